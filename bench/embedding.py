"""What embedding costs with the bundled all-MiniLM-L6-v2 on onnxruntime (fp32 and int8).

    .venv/bin/python bench/embedding.py [--repeats 300] [--threads N]

Per variant: the first load with no cached graph (written from the package's weights,
quantised for int8), a load from the cache (a new process's cost), then the p50/p99 of
embedding one short task (what `select` pays per task) and of a batch of 64 tool
descriptions (what bulk registration pays per 64 tools). Each load runs in a fresh
subprocess so nothing is shared between them.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time

TASK = "turn 100 degrees Celsius into Fahrenheit"
DESCRIPTIONS = [
    f"Tool {i}: convert a value between units of temperature, length or weight and "
    "report the result with the unit name"
    for i in range(64)
]

_CHILD = """
import json, sys, time
start = time.perf_counter()
from tooldb.embedders.local import LocalEmbedder
embedder = LocalEmbedder(quantized=sys.argv[1] == "int8")
embedder.embed(["warm up"])
print(json.dumps({"load_s": time.perf_counter() - start}))
"""


def load_seconds(variant: str, cache: str) -> float:
    env = {**os.environ, "TOOLDB_CACHE_DIR": cache}
    out = subprocess.run(
        [sys.executable, "-c", _CHILD, variant], env=env, capture_output=True, text=True, check=True
    )
    return float(json.loads(out.stdout.strip().splitlines()[-1])["load_s"])


def timings(variant: str, repeats: int) -> tuple[list[float], list[float]]:
    from tooldb.embedders.local import LocalEmbedder

    embedder = LocalEmbedder(quantized=variant == "int8")
    embedder.embed([TASK])
    one = []
    for _ in range(repeats):
        start = time.perf_counter()
        embedder.embed([TASK])
        one.append((time.perf_counter() - start) * 1000)
    batch = []
    for _ in range(max(5, repeats // 20)):
        start = time.perf_counter()
        embedder.embed(DESCRIPTIONS)
        batch.append((time.perf_counter() - start) * 1000)
    return one, batch


def p99(values: list[float]) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(len(ordered) * 0.99))]


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--repeats", type=int, default=300)
    args = parser.parse_args()
    rows = []
    for variant in ("fp32", "int8"):
        with tempfile.TemporaryDirectory() as cache:
            cold = load_seconds(variant, cache)
            warm = load_seconds(variant, cache)
        one, batch = timings(variant, args.repeats)
        rows.append((variant, cold, warm, one, batch))
    header = (
        f"{'variant':8} {'first load s':>13} {'cached load s':>14} {'1 task p50 ms':>14}"
        f" {'p99 ms':>8} {'64 texts p50 ms':>16} {'p99 ms':>8}"
    )
    print(header)
    for variant, cold, warm, one, batch in rows:
        print(
            f"{variant:8} {cold:13.2f} {warm:14.2f} {statistics.median(one):14.2f}"
            f" {p99(one):8.2f} {statistics.median(batch):16.1f} {p99(batch):8.1f}"
        )


if __name__ == "__main__":
    main()
