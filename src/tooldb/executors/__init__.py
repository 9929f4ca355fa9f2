"""Executors: one per tool kind, behind the small ``Executor`` protocol.

An executor validates a target when a tool is registered (``check``) and runs a
bound call (``run`` from synchronous code, ``arun`` from a running event loop),
enforcing the timeout it is given and raising ``ToolTimeout`` past it. It
returns the tool's raw value; ``execution`` turns that into a ToolResult.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, Protocol

from ..errors import DefinitionError
from ..types import ToolKind, ToolRecord, ToolSpec

if TYPE_CHECKING:
    from ..settings import Settings


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


def default_executors(settings: Settings | None = None) -> dict[ToolKind, Executor]:
    """The executors for every kind this installation can run, configured by ``settings``."""
    from .http import HttpExecutor
    from .python import PythonExecutor

    return {ToolKind.PYTHON: PythonExecutor(), ToolKind.HTTP: HttpExecutor(settings)}


def executor_for(executors: dict[ToolKind, Executor], kind: ToolKind | str) -> Executor:
    try:
        return executors[ToolKind(kind)]
    except (KeyError, ValueError):
        available = ", ".join(sorted(k.value for k in executors))
        raise DefinitionError(
            f"tool kind {str(kind)!r} cannot be executed by this version of tooldb "
            f"(available: {available})"
        ) from None
