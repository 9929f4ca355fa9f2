"""Submitted runs executed by real worker processes on the local PostgreSQL (issue 27):
exactly once, durable across a kill -9, per-tool limits across workers, fresh selection."""

from __future__ import annotations

import collections
import itertools
import json
import os
import signal
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import sqlalchemy as sa

import tooldb
from tooldb import Registry, RunStatus, Settings, UsageError

from .conftest import scratch_database

pytestmark = pytest.mark.postgres

TESTS = Path(__file__).parent
SRC = TESTS.parent / "src"
MODEL = "python:tooldb.workers.testing:plan_model"


@pytest.fixture(scope="module")
def database() -> Iterator[str]:
    with scratch_database("workers") as url:
        registry = tooldb.open(url, settings=Settings(embedder="hash", url=url))
        properties = {"tag": {"type": "string"}, "turn": {"type": "integer"},
                      "call": {"type": "integer"}, "ms": {"type": "integer"},
                      "size": {"type": "integer"}}  # fmt: skip
        for name, metadata in (
            ("effect", {}),
            ("overlap", {"max_concurrency": 2}),
            ("transfer", {"idempotent": False}),
        ):
            registry.add({"name": name, "kind": "python", "target": f"tests.worker_tools:{name}",
                          "description": f"test tool {name}", "metadata": metadata,
                          "parameters": {"type": "object", "properties": properties}})  # fmt: skip
        registry.close()
        yield url


@pytest.fixture
def registry(database: str) -> Iterator[Registry]:
    reg = tooldb.open(database, settings=Settings(embedder="hash", url=database))
    yield reg
    reg.close()


class Workers:
    """Worker processes (``tooldb worker``) on the test database, and their effects file."""

    def __init__(self, url: str, effects: Path, home: Path) -> None:
        self.effects = effects
        self.env = {
            **os.environ,
            "PYTHONPATH": os.pathsep.join([str(SRC), str(TESTS.parent)]),
            "TOOLDB_URL": url,
            "TOOLDB_EMBEDDER": "hash",
            "TOOLDB_HOME": str(home),
            "WORKER_EFFECTS": str(effects),
        }
        self.processes: list[subprocess.Popen[str]] = []

    def start(
        self, concurrency: int = 4, count: int = 1, *options: str
    ) -> list[subprocess.Popen[str]]:
        """Start ``count`` workers at once; return when each has launched."""
        command = [sys.executable, "-m", "tooldb", "worker", "--concurrency", str(concurrency)]
        started = [
            subprocess.Popen(
                [*command, *options],
                env=self.env,
                stdout=subprocess.PIPE,
                stderr=subprocess.STDOUT,
                text=True,
            )
            for _ in range(count)
        ]
        self.processes.extend(started)
        for process in started:
            assert process.stdout is not None
            line = process.stdout.readline()  # printed once DBOS is launched
            assert "waiting for runs" in line, line + process.stdout.read()
        return started

    def lines(self) -> list[dict[str, Any]]:
        if not self.effects.exists():
            return []
        return [json.loads(line) for line in self.effects.read_text().splitlines()]

    def stop(self) -> None:
        for process in self.processes:
            if process.poll() is None:
                process.send_signal(signal.SIGTERM)
        for process in self.processes:
            try:
                process.wait(timeout=10)
            except subprocess.TimeoutExpired:
                process.kill()
                process.wait()


@pytest.fixture
def workers(database: str, tmp_path: Path) -> Iterator[Workers]:
    pool = Workers(database, tmp_path / "effects.jsonl", tmp_path)
    yield pool
    pool.stop()


def plan(**fields: Any) -> str:
    return "plan: " + json.dumps(fields)


def records_by_run(registry: Registry, run_ids: list[str]) -> collections.Counter[str]:
    from tooldb.stores.schema import calls

    query = sa.select(calls.c.run_id, sa.func.count()).where(
        calls.c.tenant == registry.tenant, calls.c.run_id.in_(run_ids)
    )
    with registry.store.engine.connect() as conn:  # type: ignore[attr-defined]
        rows = conn.execute(query.group_by(calls.c.run_id)).all()
    return collections.Counter({run_id: count for run_id, count in rows})


def test_200_submitted_runs_complete_once_with_every_call_recorded_once(
    registry: Registry, workers: Workers
) -> None:
    workers.start(concurrency=8, count=2)
    run_ids = [
        registry.submit(plan(tool="effect", turns=2, arguments={"tag": f"r{i}"}), model=MODEL)
        for i in range(200)
    ]
    results = [registry.wait(run_id, timeout_s=120) for run_id in run_ids]
    assert [r.status for r in results] == [RunStatus.SUCCESS] * 200
    assert all(r.output == "done after 2 turns" for r in results)
    effects = collections.Counter(line["key"] for line in workers.lines())
    assert len(effects) == 400 and set(effects.values()) == {1}  # every call ran once
    assert records_by_run(registry, run_ids) == dict.fromkeys(run_ids, 2)  # recorded once
    by_worker = collections.Counter(r.worker for r in tooldb.workers.submitted_runs(registry, 200))
    assert len(by_worker) == 2  # both workers took runs
    assert len({line["pid"] for line in workers.lines()}) == 2


def test_a_worker_killed_mid_run_leaves_every_run_completed_and_no_completed_call_rerun(
    registry: Registry, workers: Workers
) -> None:
    doomed, survivor = workers.start(concurrency=10, count=2)
    size = registry.settings.record_output_chars + 1000  # longer than a record's preview
    run_ids = [
        registry.submit(
            plan(
                tool="effect",
                turns=4,
                report=True,
                arguments={"tag": f"k{i}", "ms": 150, "size": size},
            ),
            model=MODEL,
        )
        for i in range(20)
    ]
    deadline = time.monotonic() + 30
    while sum(1 for line in workers.lines() if line["pid"] == doomed.pid) < 10:
        assert time.monotonic() < deadline, "the first worker did not get going"
        time.sleep(0.02)
    doomed.kill()  # kill -9: no clean-up of any kind
    doomed.wait()
    done_before = {line["key"] for line in workers.lines()}
    assert len(done_before) < 80  # the runs were under way, not finished
    results = [registry.wait(run_id, timeout_s=60) for run_id in run_ids]
    assert [r.status for r in results] == [RunStatus.SUCCESS] * 20
    # every run's model read its 4 results in full, the reused ones too
    read = [sum(len(f"effect k{i}/{turn}/0") + size for turn in range(4)) for i in range(20)]
    assert [r.output for r in results] == [f"done after 4 turns, {n} characters read" for n in read]
    lines = workers.lines()
    runs_of = collections.defaultdict(list)
    for line in lines:
        runs_of[line["key"]].append(line["pid"])
    assert len(runs_of) == 80  # 20 runs x 4 turns, every call made
    assert {pid for pids in runs_of.values() for pid in pids} == {doomed.pid, survivor.pid}
    repeated = {key: pids for key, pids in runs_of.items() if len(pids) > 1}
    # A call may run again only if it was in flight when its worker died: its effect was
    # written by the killed process, but neither recorded nor checkpointed.
    assert all(pids == [doomed.pid, survivor.pid] for pids in repeated.values()), repeated
    assert len(repeated) <= 10  # at most one in-flight call per run the worker held
    assert records_by_run(registry, run_ids) == dict.fromkeys(run_ids, 4)  # recorded once
    finished_by = {r.worker for r in tooldb.workers.submitted_runs(registry, 20)}
    assert any(f":{survivor.pid}:" in (worker or "") for worker in finished_by)


def test_a_non_idempotent_call_interrupted_mid_flight_ends_the_run_for_review(
    registry: Registry, workers: Workers
) -> None:
    started = workers.start(count=2)
    run_id = registry.submit(plan(tool="transfer", arguments={"tag": "t"}), model=MODEL)
    deadline = time.monotonic() + 30
    while not workers.lines():
        assert time.monotonic() < deadline
        time.sleep(0.02)
    doomed = next(p for p in started if p.pid == workers.lines()[0]["pid"])
    doomed.kill()  # while the transfer runs
    doomed.wait()
    result = registry.wait(run_id, timeout_s=30)
    assert result.status is RunStatus.INTERRUPTED and result.requires_review
    assert "transfer" in (result.review_reason or "") and "idempotent" in result.review_reason
    assert len(workers.lines()) == 1  # not run again blindly
    row = registry.store.get_run(registry.tenant, run_id)
    assert row is not None and row.status is RunStatus.INTERRUPTED and row.requires_review


def test_a_per_tool_limit_of_2_holds_across_3_workers_and_call_many(
    registry: Registry, workers: Workers, monkeypatch: pytest.MonkeyPatch
) -> None:
    workers.start(concurrency=4, count=3)
    run_ids = [
        registry.submit(
            plan(tool="overlap", turns=2, calls=2, arguments={"tag": f"o{i}", "ms": 60}),
            model=MODEL,
        )
        for i in range(12)
    ]
    # call_many from a worker's registry (limits installed) runs beside the workers
    from tooldb.workers.engine import system_database_url
    from tooldb.workers.limits import Slots
    from tooldb.workers.state import limit_tools

    monkeypatch.setenv("WORKER_EFFECTS", str(workers.effects))
    slots = Slots(system_database_url(registry))
    limit_tools(registry, slots)
    batch = registry.call_many([("overlap", {"tag": "m", "call": i, "ms": 60}) for i in range(6)])
    assert all(result.success for result in batch)
    results = [registry.wait(run_id, timeout_s=60) for run_id in run_ids]
    slots.close()
    assert [r.status for r in results] == [RunStatus.SUCCESS] * 12
    spans = [(line["start"], line["end"]) for line in workers.lines()]
    assert len(spans) == 12 * 4 + 6
    events = sorted([(start, 1) for start, _ in spans] + [(end, -1) for _, end in spans])
    running = peak = 0
    for _, change in events:
        running += change
        peak = max(peak, running)
    assert peak == 2  # never more than the limit, and the limit was reached
    assert len({line["pid"] for line in workers.lines()}) == 4  # 3 workers + this process


def test_a_tool_added_or_disabled_reaches_a_running_workers_selection(
    registry: Registry, workers: Workers
) -> None:
    workers.start(concurrency=2)

    def offered() -> set[str]:
        result = registry.wait(registry.submit(plan(answer="tools"), model=MODEL), timeout_s=30)
        assert result.status is RunStatus.SUCCESS, result
        return set(result.output.removeprefix("tools: ").split(","))

    assert "fresh_tool" not in offered()
    registry.add({"name": "fresh_tool", "kind": "python", "target": "tests.worker_tools:effect",
                  "description": "a tool added while the worker runs"})  # fmt: skip
    started = time.monotonic()
    assert "fresh_tool" in offered()
    assert time.monotonic() - started < 1.0  # in the very next run, submitted at once
    registry.disable("fresh_tool")
    assert "fresh_tool" not in offered()


def test_a_queued_run_can_be_cancelled_and_says_so(registry: Registry, workers: Workers) -> None:
    run_id = registry.submit(plan(tool="effect", arguments={"tag": "c"}), model=MODEL)
    tooldb.workers.cancel(registry, run_id)  # no worker yet: it is still queued
    workers.start(concurrency=1)
    result = registry.wait(run_id, timeout_s=10)
    assert result.status is RunStatus.INTERRUPTED and result.error == "the run was cancelled"
    assert workers.lines() == []  # it never ran
    running = registry.submit(
        plan(tool="effect", turns=8, arguments={"tag": "r", "ms": 200}), model=MODEL
    )
    deadline = time.monotonic() + 30
    while not workers.lines():
        assert time.monotonic() < deadline
        time.sleep(0.02)
    tooldb.workers.cancel(registry, running)  # mid-run: it stops at its next step
    assert registry.wait(running, timeout_s=10).error == "the run was cancelled"
    time.sleep(1.0)
    assert len(workers.lines()) < 8  # the rest of its calls never ran


def test_submitting_on_sqlite_says_workers_need_postgresql(tmp_path: Path) -> None:
    url = f"sqlite:///{tmp_path / 'r.db'}"
    registry = tooldb.open(url, settings=Settings(embedder="hash", url=url))
    with pytest.raises(UsageError, match="need a PostgreSQL registry"):
        registry.submit("anything", model=MODEL)
    registry.close()


def test_a_submitted_model_must_be_named_by_a_string(registry: Registry) -> None:
    with pytest.raises(UsageError, match="names its model by a string"):
        registry.submit("anything", model=tooldb.ScriptedModel(["hi"]))  # type: ignore[arg-type]


def test_the_cli_submits_waits_lists_and_cancels(
    database: str, workers: Workers, tmp_path: Path
) -> None:
    from tests.test_cli import as_json

    cancelled = as_json(database, "submit", plan(tool="effect", arguments={"tag": "x"}),
                        "--model", MODEL)["run_id"]  # fmt: skip
    assert as_json(database, "runs", "cancel", cancelled) == {
        "run_id": cancelled, "status": "cancelled"
    }  # fmt: skip
    queued = as_json(database, "submit", plan(tool="effect", turns=2, arguments={"tag": "y"}),
                     "--model", MODEL)  # fmt: skip
    assert queued["status"] == "queued"
    listed = {run["id"]: run for run in as_json(database, "runs")["submitted"]}
    assert listed[queued["run_id"]]["status"] == "queued" and not listed[queued["run_id"]]["worker"]
    (worker,) = workers.start(concurrency=2)
    result = as_json(database, "runs", "wait", queued["run_id"])
    assert result["status"] == "success" and result["output"] == "done after 2 turns"
    listed = {run["id"]: run for run in as_json(database, "runs")["submitted"]}
    assert listed[queued["run_id"]]["status"] == "success"
    assert f":{worker.pid}:" in listed[queued["run_id"]]["worker"]
    assert listed[cancelled]["status"] == "cancelled"
    assert as_json(database, "runs", "wait", cancelled, code=1)["status"] == "interrupted"
    sqlite = f"sqlite:///{tmp_path / 'r.db'}"
    assert as_json(sqlite, "init")
    refused = as_json(sqlite, "submit", "anything", code=2)["error"]["message"]
    assert "need a PostgreSQL registry" in refused


def test_a_resumed_call_reuses_its_full_result_and_never_reruns_a_non_idempotent_tool(
    registry: Registry, workers: Workers, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A call of a turn an earlier execution made (durable.py's ``run_call``): what a
    resumed run does for each case of a call that may have been in flight."""
    import asyncio

    from tooldb.workers.durable import CallInterrupted, run_call

    monkeypatch.setenv("WORKER_EFFECTS", str(workers.effects))
    run_id = f"resumed-{time.time_ns()}"
    size = registry.settings.record_output_chars + 1000  # longer than the record's preview

    def call(name: str, arguments: dict[str, Any], key: str, earlier: bool) -> Any:
        return asyncio.run(run_call(registry, name, arguments, run_id, key, earlier=earlier))

    first = call("effect", {"tag": "done", "size": size}, "call:t1:effect:a:0", False)
    assert len(first.output) > size and len(workers.lines()) == 1  # ran, recorded, kept
    (record,) = registry.calls(run_id=run_id)
    assert record.id == first.call_id and len(record.output_preview or "") < len(first.output)
    reused = call("effect", {"tag": "done", "size": size}, "call:t1:effect:a:0", True)
    assert reused == first and len(workers.lines()) == 1  # the full output, not run again
    with pytest.raises(CallInterrupted):  # a non-idempotent call without a kept result
        call("transfer", {"tag": "t", "ms": 0}, "call:t1:transfer:b:0", True)
    assert len(workers.lines()) == 1
    assert call("effect", {"tag": "other"}, "call:t1:effect:c:0", True).success  # run again
    assert len(workers.lines()) == 2
    assert call("transfer", {"tag": "f", "ms": 0}, "call:t2:transfer:d:0", False).success
    assert len(workers.lines()) == 3  # a call of this execution's turn runs
    rejected = {"tag": 5}  # does not bind: recorded as rejected, and kept so
    for earlier in (False, True):
        with pytest.raises(tooldb.ArgumentError, match="tag"):
            call("effect", rejected, "call:t3:effect:e:0", earlier)
    assert len(registry.calls(run_id=run_id)) == 4  # the replayed rejection: not again


def test_a_tenant_limit_of_1_runs_its_runs_one_at_a_time_across_workers(
    registry: Registry, workers: Workers
) -> None:
    workers.start(4, 2, "--tenant-concurrency", "1")
    run_ids = [
        registry.submit(plan(tool="overlap", arguments={"tag": f"n{i}", "ms": 100}), model=MODEL)
        for i in range(4)
    ]
    assert all(registry.wait(run_id, timeout_s=60).success for run_id in run_ids)
    spans = sorted((line["start"], line["end"]) for line in workers.lines())
    assert len(spans) == 4
    assert all(end <= start for (_, end), (start, _) in itertools.pairwise(spans))


def test_a_submitted_run_stores_its_task_as_evidence_for_the_tools_that_served_it(
    registry: Registry, workers: Workers
) -> None:
    """As ``run_task`` in one process (issue 22): selection learns from worker runs."""
    properties = {"tag": {"type": "string"}, "turn": {"type": "integer"},
                  "call": {"type": "integer"}}  # fmt: skip
    registry.add({"name": "ledger_tool", "kind": "python", "target": "tests.worker_tools:effect",
                  "description": "a tool only this test calls",
                  "parameters": {"type": "object", "properties": properties}})  # fmt: skip
    workers.start(concurrency=2)
    task = "Reconcile the Oslo branch ledger. " + plan(
        tool="ledger_tool", turns=2, arguments={"tag": "ledger"}
    )
    result = registry.wait(registry.submit(task, model=MODEL), timeout_s=60)
    assert result.status is RunStatus.SUCCESS
    assert [use.success for use in result.tool_calls] == [True, True]
    stored = registry.evidence(tool="ledger_tool")
    assert [(row.task, row.good, row.bad) for row in stored] == [(task, 1.0, 0.0)]
