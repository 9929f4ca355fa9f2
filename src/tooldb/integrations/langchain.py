"""tooldb tools as LangChain tools, for LangChain agents and LangGraph (``ToolNode``,
``create_react_agent``). Needs ``pip install 'tooldb[langchain]'``.

    tools = as_tools(registry, task="convert 20 celsius to fahrenheit")
    agent = create_react_agent(chat_model, tools)
    agent.invoke({"messages": [("user", "...")]}, {"configurable": {"thread_id": "t1"}})

Each tool's schema is the tooldb tool's JSON schema; LangChain passes the model's
arguments through untouched and tooldb binds them, so a wrong argument comes back to
the model as tooldb's message (a ``ToolMessage`` with ``status="error"``). A call made
with a ``thread_id`` (or ``tooldb_run``) in the config's ``configurable`` is recorded
under one tooldb run per thread, a child of the run that selected the tools;
``tools[0].bridge.run_id("t1")`` names it.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from ..registry import Registry
from .bridge import ToolBridge, missing_framework

try:
    from langchain_core.runnables import RunnableConfig
    from langchain_core.tools import BaseTool, ToolException
except ImportError as exc:  # pragma: no cover - exercised in a subprocess
    raise missing_framework("LangChain", "langchain", exc) from None

__all__ = ["TooldbTool", "as_tools"]


def as_tools(
    registry: Registry,
    task: str | None = None,
    k: int = 8,
    names: Sequence[str] | None = None,
    category: str | None = None,
) -> list[BaseTool]:
    """The tools ``registry.select`` ranks for ``task`` (the best ``k``), or the named
    ones, as LangChain ``BaseTool``s whose calls tooldb binds, runs and records."""
    bridge = ToolBridge(registry, "langchain", task=task, k=k, names=names, category=category)
    return [
        TooldbTool(
            name=record.name,
            description=record.spec.description,
            args_schema=record.spec.parameters,
            bridge=bridge,
        )
        for record in bridge.tools
    ]


class TooldbTool(BaseTool):
    """One tooldb tool; its arguments go to tooldb's binder as the model sent them."""

    bridge: ToolBridge
    handle_tool_error: bool = True

    def _to_args_and_kwargs(
        self, tool_input: str | dict[str, Any], tool_call_id: str | None
    ) -> tuple[tuple[Any, ...], dict[str, Any]]:
        # One keyword, so a tool parameter named like LangChain's own (config,
        # run_manager) cannot collide with them.
        return (), {"arguments": self._parse_input(tool_input, tool_call_id)}

    def _run(self, arguments: Any, config: RunnableConfig, run_manager: Any = None) -> str:
        reply = self.bridge.call(self.name, arguments, key=run_key(config))
        if not reply.ok:
            raise ToolException(reply.text)  # handled: the model reads it, status "error"
        return reply.text


def run_key(config: RunnableConfig | None) -> str | None:
    """The run a call belongs to: ``tooldb_run`` or LangGraph's ``thread_id`` in the
    config's ``configurable`` (None: the tools' own run)."""
    configurable = (config or {}).get("configurable") or {}
    key = configurable.get("tooldb_run") or configurable.get("thread_id")
    return None if key is None else str(key)
