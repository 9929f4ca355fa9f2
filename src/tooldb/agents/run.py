"""The main job: run a task with an agent, the LLM loop when a model is configured,
the router when none is (so it works offline)."""

from __future__ import annotations

from typing import TYPE_CHECKING

from ..models import Model, load_model
from ..types import AgentSpec, RunResult
from .limits import Limits
from .loop import AgentLoop, CallTool
from .router import Router

if TYPE_CHECKING:
    from ..registry import Registry


def run_task(
    registry: Registry,
    task: str,
    *,
    agent: str | AgentSpec | None = None,
    model: str | Model | None = None,
    tool_choice: str | None = None,
    k: int = 5,
) -> RunResult:
    """Run ``task``: with ``model`` (or the agent's, or the ``model`` setting) the LLM
    tool-calling loop, otherwise the router. Never raises for what the model or a tool
    does; raises for the caller's mistakes (unknown agent, model provider or tool)."""
    spec = registry.agent(agent) if isinstance(agent, str) else agent
    loop = agent_loop(registry, spec, model, tool_choice)
    if loop is None:
        names = _router_names(registry, spec)
        return Router(registry, k=k, names=names).run(task, agent=spec.name if spec else None)
    return loop.run(task)


def agent_loop(
    registry: Registry,
    spec: AgentSpec | None,
    model: str | Model | None,
    tool_choice: str | None = None,
    call_tool: CallTool | None = None,
) -> AgentLoop | None:
    """The LLM loop ``run_task`` runs ``spec``'s tasks with (None: no model, the router
    runs them); ``call_tool`` as in ``AgentLoop`` (durable runs: tooldb.workers)."""
    chosen: str | Model | None = model or (spec.model if spec else None) or registry.settings.model
    if not chosen:
        return None
    resolved = load_model(chosen, registry.settings) if isinstance(chosen, str) else chosen
    limits = Limits.from_settings(registry.settings).updated(spec.limits if spec else None)
    if spec is None:
        return AgentLoop(
            registry, resolved, limits=limits, tool_choice=tool_choice, call_tool=call_tool
        )
    return AgentLoop(
        registry,
        resolved,
        instructions=spec.instructions,
        tools=spec.tools,
        skills=spec.skills,
        search_tools=spec.search_tools,
        subagents=spec.subagents,
        limits=limits,
        tool_choice=tool_choice or spec.tool_choice,
        agent=spec.name,
        call_tool=call_tool,
    )


def _router_names(registry: Registry, spec: AgentSpec | None) -> list[str] | None:
    """The tools a router run may pick from: the agent's tools and its skills' tools."""
    if spec is None or (spec.tools is None and not spec.skills):
        return None
    names = list(spec.tools or [])
    for skill in spec.skills:
        names.extend(grant.name for grant in registry.skill(skill).tools)
    return names
