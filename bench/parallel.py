"""Do parallel calls run in parallel? ``call_many`` of tools that wait 100 ms, per kind.

Two tables, on a temporary SQLite registry (``embedder="none"``):

* ``call_many`` of 1, 10 and 100 calls of a tool that waits 100 ms, per kind (async
  Python, sync Python, http against a ThreadingHTTPServer on 127.0.0.1 whose handler
  sleeps, a Python script tool through the fork server, and the same script tool run
  as a process per call, ``script/proc``): wall time, and the 10-call time against
  one call's (target: at most 1.3x, which is what "parallel" means). The 100-call batches run
  with ``max_parallel=100, max_parallel_per_tool=100`` (and the same settings, so the
  shared thread pool has 100 threads); a last column runs them with the default
  limits (``max_parallel_calls=16``, ``max_parallel_per_tool=8``: 13 waves of 8).
* the cost of one sequential ``Registry.call`` of a no-op tool of each kind (python,
  sql ``SELECT 1``, http on loopback, mcp ``get_current_time`` on a warm session,
  script = a call through the fork server, script/proc = a process start), p50 and
  p99. No target yet.

    .venv/bin/python bench/parallel.py [--calls 200] [--script-calls 30] [--repeat 3]
"""

from __future__ import annotations

import argparse
import asyncio
import json
import statistics
import sys
import tempfile
import threading
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

import tooldb
from tooldb import Registry, Settings

WAIT_S = 0.1
WIDE = 100  # limits for the 100-call batches
MCP_SERVER = [sys.executable, "-m", "mcp_server_time", "--local-timezone", "UTC"]
MCP_ARGS = {"timezone": "Asia/Tokyo"}


@tooldb.tool
async def wait_async() -> int:
    """Wait 100 ms on the event loop."""
    await asyncio.sleep(WAIT_S)
    return 1


@tooldb.tool
def wait_sync() -> int:
    """Wait 100 ms in a thread."""
    time.sleep(WAIT_S)
    return 1


@tooldb.tool
def noop() -> int:
    """Do nothing."""
    return 1


class _Handler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"
    disable_nagle_algorithm = True

    def log_message(self, *_args: Any) -> None:
        pass

    def do_GET(self) -> None:
        if self.path == "/wait":
            time.sleep(WAIT_S)
        body = json.dumps({"ok": 1}).encode()
        self.send_response(200)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)


class _Server(ThreadingHTTPServer):
    daemon_threads = True
    request_queue_size = 256  # the default listen backlog (5) drops a burst of 100 connects


@contextmanager
def http_server() -> Iterator[str]:
    server = _Server(("127.0.0.1", 0), _Handler)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{server.server_address[1]}"
    finally:
        server.shutdown()
        server.server_close()


def _script(body: str) -> str:
    return f"import time\n\n\ndef main():\n{body}    return 1\n"


def register(registry: Registry, base: str) -> None:
    for func in (wait_async, wait_sync, noop):
        registry.add_function(func)
    registry.add(
        {"name": "http_wait", "kind": "http", "target": f"GET {base}/wait"},
        {"name": "http_noop", "kind": "http", "target": f"GET {base}/noop"},
        {"name": "script_wait", "kind": "script", "target": _script(f"    time.sleep({WAIT_S})\n")},
        {"name": "script_noop", "kind": "script", "target": _script("")},
        {"name": "sql_noop", "kind": "sql", "target": "SELECT 1", "returns": "scalar"},
    )  # fmt: skip


def _ok(results: list[tooldb.ToolResult]) -> None:
    for result in results:
        if not result.success:
            raise SystemExit(f"call failed: {result.error}")


def _batch(registry: Registry, name: str, n: int, wide: bool) -> float:
    limits = {"max_parallel": WIDE, "max_parallel_per_tool": WIDE} if wide else {}
    start = time.perf_counter()
    results = registry.call_many([(name, {})] * n, **limits)  # type: ignore[arg-type]
    elapsed = time.perf_counter() - start
    _ok(results)
    return elapsed


def _median_of(repeat: int, fn: Callable[[], float]) -> float:
    return statistics.median(fn() for _ in range(repeat))


def parallel_table(registries: dict[str, tuple[Registry, Registry]], repeat: int) -> None:
    """``registries``: per row, the wide and the default-limits registry to call."""
    kinds = {
        "async": "wait_async",
        "sync": "wait_sync",
        "http": "http_wait",
        "script": "script_wait",
        "script/proc": "script_wait",
    }
    print(f"call_many of a tool that waits {WAIT_S * 1000:.0f} ms (wall ms, median of {repeat})")
    print(
        f"{'kind':<12}{'1 call':>9}{'10 calls':>10}{'10 / 1':>8}  {'<= 1.3x':<8}"
        f"{'100 calls':>11}{'100, defaults':>15}"
    )
    for kind, name in kinds.items():
        wide, default = registries.get(kind, registries["*"])
        _batch(wide, name, 10, True)  # warm up: pools, connections, isolation probe
        one = _median_of(repeat, lambda r=wide, n=name: _timed_call(r, n, {}))
        ten = _median_of(repeat, lambda r=wide, n=name: _batch(r, n, 10, True))
        hundred = _median_of(repeat, lambda r=wide, n=name: _batch(r, n, 100, True))
        defaults = _batch(default, name, 100, False)
        ratio = ten / one
        verdict = "met" if ratio <= 1.3 else "missed"
        print(
            f"{kind:<12}{one * 1000:>9.0f}{ten * 1000:>10.0f}{ratio:>7.2f}x  {verdict:<8}"
            f"{hundred * 1000:>11.0f}{defaults * 1000:>15.0f}"
        )
    print(
        f"100 calls: max_parallel={WIDE}, max_parallel_per_tool={WIDE} (settings too);"
        " 'defaults': max_parallel_calls=16, max_parallel_per_tool=8; script: through the"
        " fork server, script/proc: a process per call (script_forkserver=False)"
    )


def _timed_call(registry: Registry, name: str, arguments: dict[str, Any]) -> float:
    start = time.perf_counter()
    result = registry.call(name, arguments)
    elapsed = time.perf_counter() - start
    if not result.success:
        raise SystemExit(f"{name} failed: {result.error}")
    return elapsed


def overhead_table(
    registry: Registry, per_process: Registry, calls: int, script_calls: int
) -> None:
    kinds = {
        "python": ("noop", {}, calls),
        "sql": ("sql_noop", {}, calls),
        "http": ("http_noop", {}, calls),
        "mcp": ("time__get_current_time", MCP_ARGS, calls),
        "script": ("script_noop", {}, script_calls),
        "script/proc": ("script_noop", {}, script_calls),
    }
    print("\nsequential Registry.call of a no-op tool (µs per call)")
    print(f"{'kind':<12}{'calls':>7}{'p50 µs':>11}{'p99 µs':>11}{'mean µs':>11}")
    for kind, (name, arguments, n) in kinds.items():
        target = per_process if kind == "script/proc" else registry
        for _ in range(min(20, n)):
            _timed_call(target, name, arguments)
        samples = sorted(_timed_call(target, name, arguments) * 1e6 for _ in range(n))
        p99 = samples[min(len(samples) - 1, int(0.99 * len(samples)))]
        print(
            f"{kind:<12}{n:>7}{statistics.median(samples):>11.0f}{p99:>11.0f}"
            f"{statistics.fmean(samples):>11.0f}"
        )
    print(
        "mcp: mcp-server-time get_current_time, warm stdio session; script: a call through"
        " the fork server; script/proc: a process start (bwrap + interpreter)"
    )


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--calls", type=int, default=200, help="sequential no-op calls per kind")
    parser.add_argument("--script-calls", type=int, default=30, help="the same for script")
    parser.add_argument("--repeat", type=int, default=3, help="batches per cell (median)")
    args = parser.parse_args(argv)
    if min(args.calls, args.script_calls, args.repeat) <= 0:
        parser.error("--calls, --script-calls and --repeat must be positive")
    with http_server() as base, tempfile.TemporaryDirectory() as tmp:
        url = f"sqlite:///{Path(tmp) / 'bench.db'}"
        common: dict[str, Any] = {
            "url": url,
            "embedder": "none",
            "http_allowed_hosts": ("127.0.0.1",),
        }
        wide_limits = {"max_parallel_calls": WIDE, "max_parallel_per_tool": WIDE}
        wide = tooldb.open(url, settings=Settings(**common, **wide_limits))
        default = tooldb.open(url, settings=Settings(**common))
        off = {"script_forkserver": False}
        per_process = tooldb.open(url, settings=Settings(**common, **wide_limits, **off))
        per_process_default = tooldb.open(url, settings=Settings(**common, **off))
        registries = {"*": (wide, default), "script/proc": (per_process, per_process_default)}
        try:
            register(wide, base)
            for func in (wait_async, wait_sync, noop):  # in-process callables for this one too
                default.add_function(func)
            parallel_table(registries, args.repeat)
            wide.add_mcp("time", command=MCP_SERVER)
            overhead_table(wide, per_process, args.calls, args.script_calls)
        finally:
            for registry in (per_process_default, per_process, default, wide):
                registry.close()
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
