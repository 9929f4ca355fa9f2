"""Skill selection: the skills most likely to help with a task, each score explained.

Skills are few (hundreds, not 100,000s), so this is exact and simple: every enabled
skill is scored. Its text (name, description, the start of its instructions) gets a
vector from the registry's embedder, kept in process by the skill's content hash, so
an unchanged skill is never embedded again and a new or changed one is embedded on
the next selection; BM25 runs on a small in-memory index of the same texts, rebuilt
only when the set of skills changes. The two are fused exactly as tool selection
fuses them (z-scores, the task's lexical share, the vectors' check of the words'
best match: retrieval.py, select.py), so a skill's scores read like a tool's.
Skills have no call statistics: the final score is the relevance. The vectors are also
kept in the store (a ``VectorVault``, migration 0014), so a new process loads them
instead of embedding hundreds of skills again on its first selection.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable, Collection
from dataclasses import dataclass

import numpy as np
from pydantic import BaseModel, Field

from ..embedders import Embedder
from .documents import split_name
from .lexical import BM25Index
from .retrieval import MIN_DENSE_SPREAD, MIN_LEXICAL_SPREAD, Mix, Spread, blend
from .select import Z_SPAN, Ranker, Weights

#: How much of a skill's instructions stands for it in retrieval (their opening says
#: what the skill is for; the rest is how).
INSTRUCTIONS_CHARS = 300


class SkillCandidate(BaseModel):
    """One selected skill with the components of its score (as a tool's Candidate):
    ``dense`` the cosine of task and skill (None without an embedder), ``lexical`` the
    BM25 score, ``relevance`` their fusion scaled to 0-1, ``final`` what ranks it."""

    name: str
    rank: int
    final: float
    relevance: float
    dense: float | None
    lexical: float
    description: str = ""


class SkillSelection(BaseModel):
    """What ``Registry.select_skills`` returns."""

    task: str
    candidates: list[SkillCandidate]
    embedder: str | None = None
    notes: list[str] = Field(default_factory=list)
    duration_ms: float = 0.0

    @property
    def names(self) -> list[str]:
        return [candidate.name for candidate in self.candidates]


@dataclass(frozen=True)
class SkillText:
    """What a skill is searched by, and the hash its vector is remembered under."""

    name: str
    description: str
    text: str
    content_hash: str

    @classmethod
    def of(cls, name: str, description: str, instructions: str, content_hash: str) -> SkillText:
        opening = " ".join(instructions[:INSTRUCTIONS_CHARS].split())
        text = f"{name} ({split_name(name)}). {description.strip()}. {opening}".strip()
        return cls(name, description, text, content_hash)


@dataclass(frozen=True)
class VectorVault:
    """Where skill vectors outlive the process (the store, for one tenant and embedder):
    ``load`` the float32 bytes of the content hashes it has, ``save`` new ones."""

    load: Callable[[list[str]], dict[str, bytes]]
    save: Callable[[dict[str, bytes]], None]


class SkillRanker:
    """Ranks a tenant's skills for a task; holds the skills' vectors and BM25 index."""

    def __init__(
        self, embedder: Embedder | None, weights: Weights, vault: VectorVault | None = None
    ) -> None:
        self.embedder = embedder
        self.vault = vault
        self.ranker = Ranker(weights)
        #: Skill vectors by content hash (the embedder is fixed for this ranker).
        self.vectors: dict[str, np.ndarray] = {}
        #: Texts embedded so far (what tests and the benchmark check caching by).
        self.embedded = 0
        self._texts: dict[str, SkillText] = {}
        self._lexical: tuple[tuple[str, ...], BM25Index] | None = None
        self._lock = threading.Lock()

    def text(self, name: str, description: str, instructions: str, content_hash: str) -> SkillText:
        """A skill's search text, made once per content hash."""
        known = self._texts.get(content_hash)
        if known is None or known.name != name:
            known = self._texts[content_hash] = SkillText.of(
                name, description, instructions, content_hash
            )
        return known

    def rank(
        self, task: str, every: list[SkillText], k: int, names: Collection[str] | None = None
    ) -> SkillSelection:
        """The ``k`` best of ``every`` (a tenant's enabled skills), or of those among
        ``names``: scored against the allowed ones only, as a filtered tool selection."""
        started = time.perf_counter()
        embedder_id = self.embedder.id if self.embedder is not None else None
        notes = [] if self.embedder is not None else ["lexical only: no embedder"]
        every = sorted(every, key=lambda skill: skill.name)  # a stable slot order
        allowed = [i for i, s in enumerate(every) if names is None or s.name in names]
        if not allowed or k == 0:
            return SkillSelection(task=task, candidates=[], embedder=embedder_id, notes=notes)
        with self._lock:
            self._forget_stale(every)
            matched = self._bm25(every).match(task)
            dense = None
            if self.embedder is not None:
                vectors = self._vectors(every)[allowed]
                query = np.asarray(self.embedder.embed([task])[0], dtype=np.float32)
                dense = (vectors @ query).astype(np.float32, copy=False)
        slots = np.asarray(allowed, dtype=np.intp)
        lexical = matched.at(slots).astype(np.float32, copy=False)
        skills = [every[i] for i in allowed]
        best_at = int(lexical.argmax())
        best_lexical = float(lexical[best_at])
        w = self.ranker.w
        mix = Mix(w.lexical_share, w.twin_cosine, w.unrelated_z,
                  w.unrelated_share)  # fmt: skip
        lexical_spread = Spread.of(lexical, MIN_LEXICAL_SPREAD * best_lexical)
        dense_spread = Spread.of(dense, MIN_DENSE_SPREAD) if dense is not None else None
        share = mix.share
        if dense is not None and dense_spread is not None and best_lexical > 0:
            judged = None  # as retrieval.exact_pool: vectors that barely differ do not judge
            if dense_spread.spread > MIN_DENSE_SPREAD:
                judged = (float(dense[best_at]) - dense_spread.mean) / dense_spread.spread
            share = mix.vetted(judged)
        fused = blend(dense, lexical, dense_spread, lexical_spread, share)
        relevance = np.exp((fused - float(fused.max())) / Z_SPAN)
        order = sorted(range(len(skills)), key=lambda i: (-float(fused[i]), skills[i].name))
        candidates = [
            SkillCandidate(
                name=skills[i].name,
                rank=rank,
                final=round(float(relevance[i]), 6),
                relevance=round(float(relevance[i]), 6),
                dense=round(float(dense[i]), 6) if dense is not None else None,
                lexical=round(float(lexical[i]), 6),
                description=skills[i].description,
            )
            for rank, i in enumerate(order[:k], start=1)
        ]
        return SkillSelection(
            task=task,
            candidates=candidates,
            embedder=embedder_id,
            notes=notes,
            duration_ms=(time.perf_counter() - started) * 1000,
        )

    def _bm25(self, skills: list[SkillText]) -> BM25Index:
        """The BM25 index of these skills (rebuilt only when they change)."""
        key = tuple(f"{skill.name}\0{skill.content_hash}" for skill in skills)
        if self._lexical is None or self._lexical[0] != key:
            index = BM25Index()
            for slot, skill in enumerate(skills):
                index.add(slot, skill.text)
            self._lexical = (key, index)
        return self._lexical[1]

    def _forget_stale(self, every: list[SkillText]) -> None:
        """Many skills changed or went since: drop what is kept of the old versions."""
        if max(len(self.vectors), len(self._texts)) > 2 * len(every) + 64:
            wanted = {skill.content_hash for skill in every}
            self.vectors = {h: v for h, v in self.vectors.items() if h in wanted}
            self._texts = {h: t for h, t in self._texts.items() if h in wanted}

    def _vectors(self, skills: list[SkillText]) -> np.ndarray:
        """One row per skill: remembered, else loaded from the vault, else embedded now
        (and saved to the vault for the next process)."""
        assert self.embedder is not None
        missing = {s.content_hash: s.text for s in skills if s.content_hash not in self.vectors}
        if missing and self.vault is not None:
            dim = self.embedder.dim
            for content_hash, blob in self.vault.load(list(missing)).items():
                vector = np.frombuffer(blob, dtype=np.float32)
                if vector.shape == (dim,):  # anything else is not this embedder's
                    self.vectors[content_hash] = vector
                    del missing[content_hash]
        if missing:
            rows = self.embedder.embed(list(missing.values()))
            self.embedded += len(missing)
            fresh: dict[str, bytes] = {}
            for content_hash, row in zip(missing, rows, strict=True):
                vector = self.vectors[content_hash] = np.asarray(row, dtype=np.float32)
                fresh[content_hash] = vector.tobytes()
            if self.vault is not None:
                self.vault.save(fresh)
        return np.stack([self.vectors[skill.content_hash] for skill in skills])
