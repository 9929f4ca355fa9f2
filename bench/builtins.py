"""What the built-in tools cost per call: ``recall`` as a namespace's memories grow
(it ranks them all: BM25 built per call, cosines over the stored vectors), ``remember``,
and ``bash``/``git_status`` (a bubblewrap sandbox per call) on a temporary SQLite
registry. Prints one table; nothing is kept.

    .venv/bin/python bench/builtins.py                    # 100, 1,000, 10,000 memories
    .venv/bin/python bench/builtins.py --sizes 1000 --embedder local
"""

from __future__ import annotations

import argparse
import statistics
import tempfile
import time
from pathlib import Path

import tooldb
from tooldb import Settings
from tooldb.builtins import add_builtins
from tooldb.builtins.rows import add_memory

WORDS = [
    "deploy",
    "host",
    "backup",
    "invoice",
    "customer",
    "schedule",
    "server",
    "database",
    "release",
    "staging",
    "bucket",
    "token",
    "region",
    "cluster",
    "report",
    "budget",
    "meeting",
    "vendor",
    "contract",
    "ticket",
]


def timed(registry: tooldb.Registry, tool: str, arguments: dict[str, object], n: int) -> float:
    samples = []
    for _ in range(n):
        started = time.perf_counter()
        result = registry.call(tool, arguments)
        samples.append((time.perf_counter() - started) * 1000)
        assert result.success, result.error
    return statistics.median(samples)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--sizes", type=int, nargs="+", default=[100, 1000, 10_000])
    parser.add_argument("--embedder", default="hash")
    parser.add_argument("--repeat", type=int, default=20)
    args = parser.parse_args()
    rows: list[tuple[str, str, float]] = []
    with tempfile.TemporaryDirectory() as folder:
        url = f"sqlite:///{Path(folder) / 'registry.db'}"
        settings = Settings(url=url, embedder=args.embedder, workspace=f"{folder}/ws")
        with tooldb.open(url, settings=settings) as registry:
            add_builtins(registry, ["memory", "shell", "git"])
            stored = 0
            for size in sorted(args.sizes):
                texts = [
                    f"note {i}: {WORDS[i % 20]} {WORDS[(i * 7) % 20]} {WORDS[(i * 13) % 20]} {i}"
                    for i in range(stored, size)
                ]
                for text in texts:  # stored without vectors: the first recall embeds them
                    add_memory(registry.store, registry.tenant, "default", text, [], None, None)
                stored = size
                first = time.perf_counter()
                registry.call("recall", {"query": "warm up"})
                rows.append(("recall, first (embeds new)", f"{size:,}",
                             (time.perf_counter() - first) * 1000))  # fmt: skip
                query = {"query": "which staging server holds the backup?", "k": 5}
                rows.append(("recall", f"{size:,}", timed(registry, "recall", query, args.repeat)))
            remember = {"text": "The staging host is zephyr-3", "tags": ["deploy"]}
            rows.append(("remember", "-", timed(registry, "remember", remember, args.repeat)))
            rows.append(("bash (echo)", "-", timed(registry, "bash", {"command": "echo hi"}, 10)))
            registry.call("git_commit", {"message": "init"})  # git_status needs a repository
            rows.append(("git_status", "-", timed(registry, "git_status", {}, 10)))
    print(f"embedder {args.embedder}; p50 of {args.repeat} calls (bash, git: 10)")
    print(f"{'call':28} {'memories':>9} {'ms':>9}")
    for name, size, ms in rows:
        print(f"{name:28} {size:>9} {ms:9.1f}")


if __name__ == "__main__":
    main()
