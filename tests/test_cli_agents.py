"""`tooldb run`, `runs`, `run show`, `add skill`, `add agent`, `skills`, `agents`."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.test_cli import as_json, tooldb


@pytest.fixture
def url(store_url: str) -> str:
    return store_url


def test_run_routes_offline_and_the_run_can_be_shown(url: str) -> None:
    as_json(url, "add", "python", "tooldb.examples.basic")
    result = as_json(url, "run", "convert 100 C to F")
    assert result["status"] == "success" and result["output"] == "212.0"
    assert result["mode"] == "router" and result["tool_calls"][0]["tool"] == "convert_temperature"
    runs = as_json(url, "runs")["runs"]
    assert [r["id"] for r in runs] == [result["run_id"]]
    shown = as_json(url, "run", "show", result["run_id"])
    assert shown["status"] == "success" and [m["role"] for m in shown["messages"]] == [
        "user", "assistant", "tool",
    ]  # fmt: skip
    plain = tooldb(url, "run", "show", result["run_id"])
    assert plain.exit_code == 0 and "convert_temperature" in plain.output
    assert as_json(url, "runs", "show", result["run_id"]) == shown  # the unambiguous spelling
    assert "runs show RUN_ID" in as_json(url, "runs", "shw", "x", code=2)["error"]["message"]


def test_run_failures_exit_1_and_bad_input_exits_2(url: str) -> None:
    as_json(url, "add", "python", "tooldb.examples.basic")
    failed = as_json(url, "run", "convert the temperature", code=1)
    assert failed["status"] == "error" and failed["requires_review"] is True
    assert "value" in failed["error"]
    unknown = as_json(url, "run", "show", "nope", code=2)
    assert "no run 'nope'" in unknown["error"]["message"]
    bad_model = as_json(url, "run", "x", "--model", "madeup:thing", code=2)
    assert "unknown model provider" in bad_model["error"]["message"]
    assert as_json(url, "run", "x", "--agent", "ghost", code=2)["error"]["type"] == "NotFound"


def test_skills_and_agents_from_files(url: str, tmp_path: Path) -> None:
    skill = tmp_path / "SKILL.md"
    skill.write_text(
        "---\nname: temps\ndescription: Temperatures.\ntools: [convert_temperature]\n---\nUse it.\n"
    )
    refused = as_json(url, "add", "skill", str(skill), code=2)["error"]["message"]
    assert "skill 'temps' names what this tenant does not have: tool 'convert_temperature'" in (
        refused
    )
    assert as_json(url, "add", "python", "tooldb.examples.basic")
    assert as_json(url, "add", "skill", str(skill)) == {"changed": ["temps"]}
    listed = as_json(url, "skills")["skills"]
    assert listed[0]["name"] == "temps" and listed[0]["tools"][0]["access"] == "execute"
    agent = tmp_path / "agent.yaml"
    agent.write_text("name: weather\nskills: [temps]\n")
    assert as_json(url, "add", "agent", str(agent)) == {
        "agent": "weather", "changed": True, "as_tool": False,
    }  # fmt: skip
    assert as_json(url, "agents")["agents"][0]["name"] == "weather"
    bad = tmp_path / "bad.md"
    bad.write_text("nothing")
    assert "front matter" in as_json(url, "add", "skill", str(bad), code=2)["error"]["message"]


def test_run_args_supply_what_the_task_lacks_and_a_decline_names_it(url: str) -> None:
    as_json(url, "add", "python", "tooldb.examples.planner")
    declined = as_json(url, "run", "count the days from 2024-01-01", code=1)
    assert declined["tool_calls"] == [] and declined["plan"]["missing"] == ["end"]
    assert declined["plan"]["tool"] == "days_between"
    assert declined["plan"]["why"]["start"].startswith("'from'")
    done = as_json(url, "run", "count the days from 2024-01-01", "--args", '{"end": "2024-03-01"}')
    assert done["status"] == "success" and done["output"] == "60"
    assert done["plan"]["calls"][0]["why"]["end"] == "supplied by the caller"
    plain = tooldb(url, "run", "count the days from 2024-01-01")  # stdin is no terminal: no prompt
    assert plain.exit_code == 1 and "does not give 'end'" in plain.output
    bad = as_json(url, "run", "count the days", "--args", "{end: 1}", code=2)
    assert "--args is not valid JSON" in bad["error"]["message"]
    assert "JSON object" in as_json(url, "run", "x", "--args", "[1]", code=2)["error"]["message"]


def test_run_on_a_terminal_asks_for_a_missing_argument(
    url: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    from tests.test_cli import runner
    from tooldb.cli import agents as cli_agents
    from tooldb.cli.app import app

    as_json(url, "add", "python", "tooldb.examples.planner")
    monkeypatch.setattr(cli_agents, "_interactive", lambda: True)
    asked = runner.invoke(app, ["--db", url, "run", "count the days from 2024-01-01"],
                          input="2024-01-31\n")  # fmt: skip
    assert asked.exit_code == 0, asked.output
    assert "days_between: end" in asked.output and "30" in asked.output
    skipped = runner.invoke(app, ["--db", url, "run", "count the days from 2024-01-01"],
                            input="\n")  # fmt: skip
    assert skipped.exit_code == 1 and "does not give 'end'" in skipped.output
    no_prompt = as_json(url, "run", "count the days from 2024-01-01", code=1)  # --json: never asks
    assert no_prompt["plan"]["missing"] == ["end"]
