"""Submitted runs on worker processes (issue 27): runs/s with 1, 2 and 4 workers for
(a) 5-turn scripted runs with a CPU-light tool and (b) 5-turn runs whose tool waits
100 ms; the queueing overhead of one run against the same run in this process; the time
to recover the runs of a worker killed with SIGKILL.

    python bench/workers.py [--runs 40] [--concurrency 8]

Needs the local PostgreSQL (a scratch database is created and dropped) and the
``workers`` extra. Prints a markdown table.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import time
import uuid
from pathlib import Path
from typing import Any

import psycopg

import tooldb
from tooldb import Settings
from tooldb.workers.testing import nap, plan_model, tick

ADMIN = os.environ.get("TOOLDB_TEST_PG", "postgresql://postgres@127.0.0.1:5432/postgres")
SRC = Path(__file__).resolve().parent.parent / "src"
MODEL = "python:tooldb.workers.testing:plan_model"


def plan(tool: str, tag: str) -> str:
    return "plan: " + json.dumps({"tool": tool, "turns": 5, "arguments": {"call": 0}, "t": tag})


def start_workers(url: str, count: int, concurrency: int) -> list[subprocess.Popen[str]]:
    env = {**os.environ, "PYTHONPATH": str(SRC), "TOOLDB_URL": url, "TOOLDB_EMBEDDER": "hash"}
    processes = [
        subprocess.Popen(
            [sys.executable, "-m", "tooldb", "worker", "--concurrency", str(concurrency)],
            env=env,
            stdout=subprocess.PIPE,
            stderr=subprocess.STDOUT,
            text=True,
        )
        for _ in range(count)
    ]
    for process in processes:
        assert process.stdout is not None
        line = process.stdout.readline()
        assert "waiting for runs" in line, line
    return processes


def dead_executor(url: str, pid: int) -> str:
    """The executor id of the worker process ``pid`` (from a run it has taken)."""
    deadline = time.monotonic() + 30
    while time.monotonic() < deadline:
        with psycopg.connect(url) as conn:
            row = conn.execute(
                "SELECT executor_id FROM dbos.workflow_status WHERE executor_id LIKE %s LIMIT 1",
                (f"%:{pid}:%",),
            ).fetchone()
        if row:
            return str(row[0])
        time.sleep(0.05)
    raise RuntimeError(f"worker {pid} took no run")


def pending_of(url: str, executor: str) -> int:
    with psycopg.connect(url) as conn:
        row = conn.execute(
            "SELECT count(*) FROM dbos.workflow_status WHERE executor_id = %s "
            "AND status = 'PENDING'",
            (executor,),
        ).fetchone()
    return int(row[0]) if row else 0


def stop(processes: list[subprocess.Popen[str]]) -> None:
    for process in processes:
        if process.poll() is None:
            process.terminate()
    for process in processes:
        process.wait(timeout=20)


def throughput(registry: Any, tool: str, runs: int) -> float:
    started = time.perf_counter()
    ids = [registry.submit(plan(tool, uuid.uuid4().hex), model=MODEL) for _ in range(runs)]
    for run_id in ids:
        assert registry.wait(run_id, timeout_s=300).success
    return runs / (time.perf_counter() - started)


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--runs", type=int, default=40)
    parser.add_argument("--concurrency", type=int, default=8)
    args = parser.parse_args()
    name = f"bench_workers_{uuid.uuid4().hex[:8]}"
    with psycopg.connect(ADMIN, autocommit=True) as admin:
        admin.execute(f'CREATE DATABASE "{name}"')
    url = f"{ADMIN.rsplit('/', 1)[0]}/{name}"
    rows: list[tuple[str, str]] = []
    try:
        registry = tooldb.open(url, settings=Settings(embedder="hash", url=url))
        registry.add(tick, nap)
        for workers in (1, 2, 4):
            processes = start_workers(url, workers, args.concurrency)
            try:
                throughput(registry, "tick", 4)  # warm up
                light = throughput(registry, "tick", args.runs)
                waiting = throughput(registry, "nap", args.runs)
            finally:
                stop(processes)
            rows.append((f"runs/s, {workers} worker(s), CPU-light tools", f"{light:.1f}"))
            rows.append((f"runs/s, {workers} worker(s), 100 ms tools", f"{waiting:.2f}"))
        # queueing overhead: one run at a time, submitted vs in this process
        processes = start_workers(url, 1, args.concurrency)
        try:
            throughput(registry, "tick", 2)
            queued = []
            for _ in range(10):
                started = time.perf_counter()
                registry.wait(registry.submit(plan("tick", "q"), model=MODEL))
                queued.append(time.perf_counter() - started)
            local = []
            for _ in range(10):
                started = time.perf_counter()
                registry.run(plan("tick", "l"), model=plan_model())
                local.append(time.perf_counter() - started)
            median_q, median_l = sorted(queued)[5] * 1000, sorted(local)[5] * 1000
            rows.append(("5-turn run, submitted and waited for (ms, median)", f"{median_q:.0f}"))
            rows.append(("5-turn run, in this process (ms, median)", f"{median_l:.0f}"))
            rows.append(("runs/s in this process, one at a time", f"{1000 / median_l:.1f}"))
            rows.append(("queueing overhead per run (ms)", f"{median_q - median_l:.0f}"))
        finally:
            stop(processes)
        # recovery: two workers, one killed mid-run; until its runs are re-enqueued, and done
        processes = start_workers(url, 2, args.concurrency)
        try:
            ids = [registry.submit(plan("nap", f"k{i}"), model=MODEL) for i in range(16)]
            time.sleep(0.4)
            victim = processes[0]
            executor = dead_executor(url, victim.pid)
            victim.kill()
            killed = time.perf_counter()
            while pending_of(url, executor):
                time.sleep(0.01)
            requeued = time.perf_counter() - killed
            for run_id in ids:
                assert registry.wait(run_id, timeout_s=120).success
            recovered = time.perf_counter() - killed
            rows.append(("kill -9 to the dead worker's runs re-enqueued (s)", f"{requeued:.2f}"))
            rows.append(("kill -9 to all 16 runs done on the other worker (s)", f"{recovered:.1f}"))
        finally:
            stop(processes)
        registry.close()
    finally:
        with psycopg.connect(ADMIN, autocommit=True) as admin:
            admin.execute(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')
    print(f"| measure ({args.runs} runs of 5 turns, concurrency {args.concurrency}) | value |")
    print("|---|---|")
    for label, value in rows:
        print(f"| {label} | {value} |")


if __name__ == "__main__":
    main()
