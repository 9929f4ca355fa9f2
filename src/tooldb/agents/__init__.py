"""Agent loops on top of the registry: the LLM tool-calling loop and the no-LLM router."""

from __future__ import annotations

from .limits import Limits
from .loop import AgentLoop
from .router import Router
from .run import run_task

__all__ = ["AgentLoop", "Limits", "Router", "run_task"]
