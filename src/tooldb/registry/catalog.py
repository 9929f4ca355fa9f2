"""Skills and agent definitions in the registry (a mixin of Registry).

Both are versioned by content like tools: registering an unchanged definition is
a no-op, a changed one bumps the version. Skills name tools; a skill naming a tool
that does not exist yet is accepted (tools may be registered later) and reported
when an agent loads it.
"""

from __future__ import annotations

import builtins
import time
from collections.abc import Callable
from datetime import UTC, datetime
from pathlib import Path
from typing import TYPE_CHECKING, Any

from ..errors import NotFound, UsageError
from ..types import AgentSpec, SkillSpec
from .skills import agent_from_mapping, read_agent, read_skills, skill_from_mapping

if TYPE_CHECKING:
    from ..stores import Store


class Catalog:
    store: Store
    tenant: str
    #: Registry's: registers an agent as a tool of kind ``agent`` (``as_tool``).
    add_agent_tool: Callable[[str], Any]

    def add_skill(self, skill: SkillSpec | dict[str, Any] | str | Path) -> builtins.list[str]:
        """Register skills from a spec, a mapping, a SKILL.md file or a folder of them;
        returns the names of skills that are new or changed."""
        if isinstance(skill, SkillSpec):
            specs = [skill]
        elif isinstance(skill, dict):
            specs = [skill_from_mapping(skill)]
        else:
            specs = read_skills(skill)
        changed = []
        for spec in specs:
            row = spec.model_dump(mode="json")
            row["content_hash"] = spec.content_hash()
            _, did_change = self.store.put_skill(self.tenant, row)
            if did_change:
                changed.append(spec.name)
        return changed

    def skill(self, name: str) -> SkillSpec:
        row = self.store.get_skill(self.tenant, name)
        if row is None:
            raise NotFound(f"no skill named {name!r} in tenant {self.tenant!r}")
        return _skill(row)

    def skills(self) -> builtins.list[SkillSpec]:
        return [_skill(row) for row in self.store.list_skills(self.tenant)]

    def add_agent(self, agent: AgentSpec | dict[str, Any] | str | Path) -> bool:
        """Register an agent from a spec, a mapping or a YAML file; True if new or changed."""
        if isinstance(agent, AgentSpec):
            spec = agent
        elif isinstance(agent, dict):
            spec = agent_from_mapping(agent)
        else:
            spec = read_agent(agent)
        row = {
            "name": spec.name,
            "definition": spec.model_dump(mode="json"),
            "content_hash": spec.content_hash(),
        }
        _, changed = self.store.put_agent(self.tenant, row)
        if spec.as_tool:
            self.add_agent_tool(spec.name)
        return changed

    def agent(self, name: str) -> AgentSpec:
        row = self.store.get_agent(self.tenant, name)
        if row is None:
            raise NotFound(f"no agent named {name!r} in tenant {self.tenant!r}")
        return AgentSpec.model_validate(row["definition"])

    def agents(self) -> builtins.list[AgentSpec]:
        return [
            AgentSpec.model_validate(row["definition"])
            for row in self.store.list_agents(self.tenant)
        ]

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


def _skill(row: dict[str, Any]) -> SkillSpec:
    return SkillSpec.model_validate({k: v for k, v in row.items() if k in _SKILL_FIELDS})
