"""An agent run whose process is killed (SIGKILL, mid-run) loses no call whose result the
model was given, and is marked ``interrupted`` by the next open once its lease expires;
a run that is alive, however slow, is never marked. Both stores; the child runs with the
default settings but a 1 s lease (``TOOLDB_AGENT_RUN_LEASE``)."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import tooldb
from tests.mcp_support import wait_until
from tests.test_cli import as_json
from tooldb import Settings
from tooldb.types import RunStatus

ROOT = Path(__file__).resolve().parents[2]
LEASE_S = 1.0
OFFSET = 1_000_000  # the child adds it to each turn's number: results are unmistakable

CHILD = """
import sys, time
import tooldb
import tests.sample_tools as st
from tooldb import AgentLoop, FunctionModel, Limits, Settings
from tooldb.models import call

url, seen_path, pace = sys.argv[1], sys.argv[2], float(sys.argv[3])
registry = tooldb.open(url, settings=Settings.load(url=url))
registry.add(st.add)
seen = open(seen_path, "a", buffering=1)

def decide(messages, tools, choice):
    if messages[-1].role == "tool":  # the result of the last call, as the model gets it
        seen.write(messages[-1].content + "\\n")
    time.sleep(pace)
    turn = sum(m.role == "tool" for m in messages)
    return call("add", {"a": turn, "b": OFFSET})

limits = Limits(max_iterations=10**7, max_tool_calls=10**7, timeout_s=3600)
AgentLoop(registry, FunctionModel(decide), tools=["add"], limits=limits).run("count forever")
""".replace("OFFSET", str(OFFSET))


def _start(url: str, tmp_path: Path, pace: float) -> tuple[subprocess.Popen[bytes], Path]:
    script, seen = tmp_path / "child.py", tmp_path / "seen.txt"
    script.write_text(CHILD)
    env = {
        **os.environ,
        "PYTHONPATH": os.pathsep.join([str(ROOT / "src"), str(ROOT)]),
        "TOOLDB_AGENT_RUN_LEASE": str(LEASE_S),
    }
    process = subprocess.Popen(
        [sys.executable, str(script), url, str(seen), str(pace)],
        cwd=ROOT,
        env=env,
        stderr=subprocess.PIPE,
    )
    return process, seen


def _seen(path: Path) -> list[int]:
    """The turns whose result the model was given (complete lines only)."""
    text = path.read_text() if path.exists() else ""
    return [int(line) - OFFSET for line in text.split("\n")[:-1]]


def _wait_for(process: subprocess.Popen[bytes], seen: Path, count: int) -> None:
    assert wait_until(lambda: len(_seen(seen)) >= count or process.poll() is not None, 120)
    assert process.poll() is None, process.stderr.read().decode() if process.stderr else ""


def _kill(process: subprocess.Popen[bytes]) -> None:
    os.kill(process.pid, signal.SIGKILL)
    process.wait(30)
    if process.stderr:
        process.stderr.close()


def _open(url: str) -> tooldb.Registry:
    return tooldb.open(url, settings=Settings(embedder="hash", url=url))


def test_a_killed_run_loses_no_call_and_ends_interrupted(store_url: str, tmp_path: Path) -> None:
    process, seen_path = _start(store_url, tmp_path, 0.0)
    try:
        _wait_for(process, seen_path, 300)  # hundreds of turns, no wait between them
    finally:
        _kill(process)
    seen = _seen(seen_path)
    with _open(store_url) as registry:
        (run,) = registry.store.list_runs(registry.tenant, limit=10)
        recorded = {call.arguments["a"] for call in registry.calls(run_id=run.id, limit=10**6)}
        lost = sorted(set(seen) - recorded)
        assert not lost, f"{len(lost)} of {len(seen)} calls the model saw are not recorded"
        # at most the call in flight ran without the model seeing it
        assert len(recorded) - len(seen) in (0, 1)
    time.sleep(LEASE_S + 0.5)  # the lease runs out: nobody renews it
    with _open(store_url) as registry:  # the next open sweeps
        record = registry.store.get_run(registry.tenant, run.id)
        assert record is not None and record.status is RunStatus.INTERRUPTED
        assert record.requires_review and record.ended_at is not None
        assert record.tool_calls == len(recorded)
    listed = as_json(store_url, "runs")["runs"]
    assert [(r["id"], r["status"]) for r in listed] == [(run.id, "interrupted")]


def test_a_live_run_is_not_interrupted_and_a_killed_one_is(store_url: str, tmp_path: Path) -> None:
    """A slow run keeps its lease while its process lives (a sweep leaves it running)."""
    process, seen_path = _start(store_url, tmp_path, 0.05)
    try:
        _wait_for(process, seen_path, 2)
        time.sleep(3 * LEASE_S)  # three leases: only renewals keep it alive
        with _open(store_url) as registry:
            assert registry.sweep_runs() == []
            (run,) = registry.store.list_runs(registry.tenant, limit=10)
            assert run.status is RunStatus.RUNNING
    finally:
        _kill(process)
    deadline = time.monotonic() + 10 * LEASE_S
    with _open(store_url) as registry:
        while time.monotonic() < deadline and not registry.sweep_runs():
            time.sleep(0.1)
        record = registry.store.get_run(registry.tenant, run.id)
        assert record is not None and record.status is RunStatus.INTERRUPTED
        assert record.tool_calls == len(registry.calls(run_id=run.id, limit=10**6)) > 0
