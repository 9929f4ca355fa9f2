"""PostgreSQL engine through psycopg 3 (``postgresql://`` URLs are mapped to it)."""

from __future__ import annotations

from typing import Any

import sqlalchemy as sa
from sqlalchemy.engine import make_url


def create_postgres_engine(url: str, **options: Any) -> sa.Engine:
    parsed = make_url(url)
    if parsed.drivername in {"postgresql", "postgres"}:
        parsed = parsed.set(drivername="postgresql+psycopg")
    return sa.create_engine(parsed, pool_size=8, max_overflow=16, pool_pre_ping=True, **options)


def migration_lock(connection: sa.Connection) -> None:
    """Serialise concurrent ``init`` runs for the length of the transaction."""
    connection.execute(sa.text("SELECT pg_advisory_xact_lock(73112024)"))
