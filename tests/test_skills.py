"""Skills and agents: SKILL.md files, progressive disclosure in the loop, access levels."""

from __future__ import annotations

import json
import sqlite3
from collections.abc import Iterator
from pathlib import Path

import pytest

import tests.sample_tools as st
import tooldb
from tooldb import Registry, Settings
from tooldb.agents import AgentLoop, run_task
from tooldb.errors import DefinitionError, NotFound
from tooldb.examples.pets_server import PetsServer
from tooldb.models import ScriptedModel, call
from tooldb.registry.skills import read_skills
from tooldb.types import Access, RunStatus

MATH = """---
name: math
description: Arithmetic on integers.
tools:
  - add
depends_on: [text]
license: MIT
---
# Math
Use `add` for sums. Never guess.
"""
TEXT = """---
name: text
description: Work with text.
tools:
  echo: read
---
Echo text back with `echo`.
"""
ADVANCED = """---
name: advanced-math
description: Harder arithmetic.
parent: math
tools: [fail]
---
Only for experts.
"""


@pytest.fixture
def skill_dir(tmp_path: Path) -> Path:
    for name, text in {"math": MATH, "text": TEXT, "advanced": ADVANCED}.items():
        folder = tmp_path / "skills" / name
        folder.mkdir(parents=True)
        (folder / "SKILL.md").write_text(text)
    return tmp_path / "skills"


@pytest.fixture
def reg(registry: Registry, skill_dir: Path) -> Registry:
    registry.add(st.add, st.echo, st.fail, st.whoami)
    assert sorted(registry.add_skill(skill_dir)) == ["advanced-math", "math", "text"]
    return registry


def test_skill_files_parse_with_tools_access_and_unknown_fields(skill_dir: Path) -> None:
    skills = {s.name: s for s in read_skills(skill_dir)}
    math = skills["math"]
    assert math.depends_on == ["text"] and math.tools[0].access is Access.EXECUTE
    assert math.instructions.startswith("# Math") and math.metadata == {"license": "MIT"}
    assert skills["text"].tools[0].access is Access.READ
    assert skills["advanced-math"].parent == "math"


@pytest.mark.parametrize(
    ("text", "problem"),
    [
        ("no front matter", "must start with YAML front matter"),
        ("---\nname: x\n", "not closed"),
        ("---\nname: x\n---\n", "description"),
        ("---\n[1, 2]\n---\n", "must be a mapping"),
        ("---\nname: x\ndescription: d\ntools: [{name: t, access: admin}]\n---\n", "access"),
        ("---\nname: x\ndescription: d\ntools: 3\n---\n", "'tools' must be"),
    ],
)
def test_bad_skill_files_are_clear_errors(tmp_path: Path, text: str, problem: str) -> None:
    path = tmp_path / "SKILL.md"
    path.write_text(text)
    with pytest.raises(DefinitionError, match=problem):
        read_skills(path)


def test_skills_are_versioned_and_listed(reg: Registry, skill_dir: Path) -> None:
    assert reg.add_skill(skill_dir) == []  # unchanged: nothing new
    (skill_dir / "text" / "SKILL.md").write_text(TEXT.replace("Work with", "Handle"))
    assert reg.add_skill(skill_dir) == ["text"]
    assert reg.skill("text").description == "Handle text."
    assert [s.name for s in reg.skills()] == ["advanced-math", "math", "text"]
    with pytest.raises(NotFound):
        reg.skill("nope")


def test_progressive_disclosure(reg: Registry) -> None:
    model = ScriptedModel(
        [call("load_skill", {"name": "math"}), call("add", {"a": 1, "b": 2}), "3"]
    )
    result = AgentLoop(reg, model, skills=["math"], instructions="Be exact.").run("1 + 2")
    assert result.status is RunStatus.SUCCESS
    first_messages, first_tools, _ = model.requests[0]
    assert [t.name for t in first_tools] == ["load_skill"]  # only the skill loader at first
    system = first_messages[0].content
    assert "Be exact." in system and "- math: Arithmetic on integers." in system
    assert system.startswith("Be exact.\n\n")  # the instructions, then the skills' index
    assert "Use `add`" not in system  # instructions only once loaded
    loaded = model.requests[1][0][-1].content
    assert "Use `add` for sums" in loaded and "Echo text back" in loaded  # with dependencies
    assert "advanced-math: Harder arithmetic." in loaded  # sub-skills are listed
    assert "add (execute)" in loaded and "echo (read)" in loaded
    assert sorted(t.name for t in model.requests[1][1]) == ["add", "echo", "load_skill"]
    details = reg.store.get_run_details(reg.tenant, result.run_id)
    assert details is not None and details["data"]["skills_loaded"] == ["text", "math"]


def test_skills_outside_the_agent_cannot_be_loaded(reg: Registry) -> None:
    model = ScriptedModel([call("load_skill", {"name": "math"}), "no"])
    AgentLoop(reg, model, skills=["text"]).run("x")
    assert "no skill named 'math' is available" in model.requests[1][0][-1].content
    with pytest.raises(NotFound, match="ghost"):
        AgentLoop(reg, ScriptedModel(["x"]), skills=["ghost"]).run("x")


def test_read_access_refuses_code_tools_and_allows_read_only_ones(reg: Registry) -> None:
    reg.add_skill({"name": "peek", "description": "Look only.",
                   "tools": {"whoami": "read", "add": "write"}})  # fmt: skip
    model = ScriptedModel(
        [call("load_skill", {"name": "peek"}),
         [call("whoami", {"note": "n"}), call("add", {"a": 1})], "done"]
    )  # fmt: skip
    result = AgentLoop(reg, model, skills=["peek"]).run("peek")
    errors = [u.error for u in result.tool_calls[1:]]
    assert "granted 'read' access to 'whoami'" in (errors[0] or "")
    assert "granted 'write' access to 'add'" in (errors[1] or "")
    assert reg.calls(run_id=result.run_id) == []  # nothing ran


@pytest.fixture
def data_registry(tmp_path: Path, store_url: str) -> Iterator[Registry]:
    data = tmp_path / "data.db"
    with sqlite3.connect(data) as conn:
        conn.execute("CREATE TABLE notes (body TEXT)")
    settings = Settings(url=store_url, embedder="hash", connections={"data": f"sqlite:///{data}"})
    reg = tooldb.open(store_url, settings=settings)
    reg.add({"name": "add_note", "kind": "sql", "target": "INSERT INTO notes VALUES (:body)",
             "returns": "none", "parameters": {"body": {"type": "string", "required": True}},
             "metadata": {"connection": "data", "access": "write"}})  # fmt: skip
    yield reg
    reg.close()


def test_read_grant_runs_a_writable_sql_tool_read_only(data_registry: Registry) -> None:
    reg = data_registry
    reg.add_skill({"name": "reader", "description": "r", "tools": {"add_note": "read"}})
    reg.add_skill({"name": "writer", "description": "w", "tools": {"add_note": "write"}})
    note = call("add_note", {"body": "hi"})
    model = ScriptedModel([call("load_skill", {"name": "reader"}), note, "done"])
    result = AgentLoop(reg, model, skills=["reader"]).run("write a note")
    assert not result.tool_calls[1].success
    assert "tried to write; nothing was written" in (result.tool_calls[1].error or "")
    model = ScriptedModel([call("load_skill", {"name": "writer"}), note, "done"])
    result = AgentLoop(reg, model, skills=["writer"]).run("write a note")
    assert result.tool_calls[1].success, result.tool_calls[1].error
    # the same tool called directly keeps its registered access
    assert reg.call("add_note", {"body": "direct"}).success


def test_agents_from_yaml_run_with_their_skills(reg: Registry, tmp_path: Path) -> None:
    agent_file = tmp_path / "agent.yaml"
    agent_file.write_text(
        "name: calculator\ninstructions: You add numbers.\nskills: [math]\n"
        "limits: {max_iterations: 4}\n"
    )
    assert reg.add_agent(agent_file) is True
    assert reg.add_agent(agent_file) is False
    spec = reg.agent("calculator")
    assert spec.skills == ["math"] and spec.limits == {"max_iterations": 4}
    model = ScriptedModel([call("load_skill", {"name": "math"})], repeat_last=True)
    result = run_task(reg, "add forever", agent="calculator", model=model)
    assert result.status is RunStatus.PARTIAL and result.agent == "calculator"
    assert result.review_reason == "reached the limit of 4 iterations"
    # without a model the agent routes among its skills' tools only
    routed = run_task(reg, "echo 'hello'", agent="calculator")  # echo is not offered: decline
    assert routed.mode == "router" and routed.tool_calls == []
    assert routed.plan is not None and routed.plan["tool"] == "add"
    added = run_task(reg, "add 2 and 3", agent="calculator")
    assert [(u.tool, u.arguments) for u in added.tool_calls] == [("add", {"a": 2, "b": 3})]
    bad = tmp_path / "bad.yaml"
    bad.write_text("name: x\nunknown_field: 1\n")
    with pytest.raises(DefinitionError, match="unknown_field"):
        reg.add_agent(bad)
    assert json.loads(spec.model_dump_json())["name"] == "calculator"


def test_read_grant_sends_only_safe_methods_on_the_pets_server(
    http_registry: Registry, pets: PetsServer
) -> None:
    """``read`` runs GET and refuses POST before anything is sent; ``write`` runs both;
    a python tool registered ``metadata.read_only: true`` runs under ``read`` (HTTP tools
    are judged by their method only: their metadata has no ``read_only``)."""
    reg = http_registry
    reg.add(
        {"name": "list_pets", "kind": "http", "target": f"GET {pets.url}/pets"},
        {"name": "add_pet", "kind": "http", "target": f"post {pets.url}/pets",
         "parameters": {"name": "string", "tag": "string"}},
        {"name": "look", "target": "tests.sample_tools:echo", "parameters": {"text": "string"},
         "metadata": {"read_only": True}},
        {"name": "say", "target": "tests.sample_tools:echo", "parameters": {"text": "string"}},
    )  # fmt: skip
    tools = ["list_pets", "add_pet", "look", "say"]
    for level in ("read", "write"):
        reg.add_skill({"name": level, "description": level, "tools": dict.fromkeys(tools, level)})
    turn = [call("list_pets", {}), call("add_pet", {"name": "Fido", "tag": "dog"}),
            call("look", {"text": "hi"}), call("say", {"text": "hi"})]  # fmt: skip
    before = len(pets.state.pets)
    model = ScriptedModel([call("load_skill", {"name": "read"}), turn, "done"])
    result = AgentLoop(reg, model, skills=["read"]).run("look at the pets")
    listed, added, looked, said = result.tool_calls[1:]
    assert listed.success and looked.success, (listed.error, looked.error)
    assert not added.success and not said.success
    assert "granted 'read' access to 'add_pet', and it sends POST" in (added.error or "")
    assert "running a python tool needs 'execute'" in (said.error or "")
    assert [(s.method, s.path) for s in pets.seen] == [("GET", "/pets")]  # no POST arrived
    assert len(pets.state.pets) == before
    assert sorted(c.tool_name for c in reg.calls(run_id=result.run_id)) == ["list_pets", "look"]
    # write runs both HTTP methods (still not python: that needs execute)
    pets.seen.clear()
    model = ScriptedModel([call("load_skill", {"name": "write"}), turn, "done"])
    result = AgentLoop(reg, model, skills=["write"]).run("add a pet")
    listed, added, looked, said = result.tool_calls[1:]
    assert listed.success and added.success and looked.success, (listed.error, added.error)
    assert "running a python tool needs 'execute'" in (said.error or "")
    assert sorted(s.method for s in pets.seen) == ["GET", "POST"]
    assert len(pets.state.pets) == before + 1
