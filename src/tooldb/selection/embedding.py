"""Keeping tool embeddings current: embed what is pending for an embedder, in batches.

Vectors are derived data: registration commits the tools first, then this fills
their vectors. If it is interrupted (or the embedder is down), nothing is lost:
``tooldb embed`` picks up exactly the tools still pending, and selection ranks
them by words meanwhile.
"""

from __future__ import annotations

import numpy as np

from ..embedders import Embedder
from ..stores import Store
from ..types import Progress

__all__ = ["BATCH", "Progress", "embed_pending"]


BATCH = 256


def embed_pending(
    store: Store,
    tenant: str,
    embedder: Embedder,
    *,
    total: int | None = None,
    progress: Progress | None = None,
    batch: int = BATCH,
) -> int:
    """Embed every tool of the tenant without a vector from ``embedder``; returns how many."""
    done = 0
    after = 0
    while True:
        rows = store.pending_embeddings(tenant, embedder.id, after_id=after, limit=batch)
        if not rows:
            return done
        vectors = np.asarray(embedder.embed([text for _, text in rows]), dtype=np.float32)
        payload = [(tool_id, text, vectors[i].tobytes()) for i, (tool_id, text) in enumerate(rows)]
        store.put_embeddings(tenant, embedder.id, int(vectors.shape[1]), payload)
        done += len(rows)
        after = rows[-1][0]
        if progress is not None:
            progress(done, total)
