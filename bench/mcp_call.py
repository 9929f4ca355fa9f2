"""What an mcp tool call costs through tooldb, against the SDK client on its own.

Runs mcp-server-time as a subprocess and times ``get_current_time``:

* ``sdk``: ``mcp.Client.call_tool`` in one event loop (the floor);
* ``tooldb call``: ``Registry.call`` from a plain thread (bind, hop to the session
  loop thread, call, render, record in a SQLite registry);
* ``tooldb acall``: ``await Registry.acall`` from another event loop;

plus the time to start a session (server process + handshake) and to recover
from a killed server (the next call starts a new one).
"""

from __future__ import annotations

import argparse
import asyncio
import os
import signal
import statistics
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path

import anyio
from mcp import Client, StdioServerParameters
from mcp.client.stdio import stdio_client

import tooldb
from tooldb import Registry

SERVER = [sys.executable, "-m", "mcp_server_time", "--local-timezone", "UTC"]
ARGS = {"timezone": "Asia/Tokyo"}


def _row(label: str, samples_s: list[float]) -> str:
    us = sorted(s * 1e6 for s in samples_s)
    p99 = us[min(len(us) - 1, int(len(us) * 0.99))]
    return (
        f"{label:<14} {statistics.fmean(us):>9.0f} {us[len(us) // 2]:>9.0f} {p99:>9.0f}"
        f" {len(us) / sum(samples_s):>9.0f}"
    )


def bench_sdk(calls: int) -> list[float]:
    async def run() -> list[float]:
        params = StdioServerParameters(command=SERVER[0], args=SERVER[1:])
        with open(os.devnull, "w") as errlog:
            async with Client(stdio_client(params, errlog=errlog), cache=None) as client:
                for _ in range(20):
                    await client.call_tool("get_current_time", ARGS)
                samples = []
                for _ in range(calls):
                    start = time.perf_counter()
                    await client.call_tool("get_current_time", ARGS)
                    samples.append(time.perf_counter() - start)
                return samples

    return anyio.run(run)


def _timed(fn: Callable[[], object], calls: int) -> list[float]:
    samples = []
    for _ in range(calls):
        start = time.perf_counter()
        fn()
        samples.append(time.perf_counter() - start)
    return samples


def bench_tooldb(registry: Registry, calls: int) -> tuple[list[float], list[float]]:
    def call() -> None:
        assert registry.call("time__get_current_time", ARGS).success

    for _ in range(20):
        call()
    sync = _timed(call, calls)

    async def run() -> list[float]:
        samples = []
        for _ in range(calls):
            start = time.perf_counter()
            assert (await registry.acall("time__get_current_time", ARGS)).success
            samples.append(time.perf_counter() - start)
        return samples

    return sync, asyncio.run(run())


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--calls", type=int, default=1000)
    options = parser.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        url = f"sqlite:///{Path(tmp) / 'bench.db'}"
        with tooldb.open(url) as registry:
            start = time.perf_counter()
            registry.add_mcp("time", command=SERVER)
            first_start = time.perf_counter() - start
            sync, async_ = bench_tooldb(registry, options.calls)
            pid = registry.call("time__get_current_time", ARGS)  # session is warm
            os.kill(_server_pid(), signal.SIGKILL)
            time.sleep(0.2)
            start = time.perf_counter()
            pid = registry.call("time__get_current_time", ARGS)
            recovery = time.perf_counter() - start
            assert pid.success
        sdk = bench_sdk(options.calls)
    print(f"mcp-server-time get_current_time, {options.calls} calls per row (µs)")
    print(f"{'path':<14} {'mean':>9} {'p50':>9} {'p99':>9} {'calls/s':>9}")
    for label, samples in (("sdk", sdk), ("tooldb call", sync), ("tooldb acall", async_)):
        print(_row(label, samples))
    print(f"import (start + list + register): {first_start * 1000:.0f} ms")
    print(f"first call after the server was killed (restart): {recovery * 1000:.0f} ms")


def _server_pid() -> int:
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit():
            try:
                stat = (entry / "stat").read_text()
                cmdline = (entry / "cmdline").read_bytes()
            except OSError:
                continue
            ppid = int(stat[stat.rindex(")") + 2 :].split()[1])
            if ppid == os.getpid() and b"mcp_server_time" in cmdline:
                return int(entry.name)
    raise RuntimeError("mcp-server-time is not running")


if __name__ == "__main__":
    main()
