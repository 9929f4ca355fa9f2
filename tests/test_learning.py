"""Learning from use: evidence stored per tenant, its effect on ranking, its bounds and
pruning, on both stores; and the two fixes found with it (descriptions, plain-SQL tools)."""

from __future__ import annotations

import asyncio
import json
import time
from typing import Any

import pytest
import sqlalchemy as sa
from typer.testing import CliRunner

import tooldb
from tooldb import NotFound, Registry, Settings, UsageError
from tooldb.agents import builtins
from tooldb.cli import app
from tooldb.registry.manifests import spec_from_mapping
from tooldb.selection import evidence as evidence_module
from tooldb.types import LoopContext

CATALOGUE: list[dict[str, Any]] = [
    {"name": "convert_currency", "target": "tests.sample_tools:echo",
     "description": "Convert an amount of money from one currency to another at today's rate."},
    {"name": "word_count", "target": "tests.sample_tools:echo",
     "description": "Count the words of a text."},
    {"name": "thermo", "target": "tests.sample_tools:echo",
     "description": "Temperature scales."},
    {"name": "broken", "target": "tests.sample_tools:fail", "description": "Always fails."},
]  # fmt: skip
for _entry in CATALOGUE[:3]:
    _entry["parameters"] = {"text": {"type": "string", "required": True}}
TRAIN = ["convert 40 F to C", "convert 70 F to C", "convert 12 F to C please"]
TASK = "convert 55 F to C"


@pytest.fixture
def catalogue(registry: Registry) -> Registry:
    registry.register([spec_from_mapping(entry) for entry in CATALOGUE])
    return registry


def _open(url: str, **settings: Any) -> Registry:
    return tooldb.open(url, settings=Settings(embedder="hash", url=url, **settings))


def _rank(registry: Registry, task: str = TASK) -> list[str]:
    return registry.select(task, k=4, record=False).names


def test_successful_calls_for_a_task_rank_their_tool_first(
    catalogue: Registry, store_url: str
) -> None:
    cold = _rank(catalogue)
    assert cold[0] != "thermo"  # zero-shot, the words point elsewhere
    for task in TRAIN:
        result = catalogue.call("thermo", {"text": "x"}, task=task)
        assert result.success
    stored = catalogue.evidence()
    assert sorted(row.task for row in stored) == sorted(TRAIN)
    assert {row.tool for row in stored} == {"thermo"} and all(row.good == 1 for row in stored)
    selection = catalogue.select(TASK, k=4)
    first = selection.candidates[0]
    assert first.name == "thermo" and first.learned > 0
    assert first.evidence is not None and first.evidence.startswith("served ")
    assert "similar task" in first.evidence and "convert" in first.evidence
    # survives a restart: a new process over the same store ranks the same way
    with _open(store_url) as again:
        assert _rank(again)[0] == "thermo"
    # and learning off ranks zero-shot, exactly as before any use
    with _open(store_url, select_learning=False) as off:
        assert _rank(off) == cold


def test_a_new_catalogue_ranks_exactly_as_without_learning(catalogue: Registry) -> None:
    with _open(catalogue.store.url.replace("***", ""), select_learning=False) as off:
        for task in ("convert 100 dollars to euros", TASK, "count the words"):
            on = catalogue.select(task, k=4, record=False)
            assert on.names == _rank(off, task)
            assert all(c.learned == 0 and c.evidence is None for c in on.candidates)


def test_evidence_is_per_tenant(catalogue: Registry) -> None:
    other = catalogue.for_tenant("other")
    other.register([spec_from_mapping(entry) for entry in CATALOGUE])
    cold = _rank(other)
    for task in TRAIN:
        catalogue.learn(task, "thermo")
    assert _rank(catalogue)[0] == "thermo"
    assert _rank(other) == cold
    assert other.evidence() == []
    assert other.forget_evidence() == 0  # erases nothing of another tenant
    assert len(catalogue.evidence()) == len(TRAIN)
    with pytest.raises(NotFound):
        other.for_tenant("third").learn(TASK, "thermo")  # no such tool in that tenant


def test_failures_and_bad_feedback_count_against(catalogue: Registry) -> None:
    for task in TRAIN:
        catalogue.learn(task, "thermo")
    assert _rank(catalogue)[0] == "thermo"
    decision = catalogue.select(TASK, k=3)
    assert catalogue.feedback(decision.decision_id or 0, "thermo", good=False)
    for task in ("convert 41 F to C", "convert 42 F to C"):
        catalogue.learn(task, "thermo", good=False)
    selection = catalogue.select(TASK, k=4, record=False)
    assert selection.names[0] != "thermo"
    thermo = next(c for c in selection.candidates if c.name == "thermo")
    assert thermo.evidence is not None and "failed 3" in thermo.evidence
    # a failed call made for a task is evidence against its tool
    result = catalogue.call("broken", {}, task="convert 43 F to C")
    assert not result.success
    assert [(r.good, r.bad) for r in catalogue.evidence(tool="broken")] == [(0.0, 1.0)]
    with pytest.raises(NotFound):
        catalogue.feedback(10_000, "thermo")
    with pytest.raises(NotFound):
        catalogue.learn(TASK, "no_such_tool")
    with pytest.raises(UsageError):
        catalogue.learn("   ", "thermo")


def test_near_duplicates_merge_and_each_tool_is_capped(store_url: str) -> None:
    with _open(store_url, select_evidence_cap=2) as registry:
        registry.register([spec_from_mapping(entry) for entry in CATALOGUE])
        registry.learn(TRAIN[0], "thermo")
        registry.learn(TRAIN[0], "thermo")  # the same task again: one row, counted twice
        assert [(r.task, r.good) for r in registry.evidence()] == [(TRAIN[0], 2.0)]
        registry.learn("count the words of this letter", "thermo")
        registry.learn("how many words in this text", "thermo")  # a third: the oldest goes
        tasks = {r.task for r in registry.evidence(tool="thermo")}
        assert tasks == {"count the words of this letter", "how many words in this text"}
        registry.learn(TRAIN[0], "word_count")  # the cap is per tool
        assert len(registry.evidence()) == 3


def test_the_ooda_cycle_prunes_stale_contradicted_and_orphaned_evidence(
    catalogue: Registry,
) -> None:
    catalogue.learn(TRAIN[0], "thermo")
    catalogue.learn(TRAIN[0], "thermo", good=False)  # merged: 1 good, 1 bad: contradicted
    catalogue.learn("count the words", "word_count")
    catalogue.learn("convert dollars", "convert_currency")
    catalogue.remove("convert_currency")
    report = catalogue.ooda()
    assert report.evidence_pruned == {"stale": 0, "contradicted": 1, "removed tools": 1}
    assert [r.tool for r in catalogue.evidence()] == ["word_count"]
    assert catalogue.ooda(dry_run=True).evidence_pruned == {}
    later = time.time() + catalogue.settings.evidence_max_age_s + 60
    assert catalogue.ooda(now=later).evidence_pruned["stale"] == 1
    assert catalogue.evidence() == []
    assert all(not c.learned for c in catalogue.select(TASK, k=4, record=False).candidates)


def test_another_process_evidence_is_seen(
    catalogue: Registry, store_url: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(evidence_module, "CHECK_INTERVAL_S", 0.0)
    cold = _rank(catalogue)
    with _open(store_url) as writer:
        for task in TRAIN:
            writer.learn(task, "thermo")
    assert _rank(catalogue)[0] == "thermo"
    with _open(store_url) as eraser:
        assert eraser.forget_evidence(tool="thermo") == len(TRAIN)
    assert _rank(catalogue) == cold


def test_a_router_run_learns_from_the_tools_it_called(catalogue: Registry, store_url: str) -> None:
    result = catalogue.run("count the words: hello world", agent=None, model=None)
    used = {use.tool for use in result.tool_calls}
    assert used, result
    assert {r.tool for r in catalogue.evidence()} == used
    assert all(r.task == "count the words: hello world" for r in catalogue.evidence())
    again = catalogue.run("count the words: hello there", agent=None, model=None)
    shown = CliRunner().invoke(app, ["--db", store_url, "trace", again.run_id, "--json"]).stdout
    events = json.loads(shown)["tree"]["events"]
    decisions = [e for e in events if e["type"] == "decision"]
    explained = [c["evidence"] for c in decisions[0]["candidates"] if c.get("evidence")]
    assert explained and explained[0].startswith("served 1 similar task (closest")


def test_a_run_learned_once_teaches_each_tool_once_however_often_it_is_replayed(
    catalogue: Registry,
) -> None:
    """A submitted run resumed after it learned (workers/durable.py) learns nothing more."""
    result = catalogue.run("count the words: hello world", agent=None, model=None)
    catalogue.forget_evidence()  # the router's own learning: not what is tested here
    tools = {use.tool for use in result.tool_calls}
    assert catalogue.learn_from_run(result, once=True) == len(tools)
    assert catalogue.learn_from_run(result, once=True) == 0  # the replay
    assert [(r.tool, r.good) for r in catalogue.evidence()] == [(t, 1.0) for t in tools]
    assert catalogue.learn_from_run(result) == len(tools)  # not once: counted again
    assert [r.good for r in catalogue.evidence()] == [2.0] * len(tools)


def test_descriptions_reach_select_and_search_tools(catalogue: Registry) -> None:
    selection = catalogue.select("count the words", k=2)
    assert selection.candidates[0].description == "Count the words of a text."

    class _Run:
        registry = catalogue
        run_id = None

        class toolbox:  # stands in for the run's toolbox
            @staticmethod
            def add_tools(names: list[str]) -> list[str]:
                return names

    tool = builtins.search_tools(_Run())  # type: ignore[arg-type]
    context = LoopContext(run_id="r", iteration=0)
    result = asyncio.run(tool.run({"query": "count the words", "k": 1}, context))
    assert "- word_count: Count the words of a text." in result.output


def test_a_tool_inserted_by_plain_sql_is_embedded(catalogue: Registry, store_url: str) -> None:
    now = time.time()
    row = {
        "tenant": "default", "name": "fahrenheit_to_celsius", "description": "Degrees.",
        "category": "general", "kind": "python", "target": "tests.sample_tools:echo",
        "parameters": json.dumps({"type": "object", "properties": {}}), "returns": "text",
        "metadata": "{}", "version": 1, "content_hash": "by-hand", "enabled": True,
        "created_at": now, "updated_at": now,
    }  # fmt: skip
    engine = sa.create_engine(store_url.replace("postgresql://", "postgresql+psycopg://"))
    columns = ", ".join(row)
    values = ", ".join(f":{key}" for key in row)
    with engine.begin() as conn:
        conn.execute(sa.text(f"INSERT INTO tools ({columns}) VALUES ({values})"), row)
    engine.dispose()
    with _open(store_url) as fresh:
        assert any("tooldb embed" in note for note in fresh.select("degrees", k=1).notes)
        assert fresh.embed() == 1
        selection = fresh.select("degrees", k=1)
        assert selection.notes == [] and selection.names == ["fahrenheit_to_celsius"]
        assert selection.candidates[0].dense is not None


def test_cli_feedback_evidence_and_call_with_a_task(catalogue: Registry, store_url: str) -> None:
    runner = CliRunner()
    base = ["--db", store_url]
    call = ["call", "thermo", "--args", '{"text": "x"}', "--task", TRAIN[0]]
    out = runner.invoke(app, [*base, *call])
    assert out.exit_code == 0, out.output
    chosen = runner.invoke(app, [*base, "select", TASK, "-k", "2", "--json"])
    document = json.loads(chosen.stdout)
    assert all(c["description"] for c in document["candidates"])
    decision = document["decision_id"]
    out = runner.invoke(app, [*base, "feedback", str(decision), "thermo", "--good"])
    assert out.exit_code == 0 and "noted" in out.stdout
    listed = json.loads(runner.invoke(app, [*base, "evidence", "list", "--json"]).stdout)
    assert {(r["tool"], r["task"]) for r in listed["evidence"]} == {
        ("thermo", TRAIN[0]),
        ("thermo", TASK),
    }
    table = runner.invoke(app, [*base, "select", TASK, "-k", "2"]).stdout
    assert "thermo: served 2 similar tasks" in table
    refused = runner.invoke(app, [*base, "evidence", "forget"])
    assert refused.exit_code == 2 and "--all" in refused.output
    out = runner.invoke(app, [*base, "evidence", "forget", "--all", "--json"])
    assert json.loads(out.stdout) == {"deleted": 2}
    bad = runner.invoke(app, [*base, "feedback", "999999", "thermo", "--bad"])
    assert bad.exit_code != 0 and "no decision" in bad.output
