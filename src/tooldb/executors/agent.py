"""The ``agent`` kind: a registered agent run as a tool (target: the agent's name).

The agent loops live in ``tooldb.agents``, a layer above the registry and its
executors, so this executor cannot import them: it is handed a runner when the
registry builds its executors (``Registry.agent_runtime.run_agent_tool``) and calls
it with the registry running the call, taken from the call's context.
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable
from typing import TYPE_CHECKING, Any

from ..background_loop import run_sync
from ..context import current_registry
from ..errors import DefinitionError, ExecutionError, ToolTimeout
from ..types import ToolKind, ToolRecord, ToolSpec, check_name

if TYPE_CHECKING:
    from ..registry import Registry

#: Runs an agent on a call's arguments: (registry, agent name, arguments) -> its answer.
AgentRunner = Callable[["Registry", str, dict[str, Any]], Awaitable[Any]]


def agent_tool_parameters() -> dict[str, Any]:
    """The schema every agent tool takes."""
    return {
        "type": "object",
        "properties": {
            "task": {"type": "string", "description": "What the agent should do, in words."},
            "context": {
                "type": "object",
                "description": "Facts the agent needs that the task does not say.",
            },
        },
        "required": ["task"],
        "additionalProperties": False,
    }


class AgentExecutor:
    kind = ToolKind.AGENT

    def __init__(self, runner: AgentRunner | None = None) -> None:
        self._runner = runner

    def check(self, spec: ToolSpec) -> None:
        try:
            check_name(spec.target, "agent name")
        except ValueError as exc:
            raise DefinitionError(
                f"tool {spec.name!r}: target must be an agent's name: {exc}"
            ) from None

    def prepare(self, tool: ToolRecord) -> None:
        return None

    def run(self, tool: ToolRecord, arguments: dict[str, Any], timeout_s: float | None) -> Any:
        return run_sync(self.arun(tool, arguments, timeout_s))

    async def arun(
        self, tool: ToolRecord, arguments: dict[str, Any], timeout_s: float | None
    ) -> Any:
        if self._runner is None:
            raise ExecutionError(
                f"agent tool {tool.name!r} cannot run: this registry was built without an "
                "agent runtime (Registry(..., agent_runtime=...); `import tooldb` provides one)"
            )
        registry = current_registry()
        try:
            async with asyncio.timeout(timeout_s):
                return await self._runner(registry, tool.spec.target, arguments)
        except TimeoutError:
            raise ToolTimeout(
                f"agent tool {tool.name!r} did not answer within {timeout_s:g} s"
            ) from None
