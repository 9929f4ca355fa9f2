"""Agent loops on top of the registry: the LLM tool-calling loop and the no-LLM router.

This layer sits above the registry. The registry reaches it only through
``RUNTIME`` (``Registry.agent_runtime``), which ``tooldb/__init__.py`` installs.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from .limits import Limits
from .loop import AgentLoop
from .orchestrate import run_agent_tool
from .router import Router
from .run import run_task

if TYPE_CHECKING:
    from ..registry import Registry
    from ..types import RunResult


class Agents:
    """The agent layer as handed to the registry (``registry.AgentRuntime``)."""

    def run_task(
        self,
        registry: Registry,
        task: str,
        *,
        agent: str | None = None,
        model: Any = None,
        tool_choice: str | None = None,
    ) -> RunResult:
        return run_task(registry, task, agent=agent, model=model, tool_choice=tool_choice)

    async def run_agent_tool(
        self, registry: Registry, agent: str, arguments: dict[str, Any]
    ) -> Any:
        return await run_agent_tool(registry, agent, arguments)


RUNTIME = Agents()

__all__ = ["RUNTIME", "AgentLoop", "Agents", "Limits", "Router", "run_task"]
