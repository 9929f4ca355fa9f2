"""``search_sessions``: semantic and lexical search over note chunks.

Each note is cut into chunks (its lines: one section each) at install. A search ranks
chunks twice, by BM25 over words and by cosine similarity with the registry's embedder
(vectors computed once per chunk and embedder, kept in the pack's database), and fuses
the two rankings by reciprocal rank (k = 60), so an exact term ("PCL-5") and a
paraphrase ("nightmares got better") both find their sessions. Without an embedder
(setting ``embedder = none``) the ranking is lexical only.
"""

from __future__ import annotations

import math
import re
from collections import Counter
from typing import Any

import numpy as np

from ...context import current_registry
from ...decorators import tool
from ...errors import UsageError
from . import store
from .history import where

RRF_K = 60
_WORD = re.compile(r"[a-z0-9]+(?:-[a-z0-9]+)*")
_STOP = frozenset(
    [
        "a",
        "an",
        "and",
        "are",
        "as",
        "at",
        "be",
        "by",
        "for",
        "from",
        "has",
        "have",
        "her",
        "his",
        "in",
        "is",
        "it",
        "of",
        "on",
        "or",
        "she",
        "he",
        "the",
        "to",
        "was",
        "with",
    ]
)


def words(text: str) -> list[str]:
    return [w for w in _WORD.findall(text.lower()) if w not in _STOP]


def bm25(query: list[str], docs: list[list[str]], k1: float = 1.5, b: float = 0.75) -> list[float]:
    if not docs:
        return []
    avg = sum(len(d) for d in docs) / len(docs) or 1.0
    df = Counter(w for d in docs for w in set(d))
    scores = []
    for doc in docs:
        counts = Counter(doc)
        score = 0.0
        for word in set(query):
            if word in counts:
                idf = math.log(1 + (len(docs) - df[word] + 0.5) / (df[word] + 0.5))
                tf = counts[word]
                score += idf * tf * (k1 + 1) / (tf + k1 * (1 - b + b * len(doc) / avg))
        scores.append(score)
    return scores


def _semantic(query: str, rows: list[dict[str, Any]], url: str, tenant: str) -> list[float] | None:
    embedder = current_registry().embedder
    if embedder is None:
        return None
    missing = [r for r in rows if r["embedder"] != embedder.id or r["vector"] is None]
    if missing:
        vectors = embedder.embed([r["text"] for r in missing])
        for row, vector in zip(missing, vectors, strict=True):
            row["vector"] = np.asarray(vector, dtype=np.float32).tobytes()
            row["embedder"] = embedder.id
        store.store_vectors(url, tenant, embedder.id, missing)
    matrix = np.stack([np.frombuffer(r["vector"], dtype=np.float32) for r in rows])
    return [float(x) for x in matrix @ embedder.embed([query])[0]]


def _ranks(scores: list[float]) -> dict[int, int]:
    order = sorted((i for i, s in enumerate(scores) if s > 0), key=lambda i: -scores[i])
    return {index: rank for rank, index in enumerate(order, 1)}


@tool(category="clinical")
def search_sessions(query: str, patient_id: str | None = None, limit: int = 5) -> dict[str, Any]:
    """Search therapy notes by meaning and by words; returns the best matching passages
    with their session id and date, best first (one hit per session).

    Use it to find when something was discussed ("first imaginal exposure", "cannabis",
    "nightmares improving"). Cite the session ids it returns.

    Args:
        query: What to look for, in plain words.
        patient_id: Only this patient's sessions, like "P03" (default: every patient).
        limit: How many sessions to return (1 to 20).
    """
    if not query.strip():
        raise UsageError("query must not be empty")
    if not 1 <= limit <= 20:
        raise UsageError(f"limit must be from 1 to 20, got {limit}")
    url, tenant = where("search_sessions")
    rows = store.all_chunks(url, tenant, patient_id)
    lexical = _ranks(bm25(words(query), [words(r["text"]) for r in rows]))
    semantic_scores = _semantic(query, rows, url, tenant) if rows else None
    semantic = _ranks(semantic_scores) if semantic_scores is not None else {}
    fused: dict[int, float] = {}
    for ranking in (lexical, semantic):
        for index, rank in ranking.items():
            fused[index] = fused.get(index, 0.0) + 1 / (RRF_K + rank)
    hits, seen = [], set()
    for index in sorted(fused, key=lambda i: -fused[i]):
        row = rows[index]
        if row["session_id"] in seen:
            continue
        seen.add(row["session_id"])
        hits.append(
            {
                "session_id": row["session_id"],
                "patient_id": row["patient_id"],
                "session_date": row["session_date"].isoformat(),
                "passage": row["text"],
                "score": round(fused[index], 4),
                "lexical_rank": lexical.get(index),
                "semantic_rank": semantic.get(index),
            }
        )
        if len(hits) == limit:
            break
    return {"query": query, "mode": "hybrid" if semantic else "lexical", "hits": hits}
