"""`tooldb ooda ...` and `tooldb add builtins`: JSON documents, exit codes, text output."""

from __future__ import annotations

import json
import time
from typing import Any

import pytest
from typer.testing import CliRunner

import tooldb
from tooldb import Settings
from tooldb.cli import app

from .ooda_support import DAY, log_calls, pattern, tool_spec

runner = CliRunner()


def tooldb_cli(url: str, *args: str) -> Any:
    return runner.invoke(app, ["--db", url, *args])


def as_json(url: str, *args: str, code: int = 0) -> Any:
    result = tooldb_cli(url, *args, "--json")
    assert result.exit_code == code, result.output
    return json.loads(result.stdout)


@pytest.fixture
def url(store_url: str) -> str:
    with tooldb.open(store_url, settings=Settings(embedder="hash", url=store_url)) as registry:
        registry.add(tool_spec("flaky", "Fetch a web page."), tool_spec("fine", "Fetch a page."))
        now = time.time()
        log_calls(registry, "flaky", pattern(300, 30), start=now - 5 * DAY, end=now - DAY)
        log_calls(registry, "fine", pattern(50, 50), start=now - 5 * DAY, end=now - DAY)
    return store_url


def test_run_dry_run_findings_history_undo_and_trend(url: str) -> None:
    dry = as_json(url, "ooda", "run", "--dry-run")
    assert dry["dry_run"] is True and "cycle_id" not in dry  # None is left out
    assert [(a["tool"], a.get("id")) for a in dry["acts"]] == [("flaky", None)]
    assert as_json(url, "ooda", "history") == {"acts": []}

    found = as_json(url, "ooda", "findings")["findings"]
    assert [(f["kind"], f["tool"]) for f in found] == [("low_success", "flaky")]
    assert found[0]["evidence"]["calls"] == 300
    assert [a["tool"] for a in found[0]["alternatives"]] == ["fine"]

    report = as_json(url, "ooda", "run")
    assert report["cycle_id"] >= 1 and report["calls_analyzed"] == 350
    act = report["acts"][0]
    assert (act["tool"], act["action"], act["policy"]) == ("flaky", "disable", "disable_failing")
    enabled = {t["name"]: t["enabled"] for t in as_json(url, "list", "--all")["tools"]}
    assert enabled == {"flaky": False, "fine": True}

    history = as_json(url, "ooda", "history")["acts"]
    assert [a["id"] for a in history] == [act["id"]]
    undone = as_json(url, "ooda", "undo", str(act["id"]))
    assert (undone["action"], undone["reverses"]) == ("enable", act["id"])
    error = as_json(url, "ooda", "undo", str(act["id"]), code=2)["error"]
    assert error["type"] == "UsageError" and "already undone" in error["message"]
    assert as_json(url, "ooda", "undo", "424242", code=2)["error"]["type"] == "NotFound"

    trend = as_json(url, "ooda", "trend", "flaky")
    assert trend["tool"] == "flaky" and trend["analyses"][0]["calls"] == 300
    assert as_json(url, "ooda", "trend", "nope", code=2)["error"]["type"] == "NotFound"


def test_text_output(url: str) -> None:
    run = tooldb_cli(url, "ooda", "run")
    assert run.exit_code == 0, run.output
    assert "cycle 1" in run.stdout and "low_success" in run.stdout and "disable" in run.stdout
    history = tooldb_cli(url, "ooda", "history")
    assert history.exit_code == 0 and "disable_failing" in history.stdout
    assert "no findings" not in tooldb_cli(url, "ooda", "findings").stdout
    assert "300" in tooldb_cli(url, "ooda", "trend", "flaky").stdout
    undo = tooldb_cli(url, "ooda", "undo", "1")
    assert undo.exit_code == 0 and "enabled flaky" in undo.stdout


def test_a_running_cycle_is_reported_not_doubled(url: str) -> None:
    with tooldb.open(url, settings=Settings(embedder="hash", url=url)) as registry:
        assert registry.store.acquire_ooda_lock(registry.tenant, "elsewhere:9:x", 60)[0]
        error = as_json(url, "ooda", "run", code=1)["error"]
        assert error["type"] == "StoreError" and "elsewhere:9:x" in error["message"]
        result = tooldb_cli(url, "ooda", "run", "--wait", "0.2")
        assert result.exit_code == 1 and "another OODA cycle" in result.stderr
        assert tooldb_cli(url, "ooda", "run", "--wait", "-1").exit_code == 2
        registry.store.release_ooda_lock(registry.tenant, "elsewhere:9:x")
    assert as_json(url, "ooda", "run", "--wait", "5")["acts"][0]["tool"] == "flaky"


def test_add_builtins(store_url: str) -> None:
    added = as_json(store_url, "add", "builtins", "diagnostics")
    assert added["tools"] == [
        {"name": "analyze_system_state", "version": 1, "status": "created"},
        {"name": "explain_inference", "version": 1, "status": "created"},
    ]
    state = as_json(store_url, "call", "analyze_system_state", "--args", '{"hours": 2}')
    assert state["success"] is True and state["data"]["tools"]["total"] == 2
