"""Memory group: ``remember``, ``recall`` and ``forget``: long-term memory across runs
and sessions, stored in the registry (table ``memories``), per tenant and per agent
namespace (the agent of the run, else ``default``). Recall fuses a semantic ranking
(cosine under the registry's embedder; vectors are computed when a memory is stored
and recomputed when the embedder changed) and a lexical one (the BM25 of tool
selection) by reciprocal rank, so an exact name and a paraphrase both find a memory.
Served by ``tooldb mcp`` like any tool: any MCP client gets a memory server."""

from __future__ import annotations

import threading
from collections import OrderedDict
from dataclasses import dataclass
from typing import Any

import numpy as np

from ..decorators import tool
from ..errors import UsageError
from ..selection.lexical import BM25Index
from .common import registry_settings, run_context_agent
from .rows import add_memory, delete_memory, list_memories, memory_signature, set_vectors

GROUP = {"builtin": "memory"}
MAX_TEXT_CHARS = 20_000
MAX_TAGS = 20
#: How many of a namespace's newest memories recall searches.
MAX_SEARCHED = 20_000
#: Reciprocal rank fusion's constant (Cormack et al. 2009): ranks, not raw scores, are
#: fused, as BM25's scale and the cosine's have nothing in common.
RRF_K = 60
#: A semantic-only match this far below the best cosine is noise, not a memory.
MIN_COSINE = 0.2


def _namespace() -> str:
    _, agent = run_context_agent()
    return agent or "default"


def _tags(tags: list[str] | None) -> list[str]:
    tags = tags or []
    if len(tags) > MAX_TAGS or not all(isinstance(t, str) and 0 < len(t) <= 100 for t in tags):
        raise UsageError(f"'tags' must be at most {MAX_TAGS} short non-empty strings")
    return sorted({t.strip().lower() for t in tags if t.strip()})


def _vectors(texts: list[str]) -> tuple[str | None, np.ndarray | None]:
    registry, _ = registry_settings()
    embedder = registry.embedder
    if embedder is None or not texts:
        return None, None
    vectors = np.asarray(embedder.embed(texts), dtype=np.float32)
    norms = np.linalg.norm(vectors, axis=1, keepdims=True)
    return embedder.id, vectors / np.maximum(norms, 1e-12)


@tool(category="memory", metadata=GROUP)
def remember(text: str, tags: list[str] | None = None) -> dict[str, Any]:
    """Save a fact, decision or preference to long-term memory, so a later run (or
    another session) can recall it. Use it for what will matter again: names, settings
    found, user preferences, results of long work. Returns the memory's id.

    Args:
        text: What to remember, as a self-contained sentence.
        tags: Optional labels to filter by later, e.g. ["project-x", "preference"].
    """
    if not isinstance(text, str) or not text.strip():
        raise UsageError("'text' must be a non-empty string: what to remember")
    if len(text) > MAX_TEXT_CHARS:
        raise UsageError(f"'text' must be at most {MAX_TEXT_CHARS} characters, got {len(text)}")
    registry, _ = registry_settings()
    clean_tags = _tags(tags)
    embedder_id, vectors = _vectors([text.strip()])
    vector = vectors[0].tobytes() if vectors is not None else None
    namespace = _namespace()
    memory_id = add_memory(
        registry.store, registry.tenant, namespace, text.strip(), clean_tags, embedder_id, vector
    )
    return {"id": memory_id, "namespace": namespace, "tags": clean_tags}


@tool(category="memory", metadata=GROUP)
def recall(query: str, k: int = 5, tags: list[str] | None = None) -> dict[str, Any]:
    """Search long-term memory for what was remembered earlier (in this or earlier runs)
    about a subject, by meaning and by words. Use it at the start of a task that may
    build on earlier work. Returns the best memories with id, text, tags and score.

    Args:
        query: What you want to know, in a few words or a question.
        k: How many memories at most (1 to 50).
        tags: Only memories carrying all these tags.
    """
    if not isinstance(query, str) or not query.strip():
        raise UsageError("'query' must be a non-empty string")
    if not 1 <= k <= 50:
        raise UsageError(f"'k' must be from 1 to 50, got {k}")
    wanted = set(_tags(tags))
    found = _namespace_index(_namespace())
    rows = found.rows
    if not rows:
        return {"memories": [], "searched": 0}
    allowed = (
        np.array([wanted <= set(row["tags"] or []) for row in rows], dtype=bool)
        if wanted
        else np.ones(len(rows), dtype=bool)
    )
    fused = np.zeros(len(rows))
    words = found.lexical.scores(query, len(rows))
    _add_ranks(fused, np.flatnonzero(allowed & (words > 0)), words)
    if found.matrix is not None:
        _, query_vectors = _vectors([query])
        assert query_vectors is not None
        cosines = found.matrix @ query_vectors[0]
        best = float(cosines[allowed].max()) if allowed.any() else 0.0
        near = allowed & ((cosines >= max(MIN_COSINE, best - 0.35)) | (words > 0))
        _add_ranks(fused, np.flatnonzero(near), cosines)
    hits = np.flatnonzero(fused > 0)
    chosen = hits[np.lexsort((-found.ids[hits], -fused[hits]))][:k]  # best, then newest
    return {
        "memories": [
            {
                "id": rows[s]["id"],
                "text": rows[s]["text"],
                "tags": rows[s]["tags"],
                "created_at": rows[s]["created_at"],
                "score": round(float(fused[s]) * (RRF_K + 1) / 2, 4),  # 1.0: first by both
            }
            for s in (int(slot) for slot in chosen)
        ],
        "searched": int(allowed.sum()),
    }


@dataclass
class _Indexed:
    """A namespace's memories ready to rank: rows, their BM25 index, their unit vectors
    under ``embedder`` (None without one), and the signature they were read at."""

    signature: tuple[Any, ...]
    embedder: str | None
    rows: list[dict[str, Any]]
    ids: np.ndarray
    lexical: BM25Index
    matrix: np.ndarray | None


#: (store, tenant, namespace) -> the namespace's index, reused while its signature (one
#: cheap aggregate query per recall) is unchanged: building BM25 and reading every row
#: was most of a recall (bench/builtins.py).
_INDEXES: OrderedDict[tuple[int, str, str], _Indexed] = OrderedDict()
_INDEXES_KEPT = 32
_LOCK = threading.Lock()


def _add_ranks(fused: np.ndarray, slots: np.ndarray, scores: np.ndarray) -> None:
    """Reciprocal-rank fusion: each slot of ``slots`` gains 1/(RRF_K + its rank by
    ``scores``, best first)."""
    order = slots[np.argsort(-scores[slots], kind="stable")]
    fused[order] += 1.0 / (RRF_K + 1 + np.arange(len(order)))


def _namespace_index(namespace: str) -> _Indexed:
    registry, _ = registry_settings()
    embedder = registry.embedder
    embedder_id = embedder.id if embedder is not None else None
    key = (id(registry.store), registry.tenant, namespace)
    signature = memory_signature(registry.store, registry.tenant, namespace)
    with _LOCK:
        cached = _INDEXES.get(key)
        if cached is not None and (cached.signature, cached.embedder) == (signature, embedder_id):
            _INDEXES.move_to_end(key)
            return cached
    rows = list_memories(registry.store, registry.tenant, namespace, MAX_SEARCHED)
    lexical = BM25Index()
    for slot, row in enumerate(rows):
        lexical.add(slot, row["text"] + " " + " ".join(row["tags"] or []))
    matrix = _matrix(rows) if embedder_id is not None else None
    ids = np.array([row["id"] for row in rows], dtype=np.int64)
    built = _Indexed(signature, embedder_id, rows, ids, lexical, matrix)
    with _LOCK:
        _INDEXES[key] = built
        while len(_INDEXES) > _INDEXES_KEPT:
            _INDEXES.popitem(last=False)
    return built


def _matrix(rows: list[dict[str, Any]]) -> np.ndarray | None:
    """The rows' unit vectors (stale or missing ones computed and stored first)."""
    registry, _ = registry_settings()
    embedder = registry.embedder
    if embedder is None or not rows:
        return None
    stale = [i for i, row in enumerate(rows) if row["embedder"] != embedder.id or not row["vector"]]
    if stale:
        _, fresh = _vectors([rows[i]["text"] for i in stale])
        assert fresh is not None
        updates = []
        for i, vector in zip(stale, fresh, strict=True):
            rows[i]["vector"] = vector.tobytes()
            updates.append((rows[i]["id"], rows[i]["vector"]))
        set_vectors(registry.store, registry.tenant, embedder.id, updates)
    return np.stack([np.frombuffer(row["vector"], dtype=np.float32) for row in rows])


@tool(category="memory", metadata=GROUP)
def forget(id: int) -> dict[str, Any]:
    """Delete one memory by its id (as remember or recall returned it), e.g. when it is
    wrong or out of date. Returns whether it was deleted.

    Args:
        id: The memory's id.
    """
    if isinstance(id, bool) or not isinstance(id, int) or id < 1:
        raise UsageError(f"'id' must be a memory id (a positive integer), got {id!r}")
    registry, _ = registry_settings()
    if not delete_memory(registry.store, registry.tenant, _namespace(), id):
        raise UsageError(f"'id' {id}: no such memory in this namespace")
    return {"id": id, "deleted": True}
