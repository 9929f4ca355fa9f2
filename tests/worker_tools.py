"""Tools for tests/test_workers.py that count their side effects in a file named by
$WORKER_EFFECTS (one line per effect: what ran, in which process, when), so a test
sees every execution, whichever worker process ran it."""

from __future__ import annotations

import json
import os
import time


def _write(entry: dict[str, object]) -> None:
    with open(os.environ["WORKER_EFFECTS"], "a", encoding="utf-8") as out:
        out.write(json.dumps(entry) + "\n")  # one short write: atomic with O_APPEND


def effect(tag: str = "", turn: int = 0, call: int = 0, ms: int = 0, size: int = 0) -> str:
    """Waits ``ms``, then writes its effect: the call is done (its output padded with
    ``size`` dots: longer than a record's preview, say)."""
    time.sleep(ms / 1000)
    _write({"key": f"{tag}/{turn}/{call}", "pid": os.getpid()})
    return f"effect {tag}/{turn}/{call}" + "." * size


def overlap(tag: str = "", turn: int = 0, call: int = 0, ms: int = 50) -> str:
    """Records when it ran (for the overlap of calls across workers)."""
    start = time.time()
    time.sleep(ms / 1000)
    _write({"key": f"{tag}/{turn}/{call}", "pid": os.getpid(), "start": start,
            "end": time.time()})  # fmt: skip
    return "ok"


def transfer(tag: str = "", turn: int = 0, call: int = 0, ms: int = 3000) -> str:
    """A side effect that must not happen twice: it says it began, then takes ``ms``."""
    _write({"key": f"{tag}/{turn}/{call}", "pid": os.getpid(), "began": True})
    time.sleep(ms / 1000)
    return "transferred"
