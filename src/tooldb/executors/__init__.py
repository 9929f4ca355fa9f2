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
from typing import TYPE_CHECKING, Any, Protocol, runtime_checkable

from ..errors import DefinitionError
from ..types import ToolKind, ToolRecord, ToolSpec

if TYPE_CHECKING:
    from ..settings import Settings
    from .agent import AgentRunner


@dataclass(frozen=True)
class Rendered:
    """A value its executor has already rendered: ``output`` for a model, JSON ``data``.

    ``execution.render`` passes it through unchanged instead of guessing a rendering.
    """

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


@runtime_checkable
class Closeable(Protocol):
    """An executor holding resources (sessions, connection pools) that the registry releases."""

    def close(self) -> None: ...


@runtime_checkable
class Blocking(Protocol):
    """An executor some of whose tools only block a thread (``arun`` would just hand
    ``run`` to the pool). A caller already in a worker thread runs those with ``run``
    directly: one thread hop per call instead of three (bind, run, record)."""

    def blocking(self, tool: ToolRecord) -> bool: ...


def default_executors(
    settings: Settings | None = None,
    store_url: str | None = None,
    agent_runner: AgentRunner | None = None,
) -> dict[ToolKind, Executor]:
    """The executors for every kind this installation can run.

    ``settings`` and ``store_url`` (the registry's own database, unmasked) configure
    the kinds that need them: SQL tools reach named connections and the registry.
    ``agent_runner`` runs ``agent`` tools: the agent layer sits above the executors,
    so the registry hands its runner down instead of this package importing it.
    """
    from ..settings import Settings
    from .agent import AgentExecutor
    from .http import HttpExecutor
    from .mcp import McpExecutor
    from .python import PythonExecutor
    from .script import ScriptExecutor
    from .sql import SQLExecutor

    settings = settings or Settings()
    return {
        ToolKind.PYTHON: PythonExecutor(),
        ToolKind.SQL: SQLExecutor(settings, store_url),
        ToolKind.SCRIPT: ScriptExecutor(forkserver=settings.script_forkserver),
        ToolKind.MCP: McpExecutor(
            max_result_bytes=settings.mcp_max_result_bytes, settings=settings
        ),
        ToolKind.HTTP: HttpExecutor(settings),
        ToolKind.AGENT: AgentExecutor(agent_runner),
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
