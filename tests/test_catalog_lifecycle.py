"""Skills and agents as registry citizens (issue 28.3, 28.4): registering one that
names what the tenant lacks is refused with every missing name (or registered
disabled with --allow-missing, and enabled once complete); a tool an enabled skill or
agent uses is removed only with --force; enable, disable, remove, show (with versions)
and list work on skills and agents as on tools. Both stores, API and CLI."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from typer.testing import CliRunner

import tests.sample_tools as st
from tooldb import DefinitionError, NotFound, Registry, UsageError
from tooldb.cli import app

SQL_SKILL = {"name": "sql", "description": "Query the database.", "tools": ["run_query"],
             "depends_on": ["basics"]}  # fmt: skip


def test_a_skill_naming_what_is_missing_is_refused_with_each_name(registry: Registry) -> None:
    with pytest.raises(DefinitionError) as refused:
        registry.add_skill(SQL_SKILL)
    message = str(refused.value)
    assert "skill 'sql' names what this tenant does not have" in message
    assert "tool 'run_query'" in message and "skill 'basics'" in message
    assert "--allow-missing" in message
    with pytest.raises(NotFound):
        registry.skill("sql")  # nothing half-registered


def test_allow_missing_registers_disabled_and_completing_enables(registry: Registry) -> None:
    assert registry.add_skill(SQL_SKILL, allow_missing=True) == ["sql"]
    record = registry.definition("skill", "sql")
    assert not record["enabled"]
    assert record["disabled_reason"] == "missing: tool 'run_query', skill 'basics'"
    assert [s.name for s in registry.skills()] == []  # agents are not offered it
    assert [s.name for s in registry.skills(include_disabled=True)] == ["sql"]
    with pytest.raises(UsageError, match=r"skill 'sql' is disabled \(missing: tool"):
        registry.skill("sql")
    with pytest.raises(DefinitionError, match="cannot be enabled: this tenant has no tool"):
        registry.enable_definition("skill", "sql")

    registry.add_function(st.echo, name="run_query")
    registry.add_skill({"name": "basics", "description": "The basics."})
    assert registry.add_skill(SQL_SKILL) == []  # same content: unchanged, but now complete
    assert registry.definition("skill", "sql")["enabled"]
    assert registry.skill("sql").tools[0].name == "run_query"


def test_an_agent_is_checked_too_and_its_tool_follows_its_flag(registry: Registry) -> None:
    agent = {"name": "analyst", "instructions": "Answer.", "skills": ["sql"],
             "tools": ["chart"], "as_tool": True}  # fmt: skip
    with pytest.raises(DefinitionError, match=r"tool 'chart', skill 'sql'"):
        registry.add_agent(agent)
    registry.add_agent(agent, allow_missing=True)
    assert not registry.get("analyst").enabled  # its tool is disabled with it
    with pytest.raises(UsageError, match="agent 'analyst' is disabled"):
        registry.agent("analyst")
    registry.add_function(st.echo, name="chart")
    registry.add_function(st.add, name="run_query")
    registry.add_skill({"name": "sql", "description": "SQL.", "tools": ["run_query"]})
    registry.add_agent(agent)
    assert registry.get("analyst").enabled and registry.agent("analyst").skills == ["sql"]


def test_removing_a_tool_in_use_needs_force_and_disables_the_users(registry: Registry) -> None:
    registry.add_function(st.echo)
    registry.add_skill({"name": "text", "description": "Text.", "tools": ["echo"]})
    registry.add_agent({"name": "talker", "instructions": "Talk.", "tools": ["echo"]})
    with pytest.raises(UsageError, match="tool 'echo' is used by skill text, agent talker"):
        registry.remove("echo")
    assert registry.get("echo")  # still there
    registry.remove("echo", force=True)
    with pytest.raises(NotFound):
        registry.get("echo")
    for kind, name in (("skill", "text"), ("agent", "talker")):
        record = registry.definition(kind, name)
        assert not record["enabled"]
        assert record["disabled_reason"] == "missing: tool 'echo' (removed)"
    registry.add_function(st.echo)
    registry.enable_definition("skill", "text")  # complete again: may be enabled
    assert registry.skill("text").name == "text"


def test_versions_by_content_and_lifecycle_per_tenant(registry: Registry) -> None:
    registry.add_agent({"name": "helper", "instructions": "Help."})
    registry.add_agent({"name": "helper", "instructions": "Help."})  # unchanged
    registry.add_agent({"name": "helper", "instructions": "Help more."})
    record = registry.definition("agent", "helper")
    assert record["version"] == 2 and [v["version"] for v in record["versions"]] == [1, 2]
    assert record["definition"]["instructions"] == "Help more."
    first = registry.definition("agent", "helper", version=1)
    assert first["definition"]["instructions"] == "Help." and first["shown_version"] == 1
    with pytest.raises(NotFound, match="agent 'helper' has no version 3"):
        registry.definition("agent", "helper", version=3)

    other = registry.for_tenant("other")
    with pytest.raises(NotFound):
        other.definition("agent", "helper")
    with pytest.raises(NotFound):
        other.disable_definition("agent", "helper")
    registry.disable_definition("agent", "helper")
    assert [a.name for a in registry.agents()] == []
    registry.enable_definition("agent", "helper")
    assert [a.name for a in registry.agents()] == ["helper"]
    registry.remove_definition("agent", "helper")
    with pytest.raises(NotFound):
        registry.definition("agent", "helper")
    registry.add_agent({"name": "helper", "instructions": "Again."})
    assert registry.definition("agent", "helper")["version"] == 1  # history went with it
    with pytest.raises(UsageError, match="kind must be skill or agent"):
        registry.definition("tool", "helper")


def cli(url: str, *args: str, code: int = 0) -> Any:
    result = CliRunner().invoke(app, ["--db", url, *args, "--json"])
    assert result.exit_code == code, result.output
    return json.loads(result.stdout)


def test_the_cli_works_on_skills_and_agents_as_on_tools(store_url: str, tmp_path: Path) -> None:
    cli(store_url, "add", "python", "tests.sample_tools")
    skill = tmp_path / "sql" / "SKILL.md"
    skill.parent.mkdir()
    skill.write_text("---\nname: sql\ndescription: SQL.\ntools: [run_query]\n---\nUse it.\n")
    error = cli(store_url, "add", "skill", str(skill), code=2)["error"]["message"]
    assert "tool 'run_query'" in error
    assert cli(store_url, "add", "skill", str(skill), "--allow-missing") == {"changed": ["sql"]}
    agent = tmp_path / "agent.yaml"
    agent.write_text("name: analyst\ninstructions: Answer.\nskills: [sql]\ntools: [echo]\n")
    cli(store_url, "add", "agent", str(agent))
    assert cli(store_url, "disable", "agent", "analyst")["action"] == "disabled"
    shown = cli(store_url, "show", "agent", "analyst")
    assert shown["enabled"] is False and shown["definition"]["tools"] == ["echo"]
    cli(store_url, "enable", "agent", "analyst")
    listed = cli(store_url, "list", "--kind", "skill")["skills"]
    assert [(s["name"], s["enabled"]) for s in listed] == [("sql", False)]
    assert cli(store_url, "list", "--kind", "agent")["agents"][0]["enabled"] is True
    error = cli(store_url, "remove", "echo", code=2)["error"]["message"]
    assert "used by agent analyst" in error
    cli(store_url, "remove", "echo", "--force")
    assert cli(store_url, "show", "agent", "analyst")["enabled"] is False
    cli(store_url, "remove", "skill", "sql")
    assert cli(store_url, "show", "skill", "sql", code=2)["error"]["message"].startswith(
        "no skill named 'sql'"
    )
    assert (
        "kind must be tool, skill or agent"
        in (cli(store_url, "disable", "toolz", "x", code=2)["error"]["message"])
    )
    text = CliRunner().invoke(app, ["--db", store_url, "show", "agent", "analyst"])
    assert text.exit_code == 0 and "disabled: missing: tool 'echo' (removed)" in text.stdout
