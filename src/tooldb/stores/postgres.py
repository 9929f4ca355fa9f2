"""PostgreSQL engine through psycopg 3 (``postgresql://`` URLs are mapped to it)."""

from __future__ import annotations

import time
from typing import Any

import sqlalchemy as sa
from sqlalchemy import event
from sqlalchemy.engine import make_url

#: A pooled connection idle for longer than this is pinged before it is handed out.
PING_IDLE_S = 1.0


def create_postgres_engine(url: str, **options: Any) -> sa.Engine:
    parsed = make_url(url)
    if parsed.drivername in {"postgresql", "postgres"}:
        parsed = parsed.set(drivername="postgresql+psycopg")
    engine = sa.create_engine(parsed, pool_size=8, max_overflow=16, **options)
    _ping_when_idle(engine)
    return engine


def _ping_when_idle(engine: sa.Engine) -> None:
    """``pool_pre_ping``, but only for a connection that sat idle in the pool: one that
    was given back a moment ago is alive, and pinging it cost a round trip on every
    checkout (a dozen per agent run). A failed ping discards the connection and the pool
    hands out a fresh one, as ``pool_pre_ping`` does."""
    dialect = engine.dialect

    @event.listens_for(engine, "checkin")
    def _idle(dbapi_connection: Any, record: Any) -> None:
        record.info["tooldb_idle_since"] = time.monotonic()

    @event.listens_for(engine, "checkout")
    def _ping(dbapi_connection: Any, record: Any, proxy: Any) -> None:
        since = record.info.get("tooldb_idle_since")
        if since is None or time.monotonic() - since < PING_IDLE_S:
            return  # new, or back in the pool a moment ago
        try:
            dialect.do_ping(dbapi_connection)
        except dialect.loaded_dbapi.Error as exc:
            raise sa.exc.DisconnectionError(str(exc)) from exc


def migration_lock(connection: sa.Connection) -> None:
    """Serialise concurrent ``init`` runs for the length of the transaction."""
    connection.execute(sa.text("SELECT pg_advisory_xact_lock(73112024)"))
