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
import sqlalchemy as sa
from typer.testing import CliRunner

import tests.sample_tools as st
import tooldb
from tooldb import DefinitionError, NotFound, Registry, Settings, UsageError
from tooldb.cli import app
from tooldb.executors.agent import agent_tool_parameters
from tooldb.stores.schema import skill_vectors
from tooldb.types import Returns, SkillSpec, ToolKind

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


# -- an agent as a tool, and finding skills (mutation group catalog_integrity) ----------


def test_an_agent_tool_takes_its_text_and_time_from_the_agent(registry: Registry) -> None:
    """The description is the agent's, else its instructions' first non-blank line, else
    a plain one; the timeout is the agent's own (or the setting's) plus five seconds."""
    agents = {
        "described": {"description": "Summarises.", "instructions": "Sum.",
                      "limits": {"timeout_s": 20}},
        "instructed": {"instructions": "\n   \nFirst line.\nSecond line."},
        "quiet": {},
    }  # fmt: skip
    for name, fields in agents.items():
        registry.add_agent({"name": name, "as_tool": True, **fields})
    tools = {name: registry.get(name).spec for name in agents}
    assert {n: t.description for n, t in tools.items()} == {
        "described": "Summarises.",
        "instructed": "First line.",
        "quiet": "The agent quiet.",
    }
    assert {n: t.timeout_s for n, t in tools.items()} == {
        "described": 25.0,
        "instructed": registry.settings.agent_timeout_s + 5.0,
        "quiet": registry.settings.agent_timeout_s + 5.0,
    }
    for name, tool in tools.items():
        assert (tool.kind, tool.target, tool.category) == (ToolKind.AGENT, name, "agents")
        assert tool.parameters == agent_tool_parameters() and tool.returns is Returns.JSON


def test_an_agent_tool_never_takes_the_name_of_another_kind_of_tool(registry: Registry) -> None:
    registry.add_function(st.echo)
    with pytest.raises(UsageError) as refused:
        registry.add_agent({"name": "echo", "instructions": "Echo.", "as_tool": True})
    assert str(refused.value) == (
        "cannot register agent 'echo' as a tool: a python tool has that name"
    )
    assert registry.get("echo").spec.kind is ToolKind.PYTHON
    other = registry.for_tenant("other")  # another tenant's echo is no obstacle
    other.add_agent({"name": "echo", "instructions": "Echo.", "as_tool": True})
    assert other.get("echo").spec.kind is ToolKind.AGENT


SKILLS = [
    ("weather", "Current weather and forecasts for a city.", "Give temperature and rain."),
    ("invoices", "Create and send invoices to customers.", "Number them by year."),
    ("tides", "High and low water for a coast.", "Say when the harbour moorings dry out."),
]


def test_skills_are_found_among_the_tenants_enabled_ones(registry: Registry) -> None:
    for name, description, instructions in SKILLS:
        registry.add_skill({"name": name, "description": description, "instructions": instructions})
    found = registry.select_skills("  when do the moorings dry out  ", 2)
    assert found.task == "when do the moorings dry out" and len(found.candidates) == 2
    best = found.candidates[0]
    assert best.name == "tides" and best.lexical > 0  # found by its instructions' words
    assert best.dense is not None and found.embedder == registry.embedder.id  # type: ignore[union-attr]
    ranker = registry._skill_ranker
    among = registry.select_skills("forecast for Paris", 5, names=["invoices", "tides"])
    assert set(among.names) == {"invoices", "tides"} and registry._skill_ranker is ranker
    assert registry.select_skills("forecast for Paris", 5, names=[]).names == []
    registry.disable_definition("skill", "weather")
    assert "weather" not in registry.select_skills("forecast for Paris", 5).names
    with pytest.raises(UsageError, match="k must be"):
        registry.select_skills("forecast", -1)


def test_skill_vectors_are_kept_per_tenant_and_embedder(registry: Registry, store_url: str) -> None:
    for name, description, instructions in SKILLS:
        registry.add_skill({"name": name, "description": description, "instructions": instructions})
    registry.select_skills("forecast", 1)
    embedder = registry.embedder
    assert embedder is not None
    hashes = {row["content_hash"] for row in registry.store.list_skills(registry.tenant)}
    kept = registry.store.skill_vectors(registry.tenant, embedder.id, sorted(hashes))
    assert set(kept) == hashes and {len(v) for v in kept.values()} == {4 * embedder.dim}
    with registry.store.engine.connect() as conn:
        dims = conn.execute(sa.select(skill_vectors.c.dim, skill_vectors.c.tenant)).all()
    assert set(dims) == {(embedder.dim, registry.tenant)}
    settings = Settings(embedder="hash", url=store_url)
    with tooldb.open(store_url, settings=settings) as again:
        assert again.select_skills("forecast", 1).names == ["weather"]
        assert again._skill_ranker is not None and again._skill_ranker.embedded == 0
    lexical = Settings(embedder="none", url=store_url)
    with tooldb.open(store_url, settings=lexical) as plain:
        found = plain.select_skills("forecast", 1)
        assert found.names == ["weather"] and found.embedder is None
        assert found.candidates[0].dense is None and found.notes == ["lexical only: no embedder"]


def test_what_the_lifecycle_says_in_full(registry: Registry) -> None:
    """The texts of refusals and of a disabled definition, the default reason, and a
    skill's assignment rows shown without the tenant and skill columns."""
    registry.add_function(st.echo)
    registry.add_skill({"name": "child", "description": "C.", "parent": "base",
                        "tools": ["echo"]}, allow_missing=True)  # fmt: skip
    assert registry.definition("skill", "child")["disabled_reason"] == "missing: skill 'base'"
    with pytest.raises(DefinitionError) as refused:
        registry.enable_definition("skill", "child")
    assert str(refused.value) == "skill 'child' cannot be enabled: this tenant has no skill 'base'"
    with pytest.raises(DefinitionError) as refused:
        registry.add_agent({"name": "lost", "tools": ["ghost"]})
    assert str(refused.value) == (
        "agent 'lost' names what this tenant does not have: tool 'ghost'. Register them "
        "first, or pass --allow-missing (allow_missing=True) to register it disabled"
    )
    assert registry.definition("skill", "child")["assigned"] == [
        {"tool": "echo", "position": 0, "priority": 0, "config": {}, "access": "execute"}
    ]
    registry.add_skill({"name": "base", "description": "B."})
    registry.enable_definition("skill", "child")
    registry.disable_definition("skill", "child")
    assert registry.definition("skill", "child")["disabled_reason"] == "disabled by hand"
    registry.store.set_catalog_enabled("skill", registry.tenant, "child", (False, None))
    with pytest.raises(UsageError) as refused:
        registry.skill("child")
    assert str(refused.value) == (
        "skill 'child' is disabled (no reason given): `tooldb enable skill child` enables it"
    )
    with pytest.raises(NotFound) as missing:
        registry.remove_definition("agent", "ghost")
    assert str(missing.value) == f"no agent named 'ghost' in tenant {registry.tenant!r}"


def test_a_definition_disabled_by_hand_stays_disabled_when_registered_again(
    registry: Registry,
) -> None:
    registry.add_skill(SkillSpec(name="notes", description="Notes."))  # a spec as it is
    registry.add_agent({"name": "scribe", "instructions": "Write."})
    registry.disable_definition("skill", "notes")
    registry.disable_definition("agent", "scribe", reason="under review")
    assert registry.add_skill(SkillSpec(name="notes", description="Notes.")) == []
    assert registry.add_skill({"name": "notes", "description": "More notes."}) == ["notes"]
    assert registry.add_agent({"name": "scribe", "instructions": "Write more."})
    assert registry.definition("skill", "notes")["disabled_reason"] == "disabled by hand"
    assert registry.definition("agent", "scribe")["disabled_reason"] == "under review"
    assert not registry.definition("agent", "scribe")["enabled"]


def test_dates_in_yaml_metadata_are_stored_as_json_text(registry: Registry, tmp_path: Path) -> None:
    """YAML reads ``2024-05-01`` as a date: definitions are stored as JSON, so it is kept
    as its ISO text (and the definition loads back as it was registered)."""
    skill = tmp_path / "dated" / "SKILL.md"
    skill.parent.mkdir()
    skill.write_text(
        "---\nname: dated\ndescription: D.\nmetadata: {since: 2024-05-01}\n---\nUse.\n"
    )
    agent = tmp_path / "agent.yaml"
    agent.write_text("name: dated-agent\ninstructions: Go.\nmetadata: {since: 2024-05-01}\n")
    assert registry.add_skill(skill) == ["dated"] and registry.add_agent(agent)
    assert registry.skill("dated").metadata == {"since": "2024-05-01"}
    assert registry.agent("dated-agent").metadata == {"since": "2024-05-01"}


def test_five_skills_by_default(registry: Registry) -> None:
    for topic in ("maps", "mail", "music", "money", "meals", "movies", "medicine"):
        registry.add_skill({"name": topic, "description": f"Everything about {topic}."})
    assert len(registry.select_skills("everything about my maps").candidates) == 5
