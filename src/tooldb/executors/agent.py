"""The ``agent`` kind: a registered agent run as a tool (target: the agent's name).

The agent loops live in ``tooldb.agents``, which builds on the registry; this
executor only hands the call over to ``agents.orchestrate`` (imported when a call
comes, so executors keep knowing nothing of agents) with the registry running the
call and the caller's run, both taken from the call's context.
"""

from __future__ import annotations

import asyncio
from typing import Any

from ..errors import DefinitionError, ToolTimeout
from ..types import ToolKind, ToolRecord, ToolSpec, check_name


class AgentExecutor:
    kind = ToolKind.AGENT

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
        from ..parallel import run_sync

        return run_sync(self.arun(tool, arguments, timeout_s))

    async def arun(
        self, tool: ToolRecord, arguments: dict[str, Any], timeout_s: float | None
    ) -> Any:
        from ..agents.orchestrate import run_agent_tool
        from ..context import current_registry

        registry = current_registry()
        try:
            async with asyncio.timeout(timeout_s):
                return await run_agent_tool(registry, tool.spec.target, arguments)
        except TimeoutError:
            raise ToolTimeout(
                f"agent tool {tool.name!r} did not answer within {timeout_s:g} s"
            ) from None
