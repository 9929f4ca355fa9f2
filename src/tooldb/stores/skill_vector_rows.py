"""The store's skill vectors (``SQLStore`` mixin): each skill's embedding by content hash,
so a process loads them instead of embedding every skill again (selection/skills.py)."""

from __future__ import annotations

import time
from collections.abc import Callable, Collection, Mapping
from contextlib import AbstractContextManager

import sqlalchemy as sa
from sqlalchemy.dialects import postgresql, sqlite

from .schema import skill_vectors, skills


class SkillVectorRows:
    """Mixin of SQLStore (which provides ``engine``, ``_reader`` and ``_guard``)."""

    engine: sa.Engine
    _reader: sa.Engine
    _guard: Callable[[], AbstractContextManager[None]]

    def skill_vectors(
        self, tenant: str, embedder: str, hashes: Collection[str]
    ) -> dict[str, bytes]:
        """The stored vectors (float32 bytes) of these content hashes under ``embedder``."""
        if not hashes:
            return {}
        table = skill_vectors
        query = sa.select(table.c.content_hash, table.c.vector).where(
            table.c.tenant == tenant,
            table.c.embedder == embedder,
            table.c.content_hash.in_(list(hashes)),
        )
        with self._guard(), self._reader.connect() as conn:
            return {row[0]: bytes(row[1]) for row in conn.execute(query)}

    def put_skill_vectors(
        self, tenant: str, embedder: str, dim: int, vectors: Mapping[str, bytes]
    ) -> None:
        """Keep these vectors (a hash stored already keeps its first vector: the same
        content under the same embedder), and drop the vectors of content hashes no
        skill of the tenant has any more, in one transaction."""
        if not vectors:
            return
        table = skill_vectors
        dialect = sqlite if self.engine.dialect.name == "sqlite" else postgresql
        now = time.time()
        rows = [
            {"tenant": tenant, "embedder": embedder, "content_hash": content_hash,
             "dim": dim, "vector": vector, "embedded_at": now}
            for content_hash, vector in vectors.items()
        ]  # fmt: skip
        current = sa.select(skills.c.content_hash).where(skills.c.tenant == tenant)
        with self._guard(), self.engine.begin() as conn:
            conn.execute(dialect.insert(table).on_conflict_do_nothing(), rows)
            conn.execute(
                table.delete().where(table.c.tenant == tenant, table.c.content_hash.not_in(current))
            )
