"""The main job: run a task with an agent, the LLM loop when a model is configured,
the router when none is (so it works offline)."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from ..models import Model, load_model
from ..types import AgentSpec, RunResult
from .limits import Limits
from .loop import AgentLoop
from .router import Ask, Router

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
    arguments: dict[str, Any] | None = None,
    ask: Ask | None = None,
) -> RunResult:
    """Run ``task``: with ``model`` (or the agent's, or the ``model`` setting) the LLM
    tool-calling loop, otherwise the router. Never raises for what the model or a tool
    does; raises for the caller's mistakes (unknown agent, model provider or tool).
    ``arguments`` fill or override what the router extracts; ``ask`` is asked for the
    required arguments it cannot find (both for the router only)."""
    spec = registry.agent(agent) if isinstance(agent, str) else agent
    chosen: str | Model | None = model or (spec.model if spec else None) or registry.settings.model
    if not chosen:
        names = _router_names(registry, spec)
        router = Router(registry, k=k, names=names, ask=ask)
        return router.run(task, agent=spec.name if spec else None, arguments=arguments)
    resolved = load_model(chosen, registry.settings) if isinstance(chosen, str) else chosen
    limits = Limits.from_settings(registry.settings).updated(spec.limits if spec else None)
    if spec is None:
        return AgentLoop(registry, resolved, limits=limits, tool_choice=tool_choice).run(task)
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
    ).run(task)


def _router_names(registry: Registry, spec: AgentSpec | None) -> list[str] | None:
    """The tools a router run may pick from: the agent's tools and its skills' tools."""
    if spec is None or (spec.tools is None and not spec.skills):
        return None
    names = list(spec.tools or [])
    for skill in spec.skills:
        names.extend(grant.name for grant in registry.skill(skill).tools)
    return names
