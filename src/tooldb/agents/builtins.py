"""Tools the loop implements itself: ``search_tools`` (selection adds tools to the run),
``load_skill`` (progressive disclosure) and ``subagent`` (a child run)."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from ..errors import UsageError
from ..models.base import ToolSchema
from ..types import LoopContext, ToolResult
from .toolbox import Builtin

if TYPE_CHECKING:
    from .loop import _Run

SEARCH_TOOLS = "search_tools"


def search_tools(run: _Run, k_default: int = 5) -> Builtin:
    """Find more tools for a sub-task; found tools are offered from the next turn on."""

    async def execute(arguments: dict[str, Any], context: LoopContext) -> ToolResult:
        query = arguments.get("query")
        if not isinstance(query, str) or not query.strip():
            raise UsageError("'query' must be a non-empty string describing what a tool should do")
        k = arguments.get("k", k_default)
        if isinstance(k, bool) or not isinstance(k, int) or not 1 <= k <= 20:
            raise UsageError(f"'k' must be an integer from 1 to 20, got {k!r}")
        selection = run.registry.select(query, k, run_id=run.run_id)
        added = run.toolbox.add_tools(selection.names)
        lines = [f"- {c.name}: {c.description[:200]}" for c in selection.candidates]
        text = "\n".join(lines) if lines else "no tools found"
        note = (
            f"\n{len(added)} new tool(s) available from your next turn."
            if added
            else "\nno new tools (these were already available)."
        )
        return ToolResult(success=True, output=text + note, data=selection.names)

    return Builtin(
        ToolSchema(
            name=SEARCH_TOOLS,
            description=(
                "Search the tool registry for tools that can do something; the tools found "
                "become callable from your next turn."
            ),
            parameters={
                "type": "object",
                "properties": {
                    "query": {"type": "string", "description": "what the tool should do"},
                    "k": {"type": "integer", "minimum": 1, "maximum": 20, "default": k_default},
                },
                "required": ["query"],
                "additionalProperties": False,
            },
        ),
        execute,
    )
