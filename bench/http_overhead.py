"""What does tooldb add to an HTTP request? One GET to the local pets API, three ways.

* ``httpx``: a bare pooled ``httpx.Client`` (the floor);
* ``executor.run``: the http executor alone (request mapping, host-guarded client,
  streamed and parsed response), no registry;
* ``call, recording off``: ``Registry.call`` of an http tool (bind, host guard, request
  mapping, response parsing), ``Settings(record_calls=False)``;
* ``call, recording on``: the same with the call recorded in a SQLite file.

The server (``tooldb.examples.pets_server``) runs in this process on 127.0.0.1, so the
numbers include its own time; compare the rows with each other, not with a network.
Modes run in alternating blocks so machine drift lands on all of them alike.

    .venv/bin/python bench/http_overhead.py [--calls 2000] [--block 200]
"""

from __future__ import annotations

import argparse
import statistics
import tempfile
import time
from collections.abc import Callable
from pathlib import Path

import httpx

import tooldb
from tooldb import Settings
from tooldb.examples.pets_server import PetsServer


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--calls", type=int, default=2000, help="timed calls per mode")
    parser.add_argument("--warmup", type=int, default=100, help="untimed calls per mode first")
    parser.add_argument("--block", type=int, default=200, help="calls per block")
    args = parser.parse_args(argv)
    with PetsServer() as server, tempfile.TemporaryDirectory() as tmp:
        url = f"sqlite:///{Path(tmp) / 'bench.db'}"
        common = {"url": url, "http_allowed_hosts": ("127.0.0.1",), "embedder": "none"}
        on = tooldb.open(url, settings=Settings(**common))  # type: ignore[arg-type]
        off = tooldb.open(url, settings=Settings(**common, record_calls=False))  # type: ignore[arg-type]
        on.add({"name": "pet", "kind": "http", "target": f"GET {server.url}/pets/{{pet_id}}",
                "parameters": {"pet_id": {"type": "int", "required": True}}})  # fmt: skip
        client = httpx.Client()
        executor, tool = off.executors[tooldb.ToolKind.HTTP], off.get("pet")
        executor.prepare(tool)
        modes: dict[str, Callable[[], object]] = {
            "httpx": lambda: client.get(f"{server.url}/pets/1").json(),
            "executor.run": lambda: executor.run(tool, {"pet_id": 1}, 30.0),
            "call, recording off": lambda: _ok(off.call("pet", {"pet_id": 1})),
            "call, recording on": lambda: _ok(on.call("pet", {"pet_id": 1})),
        }
        timings = _run(modes, args.calls, args.warmup, args.block)
        recorded = len(on.calls(tool="pet", limit=args.calls * 2))
        on.close()
        off.close()
        client.close()
    _report(timings, recorded, args.calls + args.warmup)
    return 0


def _ok(result: tooldb.ToolResult) -> object:
    if not result.success:
        raise SystemExit(f"call failed: {result.error}")
    return result.data


def _run(
    modes: dict[str, Callable[[], object]], calls: int, warmup: int, block: int
) -> dict[str, list[int]]:
    for fn in modes.values():
        for _ in range(warmup):
            fn()
    timings: dict[str, list[int]] = {name: [] for name in modes}
    while len(timings["httpx"]) < calls:
        for name, fn in modes.items():
            for _ in range(min(block, calls - len(timings[name]))):
                start = time.perf_counter_ns()
                fn()
                timings[name].append(time.perf_counter_ns() - start)
    return timings


def _report(timings: dict[str, list[int]], recorded: int, expected: int) -> None:
    floor = statistics.median(timings["httpx"]) / 1000
    print(f"{'mode':<22}{'mean µs':>10}{'p50 µs':>10}{'p99 µs':>10}{'p50 - httpx':>14}")
    for name, values in timings.items():
        ordered = sorted(values)
        p50 = statistics.median(ordered) / 1000
        p99 = ordered[min(len(ordered) - 1, int(0.99 * len(ordered)))] / 1000
        mean = statistics.fmean(ordered) / 1000
        print(f"{name:<22}{mean:>10.1f}{p50:>10.1f}{p99:>10.1f}{p50 - floor:>+14.1f}")
    print(f"recorded calls: {recorded} (expected {expected})")


if __name__ == "__main__":
    raise SystemExit(main())
