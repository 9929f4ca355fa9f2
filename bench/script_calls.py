"""What does a script tool call cost? Latency of ``registry.call`` for script tools.

Python script calls start from the fork server (a sandboxed fork per call); the
``per process`` variant turns it off (``script_forkserver=False``): each call then
starts ``bwrap`` and a fresh interpreter, as JavaScript calls always do. This
prints, per variant, the latency of N sequential calls (p50, p95 in ms) next to the
bare start of the same interpreters, and the throughput of the same calls from
several threads.

    .venv/bin/python bench/script_calls.py [--calls 50] [--threads 4]
"""

from __future__ import annotations

import argparse
import statistics
import subprocess
import sys
import tempfile
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

import tooldb
from tooldb import Registry, Settings
from tooldb.executors import sandbox
from tooldb.executors.script import node_binary

VARIANTS: dict[str, tuple[str, dict[str, Any]]] = {
    "python main()": ("def main(a, b=1):\n    return a + b\n", {}),
    "python plain": (
        "import json, sys\nargs = json.load(sys.stdin)\nprint(args['a'] + 1)\n",
        {},
    ),
    "javascript exports": ("module.exports = ({ a }) => a + 1;", {"language": "javascript"}),
}
PER_PROCESS = "python main(), per process"  # the first variant, fork server off


def _pct(values: list[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(q * len(ordered)))]


def _timed(func: Any, n: int) -> list[float]:
    out = []
    for _ in range(n):
        start = time.perf_counter()
        func()
        out.append((time.perf_counter() - start) * 1000)
    return out


def _baseline(argv: list[str], n: int) -> list[float]:
    return _timed(lambda: subprocess.run(argv, check=True), n)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--calls", type=int, default=50, help="sequential calls per variant")
    parser.add_argument("--threads", type=int, default=4, help="threads for the throughput run")
    args = parser.parse_args(argv)
    if args.calls <= 0 or args.threads <= 0:
        parser.error("--calls and --threads must be positive")
    print("isolation:", sandbox.isolation().summary())
    rows: list[tuple[str, list[float]]] = []
    python = sandbox.script_python()
    rows.append(("bare: python -I -S -c pass", _baseline([python, "-I", "-S", "-c", "pass"], 20)))
    node = node_binary()
    if node:
        rows.append(("bare: node -e 0", _baseline([node, "-e", "0"], 20)))
    throughput: list[tuple[str, float]] = []
    with tempfile.TemporaryDirectory() as scratch:
        url = f"sqlite:///{Path(scratch) / 'bench.db'}"
        registry = tooldb.open(url, settings=Settings(url=url))
        per_process = tooldb.open(url, settings=Settings(url=url, script_forkserver=False))
        variants = {**VARIANTS, PER_PROCESS: VARIANTS["python main()"]}
        try:
            for label, (source, metadata) in variants.items():
                if metadata.get("language") == "javascript" and not node:
                    continue
                target = per_process if label == PER_PROCESS else registry
                _register(target, label, source, metadata)
                target.call(label, {"a": 1})  # warm up: probe, imports
                rows.append((label, _timed(lambda r=target, n=label: _check(r, n), args.calls)))
                throughput.append((label, _throughput(target, label, args)))
        finally:
            per_process.close()
            registry.close()
    print(f"\n{'variant':<30}{'p50 ms':>9}{'p95 ms':>9}{'mean ms':>9}")
    for label, values in rows:
        mean = statistics.fmean(values)
        print(f"{label:<30}{_pct(values, 0.5):>9.1f}{_pct(values, 0.95):>9.1f}{mean:>9.1f}")
    print(f"\n{'variant':<30}{'threads':>9}{'calls/s':>9}")
    for label, rate in throughput:
        print(f"{label:<30}{args.threads:>9}{rate:>9.1f}")
    return 0


def _register(registry: Registry, name: str, source: str, metadata: dict[str, Any]) -> None:
    registry.add(
        {
            "name": name,
            "kind": "script",
            "target": source,
            "parameters": {"a": {"type": "int", "required": True}},
            "metadata": metadata,
        }
    )


def _check(registry: Registry, name: str) -> None:
    result = registry.call(name, {"a": 1})
    if not result.success or result.data != 2:
        raise SystemExit(f"{name}: unexpected result {result}")


def _throughput(registry: Registry, name: str, args: argparse.Namespace) -> float:
    start = time.perf_counter()
    with ThreadPoolExecutor(args.threads) as pool:
        list(pool.map(lambda _: _check(registry, name), range(args.calls)))
    return args.calls / (time.perf_counter() - start)


if __name__ == "__main__":
    sys.exit(main())
