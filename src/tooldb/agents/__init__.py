"""Agent loops on top of the registry: the LLM tool-calling loop and the no-LLM router.

This layer sits above the registry. The registry reaches it only through
``RUNTIME`` (``Registry.agent_runtime``), which ``tooldb/__init__.py`` installs.
"""

from __future__ import annotations

from ..registry import AgentRuntime
from .limits import Limits
from .loop import AgentLoop
from .orchestrate import run_agent_tool
from .router import Router
from .run import run_task

#: The agent layer as handed to the registry.
RUNTIME = AgentRuntime(run_task=run_task, run_agent_tool=run_agent_tool)

__all__ = ["RUNTIME", "AgentLoop", "Limits", "Router", "run_task"]
