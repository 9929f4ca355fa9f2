"""Assignments with configuration (issue 28.2): an agent's skills and a skill's tools
carry priority, order and configuration, stored as rows (agent_skills, skill_tools)
and shown by `tooldb show agent`; loading a skill hands the agent its configuration;
a skill's dependency may be optional. Both stores."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
import sqlalchemy as sa
from typer.testing import CliRunner

import tests.sample_tools as st
from tooldb import Registry
from tooldb.agents import run_task
from tooldb.cli import app
from tooldb.models import ScriptedModel, call
from tooldb.stores.schema import agent_skills, skill_tools

AGENT = """\
name: analyst
instructions: Answer with data.
skills:
  - {name: sql, priority: 2, config: {dialect: sqlite, row_cap: 50}}
  - math
  - {name: text, priority: 5}
"""


@pytest.fixture
def reg(registry: Registry) -> Registry:
    registry.add(st.add, st.echo)
    registry.add_skill({"name": "math", "description": "Arithmetic.", "tools": ["add"]})
    registry.add_skill({"name": "text", "description": "Text.", "tools": ["echo"]})
    registry.add_skill(
        {
            "name": "sql",
            "description": "Query data.",
            "tools": [{"name": "add"}, {"name": "echo", "priority": 3, "config": {"max": 3}}],
            "depends_on": ["math", {"name": "extras", "optional": True}],
        }
    )
    return registry


def rows(reg: Registry, table: sa.Table) -> list[dict[str, Any]]:
    with reg.store.engine.connect() as conn:
        found = conn.execute(sa.select(table).order_by(*table.primary_key.columns))
        return [dict(r._mapping) for r in found]


def test_priorities_order_the_skills_and_everything_is_stored_as_rows(
    reg: Registry, tmp_path: Path
) -> None:
    path = tmp_path / "analyst.yaml"
    path.write_text(AGENT)
    reg.add_agent(path)
    spec = reg.agent("analyst")
    assert spec.skills == ["text", "sql", "math"]  # priority 5, 2, then 0 as written
    assert spec.skill_config("sql") == {"dialect": "sqlite", "row_cap": 50}
    assert spec.skill_config("math") == {}
    linked = [(r["skill"], r["position"], r["priority"], r["config"])
              for r in rows(reg, agent_skills) if r["agent"] == "analyst"]  # fmt: skip
    assert sorted(linked, key=lambda r: r[1]) == [
        ("text", 0, 5, {}), ("sql", 1, 2, {"dialect": "sqlite", "row_cap": 50}), ("math", 2, 0, {}),
    ]  # fmt: skip
    tools = [(r["tool"], r["position"], r["priority"], r["config"], r["access"])
             for r in rows(reg, skill_tools) if r["skill"] == "sql"]  # fmt: skip
    assert sorted(tools, key=lambda r: r[1]) == [
        ("add", 0, 0, {}, "execute"), ("echo", 1, 3, {"max": 3}, "execute"),
    ]  # fmt: skip
    shown = reg.definition("agent", "analyst")
    assert [a["skill"] for a in shown["assigned"]] == ["text", "sql", "math"]
    assert shown["assigned"][1]["config"] == {"dialect": "sqlite", "row_cap": 50}
    # a new version replaces the rows; removal takes them away
    path.write_text(AGENT.replace("  - math\n", ""))
    reg.add_agent(path)
    assert [r["skill"] for r in rows(reg, agent_skills)] == ["sql", "text"]
    reg.remove_definition("agent", "analyst")
    assert rows(reg, agent_skills) == []
    reg.remove_definition("skill", "sql")
    assert [r["skill"] for r in rows(reg, skill_tools)] == ["math", "text"]


def test_loading_a_skill_hands_over_its_configuration(reg: Registry, tmp_path: Path) -> None:
    path = tmp_path / "analyst.yaml"
    path.write_text(AGENT)
    reg.add_agent(path)
    model = ScriptedModel([call("load_skill", {"name": "sql"}), "done"])
    result = run_task(reg, "how many?", agent="analyst", model=model)
    assert result.status.value == "success", result.error
    loaded = next(m for m in reg.store.run_messages(result.run_id) if m.get("role") == "tool")
    text = loaded["content"]
    assert 'Your configuration of this skill: {"dialect": "sqlite", "row_cap": 50}' in text
    assert 'Tool configuration: echo: {"max": 3}' in text
    assert "math (required by sql)" in text or "add" in text  # the required dependency
    # the optional dependency "extras" is not registered: no error, nothing from it


def test_show_agent_prints_the_assignments(reg: Registry, store_url: str, tmp_path: Path) -> None:
    path = tmp_path / "analyst.yaml"
    path.write_text(AGENT)
    result = CliRunner().invoke(app, ["--db", store_url, "add", "agent", str(path)])
    assert result.exit_code == 0, result.output
    result = CliRunner().invoke(app, ["--db", store_url, "show", "agent", "analyst", "--json"])
    assert result.exit_code == 0, result.output
    document = json.loads(result.stdout)
    assert document["definition"]["skills"] == ["text", "sql", "math"]
    config = {"dialect": "sqlite", "row_cap": 50}
    assert document["assigned"][1] == {
        "skill": "sql",
        "position": 1,
        "priority": 2,
        "config": config,
    }
