"""HNSW graphs kept on disk between processes, so a cold start at 100,000 tools loads
the graph instead of rebuilding it (tens of seconds on two cores).

One file per (store, tenant, embedder) in the user cache dir (``$TOOLDB_CACHE_DIR``):
a JSON header, then the graph. The header holds how many slots the graph covers and
a fingerprint of their (tool id, change_seq) pairs; a fresh index reuses the graph
only if its own first slots have the same fingerprint (nothing covered was changed or
removed since), then appends the rest. Anything else (a stale, foreign or damaged
file) means a rebuild, never a wrong answer. Written to a temporary file and renamed,
so concurrent processes never read half a file.
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import os
import re
import tempfile
from collections.abc import Callable
from pathlib import Path

from ..embedders.local import cache_dir
from . import ann

FORMAT = 1
#: Rewrite the file when the graph has grown by this share since it was written.
RESAVE_GROWTH = 0.1


class GraphCache:
    def __init__(self, path: Path, fingerprint: Callable[[int], str]) -> None:
        self.path = path
        self.fingerprint = fingerprint
        self.saved_slots = 0

    @classmethod
    def for_index(
        cls, store_url: str, tenant: str, embedder_id: str, fingerprint: Callable[[int], str]
    ) -> GraphCache:
        where = re.sub(r"//[^@/]*@", "//", store_url)  # no credentials in the key
        key = hashlib.sha256(
            json.dumps([FORMAT, ann.HnswIndex.build, where, tenant, embedder_id]).encode()
        ).hexdigest()[:24]
        return cls(cache_dir() / "graphs" / f"{key}.hnsw", fingerprint)

    def load(self, dim: int) -> tuple[ann.HnswIndex, int] | None:
        """(graph, slots it covers) when the file matches this index's slots, else None."""
        try:
            with self.path.open("rb") as handle:
                header = json.loads(handle.readline())
                slots = int(header["slots"])
                if header.get("fingerprint") != self.fingerprint(slots):
                    return None
                graph = ann.HnswIndex.from_bytes(handle.read(), dim)
        except (OSError, ValueError, KeyError, TypeError):
            return None
        if len(graph) != slots:
            return None
        self.saved_slots = slots
        return graph, slots

    def save(self, graph: ann.HnswIndex, *, force: bool = False) -> None:
        slots = len(graph)
        if not force and slots <= self.saved_slots * (1 + RESAVE_GROWTH):
            return
        header = json.dumps({"slots": slots, "fingerprint": self.fingerprint(slots)})
        with contextlib.suppress(OSError):  # a cache: failing to write it is not an error
            self.path.parent.mkdir(parents=True, exist_ok=True)
            handle, temporary = tempfile.mkstemp(dir=self.path.parent, suffix=".part")
            try:
                with os.fdopen(handle, "wb") as out:
                    out.write(header.encode() + b"\n")
                    out.write(graph.to_bytes())
                os.replace(temporary, self.path)
                self.saved_slots = slots
            finally:
                with contextlib.suppress(FileNotFoundError):
                    os.unlink(temporary)
