"""The built-in groups' rows in the registry (tables ``memories`` and ``run_plans``,
migration 0009): every statement filters by tenant (docs/security.md)."""

from __future__ import annotations

import time
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from typing import Any

import sqlalchemy as sa

from ..errors import StoreError
from ..stores import Store
from ..stores.schema import memories, run_plans


def _engine(store: Store) -> sa.Engine:
    engine = getattr(store, "engine", None)
    if not isinstance(engine, sa.Engine):
        raise StoreError("built-in memory and plans need a SQL store (SQLite or PostgreSQL)")
    return engine


@contextmanager
def transaction(store: Store) -> Iterator[sa.Connection]:
    try:
        with _engine(store).begin() as connection:
            yield connection
    except sa.exc.SQLAlchemyError as exc:
        raise StoreError(f"the registry's store failed: {exc.__class__.__name__}: {exc}") from None


# -- plans -------------------------------------------------------------------------------------
def get_plan(store: Store, tenant: str, run_id: str) -> list[dict[str, Any]] | None:
    query = sa.select(run_plans.c.steps).where(
        run_plans.c.tenant == tenant, run_plans.c.run_id == run_id
    )
    with transaction(store) as connection:
        steps = connection.execute(query).scalar()
    return list(steps) if steps is not None else None


def put_plan(store: Store, tenant: str, run_id: str, steps: list[dict[str, Any]]) -> None:
    key = (run_plans.c.tenant == tenant) & (run_plans.c.run_id == run_id)
    with transaction(store) as connection:
        changed = connection.execute(
            run_plans.update().where(key).values(steps=steps, updated_at=time.time())
        ).rowcount
        if not changed:
            connection.execute(
                run_plans.insert().values(
                    tenant=tenant, run_id=run_id, steps=steps, updated_at=time.time()
                )
            )


# -- memories ----------------------------------------------------------------------------------
def add_memory(
    store: Store,
    tenant: str,
    namespace: str,
    text: str,
    tags: Sequence[str],
    embedder: str | None,
    vector: bytes | None,
) -> int:
    values = {
        "tenant": tenant, "namespace": namespace, "text": text, "tags": list(tags),
        "embedder": embedder, "vector": vector, "created_at": time.time(),
    }  # fmt: skip
    with transaction(store) as connection:
        key = connection.execute(memories.insert().values(**values)).inserted_primary_key
        assert key is not None
        return int(key[0])


def list_memories(store: Store, tenant: str, namespace: str, limit: int) -> list[dict[str, Any]]:
    query = (
        sa.select(memories)
        .where(memories.c.tenant == tenant, memories.c.namespace == namespace)
        .order_by(memories.c.id.desc())
        .limit(limit)
    )
    with transaction(store) as connection:
        return [dict(row._mapping) for row in connection.execute(query)]


def memory_signature(store: Store, tenant: str, namespace: str) -> tuple[Any, ...]:
    """What changes whenever a namespace's memories do: their count and newest id (ids
    are never reused), read from the (tenant, namespace) index alone."""
    query = sa.select(sa.func.count(), sa.func.max(memories.c.id)).where(
        memories.c.tenant == tenant, memories.c.namespace == namespace
    )
    with transaction(store) as connection:
        return tuple(connection.execute(query).one())


def set_vectors(
    store: Store, tenant: str, embedder: str, vectors: Sequence[tuple[int, bytes]]
) -> None:
    """Store recomputed vectors, in one statement executed for many rows."""
    if not vectors:
        return
    query = (
        memories.update()
        .where(memories.c.tenant == tenant, memories.c.id == sa.bindparam("memory_id"))
        .values(embedder=embedder, vector=sa.bindparam("new_vector"))
    )
    with transaction(store) as connection:
        connection.execute(query, [{"memory_id": i, "new_vector": v} for i, v in vectors])


def delete_memory(store: Store, tenant: str, namespace: str, memory_id: int) -> bool:
    query = memories.delete().where(
        memories.c.tenant == tenant, memories.c.namespace == namespace, memories.c.id == memory_id
    )
    with transaction(store) as connection:
        return bool(connection.execute(query).rowcount)
