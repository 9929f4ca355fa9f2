"""DBOS as tooldb's durable-execution engine: its system database lives in the registry's
own PostgreSQL database (schema ``dbos``), so workers add no server beside the one
tooldb already uses. ``dbos`` is imported here only, and only when a worker or a
submitter asks for it: ``import tooldb`` never loads it (the ``workers`` extra)."""

from __future__ import annotations

import threading
from typing import TYPE_CHECKING, Any

from sqlalchemy.engine import make_url

from ..errors import UsageError

if TYPE_CHECKING:
    from dbos import DBOSClient

    from ..registry import Registry

#: The workflow every submitted run is, and the queue runs wait on.
WORKFLOW_NAME = "tooldb_run"
QUEUE_NAME = "tooldb_runs"
#: One version for every worker and submitter: DBOS recovers only workflows of its own
#: application version, and a version computed from code would differ between hosts
#: whose installs differ in paths.
APP_VERSION = "tooldb-workers-2"
APP_NAME = "tooldb"
SCHEMA = "dbos"


def system_database_url(registry: Registry) -> str:
    """The registry's PostgreSQL URL (password kept) as DBOS wants it; a clear error for
    SQLite, where there are no workers: ``tooldb run`` runs tasks in the process."""
    store_url = getattr(registry.store, "url", None) or registry.settings.resolved_url
    engine = getattr(registry.store, "engine", None)
    url = engine.url if engine is not None else make_url(str(store_url))
    if not url.drivername.startswith("postgresql"):
        raise UsageError(
            "submitted runs and workers need a PostgreSQL registry (TOOLDB_URL="
            "postgresql://...); this one is "
            f"{url.drivername}: run the task in this process with `tooldb run` instead"
        )
    return str(url.set(drivername="postgresql").render_as_string(hide_password=False))


def require_dbos() -> None:
    try:
        import dbos  # noqa: F401
    except ImportError as exc:  # pragma: no cover - the extra is part of dev
        raise UsageError("workers need the dbos package: pip install 'tooldb[workers]'") from exc


_CLIENTS: dict[str, DBOSClient] = {}
_CLIENTS_LOCK = threading.Lock()
_MIGRATED: set[str] = set()


def migrate(url: str) -> None:
    """Create or upgrade DBOS's tables in the registry database (once per process)."""
    if url in _MIGRATED:
        return
    from dbos import DBOS

    DBOS.migrate(url, schema=SCHEMA)
    _MIGRATED.add(url)


def client_for(registry: Registry) -> DBOSClient:
    """A DBOS client on the registry's database: enqueues, reads and cancels runs without
    running any (what ``submit``, ``wait`` and ``tooldb runs`` use)."""
    require_dbos()
    url = system_database_url(registry)
    with _CLIENTS_LOCK:
        client = _CLIENTS.get(url)
        if client is None:
            from dbos import DBOSClient

            migrate(url)
            client = _CLIENTS[url] = DBOSClient(
                system_database_url=url,
                dbos_system_schema=SCHEMA,
                system_database_pool_size=4,
                application_name=APP_NAME,
            )
        return client


def worker_config(
    registry: Registry, executor_id: str, concurrency: int, *, log_level: str = "WARNING"
) -> dict[str, Any]:
    """The DBOS configuration of one worker process."""
    return {
        "name": APP_NAME,
        "system_database_url": system_database_url(registry),
        "dbos_system_schema": SCHEMA,
        "application_version": APP_VERSION,
        "executor_id": executor_id,
        # the queue thread, steps' checkpoints and runs waiting on results share it
        "sys_db_pool_size": concurrency + 6,
        "log_level": log_level,
        "notification_listener_polling_interval_sec": 0.1,
        # No ping before each checkout: DBOS retries every system-database operation
        # that fails on a lost connection (db_retry), so the ping saved nothing but a
        # round trip per checkpoint (two per step).
        "db_engine_kwargs": {"pool_pre_ping": False},
    }
