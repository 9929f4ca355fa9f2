"""Packs: `tooldb add pack NAME` registers a pack's tools (stamped with its database),
skills and agents; `pack_database` gives a pack tool its URL during a call; a missing
pack is a clear error naming the packs there are."""

from __future__ import annotations

import json
import textwrap
from collections.abc import Iterator
from pathlib import Path

import pytest
from typer.testing import CliRunner

import tooldb.packs
from tooldb.cli import app

runner = CliRunner()

PACK = '''
"""A pack written by the test: one tool reading its database URL, a skill, an agent."""
from pathlib import Path

from tooldb.packs import PackReport, pack_database, register_contents
from tooldb.decorators import tool

DESCRIPTION = "a pack for tests"
HERE = Path(__file__).parent


@tool(category="demo")
def where_is_my_database() -> str:
    """Report the database this pack was installed with."""
    return pack_database("where_is_my_database")


def install(registry, database_url):
    url = database_url or "sqlite:///default-demo.db"
    return register_contents(
        registry, "demo", url, tool_modules=[__name__], skills=HERE / "skills",
        agents=HERE / "agents",
    )
'''

SKILL = """\
---
name: demo-skill
description: Shows where the demo pack keeps its data.
tools: [where_is_my_database]
---
Call where_is_my_database.
"""

AGENT = """\
name: demo_agent
description: Answers where the demo data lives.
instructions: Use the demo skill.
skills: [demo-skill]
as_tool: true
"""


@pytest.fixture
def demo_pack(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[str]:
    root = tmp_path / "extra_packs"
    pack = root / "demo"
    (pack / "skills" / "demo-skill").mkdir(parents=True)
    (pack / "agents").mkdir()
    (pack / "__init__.py").write_text(textwrap.dedent(PACK))
    (pack / "skills" / "demo-skill" / "SKILL.md").write_text(SKILL)
    (pack / "agents" / "demo_agent.yaml").write_text(AGENT)
    monkeypatch.setattr(tooldb.packs, "__path__", [*tooldb.packs.__path__, str(root)])
    yield "demo"


def cli(url: str, *args: str) -> tuple[int, str]:
    result = runner.invoke(app, ["--db", url, *args])
    return result.exit_code, result.output


def test_add_pack_registers_tools_skills_agents_with_database(
    store_url: str, demo_pack: str
) -> None:
    code, out = cli(store_url, "add", "pack", demo_pack, "--database", "sqlite:///x.db", "--json")
    assert code == 0, out
    report = json.loads(out)
    assert report == {
        "name": "demo",
        "database_url": "sqlite:///x.db",
        "tools": ["where_is_my_database"],
        "skills": ["demo-skill"],
        "agents": ["demo_agent"],
    }
    code, out = cli(store_url, "call", "where_is_my_database", "--json")
    assert code == 0, out
    assert json.loads(out)["output"] == "sqlite:///x.db"
    code, out = cli(store_url, "list", "--json")
    names = {tool["name"] for tool in json.loads(out)["tools"]}
    assert {"where_is_my_database", "demo_agent"} <= names  # the agent also as a tool


def test_packs_lists_and_unknown_pack_is_a_clear_error(sqlite_url: str, demo_pack: str) -> None:
    code, out = cli(sqlite_url, "packs", "--json")
    assert code == 0, out
    assert {"name": "demo", "description": "a pack for tests"} in json.loads(out)["packs"]
    code, out = cli(sqlite_url, "add", "pack", "nosuch")
    assert code == 2
    assert "no pack named 'nosuch'" in out and "demo" in out
    code, out = cli(sqlite_url, "add", "pack", "../etc")
    assert code == 2 and "no pack named" in out


def test_pack_database_outside_a_pack_tool_is_refused(sqlite_url: str) -> None:
    code, out = cli(sqlite_url, "add", "python", "tests.sample_tools")
    assert code == 0, out
    registry = tooldb.open(sqlite_url)
    try:
        from tooldb.context import calling

        with calling(registry), pytest.raises(tooldb.UsageError, match="not installed by a pack"):
            tooldb.packs.pack_database(registry.list()[0].spec.name)
    finally:
        registry.close()
