"""What `tooldb serve` adds: API overhead over ``Registry.call``, and dashboard page
times over a registry with 100,000 recorded calls and 1,000 runs.

Per backend (a temporary SQLite file, a temporary PostgreSQL database): registers a
trivial Python tool, times ``--calls`` ``Registry.call``s in this process, then the same
calls as ``POST /api/tools/add/call`` to a real ``tooldb serve`` process on 127.0.0.1
(httpx, one keep-alive connection, an API key); the overhead is the difference of the
p50s. Then bulk-loads ``--log`` calls over ``--tools`` tools (the last 7 days) and
``--runs`` runs (a tenth partial and flagged for review, each with 4 messages and 2
calls) and times each dashboard page ``--repeat`` times.

    .venv/bin/python bench/http_api.py                      # both stores (~3 min)
    .venv/bin/python bench/http_api.py --backends sqlite --log 20000
"""

from __future__ import annotations

import argparse
import json
import os
import socket
import statistics
import subprocess
import sys
import time
import uuid
from pathlib import Path

import httpx
import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent))
import tooldb
from _support import DEFAULT_PG_URL, temporary_database
from tooldb import Registry
from tooldb.server import Scope, create_key
from tooldb.settings import Settings

DAY = 86_400.0
TARGET_OVERHEAD_MS = 1.0
TARGET_PAGE_MS = 200.0


def p50(values: list[float]) -> float:
    return statistics.median(values)


def p95(values: list[float]) -> float:
    return float(np.percentile(values, 95))


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port: int = sock.getsockname()[1]
        return port


def start_server(url: str) -> tuple[subprocess.Popen[str], str]:
    port = free_port()
    env = {**os.environ, "TOOLDB_URL": url, "TOOLDB_EMBEDDER": "hash"}
    server = subprocess.Popen(
        [sys.executable, "-m", "tooldb", "serve", "--port", str(port)],
        env=env, stderr=subprocess.PIPE, text=True,
    )  # fmt: skip
    base = f"http://127.0.0.1:{port}"
    deadline = time.monotonic() + 60
    while True:
        try:
            httpx.get(f"{base}/api/openapi.json", timeout=1)
            return server, base
        except httpx.TransportError:
            if time.monotonic() > deadline or server.poll() is not None:
                server.kill()
                raise RuntimeError(f"tooldb serve did not start: {server.stderr}") from None
            time.sleep(0.1)


_BARE_APP = """
import sys, uvicorn
async def app(scope, receive, send):
    if scope["type"] != "http":
        return
    while (await receive()).get("more_body"):
        continue  # drain the request body; the reply does not depend on it
    await send({"type": "http.response.start", "status": 200,
                "headers": [(b"content-type", b"application/json")]})
    await send({"type": "http.response.body", "body": b"{}"})
uvicorn.run(app, host="127.0.0.1", port=int(sys.argv[1]), log_level="warning")
"""


def bare_round_trip(calls: int, warmup: int) -> float:
    """p50 ms of the same POST to an ASGI app that answers ``{}`` under uvicorn: what
    the client, the loopback and uvicorn cost before any tooldb code runs."""
    port = free_port()
    server = subprocess.Popen([sys.executable, "-c", _BARE_APP, str(port)])
    try:
        with httpx.Client(base_url=f"http://127.0.0.1:{port}", timeout=30) as client:
            deadline = time.monotonic() + 30
            while True:
                try:
                    client.get("/")
                    break
                except httpx.TransportError:
                    assert time.monotonic() < deadline
                    time.sleep(0.1)
            times = []
            for i in range(warmup + calls):
                start = time.perf_counter()
                client.post("/", json={"arguments": {"a": 1, "b": 2}})
                if i >= warmup:
                    times.append((time.perf_counter() - start) * 1000)
        return p50(times)
    finally:
        server.terminate()
        server.wait(10)


def load(registry: Registry, tools: int, log: int, runs: int) -> tuple[str, int]:
    """The call log and the runs; a run id and a call id the page benchmarks open."""
    registry.add(
        *[
            {"name": f"tool_{i:03d}", "description": f"Synthetic tool number {i}.",
             "target": "tooldb.examples.basic:word_count",
             "parameters": {"text": {"type": "string", "default": "a b"}}, "category": f"c{i % 7}"}
            for i in range(tools)
        ]
    )  # fmt: skip
    listed = [t for t in registry.list() if t.name.startswith("tool_")]
    rng = np.random.default_rng(7)
    now = time.time()
    times = np.sort(now - rng.random(log) * 7 * DAY)
    which = rng.integers(0, len(listed), log)
    ok = rng.random(log) < 0.9
    ms = rng.lognormal(3.0, 0.8, log)
    for low in range(0, log, 20_000):
        registry.store.record_calls(
            [
                {
                    "tenant": registry.tenant, "tool_id": listed[t].id,
                    "tool_name": listed[t].name, "tool_version": 1, "run_id": None,
                    "session_id": "bench", "arguments": {"i": int(i)}, "success": bool(s),
                    "error_kind": None if s else "execution",
                    "error": None if s else "synthetic", "output_size": 2,
                    "output_preview": "ok", "duration_ms": float(d), "started_at": float(at),
                }
                for i, t, s, d, at in zip(
                    range(low, low + 20_000), which[low:low + 20_000], ok[low:low + 20_000],
                    ms[low:low + 20_000], times[low:low + 20_000], strict=False,
                )
            ]
        )  # fmt: skip
    run_ids = []
    call_id = 0
    for r in range(runs):
        run_id = uuid.uuid4().hex
        started = now - (runs - r) * 60.0
        registry.store.create_run(
            {"id": run_id, "tenant": registry.tenant, "parent_run_id": None, "agent": None,
             "mode": "router", "model": None, "task": f"synthetic task {r}", "status": "running",
             "metadata": {}, "started_at": started, "owner": None, "lease_expires_at": None}
        )  # fmt: skip
        registry.store.append_run_messages(
            run_id,
            [(i, 0, role, json.dumps({"role": role, "content": f"message {i}"}))
             for i, role in enumerate(("user", "assistant", "tool", "assistant"))],
        )  # fmt: skip
        for _ in range(2):
            result = registry.call(listed[r % len(listed)].name, {}, run_id=run_id)
            call_id = result.call_id or call_id
        partial = r % 10 == 0
        registry.store.finish_run(
            run_id,
            {"status": "partial" if partial else "success", "output": "done", "data": None,
             "error": None, "requires_review": partial,
             "review_reason": "reached the limit of 2 iterations" if partial else None,
             "iterations": 2, "tool_calls": 2, "input_tokens": 0, "output_tokens": 0,
             "ended_at": started + 1.0},
        )  # fmt: skip
        run_ids.append(run_id)
    return run_ids[-1], call_id


def time_pages(
    api: httpx.Client, key: str, backend: str, run_id: str, call_id: int, repeat: int
) -> list[list[str]]:
    """Each dashboard page ``repeat`` times, signed in with ``key``: p50 and p95 ms."""
    pages = {
        "GET / (tools, page 1)": "/",
        "GET /?page=2": "/?page=2",
        "GET /runs": "/runs",
        "GET /runs?status=partial": "/runs?status=partial",
        "GET /review": "/review",
        "GET /runs/RUN_ID": f"/runs/{run_id}",
        "GET /calls/CALL_ID": f"/calls/{call_id}",
        "GET /ooda": "/ooda",
        "GET /select?task=...": "/select?task=synthetic+tool+number+42",
        "GET /ooda?analyse=true": "/ooda?analyse=true",
    }
    rows = []
    for label, page in pages.items():
        times = []
        for _ in range(repeat):
            start = time.perf_counter()
            answer = api.get(page, cookies={"tooldb_key": key})
            times.append((time.perf_counter() - start) * 1000)
            assert answer.status_code == 200, (page, answer.status_code)
        met = "met" if p50(times) < TARGET_PAGE_MS else "missed"
        rows.append([backend, label, f"{p50(times):.1f}", f"{p95(times):.1f}", f"{met} (< 200 ms)"])
    return rows


def bench_backend(backend: str, args: argparse.Namespace) -> list[list[str]]:
    rows = []
    with temporary_database(backend, args.pg_url) as url:
        settings = Settings(embedder="hash", url=url)
        registry = tooldb.open(url, settings=settings)
        try:
            registry.add_module("tooldb.examples.basic")
            key = create_key(registry.store, registry.tenant, Scope.ADMIN)
            for _ in range(args.warmup):
                registry.call("add", {"a": 1, "b": 2})
            direct = []
            for i in range(args.calls):
                start = time.perf_counter()
                registry.call("add", {"a": i, "b": 2})
                direct.append((time.perf_counter() - start) * 1000)
            floor = bare_round_trip(args.calls, args.warmup)
            server, base = start_server(url)
            try:
                headers = {"Authorization": f"Bearer {key}"}
                with httpx.Client(base_url=base, headers=headers, timeout=30) as api:
                    body = json.dumps({"arguments": {"a": 1, "b": 2}})
                    post = {"content": body, "headers": {"content-type": "application/json"}}
                    for _ in range(args.warmup):
                        api.post("/api/tools/add/call", **post).raise_for_status()  # type: ignore[arg-type]
                    over_http, in_server = [], []
                    for _ in range(args.calls):
                        start = time.perf_counter()
                        answer = api.post("/api/tools/add/call", **post)  # type: ignore[arg-type]
                        over_http.append((time.perf_counter() - start) * 1000)
                        assert answer.status_code == 200 and answer.json()["data"] == 3
                        in_server.append(float(answer.headers["server-timing"].split("=")[1]))
                    overhead = p50(in_server) - p50(direct)
                    met = "met" if overhead <= TARGET_OVERHEAD_MS else "missed"
                    rows.append([backend, "registry.call (in process)", f"{p50(direct):.3f}",
                                 f"{p95(direct):.3f}", "-"])  # fmt: skip
                    rows.append([backend, "POST /api/tools/add/call, in the server",
                                 f"{p50(in_server):.3f}", f"{p95(in_server):.3f}",
                                 f"overhead {overhead:.3f} ms: {met} (≤ 1 ms)"])  # fmt: skip
                    rows.append([backend, "POST /api/tools/add/call, at the client",
                                 f"{p50(over_http):.3f}", f"{p95(over_http):.3f}",
                                 f"bare uvicorn round trip: {floor:.3f}"])  # fmt: skip
                    started = time.perf_counter()
                    run_id, call_id = load(registry, args.tools, args.log, args.runs)
                    print(f"{backend}: loaded {args.log:,} calls and {args.runs:,} runs in "
                          f"{time.perf_counter() - started:.1f} s", file=sys.stderr)  # fmt: skip
                    rows += time_pages(api, key, backend, run_id, call_id, args.repeat)
            finally:
                server.terminate()
                server.communicate(timeout=20)
        finally:
            registry.close()
    return rows


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--backends", nargs="+", default=["sqlite", "postgresql"])
    parser.add_argument("--calls", type=int, default=2000)
    parser.add_argument("--warmup", type=int, default=200)
    parser.add_argument("--tools", type=int, default=100)
    parser.add_argument("--log", type=int, default=100_000)
    parser.add_argument("--runs", type=int, default=1000)
    parser.add_argument("--repeat", type=int, default=20)
    parser.add_argument("--pg-url", default=DEFAULT_PG_URL)
    args = parser.parse_args()
    rows = []
    for backend in args.backends:
        rows += bench_backend(backend, args)
    print("| store | what | p50 ms | p95 ms | target |")
    print("|---|---|---|---|---|")
    for row in rows:
        print("| " + " | ".join(row) + " |")


if __name__ == "__main__":
    main()
