"""Freed native memory goes back to the system after a large load (native_memory.py)."""

from __future__ import annotations

import subprocess
import sys

SCRIPT = """
import gc
from pathlib import Path
from tooldb.selection.native_memory import release_freed_memory

def rss_mb():
    for line in Path("/proc/self/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1]) / 1024

blocks = [bytes(4000) + bytes([i % 256]) for i in range(60_000)]  # ~240 MB of heap
kept = blocks[-1]
del blocks
gc.collect()
before = rss_mb()
release_freed_memory()
print(before, rss_mb())
"""


def test_a_freed_heap_is_handed_back() -> None:
    """Blocks under glibc's mmap threshold stay resident once freed, until the trim."""
    out = subprocess.run([sys.executable, "-c", SCRIPT], capture_output=True, text=True)
    assert out.returncode == 0, out.stderr
    before, after = (float(x) for x in out.stdout.split())
    assert before - after > 100, (before, after)
