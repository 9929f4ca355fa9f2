"""Executors: one per tool kind, behind the small ``Executor`` protocol.

An executor validates a target when a tool is registered (``check``) and runs a
bound call (``run`` from synchronous code, ``arun`` from a running event loop),
enforcing the timeout it is given and raising ``ToolTimeout`` past it. It
returns the tool's raw value, or a ``Rendered`` when it already knows both the
text a model reads and the structured data; ``execution`` turns that into a
ToolResult. An executor that holds resources (sessions, pools) defines
``close()``, which ``Registry.close`` calls.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Protocol

from ..errors import DefinitionError
from ..types import ToolKind, ToolRecord, ToolSpec


@dataclass(frozen=True)
class Rendered:
    """A value already split into ``output`` (for a model) and ``data`` (structured)."""

    output: str
    data: Any = None


class Executor(Protocol):
    kind: ToolKind

    def check(self, spec: ToolSpec) -> None:
        """Raise DefinitionError if the spec's target cannot be run by this executor."""

    def prepare(self, tool: ToolRecord) -> None:
        """Load what the call needs (imports, sessions) before the clock starts;
        raise ExecutionError if it cannot be loaded."""

    def run(self, tool: ToolRecord, arguments: dict[str, Any], timeout_s: float | None) -> Any:
        """Run synchronously; raise ToolTimeout past the timeout."""

    async def arun(
        self, tool: ToolRecord, arguments: dict[str, Any], timeout_s: float | None
    ) -> Any:
        """Run from a running event loop; raise ToolTimeout past the timeout."""


def default_executors() -> dict[ToolKind, Executor]:
    """The executors for every kind this installation can run."""
    from .mcp import McpExecutor
    from .python import PythonExecutor
    from .script import ScriptExecutor

    return {
        ToolKind.PYTHON: PythonExecutor(),
        ToolKind.SCRIPT: ScriptExecutor(),
        ToolKind.MCP: McpExecutor(),
    }


def executor_for(executors: dict[ToolKind, Executor], kind: ToolKind | str) -> Executor:
    try:
        return executors[ToolKind(kind)]
    except (KeyError, ValueError):
        available = ", ".join(sorted(k.value for k in executors))
        raise DefinitionError(
            f"tool kind {str(kind)!r} cannot be executed by this version of tooldb "
            f"(available: {available})"
        ) from None
