"""Skills and agent definitions in the registry (a mixin of Registry).

Both are versioned by content like tools: registering an unchanged definition is
a no-op, a changed one bumps the version, and every version is kept. A definition
naming a tool or skill the tenant lacks is refused, or with ``allow_missing``
registered disabled with the reason; skills and agents are enabled, disabled and
removed like tools (docs/agents.md, "Integrity and lifecycle").
"""

from __future__ import annotations

import builtins
import time
from collections.abc import Callable, Iterable
from datetime import UTC, datetime
from pathlib import Path
from typing import TYPE_CHECKING, Any

from ..embedders import Embedder
from ..errors import DefinitionError, NotFound, UsageError
from ..executors.agent import agent_tool_parameters
from ..selection import Weights, check_request
from ..selection.skills import INSTRUCTIONS_CHARS, SkillRanker, SkillSelection, VectorVault
from ..settings import Settings
from ..types import AgentSpec, Returns, SkillSpec, ToolKind, ToolRecord, ToolSpec
from .skills import agent_from_mapping, read_agent, read_skills, skill_from_mapping

if TYPE_CHECKING:
    from ..stores import EnabledState, PutOutcome, Store


class Catalog:
    store: Store
    tenant: str
    settings: Settings
    #: Registry's: registers tool specs (what ``add_agent_tool`` makes).
    register: Callable[[list[ToolSpec]], list[PutOutcome]]
    #: Registry's: the tenant's tools among these names (enabled or not).
    get_many: Callable[[Iterable[str]], dict[str, ToolRecord]]
    enable: Callable[[str], None]
    disable: Callable[[str], None]
    if TYPE_CHECKING:

        @property
        def embedder(self) -> Embedder | None: ...  # Registry's

    #: Ranks this tenant's skills; holds their vectors (selection/skills.py).
    _skill_ranker: SkillRanker | None = None

    # -- skills ----------------------------------------------------------------
    def add_skill(
        self, skill: SkillSpec | dict[str, Any] | str | Path, *, allow_missing: bool = False
    ) -> builtins.list[str]:
        """Register skills from a spec, a mapping, a SKILL.md file or a folder of them;
        returns the names of skills that are new or changed.

        A skill naming a tool, a parent or a dependency this tenant does not have (nor
        the same batch) is refused with every missing name; ``allow_missing`` registers
        it disabled instead, the missing names as the reason, and registering it again
        once they exist enables it."""
        if isinstance(skill, SkillSpec):
            specs = [skill]
        elif isinstance(skill, dict):
            specs = [skill_from_mapping(skill)]
        else:
            specs = read_skills(skill)
        batch = {spec.name for spec in specs}
        changed = []
        for spec in specs:
            missing = self._missing(
                tools=[grant.name for grant in spec.tools],
                skills=[*spec.depends_on, *([spec.parent] if spec.parent else [])],
                also=batch,
            )
            state = self._state("skill", spec.name, missing, allow_missing)
            row = spec.model_dump(mode="json")
            row["content_hash"] = spec.content_hash()
            _, did_change = self.store.put_skill(self.tenant, row, state)
            if did_change:
                changed.append(spec.name)
        return changed

    def skill(self, name: str) -> SkillSpec:
        """An enabled skill (what agents load); NotFound or a clear error otherwise."""
        row = self._row("skill", name)
        _require_enabled("skill", name, row)
        return _skill(row)

    def skills(self, *, include_disabled: bool = False) -> builtins.list[SkillSpec]:
        return [
            _skill(row)
            for row in self.store.list_skills(self.tenant)
            if include_disabled or row["enabled"]
        ]

    def select_skills(
        self, task: str, k: int = 5, *, names: Iterable[str] | None = None
    ) -> SkillSelection:
        """The ``k`` enabled, active skills most likely to help with ``task`` (of those
        among ``names`` if given), best first, each with the components of its score as
        tool selection gives them (docs/agents.md, "Finding skills")."""
        task = check_request(task, k)
        if self._skill_ranker is None:
            self._skill_ranker = SkillRanker(
                self.embedder, Weights.from_settings(self.settings), self._skill_vault()
            )
        ranker = self._skill_ranker
        rows = self.store.skill_search_rows(self.tenant, INSTRUCTIONS_CHARS)
        every = [ranker.text(**row) for row in rows]
        allowed = set(names) if names is not None else None
        return ranker.rank(task, every, k, allowed)

    def _skill_vault(self) -> VectorVault | None:
        """The store, for this tenant and embedder, as the skill ranker's vault."""
        embedder = self.embedder
        if embedder is None:
            return None
        store, tenant = self.store, self.tenant

        def save(vectors: dict[str, bytes]) -> None:
            store.put_skill_vectors(tenant, embedder.id, embedder.dim, vectors)

        return VectorVault(lambda hashes: store.skill_vectors(tenant, embedder.id, hashes), save)

    # -- agents ----------------------------------------------------------------
    def add_agent(
        self, agent: AgentSpec | dict[str, Any] | str | Path, *, allow_missing: bool = False
    ) -> bool:
        """Register an agent from a spec, a mapping or a YAML file; True if new or changed.
        Like skills, an agent naming tools or skills this tenant lacks is refused with
        each missing name (``allow_missing``: registered disabled, with the reason)."""
        if isinstance(agent, AgentSpec):
            spec = agent
        elif isinstance(agent, dict):
            spec = agent_from_mapping(agent)
        else:
            spec = read_agent(agent)
        missing = self._missing(tools=spec.tools or [], skills=spec.skills, also=set())
        state = self._state("agent", spec.name, missing, allow_missing)
        row = {
            "name": spec.name,
            "definition": spec.model_dump(mode="json"),
            "content_hash": spec.content_hash(),
        }
        _, changed = self.store.put_agent(self.tenant, row, state)
        if spec.as_tool:
            self.add_agent_tool(spec.name)
            if state is not None:  # the tool follows the agent's flag when it changes
                (self.enable if state[0] else self.disable)(spec.name)
        return changed

    def agent(self, name: str) -> AgentSpec:
        """An enabled agent (what runs); NotFound or a clear error otherwise."""
        row = self._row("agent", name)
        _require_enabled("agent", name, row)
        return AgentSpec.model_validate(row["definition"])

    def add_agent_tool(self, name: str) -> PutOutcome:
        """Register the agent ``name`` as a tool of kind ``agent`` under the same name:
        callers (and other agents) delegate to it with ``{"task": ..., "context": ...}``
        and get the status protocol back (agents/orchestrate.py, docs/agents.md)."""
        spec = self.agent_definition(name)
        existing = self.store.get_tool(self.tenant, name)
        if existing is not None and existing.spec.kind is not ToolKind.AGENT:
            raise UsageError(
                f"cannot register agent {name!r} as a tool: a {existing.spec.kind.value} tool "
                "has that name"
            )
        first_line = next((ln for ln in spec.instructions.splitlines() if ln.strip()), "")
        timeout = spec.limits.get("timeout_s", self.settings.agent_timeout_s)
        tool_spec = ToolSpec(
            name=name,
            description=spec.description or first_line or f"The agent {name}.",
            category="agents",
            kind=ToolKind.AGENT,
            target=name,
            parameters=agent_tool_parameters(),
            returns=Returns.JSON,
            timeout_s=float(timeout) + 5.0,  # the agent's own limit ends it first
        )
        return self.register([tool_spec])[0]

    def agent_definition(self, name: str) -> AgentSpec:
        """The agent's current definition, enabled or not."""
        return AgentSpec.model_validate(self._row("agent", name)["definition"])

    def agents(self, *, include_disabled: bool = False) -> builtins.list[AgentSpec]:
        return [
            AgentSpec.model_validate(row["definition"])
            for row in self.store.list_agents(self.tenant)
            if include_disabled or row["enabled"]
        ]

    # -- lifecycle of both -------------------------------------------------------
    def definition(self, kind: str, name: str, version: int | None = None) -> dict[str, Any]:
        """A skill's or agent's record: ``definition`` (of ``version``, default the
        current one), ``version``, ``enabled``, ``disabled_reason`` and ``versions``."""
        row = self._row(kind, name)
        versions = self.store.catalog_versions(kind, self.tenant, name)
        shown = row["version"] if version is None else version
        found = next((v for v in versions if v["version"] == shown), None)
        drop = {"tenant", "agent"} if kind == "agent" else {"tenant", "skill"}
        if found is None:
            raise NotFound(f"{kind} {name!r} has no version {shown}")
        return {
            "kind": kind,
            "name": name,
            "version": row["version"],
            "shown_version": shown,
            "enabled": bool(row["enabled"]),
            "disabled_reason": row["disabled_reason"],
            "definition": found["definition"],
            # the current version's assignments, as rows: skills (of an agent) or tools
            "assigned": [
                {k: v for k, v in link.items() if k not in drop}
                for link in self.store.catalog_links(kind, self.tenant, name)
            ],
            "versions": [
                {
                    "version": v["version"],
                    "content_hash": v["content_hash"],
                    "created_at": v["created_at"],
                }
                for v in versions
            ],
        }

    def enable_definition(self, kind: str, name: str) -> None:
        """Enable a skill or agent; refused while what it names is still missing."""
        row = self._row(kind, name)
        if kind == "skill":
            spec = _skill(row)
            tools = [grant.name for grant in spec.tools]
            skills = [*spec.depends_on, *([spec.parent] if spec.parent else [])]
        else:
            agent = AgentSpec.model_validate(row["definition"])
            tools, skills = agent.tools or [], agent.skills
        missing = self._missing(tools=tools, skills=skills, also=set())
        if missing:
            raise DefinitionError(_missing_text(kind, name, missing, enabling=True))
        self.store.set_catalog_enabled(kind, self.tenant, name, (True, None))

    def disable_definition(self, kind: str, name: str, reason: str = "disabled by hand") -> None:
        self._row(kind, name)
        self.store.set_catalog_enabled(kind, self.tenant, name, (False, reason))

    def remove_definition(self, kind: str, name: str) -> None:
        """Delete a skill or agent and its versions."""
        self._kind(kind)
        remove = self.store.remove_skill if kind == "skill" else self.store.remove_agent
        if not remove(self.tenant, name):
            raise NotFound(f"no {kind} named {name!r} in tenant {self.tenant!r}")

    def users_of_tool(self, name: str) -> builtins.list[str]:
        """The enabled skills and agents that name tool ``name`` ("skill sql", ...)."""
        users = [
            f"skill {spec.name}"
            for spec in self.skills()
            if any(grant.name == name for grant in spec.tools)
        ]
        users += [f"agent {spec.name}" for spec in self.agents() if name in (spec.tools or [])]
        return users

    def _missing(
        self, *, tools: Iterable[str], skills: Iterable[str], also: set[str]
    ) -> builtins.list[str]:
        wanted_tools = list(dict.fromkeys(tools))
        have = self.get_many(wanted_tools) if wanted_tools else {}
        missing = [f"tool {n!r}" for n in wanted_tools if n not in have]
        for skill in dict.fromkeys(skills):
            if skill not in also and self.store.get_skill(self.tenant, skill) is None:
                missing.append(f"skill {skill!r}")
        return missing

    def _state(
        self, kind: str, name: str, missing: builtins.list[str], allow_missing: bool
    ) -> EnabledState | None:
        """The flag to store: disabled when names are missing (if allowed), enabled again
        when a definition disabled for missing names is complete now, else unchanged."""
        if missing:
            if not allow_missing:
                raise DefinitionError(_missing_text(kind, name, missing))
            return False, MISSING + ", ".join(missing)
        get = self.store.get_skill if kind == "skill" else self.store.get_agent
        current = get(self.tenant, name)
        reason = current and current["disabled_reason"]
        if current is not None and not current["enabled"] and str(reason).startswith(MISSING):
            return True, None
        return None

    def _row(self, kind: str, name: str) -> dict[str, Any]:
        self._kind(kind)
        get = self.store.get_skill if kind == "skill" else self.store.get_agent
        row = get(self.tenant, name)
        if row is None:
            raise NotFound(f"no {kind} named {name!r} in tenant {self.tenant!r}")
        return row

    @staticmethod
    def _kind(kind: str) -> None:
        if kind not in ("skill", "agent"):
            raise UsageError(f"kind must be skill or agent, got {kind!r}")

    def run_stats(self, days: int = 7) -> builtins.list[dict[str, Any]]:
        """Per UTC day and agent (the router's runs under ``(router)``), over the last
        ``days`` days: runs, how many a limit stopped (``partial``), failed or were
        interrupted, and the share a limit stopped. Newest day first."""
        if days < 1:
            raise UsageError(f"days must be at least 1, got {days}")
        since = (int(time.time() // 86400) - days + 1) * 86400.0
        table: dict[tuple[int, str], dict[str, Any]] = {}
        for row in self.store.run_outcomes(self.tenant, since):
            agent = row["agent"] or ("(router)" if row["mode"] == "router" else "(none)")
            entry = table.setdefault(
                (int(row["day"]), agent),
                {"runs": 0, "partial": 0, "error": 0, "interrupted": 0, "running": 0},
            )
            entry["runs"] += row["runs"]
            if row["status"] in entry:
                entry[row["status"]] += row["runs"]
        return [
            {
                "day": datetime.fromtimestamp(day * 86400, UTC).date().isoformat(),
                "agent": agent,
                **entry,
                "limit_share": entry["partial"] / entry["runs"],
            }
            for (day, agent), entry in sorted(table.items(), key=lambda kv: (-kv[0][0], kv[0][1]))
        ]

    def sweep_runs(self) -> builtins.list[str]:
        """Mark ``interrupted`` this tenant's runs left ``running`` by a process that died
        (their lease expired: agents/leases.py); their ids. ``tooldb.open`` does it."""
        return self.store.interrupt_expired_runs(self.tenant)


_SKILL_FIELDS = set(SkillSpec.model_fields)
#: How the reason of a definition disabled for the names it lacks begins.
MISSING = "missing: "


def _missing_text(kind: str, name: str, missing: list[str], *, enabling: bool = False) -> str:
    what = ", ".join(missing)
    if enabling:
        return f"{kind} {name!r} cannot be enabled: this tenant has no {what}"
    return (
        f"{kind} {name!r} names what this tenant does not have: {what}. Register them "
        "first, or pass --allow-missing (allow_missing=True) to register it disabled"
    )


def _require_enabled(kind: str, name: str, row: dict[str, Any]) -> None:
    if not row["enabled"]:
        raise UsageError(
            f"{kind} {name!r} is disabled ({row['disabled_reason'] or 'no reason given'}): "
            f"`tooldb enable {kind} {name}` enables it"
        )


def _skill(row: dict[str, Any]) -> SkillSpec:
    return SkillSpec.model_validate({k: v for k, v in row.items() if k in _SKILL_FIELDS})
