"""Submitted runs on worker processes (issue 27): runs/s with 1, 2 and 4 workers at each
per-worker concurrency for (a) 5-turn scripted runs with a CPU-light tool and (b) 5-turn
runs whose tool waits 100 ms, with the CPU each run costs the workers, PostgreSQL and
this process; an idle worker's CPU; the queueing overhead of one run against the same
run in this process; the time to recover the runs of a worker killed with SIGKILL.

    python bench/workers.py [--runs 60] [--concurrency 2,8] [--workers 1,2,4]

Needs the local PostgreSQL (a scratch database is created and dropped; its backends'
CPU is read from /proc, so the server must run on this host to be counted) and the
``workers`` extra. Prints markdown tables.
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


TICKS = os.sysconf("SC_CLK_TCK")
TERMINAL = {"SUCCESS", "ERROR", "CANCELLED", "MAX_RECOVERY_ATTEMPTS_EXCEEDED"}


def cpu_s(pid: int) -> float | None:
    """CPU seconds (user + system) the process has used; None if it cannot be read."""
    try:
        fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    except OSError:
        return None
    return (int(fields[11]) + int(fields[12])) / TICKS


def backends(name: str) -> dict[int, float]:
    """The CPU seconds of every PostgreSQL backend connected to database ``name``."""
    with psycopg.connect(ADMIN) as conn:
        pids = [row[0] for row in conn.execute(
            "SELECT pid FROM pg_stat_activity WHERE datname = %s", (name,)
        )]  # fmt: skip
    found = {pid: cpu_s(pid) for pid in pids}
    return {pid: value for pid, value in found.items() if value is not None}


class Cpu:
    """CPU used by the workers, the database's backends and this process over a span
    (backends that end within it are not counted: the pools keep theirs open)."""

    def __init__(self, name: str, workers: list[subprocess.Popen[str]]) -> None:
        self.name = name
        self.pids = [process.pid for process in workers]
        self.workers = sum(cpu_s(pid) or 0.0 for pid in self.pids)
        self.server = backends(name)
        self.own = time.process_time()

    def spent(self) -> tuple[float, float, float]:
        """(workers, PostgreSQL, this process) seconds since the start."""
        workers = sum(cpu_s(pid) or 0.0 for pid in self.pids) - self.workers
        now = backends(self.name)
        server = sum(value - self.server.get(pid, 0.0) for pid, value in now.items())
        return workers, server, time.process_time() - self.own


def wait_all(registry: Any, ids: list[str]) -> None:
    """Until every run has ended: one query for all the runs still going per poll (a
    wait per run would poll each in turn, the benchmark's own load)."""
    from tooldb.workers.engine import client_for

    client = client_for(registry)
    going = list(ids)
    deadline = time.monotonic() + 300
    while going:
        assert time.monotonic() < deadline, f"{len(going)} runs still going"
        rows = client.list_workflows(workflow_ids=going, load_input=False, load_output=False)
        going = [row.workflow_id for row in rows if row.status not in TERMINAL]
        if going:
            time.sleep(0.05)


def throughput(
    registry: Any, name: str, workers: list[subprocess.Popen[str]], tool: str, runs: int
) -> dict[str, float]:
    cpu = Cpu(name, workers)
    started = time.perf_counter()
    ids = [registry.submit(plan(tool, uuid.uuid4().hex), model=MODEL) for _ in range(runs)]
    wait_all(registry, ids)
    elapsed = time.perf_counter() - started
    spent = cpu.spent()
    for run_id in ids:
        assert registry.wait(run_id, timeout_s=5).success
    return {
        "runs/s": runs / elapsed,
        "worker": spent[0] * 1000 / runs,
        "server": spent[1] * 1000 / runs,
        "bench": spent[2] * 1000 / runs,
    }


def idle_cpu(name: str, workers: list[subprocess.Popen[str]], seconds: float = 5.0) -> float:
    """CPU ms per second of one idle worker (its queue polling and liveness watch)."""
    cpu = Cpu(name, workers[:1])
    time.sleep(seconds)
    return cpu.spent()[0] * 1000 / seconds


def numbers(text: str) -> list[int]:
    return [int(part) for part in text.split(",") if part.strip()]


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--runs", type=int, default=60)
    parser.add_argument("--concurrency", default="2,8", help="per worker, comma-separated")
    parser.add_argument("--workers", default="1,2,4", help="worker counts, comma-separated")
    args = parser.parse_args()
    load_before = os.getloadavg()[0]
    name = f"bench_workers_{uuid.uuid4().hex[:8]}"
    with psycopg.connect(ADMIN, autocommit=True) as admin:
        admin.execute(f'CREATE DATABASE "{name}"')
    url = f"{ADMIN.rsplit('/', 1)[0]}/{name}"
    table: list[tuple[int, int, str, dict[str, float]]] = []
    rows: list[tuple[str, str]] = []
    concurrencies = numbers(args.concurrency)
    try:
        registry = tooldb.open(url, settings=Settings(embedder="hash", url=url))
        registry.add(tick, nap)
        for concurrency in concurrencies:
            for workers in numbers(args.workers):
                processes = start_workers(url, workers, concurrency)
                try:
                    throughput(registry, name, processes, "tick", 2 * workers * concurrency)
                    for tool in ("tick", "nap"):
                        measured = throughput(registry, name, processes, tool, args.runs)
                        table.append((concurrency, workers, tool, measured))
                finally:
                    stop(processes)
        processes = start_workers(url, 1, concurrencies[-1])
        try:
            throughput(registry, name, processes, "tick", 4)
            time.sleep(1.0)
            rows.append(("one idle worker's CPU (ms per s)", f"{idle_cpu(name, processes):.0f}"))
            # queueing overhead: one run at a time, submitted vs in this process
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
        processes = start_workers(url, 2, concurrencies[-1])
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
    load = f"load average {load_before:.1f} at the start, {os.getloadavg()[0]:.1f} at the end"
    print(f"{load}; {os.cpu_count()} cores\n")
    print(f"{args.runs} runs of 5 turns per cell; CPU ms per run; ideal: workers x concurrency"
          " runs of 500 ms of naps at once\n")  # fmt: skip
    print("| concurrency | workers | tools | runs/s | ideal | worker CPU | PostgreSQL CPU "
          "| bench CPU |")  # fmt: skip
    print("|---|---|---|---|---|---|---|---|")
    for concurrency, workers, tool, got in table:
        ideal = f"{workers * concurrency / 0.5:.0f}" if tool == "nap" else ""
        kind = "100 ms" if tool == "nap" else "CPU-light"
        print(f"| {concurrency} | {workers} | {kind} | {got['runs/s']:.1f} | {ideal} "
              f"| {got['worker']:.0f} | {got['server']:.0f} | {got['bench']:.0f} |")  # fmt: skip
    print("\n| measure | value |")
    print("|---|---|")
    for label, value in rows:
        print(f"| {label} | {value} |")


if __name__ == "__main__":
    main()
