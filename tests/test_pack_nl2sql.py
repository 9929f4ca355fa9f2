"""The nl2sql pack end to end, offline: the shipped Chinook copy, the real agents and
tools, a FunctionModel playing the orchestrator and the SQL writer (and once the real
OpenAI adapter over HTTP against a local server replaying recorded responses). Cases:
a first-time success, a retry after a wrong column, a retry cap reached (partial,
flagged), a refused write statement; and the pieces (validation, chart choice)."""

from __future__ import annotations

import json
import sqlite3
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from typer.testing import CliRunner

import tooldb
from tooldb import Registry, Settings
from tooldb.agents import run_task
from tooldb.cli import app
from tooldb.errors import UsageError
from tooldb.models import FunctionModel, Message, call, load_model, register_model
from tooldb.models import unregister_model as unregister
from tooldb.packs import install
from tooldb.packs.nl2sql import CHINOOK
from tooldb.packs.nl2sql.chart import chart_type
from tooldb.packs.nl2sql.schema import read_schema, relevant_tables
from tooldb.packs.nl2sql.sqlcheck import check
from tooldb.types import RunStatus

from .wire_server import FIXTURES, WireServer, wire_server

runner = CliRunner()
RECORDED = json.loads((FIXTURES / "openai" / "nl2sql_retry.json").read_text())
QUESTION = RECORDED["question"]
GOOD, WRONG = RECORDED["good_sql"], RECORDED["wrong_sql"]
EMPTY = GOOD.replace("'2023'", "'1999'")
MODEL = "test:nl2sql"


@pytest.fixture
def reg(sqlite_url: str) -> Iterator[Registry]:
    registry = tooldb.open(sqlite_url, settings=Settings(embedder="hash", url=sqlite_url))
    report = install(registry, "nl2sql")
    assert sorted(report.agents) == ["nl2sql", "nl2sql_chart", "nl2sql_runner", "nl2sql_schema",
                                     "nl2sql_validator", "nl2sql_writer"]  # fmt: skip
    yield registry
    registry.close()
    unregister(MODEL)


def expected_rows() -> list[tuple[str, int]]:
    """The answer computed straight from the shipped file, independently of the pack."""
    with sqlite3.connect(f"file:{CHINOOK}?mode=ro", uri=True) as conn:
        return conn.execute(GOOD).fetchall()


def _results(messages: list[Message]) -> list[Message]:
    return [m for m in messages if m.role == "tool"]


STEPS = [
    ("nl2sql_schema", QUESTION),
    ("nl2sql_writer", QUESTION),
    ("nl2sql_validator", "check the SQL"),
    ("nl2sql_runner", "run the SQL"),
    ("nl2sql_chart", "chart the result"),
]


def play(sqls: list[str], writer_tasks: list[str]) -> FunctionModel:
    """One model for both roles, told apart by their instructions: the orchestrator
    follows its five steps (and stops at a failed one), the SQL writer proposes the
    next of ``sqls`` (the last one again when they run out)."""

    def decide(messages: list[Message], *_: object) -> object:
        system = messages[0].content if messages[0].role == "system" else ""
        done = _results(messages)
        if system.startswith("You write one SQL SELECT"):
            if done:
                return "proposed"
            writer_tasks.append(next(m.content for m in messages if m.role == "user"))
            return call("nl2sql_propose_sql", {"sql": sqls[min(len(writer_tasks), len(sqls)) - 1]})
        if done and done[-1].content.startswith("Error:"):
            return f"stopped: {done[-1].content}"
        if len(done) < len(STEPS):
            name, task = STEPS[len(done)]
            return call(name, {"task": task})
        return done[-1].content

    return FunctionModel(decide, id=MODEL)


def _run(reg: Registry, sqls: list[str]) -> tuple[Any, list[str]]:
    tasks: list[str] = []
    register_model(MODEL, play(sqls, tasks))
    return run_task(reg, QUESTION, agent="nl2sql", model=MODEL), tasks


def test_a_first_time_success_answers_with_a_table_the_sql_and_a_chart(reg: Registry) -> None:
    result, tasks = _run(reg, [GOOD])
    assert result.status is RunStatus.SUCCESS, result.review_reason
    rows = expected_rows()
    assert len(rows) == 5
    for artist, sold in rows:
        assert f"| {artist} | {sold} |" in result.output
    assert GOOD in result.output
    state = result.data["state"]
    assert state["chart_type"] == "bar" and f"Chart (bar): {state['chart']}" in result.output
    png = Path(state["chart"])
    assert png.read_bytes()[:4] == b"\x89PNG" and png.stat().st_size > 5_000
    assert len(tasks) == 1 and "State you read:" in tasks[0] and "table Artist" in tasks[0]
    assert {k: state[f"{k}_status"] for k in ("nl2sql_schema", "nl2sql_chart")} == {
        "nl2sql_schema": "success",
        "nl2sql_chart": "success",
    }
    # the trace shows every agent, each tool call and the chart's path
    traced = runner.invoke(app, ["--db", reg.settings.url, "trace", result.run_id[:12]])
    assert traced.exit_code == 0, traced.output
    assert "chart = " in traced.output and "chart_type = bar" in traced.output
    as_json = runner.invoke(app, ["--db", reg.settings.url, "trace", result.run_id, "--json"])
    tree = json.loads(as_json.output)["tree"]
    assert tree["state"]["chart"] == str(png) and tree["state"]["chart_type"] == "bar"
    agents = [e["agent"] for e in tree["events"] if e["type"] == "run"]
    assert agents == [name for name, _ in STEPS]
    inner = [c["tool"] for e in tree["events"] if e["type"] == "run" for c in e["events"]
             if c["type"] == "call"]  # fmt: skip
    assert inner == ["nl2sql_find_schema", "nl2sql_propose_sql", "nl2sql_check_sql",
                     "nl2sql_run_query", "nl2sql_make_chart"]  # fmt: skip


def test_a_wrong_column_comes_back_as_needs_retry_and_the_writer_fixes_it(
    reg: Registry,
) -> None:
    result, tasks = _run(reg, [WRONG, GOOD])
    assert result.status is RunStatus.SUCCESS, result.review_reason
    assert len(tasks) == 2
    assert "column 'Track.ArtistId' does not exist" in tasks[1]  # the feedback, and
    assert "ArtistId is in Album, Artist" in tasks[1]  # the refinement naming what exists
    [link] = result.data["retries"]
    assert (link["from"], link["target"], link["outcome"]) == (
        "nl2sql_validator",
        "nl2sql_writer",
        "success",
    )
    assert result.data["state"]["sql"] == GOOD
    assert all(f"| {artist} | {sold} |" in result.output for artist, sold in expected_rows())
    for command in (["runs", "show", result.run_id], ["trace", result.run_id]):
        shown = runner.invoke(app, ["--db", reg.settings.url, *command])
        assert "retry: nl2sql_validator -> nl2sql_writer (1 of 2)" in shown.output


def test_a_retry_cap_reached_is_partial_and_flagged_for_review(reg: Registry) -> None:
    result, tasks = _run(reg, [EMPTY])
    assert result.status is RunStatus.PARTIAL and result.requires_review
    assert "retry cap reached" in (result.review_reason or "")
    assert len(tasks) == 3  # the first SQL and the two retries the orchestrator allows
    assert "the query returned no rows" in tasks[1]
    assert [link["outcome"] for link in result.data["retries"]][-1] == "cap reached"
    assert result.output.startswith("stopped:")


def test_a_write_statement_is_refused_and_nothing_changes(reg: Registry) -> None:
    result, _ = _run(reg, ["DELETE FROM Track"])
    assert "refused: only a read-only SELECT is run, and this statement is a DELETE" in (
        result.output
    )
    assert result.data["state"]["nl2sql_validator_status"] == "error"
    assert result.data["retries"] == []  # a refusal is not retried
    url = reg.get("nl2sql_run_query").spec.metadata["pack_database"]
    with sqlite3.connect(url.removeprefix("sqlite:///")) as conn:
        assert conn.execute("SELECT COUNT(*) FROM Track").fetchone() == (3503,)


def test_the_recorded_http_exchange_retries_after_a_wrong_column(
    reg: Registry, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("TEST_OPENAI_KEY", "sk-test-0123456789abcdef")
    server: WireServer
    with wire_server() as server:
        server.reply(*RECORDED["responses"])
        settings = Settings(
            model_api_key_env="TEST_OPENAI_KEY",
            model_max_retries=0,
            model_max_tokens=256,
            model_base_url=f"{server.url}/v1",
        )
        model = load_model("openai:gpt-4o-mini", settings)
        result = run_task(reg, QUESTION, agent="nl2sql", model=model)
        requests = [r.body for r in server.requests]
    assert result.status is RunStatus.SUCCESS, result.review_reason
    assert len(requests) == len(RECORDED["responses"])
    writer_retry = requests[5]  # the writer re-run: its task carries the refinement
    task = next(m["content"] for m in writer_retry["messages"] if m["role"] == "user")
    assert "column 'Track.ArtistId' does not exist" in task
    assert writer_retry["tool_choice"] == {
        "type": "function",
        "function": {"name": "nl2sql_propose_sql"},
    }
    state = result.data["state"]
    assert state["sql"] == GOOD and state["chart_type"] == "bar"
    assert state["nl2sql_chart_result"] == {"chart": state["chart"], "chart_type": "bar"}
    [answer] = [use.output for use in result.tool_calls if use.tool == "nl2sql_chart"]
    assert all(f"| {a} | {n} |" in answer for a, n in expected_rows()) and GOOD in answer
    assert [link["outcome"] for link in result.data["retries"]] == ["success"]


def test_without_a_model_the_agent_says_it_needs_one(reg: Registry) -> None:
    with pytest.raises(UsageError, match="agent 'nl2sql' needs a model"):
        run_task(reg, QUESTION, agent="nl2sql")
    out = runner.invoke(app, ["--db", reg.settings.url, "run", "--agent", "nl2sql", QUESTION])
    assert out.exit_code == 2 and "needs a model: pass --model provider:model" in out.output


@pytest.mark.parametrize(
    ("sql", "status", "text"),
    [
        (GOOD, "success", "read-only SELECT"),
        ("SELECT 1; DROP TABLE Track", "error", "refused: 2 statements"),
        ("WITH d AS (DELETE FROM Track RETURNING *) SELECT * FROM d", "error", "DELETE"),
        ("UPDATE Track SET Name = 'x'", "error", "UPDATE"),
        ("PRAGMA writable_schema = 1", "error", "refused"),
        ("SELECT Nme FROM Artist", "needs_retry", "column 'Nme' does not exist in Artist"),
        ("SELECT * FROM Singer", "needs_retry", "table 'Singer' does not exist"),
        ("SELECT x.Name FROM Artist a", "needs_retry", "'x' in 'x.Name' is not a table"),
        ("SELECT Name FROM Artist WHERE", "needs_retry", "does not parse"),
        ("SELECT Name FROM Artist ORDER BY nosuchfn(Name)", "needs_retry", "cannot plan"),
    ],
)
def test_validation(reg: Registry, sql: str, status: str, text: str) -> None:
    url = reg.get("nl2sql_check_sql").spec.metadata["pack_database"]
    verdict = check(sql, read_schema(url), url)
    assert verdict.status == status and text in verdict.message, verdict


def test_schema_lookup_finds_the_join_path(reg: Registry) -> None:
    url = reg.get("nl2sql_find_schema").spec.metadata["pack_database"]
    tables = relevant_tables(read_schema(url), QUESTION, reg.embedder)
    assert {"Artist", "Album", "Track", "InvoiceLine", "Invoice"} <= set(tables)


def test_chart_type_follows_the_result_shape() -> None:
    assert chart_type(["Artist", "Sold"], [["A", 3], ["B", 2]]) == "bar"
    assert chart_type(["Month", "Total"], [["2023-01", 3.5], ["2023-02", 2.0]]) == "line"
    assert chart_type(["Bytes", "Milliseconds"], [[1, 2], [3, 4]]) == "point"
    assert chart_type(["Total"], [[42]]) is None
    assert chart_type(["Name", "Composer"], [["a", "b"]]) is None


def test_a_database_that_cannot_be_read_is_refused_before_anything_registers(
    reg: Registry, tmp_path: Path
) -> None:
    empty = tmp_path / "empty.sqlite"
    sqlite3.connect(empty).close()
    with pytest.raises(UsageError, match="has no tables"):
        install(reg, "nl2sql", f"sqlite:///{empty}")
    assert reg.get("nl2sql_run_query").spec.metadata["pack_database"] != f"sqlite:///{empty}"
