"""tooldb tools as OpenAI Agents SDK ``FunctionTool``s. Needs ``pip install
'tooldb[openai-agents]'``.

    agent = Agent(name="helper", tools=as_tools(registry, task="..."))
    result = await Runner.run(agent, "...", run_config=RunConfig(group_id="conversation-7"))

The model's arguments (a JSON text) go to tooldb's binder as they are, and whatever
tooldb says goes back to the model as the tool's output: an argument error reads as
tooldb's message naming the parameter, not the SDK's generic "An error occurred".
Calls are recorded under the tools' tooldb run, or one run per ``RunConfig.group_id``
(else ``trace_id``) when the run gives one (``tools[0].bridge`` is shared by all of
them: ``bridge.run_id("conversation-7")``).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from ..registry import Registry
from ..types import ToolRecord
from .bridge import ToolBridge, missing_framework

try:
    from agents import FunctionTool, RunContextWrapper
    from agents.tool_context import ToolContext
except ImportError as exc:  # pragma: no cover - exercised in a subprocess
    raise missing_framework("the OpenAI Agents SDK", "openai-agents", exc) from None

__all__ = ["TooldbFunctionTool", "as_tools"]


class TooldbFunctionTool(FunctionTool):
    """A ``FunctionTool`` that knows the bridge it calls through (``.bridge``)."""

    bridge: ToolBridge


def as_tools(
    registry: Registry,
    task: str | None = None,
    k: int = 8,
    names: Sequence[str] | None = None,
    category: str | None = None,
) -> list[FunctionTool]:
    """The tools ``registry.select`` ranks for ``task`` (the best ``k``), or the named
    ones, as ``FunctionTool``s whose calls tooldb binds, runs and records."""
    bridge = ToolBridge(registry, "openai-agents", task=task, k=k, names=names, category=category)
    return [_function_tool(bridge, record) for record in bridge.tools]


def _function_tool(bridge: ToolBridge, record: ToolRecord) -> FunctionTool:
    name = record.name

    # Annotated ToolContext (not RunContextWrapper): the SDK then hands over the rich
    # context that carries the RunConfig.
    async def invoke(context: ToolContext[Any], arguments: str) -> str:
        return (await bridge.acall(name, arguments, key=run_key(context))).text

    tool = TooldbFunctionTool(
        name=name,
        description=record.spec.description,
        params_json_schema=record.spec.parameters,
        on_invoke_tool=invoke,
        # tooldb's schemas allow optional parameters and defaults, which strict mode
        # forbids; tooldb binds the arguments itself.
        strict_json_schema=False,
    )
    tool.bridge = bridge
    return tool


def run_key(context: RunContextWrapper[Any]) -> str | None:
    """The run a call belongs to: the Runner's ``group_id``, else its ``trace_id``."""
    config = getattr(context, "run_config", None)
    key = getattr(config, "group_id", None) or getattr(config, "trace_id", None)
    return None if key is None else str(key)
