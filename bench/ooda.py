"""How long does an OODA analysis take over a big call log? (target: < 5 s for 1,000,000
calls on SQLite).

Builds a registry of ``--tools`` tools on a temporary SQLite file and a temporary
PostgreSQL database (created and dropped here), bulk-loads ``--calls`` synthetic
calls spread in time order over the two analysis windows (``store.record_calls``:
executemany on SQLite, COPY on PostgreSQL, counters updated in the same
transaction), then times, ``--repeat`` times each:

* scan: ``store.scan_call_log``, the one-snapshot read (per-tool aggregates of both
  windows, the current window's median and p95, future calls);
* dry run: ``registry.ooda(dry_run=True)``, scan + findings (tests, alternatives);
* cycle: ``registry.ooda()``, the same plus writing the figures, history, cycle, acts.

On SQLite it also times the alternative it rejected for the quantiles (ROW_NUMBER()
windows in SQL) against the one used (fetch tool and duration, numpy per group).
``--simulation`` adds the OODA simulation of tests/ooda_sim.py (20,000 calls through
selection) and prints its findings and top-1 success before and after the cycle.

    .venv/bin/python bench/ooda.py                                # 1M calls, both stores
    .venv/bin/python bench/ooda.py --calls 200000 --backends sqlite
    PYTHONPATH=. .venv/bin/python bench/ooda.py --calls 100000 --simulation
"""

from __future__ import annotations

import argparse
import statistics
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "src"))

import tooldb  # noqa: E402
from _support import temporary_database  # noqa: E402
from tooldb import Registry, Settings  # noqa: E402

DAY = 86_400.0
WINDOW_S = 7 * DAY
TARGET_S = 5.0  # SQLite analysis of 1,000,000 calls
CHUNK = 50_000


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--calls", type=int, default=1_000_000, help="calls in the log")
    parser.add_argument("--tools", type=int, default=100, help="tools they spread over")
    parser.add_argument("--repeat", type=int, default=3, help="timings per measure (median)")
    parser.add_argument("--backends", default="sqlite,postgresql", help="comma-separated")
    parser.add_argument(
        "--pg-url",
        default="postgresql://postgres@127.0.0.1:5432/postgres",
        help="an admin URL; a temporary database is created beside it and dropped",
    )
    parser.add_argument("--simulation", action="store_true", help="also run the simulation")
    args = parser.parse_args(argv)
    backends = [name.strip() for name in args.backends.split(",") if name.strip()]
    if set(backends) - {"sqlite", "postgresql"} or args.calls <= 0 or args.tools <= 0:
        parser.error("backends are sqlite and postgresql; counts must be positive")

    rows: list[dict[str, Any]] = []
    for backend in backends:
        with temporary_database(backend, args.pg_url) as url:
            rows.append(_bench(backend, url, args.calls, args.tools, args.repeat))
    _print_table(rows, args.calls)
    if args.simulation:
        for backend in backends:
            with temporary_database(backend, args.pg_url) as url:
                _simulation(backend, url)
    return 0


def _bench(backend: str, url: str, calls: int, tools: int, repeat: int) -> dict[str, Any]:
    settings = Settings(embedder="hash", url=url)
    with tooldb.open(url, settings=settings) as registry:
        registry.add(
            *[
                {
                    "name": f"tool_{i:04d}",
                    "description": f"Synthetic tool number {i}.",
                    "target": "tests.sample_tools:noop",
                }
                for i in range(tools)
            ]
        )
        now = time.time()
        started = time.perf_counter()
        _load(registry, calls, tools, now)
        load_s = time.perf_counter() - started
        print(f"# {backend}: loaded {calls:,} calls in {load_s:.1f} s", file=sys.stderr)
        store, tenant = registry.store, registry.tenant

        def scan() -> Any:
            return store.scan_call_log(tenant, now - 2 * WINDOW_S, now - WINDOW_S, now)

        result: dict[str, Any] = {
            "backend": backend,
            "load_s": load_s,
            "scan_s": _median(scan, repeat),
            "dry_run_s": _median(lambda: registry.ooda(dry_run=True, now=now), repeat),
            "cycle_s": _median(lambda: registry.ooda(now=now), repeat),
        }
        report = registry.ooda(dry_run=True, now=now)
        result["findings"] = len(report.findings)
        result["window_calls"] = report.calls_analyzed
        if backend == "sqlite":
            result["quantiles"] = _quantile_methods(registry, now, repeat)
        return result


def _load(registry: Registry, calls: int, tools: int, now: float) -> None:
    """Synthetic log in time order over two windows: per tool a success probability
    (a few tools fail) and a log-normal latency."""
    rng = np.random.default_rng(42)
    ids = [t.id for t in registry.list()]
    names = [t.name for t in registry.list()]
    success_p = np.clip(rng.normal(0.93, 0.05, tools), 0.0, 1.0)
    success_p[: max(1, tools // 20)] = 0.3
    median_ms = rng.lognormal(4.5, 1.0, tools)
    times = np.sort(now - rng.random(calls) * 2 * WINDOW_S)
    for low in range(0, calls, CHUNK):
        high = min(calls, low + CHUNK)
        which = rng.integers(0, tools, high - low)
        ok = rng.random(high - low) < success_p[which]
        ms = rng.lognormal(np.log(median_ms[which]), 0.6)
        registry.store.record_calls(
            [
                {
                    "tenant": registry.tenant,
                    "tool_id": ids[t],
                    "tool_name": names[t],
                    "tool_version": 1,
                    "run_id": None,
                    "session_id": "bench",
                    "arguments": {},
                    "success": s,
                    "error_kind": None if s else "execution",
                    "error": None if s else "synthetic",
                    "output_size": 0,
                    "output_preview": None,
                    "duration_ms": d,
                    "started_at": at,
                }
                for t, s, d, at in zip(
                    which.tolist(),
                    ok.tolist(),
                    ms.tolist(),
                    times[low:high].tolist(),
                    strict=True,
                )
            ]
        )


def _median(job: Callable[[], Any], repeat: int) -> float:
    times = []
    for _ in range(repeat):
        started = time.perf_counter()
        job()
        times.append(time.perf_counter() - started)
    return statistics.median(times)


def _quantile_methods(registry: Registry, now: float, repeat: int) -> dict[str, float]:
    """SQLite has no percentile aggregate: numpy over fetched (tool, ms) rows (used) vs
    ROW_NUMBER() windows picking the order statistics in SQL (rejected)."""
    import sqlalchemy as sa

    engine: sa.Engine = registry.store.engine  # type: ignore[attr-defined]
    where = "tenant = :t AND started_at >= :lo AND started_at < :hi"
    params = {"t": registry.tenant, "lo": now - WINDOW_S, "hi": now}
    windows = sa.text(
        "SELECT tool_id, rn, n, duration_ms FROM (SELECT tool_id, duration_ms,"
        " ROW_NUMBER() OVER (PARTITION BY tool_id ORDER BY duration_ms) AS rn,"
        f" COUNT(*) OVER (PARTITION BY tool_id) AS n FROM calls WHERE {where})"
        " WHERE rn IN (CAST(0.5 * (n - 1) AS INTEGER) + 1, CAST(0.5 * (n - 1) AS INTEGER) + 2,"
        " CAST(0.95 * (n - 1) AS INTEGER) + 1, CAST(0.95 * (n - 1) AS INTEGER) + 2)"
    )
    store, tenant = registry.store, registry.tenant
    with engine.connect() as conn:
        return {
            "numpy_s": _median(
                lambda: store._quantiles(conn, tenant, now - WINDOW_S, now),  # type: ignore[attr-defined]
                repeat,
            ),
            "row_number_s": _median(lambda: conn.execute(windows, params).all(), repeat),
        }


def _print_table(rows: list[dict[str, Any]], calls: int) -> None:
    print(f"\nOODA analysis over {calls:,} calls ({rows[0]['window_calls']:,} in the window)")
    header = ("store", "load s", "calls/s", "scan s", "dry run s", "cycle s", "findings", "target")
    print("| " + " | ".join(header) + " |")
    print("|" + "|".join("---" for _ in header) + "|")
    for r in rows:
        target = (
            ("met" if r["cycle_s"] < TARGET_S else "MISSED") + f" (< {TARGET_S:g} s)"
            if r["backend"] == "sqlite" and calls >= 1_000_000
            else "-"
        )
        print(
            f"| {r['backend']} | {r['load_s']:.1f} | {calls / r['load_s']:,.0f} | "
            f"{r['scan_s']:.2f} | {r['dry_run_s']:.2f} | {r['cycle_s']:.2f} | "
            f"{r['findings']} | {target} |"
        )
    for r in rows:
        if "quantiles" in r:
            q = r["quantiles"]
            print(
                f"\nSQLite median + p95 of the window: numpy per group {q['numpy_s']:.2f} s, "
                f"ROW_NUMBER() windows {q['row_number_s']:.2f} s"
            )


def _simulation(backend: str, url: str) -> None:
    sys.path.insert(0, str(ROOT))
    from tests.ooda_sim import WINDOW_S as SIM_WINDOW
    from tests.ooda_sim import Simulation

    settings = Settings(
        embedder="hash", url=url, ooda_window_s=SIM_WINDOW, ooda_never_used_after_s=0.0
    )
    with tooldb.open(url, settings=settings) as registry:
        sim = Simulation(registry)
        sim.register()
        started = time.perf_counter()
        sim.drive()
        drive_s = time.perf_counter() - started
        before = sim.expected_top1_success()
        report = registry.ooda(now=sim.end)
        after = sim.expected_top1_success()
    window = sum(f.successes for f in report.figures) / report.calls_analyzed
    print(f"\nSimulation on {backend}: {sim.calls:,} calls through selection in {drive_s:.1f} s")
    for finding in report.findings:
        print(f"  {finding.kind.value:12} {finding.tool:22} {finding.summary}")
    print(f"  disabled: {sorted(a.tool for a in report.acts if a.action == 'disable')}")
    print(f"  held: {sorted(h.tool for h in report.held)}")
    print(
        f"  success of the calls in the window {window:.3f}; selection's top-1 expected "
        f"success {before:.3f} before the cycle, {after:.3f} after"
    )


if __name__ == "__main__":
    raise SystemExit(main())
