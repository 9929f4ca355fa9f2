"""Tools the loop implements itself: ``search_tools`` (selection adds tools to the run),
``load_skill`` (progressive disclosure) and ``subagent`` (a child run)."""

from __future__ import annotations

import contextlib
import json
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from ..errors import NotFound, UsageError
from ..models.base import ToolSchema
from ..types import LoopContext, SkillSpec, ToolResult
from .toolbox import Builtin

if TYPE_CHECKING:
    from .loop import _Run

SEARCH_TOOLS = "search_tools"


def search_tools(run: _Run, k_default: int = 5) -> Builtin:
    """Find more tools for a sub-task; found tools are offered from the next turn on."""

    async def execute(arguments: dict[str, Any], context: LoopContext) -> ToolResult:
        query = arguments.get("query")
        if not isinstance(query, str) or not query.strip():
            raise UsageError("'query' must be a non-empty string describing what a tool should do")
        k = arguments.get("k", k_default)
        if isinstance(k, bool) or not isinstance(k, int) or not 1 <= k <= 20:
            raise UsageError(f"'k' must be an integer from 1 to 20, got {k!r}")
        selection = run.registry.select(query, k, run_id=run.run_id)
        added = run.toolbox.add_tools(selection.names)
        lines = [f"- {c.name}: {c.description[:200]}" for c in selection.candidates]
        text = "\n".join(lines) if lines else "no tools found"
        note = (
            f"\n{len(added)} new tool(s) available from your next turn."
            if added
            else "\nno new tools (these were already available)."
        )
        return ToolResult(success=True, output=text + note, data=selection.names)

    return Builtin(
        ToolSchema(
            name=SEARCH_TOOLS,
            description=(
                "Search the tool registry for tools that can do something; the tools found "
                "become callable from your next turn."
            ),
            parameters={
                "type": "object",
                "properties": {
                    "query": {"type": "string", "description": "what the tool should do"},
                    "k": {"type": "integer", "minimum": 1, "maximum": 20, "default": k_default},
                },
                "required": ["query"],
                "additionalProperties": False,
            },
        ),
        execute,
    )


LOAD_SKILL = "load_skill"
SEARCH_SKILLS = "search_skills"
SUBAGENT = "subagent"


def skill_index(run: _Run, listed: list[str], available: dict[str, SkillSpec]) -> str:
    """The skills part of the system prompt. Up to ``skill_index_k`` skills: every one.
    More: only the best ``skill_index_k`` for the run's task (listed in the agent's own
    order, its priorities first), and a ``search_skills`` built-in for the rest, so the
    prompt stays small at hundreds of skills."""
    limit = run.registry.settings.skill_index_k
    if len(listed) <= limit:
        return skills_prompt([available[name] for name in listed])
    run.toolbox.add_builtin(search_skills(run, available))
    top = set(run.registry.select_skills(run.task, limit, names=listed).names)
    shown = [available[name] for name in listed if name in top]  # in the agent's order
    return skills_prompt(shown) + (
        f"\n(the {limit} of your {len(listed)} skills closest to the task; call "
        f"{SEARCH_SKILLS} to find others, then load_skill)"
    )


def search_skills(run: _Run, available: dict[str, SkillSpec], k_default: int = 5) -> Builtin:
    """Find skills of this agent that the prompt's index did not list."""

    async def execute(arguments: dict[str, Any], context: LoopContext) -> ToolResult:
        query = arguments.get("query")
        if not isinstance(query, str) or not query.strip():
            raise UsageError("'query' must be a non-empty string describing what a skill is for")
        k = arguments.get("k", k_default)
        if isinstance(k, bool) or not isinstance(k, int) or not 1 <= k <= 20:
            raise UsageError(f"'k' must be an integer from 1 to 20, got {k!r}")
        found = run.registry.select_skills(query, k, names=available)
        lines = [f"- {c.name}: {c.description[:200]}" for c in found.candidates]
        text = "\n".join(lines) + "\nload one with load_skill" if lines else "no skills found"
        return ToolResult(success=True, output=text, data=found.names)

    return Builtin(
        ToolSchema(
            name=SEARCH_SKILLS,
            description=(
                "Search your skills for ones that help with something; returns their names "
                "and descriptions (load one with load_skill)."
            ),
            parameters={
                "type": "object",
                "properties": {
                    "query": {"type": "string", "description": "what the skill should help with"},
                    "k": {"type": "integer", "minimum": 1, "maximum": 20, "default": k_default},
                },
                "required": ["query"],
                "additionalProperties": False,
            },
        ),
        execute,
    )


def skills_prompt(skills: list[SkillSpec]) -> str:
    """What an agent with skills sees at first: one line per skill, nothing more."""
    lines = [f"- {skill.name}: {skill.description}" for skill in skills]
    return (
        "Skills you can load (call load_skill with a skill's name to get its instructions "
        "and tools):\n" + "\n".join(lines)
    )


def load_skill(run: _Run, available: dict[str, SkillSpec]) -> Builtin:
    """Progressive disclosure: a skill's instructions, and its tools (and those of the
    skills it depends on) offered from the next turn on, with the access it grants."""

    async def execute(arguments: dict[str, Any], context: LoopContext) -> ToolResult:
        name = arguments.get("name")
        if not isinstance(name, str) or name not in available:
            names = ", ".join(sorted(available)) or "none"
            raise UsageError(f"no skill named {name!r} is available here; skills: {names}")
        order = _with_dependencies(name, run)
        grants = _grant(run, order)
        lines = [
            f"## {skill.name} (required by {name})\n{skill.instructions}"
            for skill in order
            if skill.name != name and skill.instructions
        ]
        added, missing, configured = grants.added, grants.missing, grants.configured
        main = order[-1]
        children = [s for s in available.values() if s.parent == name]
        granted = [f"{t} ({run.toolbox.access.get(t, 'execute')})" for t in added]
        config = _assigned_config(run, context.agent, name)
        sections = [
            f"# {main.name}\n{main.instructions or main.description}",
            "\n\n".join(lines),
            _listed(
                "Sub-skills you can load:\n",
                [f"- {c.name}: {c.description}" for c in children],
                "\n",
            ),
            _listed("Tools available from your next turn: ", granted, ", "),
            _listed("Not available (not registered or disabled): ", missing, ", "),
            f"Your configuration of this skill: {json.dumps(config)}" if config else "",
            _listed("Tool configuration: ", configured, "; "),
        ]
        text = "\n\n".join(section for section in sections if section)
        return ToolResult(success=True, output=text, data={"skill": name, "tools": added,
                                                           "config": config})  # fmt: skip

    return Builtin(
        ToolSchema(
            name=LOAD_SKILL,
            description="Load a skill: returns its instructions and makes its tools callable.",
            parameters={
                "type": "object",
                "properties": {"name": _skill_name_schema(run, available)},
                "required": ["name"],
                "additionalProperties": False,
            },
        ),
        execute,
    )


@dataclass
class _Granted:
    """What loading skills did to the run's toolbox."""

    added: list[str] = field(default_factory=list)  # newly offered, with the grant's access
    missing: list[str] = field(default_factory=list)  # granted but not registered or disabled
    configured: list[str] = field(default_factory=list)  # "tool: {config}" per configured grant


def _grant(run: _Run, order: list[SkillSpec]) -> _Granted:
    """Offer each skill's tools (highest priority first) with the access it grants, and
    mark the skills loaded."""
    granted = _Granted()
    for skill in order:
        for grant in sorted(skill.tools, key=lambda g: -g.priority):
            if grant.config:
                granted.configured.append(f"{grant.name}: {json.dumps(grant.config)}")
            granted.added.extend(run.toolbox.add_tools([grant.name], grant.access.value))
            if grant.name not in run.toolbox.offered:
                granted.missing.append(grant.name)
        if skill.name not in run.skills_loaded:
            run.skills_loaded.append(skill.name)
    return granted


def _listed(heading: str, items: list[str], separator: str) -> str:
    """``heading`` and the items, or nothing when there are none."""
    return heading + separator.join(items) if items else ""


def _skill_name_schema(run: _Run, available: dict[str, SkillSpec]) -> dict[str, Any]:
    """Every name as an enum, unless there are more than the skill index lists: hundreds
    of names in the schema would cost the tokens the index saves (load_skill's check
    still refuses a name not available)."""
    if len(run.loop.skills) > run.registry.settings.skill_index_k:
        return {"type": "string", "description": "a skill's name (search_skills finds them)"}
    return {"type": "string", "enum": sorted(available)}


def _assigned_config(run: _Run, agent: str | None, skill: str) -> dict[str, Any]:
    """The configuration the running agent's definition gives ``skill``, if any."""
    if agent is None:
        return {}
    try:
        return run.registry.agent_definition(agent).skill_config(skill)
    except NotFound:  # an AgentLoop built in code, not from a registered agent
        return {}


def _with_dependencies(name: str, run: _Run) -> list[SkillSpec]:
    """The skill after everything it depends on (transitively), each once; a missing
    dependency is a clear error, a cycle is cut."""
    order: list[SkillSpec] = []
    seen: set[str] = set()

    def visit(skill_name: str, chain: tuple[str, ...]) -> None:
        if skill_name in seen or skill_name in chain:
            return
        try:
            skill = run.registry.skill(skill_name)
        except NotFound:
            raise UsageError(
                f"skill {chain[-1]!r} depends on {skill_name!r}, which is not registered"
            ) from None
        for dependency in skill.depends_on:
            visit(dependency, (*chain, skill_name))
        for optional in skill.optional_dependencies:  # loaded when there, else skipped
            with contextlib.suppress(NotFound, UsageError):
                visit(optional, (*chain, skill_name))
        seen.add(skill_name)
        order.append(skill)

    visit(name, ())
    return order


def subagent(run: _Run) -> Builtin:
    """A child run on a sub-task, with its own limits and a subset of the tools; several
    in one turn run in parallel. Children cannot start sub-agents of their own."""

    async def execute(arguments: dict[str, Any], context: LoopContext) -> ToolResult:
        from .loop import AgentLoop

        task = arguments.get("task")
        if not isinstance(task, str) or not task.strip():
            raise UsageError("'task' must be a non-empty string: the sub-task to do")
        tools = _subagent_tools(arguments.get("tools"), run)
        limits = run.limits.updated(
            {
                key: arguments[key]
                for key in ("max_iterations", "max_tool_calls")
                if arguments.get(key) is not None
            }
        )
        child = AgentLoop(
            run.registry,
            run.loop.model,
            instructions=str(arguments.get("instructions") or run.loop.instructions),
            tools=tools,
            limits=limits,
            agent=run.loop.agent,
            tracer=run.loop.tracer,
            call_tool=run.loop.call_tool,  # a durable run's sub-agent calls are kept too
        )
        result = await child.arun(task, parent=context)
        data = {"run_id": result.run_id, "status": result.status.value}
        if result.success:
            return ToolResult(success=True, output=result.output, data=data)
        why = result.review_reason or result.error or result.status.value
        return ToolResult(
            success=False,
            output=result.output,
            error=f"sub-agent run {result.run_id} ended {result.status.value}: {why}; "
            f"what it gathered: {result.output[:1000] or 'nothing'}",
            data=data,
        )

    return Builtin(
        ToolSchema(
            name=SUBAGENT,
            description=(
                "Delegate a self-contained sub-task to a sub-agent that works with the given "
                "tools and returns its answer. Several sub-agent calls in one turn run in "
                "parallel."
            ),
            parameters=_SUBAGENT_PARAMETERS,
        ),
        execute,
    )


_SUBAGENT_PARAMETERS: dict[str, Any] = {
    "type": "object",
    "properties": {
        "task": {"type": "string", "description": "the sub-task, self-contained"},
        "tools": {
            "type": "array",
            "items": {"type": "string"},
            "description": "tool names it may use (default: all of yours)",
        },
        "instructions": {"type": "string"},
        "max_iterations": {"type": "integer", "minimum": 1},
        "max_tool_calls": {"type": "integer", "minimum": 1},
    },
    "required": ["task"],
    "additionalProperties": False,
}


def _subagent_tools(tools: Any, run: _Run) -> list[str]:
    """The tools a sub-agent asked for: by default all of the parent's, and never one the
    parent was not offered (a child cannot widen its parent's access)."""
    if tools is None:
        return list(run.toolbox.offered)
    if not isinstance(tools, list) or not all(isinstance(t, str) for t in tools):
        raise UsageError("'tools' must be a list of tool names")
    outside = [t for t in tools if t not in run.toolbox.offered]
    if outside:
        raise UsageError(
            f"a sub-agent may only use tools offered to this run; not offered: {outside}"
        )
    return tools
