"""The main job: run a task with an agent, the LLM loop when a model is configured,
the router when none is (so it works offline).

An agent's ``model`` is ``provider:model``; unset (the ``--model`` given, else the
``model`` setting, else the router); ``inherit`` (the calling run's model as an agent
tool, the given or configured one at the top: it needs one, never the router); or
``none`` (always the router, e.g. an agent tool that only runs its one tool)."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from ..errors import UsageError
from ..models import Model, load_model
from ..types import AgentSpec, RunResult
from .limits import Limits
from .loop import AgentLoop, CallTool
from .router import Ask, Router

if TYPE_CHECKING:
    from ..registry import Registry

INHERIT = "inherit"
ROUTER = "none"


def run_task(
    registry: Registry,
    task: str,
    *,
    agent: str | AgentSpec | None = None,
    model: str | Model | None = None,
    tool_choice: str | None = None,
    k: int = 5,
    limits: dict[str, Any] | None = None,
    arguments: dict[str, Any] | None = None,
    ask: Ask | None = None,
) -> RunResult:
    """Run ``task``: with ``model`` (or the agent's, or the ``model`` setting) the LLM
    tool-calling loop, otherwise the router. ``limits`` override the agent's and the
    settings' (``max_iterations``, ``max_tool_calls``, ``timeout_s`` ...). Never raises
    for what the model or a tool does; raises for the caller's mistakes (unknown agent,
    model provider or tool, an agent that needs a model and has none). ``arguments``
    fill or override what the router extracts; ``ask`` is asked for the required
    arguments it cannot find (both for the router only)."""
    result = _run(registry, task, agent, model, tool_choice, k, limits, arguments, ask)
    registry.learn_from_run(result)  # the tools that served the task: selection learns
    return result


def _run(
    registry: Registry,
    task: str,
    agent: str | AgentSpec | None,
    model: str | Model | None,
    tool_choice: str | None,
    k: int,
    limits: dict[str, Any] | None,
    arguments: dict[str, Any] | None = None,
    ask: Ask | None = None,
) -> RunResult:
    spec = registry.agent(agent) if isinstance(agent, str) else agent
    loop = task_loop(registry, spec, model, tool_choice=tool_choice, limits=limits)
    if loop is None:
        router = Router(registry, k=k, names=router_names(registry, spec), ask=ask)
        return router.run(task, agent=spec.name if spec else None, arguments=arguments)
    return loop.run(task)


def task_loop(
    registry: Registry,
    spec: AgentSpec | None,
    model: str | Model | None,
    *,
    tool_choice: str | None = None,
    limits: dict[str, Any] | None = None,
    call_tool: CallTool | None = None,
) -> AgentLoop | None:
    """The LLM loop ``run_task`` runs a task with (None: no model, the router runs it);
    ``call_tool`` as in ``AgentLoop`` (durable runs: tooldb.workers)."""
    chosen = agent_model(registry, spec, model)
    if chosen is None:
        return None
    resolved = load_model(chosen, registry.settings) if isinstance(chosen, str) else chosen
    if spec is None:
        base = Limits.from_settings(registry.settings).updated(limits)
        return AgentLoop(
            registry, resolved, limits=base, tool_choice=tool_choice, call_tool=call_tool
        )
    return agent_loop(
        registry, spec, resolved, tool_choice=tool_choice, limits=limits, call_tool=call_tool
    )


def agent_model(
    registry: Registry, spec: AgentSpec | None, given: str | Model | None
) -> str | Model | None:
    """The model an agent runs on (None: the router); see the module's docstring."""
    declared = spec.model if spec is not None else None
    if declared == ROUTER:
        return None
    if declared not in (None, INHERIT):
        return given or declared
    chosen = given or registry.settings.model
    if not chosen and declared == INHERIT:
        assert spec is not None
        raise UsageError(
            f"agent {spec.name!r} needs a model: pass --model provider:model (e.g. "
            "openai:gpt-4o-mini) or set the `model` setting"
        )
    return chosen or None


def agent_loop(
    registry: Registry,
    spec: AgentSpec,
    model: Model,
    *,
    tool_choice: str | None = None,
    limits: dict[str, Any] | None = None,
    call_tool: CallTool | None = None,
) -> AgentLoop:
    """The LLM loop of a registered agent: its instructions, tools, skills, limits (and
    ``limits`` over them), tool choice and per-target retry caps."""
    return AgentLoop(
        registry,
        model,
        instructions=spec.instructions,
        tools=spec.tools,
        skills=spec.skills,
        search_tools=spec.search_tools,
        subagents=spec.subagents,
        limits=Limits.from_settings(registry.settings).updated(spec.limits).updated(limits),
        tool_choice=tool_choice or spec.tool_choice,
        agent=spec.name,
        retry_caps=spec.retries,
        call_tool=call_tool,
    )


def router_names(registry: Registry, spec: AgentSpec | None) -> list[str] | None:
    """The tools a router run may pick from: the agent's tools and its skills' tools."""
    if spec is None or (spec.tools is None and not spec.skills):
        return None
    names = list(spec.tools or [])
    for skill in spec.skills:
        names.extend(grant.name for grant in registry.skill(skill).tools)
    return names
