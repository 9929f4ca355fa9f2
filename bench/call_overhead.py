"""How much does recording add to a call? ``registry.call`` of a trivial tool, recording on/off.

Runs N calls of a trivial Python tool through ``Registry.call`` with call recording
on and off (``Settings(record_calls=False)``) against the same database, on a
temporary SQLite file and a temporary PostgreSQL database (created and dropped
here). On and off run in alternating blocks so that drift in the machine's speed
lands on both sides equally. Prints one table of latencies per call, the recording
overhead (on minus off) and the p50 of each piece of the call path.

    .venv/bin/python bench/call_overhead.py [--calls 10000] [--backends sqlite,postgresql]
"""

from __future__ import annotations

import argparse
import statistics
import sys
import time
from dataclasses import dataclass

import tooldb
from _support import temporary_database
from tooldb import BoundCall, Registry, Settings
from tooldb.execution import execute

TOOL = "bench_add"
TARGET_US = 100.0  # the acceptance target for SQLite: recording adds at most this per call


@tooldb.tool(name=TOOL)
def bench_add(a: int, b: int = 1) -> int:
    """Add two integers (the trivial tool whose calls are timed)."""
    return a + b


@dataclass
class Sample:
    backend: str
    recording: str
    latencies_ns: list[int]

    @property
    def mean_us(self) -> float:
        return statistics.fmean(self.latencies_ns) / 1000

    def pct_us(self, q: float) -> float:
        ordered = sorted(self.latencies_ns)
        return ordered[min(len(ordered) - 1, int(q * len(ordered)))] / 1000


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--calls", type=int, default=10_000, help="timed calls per mode")
    parser.add_argument("--warmup", type=int, default=500, help="untimed calls per mode first")
    parser.add_argument("--block", type=int, default=500, help="calls per on/off block")
    parser.add_argument("--backends", default="sqlite,postgresql", help="comma-separated")
    parser.add_argument(
        "--pg-url",
        default="postgresql://postgres@127.0.0.1:5432/postgres",
        help="an admin URL; a temporary database is created beside it and dropped",
    )
    parser.add_argument("--pieces", type=int, default=2000, help="calls timed piece by piece")
    args = parser.parse_args(argv)
    backends = [name.strip() for name in args.backends.split(",") if name.strip()]
    unknown = set(backends) - {"sqlite", "postgresql"}
    if unknown or args.calls <= 0 or args.block <= 0:
        parser.error(f"backends are sqlite and postgresql (got {sorted(unknown)}); counts > 0")

    samples: list[Sample] = []
    pieces: dict[str, dict[str, float]] = {}
    for backend in backends:
        started = time.perf_counter()
        with temporary_database(backend, args.pg_url) as url:
            on, off = _measure(url, args.calls, args.warmup, args.block)
            pieces[backend] = _pieces(url, args.pieces)
        samples += [Sample(backend, "off", off), Sample(backend, "on", on)]
        print(f"# {backend}: done in {time.perf_counter() - started:.1f} s", file=sys.stderr)

    _print_table(samples, pieces)
    return 0


def _open(url: str, record: bool) -> Registry:
    registry = tooldb.open(url, settings=Settings(url=url, record_calls=record))
    registry.add(bench_add)
    return registry


def _measure(url: str, calls: int, warmup: int, block: int) -> tuple[list[int], list[int]]:
    """Latencies (ns) of ``calls`` calls with recording on and off, in alternating blocks."""
    on, off = _open(url, True), _open(url, False)
    try:
        for registry in (on, off):
            _timed(registry, warmup)
        timed_on: list[int] = []
        timed_off: list[int] = []
        for index in range((calls + block - 1) // block):
            size = min(block, calls - index * block)
            # Swap the order every block so neither mode always runs first.
            order = ((on, timed_on), (off, timed_off))
            for registry, sink in order if index % 2 == 0 else order[::-1]:
                sink += _timed(registry, size)
        recorded = on.store.count_calls(on.tenant, TOOL)
        usage = on.get(TOOL).stats.usage_count
        if recorded != warmup + calls or usage != recorded:
            expected = warmup + calls
            raise SystemExit(f"lost records: {recorded} calls, usage {usage}, expected {expected}")
        return timed_on, timed_off
    finally:
        on.close()
        off.close()


def _timed(registry: Registry, count: int) -> list[int]:
    clock = time.perf_counter_ns
    call = registry.call
    latencies = []
    for i in range(count):
        start = clock()
        result = call(TOOL, {"a": i})
        latencies.append(clock() - start)
        if not result.success:
            raise SystemExit(f"call failed: {result.error}")
    return latencies


def _pieces(url: str, count: int) -> dict[str, float]:
    """p50 (µs) of each stage of one recorded call, timed separately (uses internals)."""
    registry = _open(url, True)
    clock = time.perf_counter_ns
    times: dict[str, list[int]] = {"resolve": [], "bind": [], "execute": [], "record": []}
    try:
        for i in range(count):
            t0 = clock()
            tool, binder = registry._resolve(TOOL)  # tool_head query + cache lookup
            t1 = clock()
            bound = BoundCall(tool=tool, arguments=binder.bind({"a": i}))
            t2 = clock()
            outcome = execute(registry._executor(tool), bound, 30.0)
            t3 = clock()
            registry.recorder.record(tool, bound.arguments, outcome)
            t4 = clock()
            for name, spent in zip(times, (t1 - t0, t2 - t1, t3 - t2, t4 - t3), strict=True):
                times[name].append(spent)
    finally:
        registry.close()
    return {name: statistics.median(values) / 1000 for name, values in times.items()}


def _print_table(samples: list[Sample], pieces: dict[str, dict[str, float]]) -> None:
    header = f"{'backend':<11} {'recording':<9} {'calls':>6} {'mean µs':>9} {'p50 µs':>9} "
    header += f"{'p99 µs':>9} {'calls/s':>8}"
    print(header)
    print("-" * len(header))
    for s in samples:
        print(
            f"{s.backend:<11} {s.recording:<9} {len(s.latencies_ns):>6} {s.mean_us:>9.1f} "
            f"{s.pct_us(0.5):>9.1f} {s.pct_us(0.99):>9.1f} {1e6 / s.mean_us:>8.0f}"
        )
    print()
    print("recording overhead per call (on - off):")
    by_key = {(s.backend, s.recording): s for s in samples}
    for backend in dict.fromkeys(s.backend for s in samples):
        on, off = by_key[(backend, "on")], by_key[(backend, "off")]
        mean = on.mean_us - off.mean_us
        verdict = ""
        if backend == "sqlite":
            met = "met" if mean <= TARGET_US else "MISSED"
            verdict = f"  [target <= {TARGET_US:.0f} µs: {met}]"
        print(
            f"  {backend:<11} mean {mean:7.1f} µs   p50 {on.pct_us(0.5) - off.pct_us(0.5):7.1f} µs"
            f"{verdict}"
        )
    print()
    print("call path pieces, p50 µs (timed one by one, recording on):")
    names = list(next(iter(pieces.values()), {}))
    print(f"  {'backend':<11} " + " ".join(f"{name:>10}" for name in names))
    for backend, values in pieces.items():
        print(f"  {backend:<11} " + " ".join(f"{values[name]:>10.1f}" for name in names))


if __name__ == "__main__":
    sys.exit(main())
