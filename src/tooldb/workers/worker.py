"""A worker process: DBOS launched on the registry's database, listening on the runs
queue, and watching for dead workers to hand their runs to the living.

Liveness is a PostgreSQL session advisory lock on the worker's executor id, held on a
connection of its own for the worker's life. A worker that is killed, crashes or loses
its host loses its session, and with it the lock (at once for a killed process; after
TCP keepalive for a lost host). Every worker looks, once per ``watch_s``, for executors
that own ``PENDING`` runs: one whose lock it can take is dead, and its runs are
re-enqueued (DBOS's ``_recover_pending_workflows``, whose re-enqueue admits exactly one
runner even when several workers recover at once); the next worker to dequeue one
resumes it from its last checkpointed turn and kept call (durable.py).
"""

from __future__ import annotations

import contextlib
import logging
import os
import signal
import socket
import threading
import uuid
from typing import TYPE_CHECKING, Any

import psycopg
from dbos import DBOS

from . import durable, state
from .engine import QUEUE_NAME, SCHEMA, system_database_url, worker_config
from .limits import lock_key

if TYPE_CHECKING:
    from ..registry import Registry

logger = logging.getLogger(__name__)

#: How often a worker looks for dead workers, and how often the queue is polled. A poll
#: costs the worker ~3 ms of CPU and PostgreSQL ~1 on a loaded 2-core machine: an idle
#: worker spent ~90 ms of CPU a second at 0.05 s, ~65-90 at 0.1 (bench/workers.py); a run
#: waits half an interval on average for a free slot to be filled.
WATCH_S = 0.5
QUEUE_POLL_S = 0.1
#: A global limit no deployment reaches (see ``start``).
UNLIMITED = 1_000_000


def new_executor_id() -> str:
    return f"{socket.gethostname()}:{os.getpid()}:{uuid.uuid4().hex[:8]}"


class Worker:
    """Executes submitted runs until stopped (``run_forever``) or ``stop``."""

    def __init__(
        self,
        registry: Registry,
        *,
        concurrency: int = 8,
        tenant_concurrency: int | None = None,
        executor_id: str | None = None,
    ) -> None:
        if concurrency < 1:
            raise ValueError("concurrency must be at least 1")
        self.registry = registry
        self.concurrency = concurrency
        self.tenant_concurrency = tenant_concurrency
        self.executor_id = executor_id or new_executor_id()
        self.url = system_database_url(registry)
        self._stop = threading.Event()
        self._alive: psycopg.Connection[Any] | None = None
        self._watcher: threading.Thread | None = None
        assert durable.tooldb_run is not None  # the workflow is registered on import

    def start(self) -> None:
        self._alive = psycopg.connect(self.url, autocommit=True)
        self._alive.execute("SELECT pg_advisory_lock(%s, 0)", (self._key(self.executor_id),))
        state.install(
            state.WorkerState(
                self.registry.settings, self.executor_id, self.url, self.tenant_concurrency
            )
        )
        DBOS(config=worker_config(self.registry, self.executor_id, self.concurrency))  # type: ignore[arg-type]
        DBOS.launch()
        DBOS.register_queue(
            QUEUE_NAME,
            worker_concurrency=self.concurrency,
            partition_concurrency=self.tenant_concurrency,
            # DBOS claims runs of a partition in a SERIALIZABLE transaction (strict across
            # workers) only when the queue also has a global limit; without one, two
            # workers claiming at once could both start a tenant's last free run.
            global_concurrency=UNLIMITED if self.tenant_concurrency else None,
            polling_interval_sec=QUEUE_POLL_S,
            on_conflict="always_update",
        )
        self._watcher = threading.Thread(
            target=self._watch, name="tooldb-worker-watch", daemon=True
        )
        self._watcher.start()

    def run_forever(self) -> None:
        """Start, then work until SIGTERM/SIGINT; in-flight runs are left to recovery."""
        self.start()
        for sig in (signal.SIGTERM, signal.SIGINT):
            signal.signal(sig, lambda *_: self._stop.set())
        try:
            self._stop.wait()
        finally:
            self.stop()

    def stop(self) -> None:
        self._stop.set()
        DBOS.destroy(workflow_completion_timeout_sec=0)
        if self._alive is not None:
            self._alive.close()  # our lock goes: our unfinished runs are recovered by others
        with contextlib.suppress(RuntimeError):
            state.current().close()
        state.install(None)

    @staticmethod
    def _key(executor_id: str) -> int:
        return lock_key("\0worker", executor_id)

    def _watch(self) -> None:
        while not self._stop.wait(WATCH_S):
            try:
                self.recover_dead()
            except Exception as exc:  # the database is away: look again next time
                logger.warning("could not look for dead workers: %s", exc)

    def recover_dead(self) -> list[str]:
        """Re-enqueue the pending runs of every dead worker; their executor ids."""
        assert self._alive is not None
        owners = [
            row[0]
            for row in self._alive.execute(
                f"SELECT DISTINCT executor_id FROM {SCHEMA}.workflow_status "
                "WHERE status = 'PENDING' AND queue_name IS NOT NULL AND executor_id <> %s",
                (self.executor_id,),
            )
        ]
        dead = []
        for owner in owners:
            key = self._key(owner)
            row = self._alive.execute("SELECT pg_try_advisory_lock(%s, 0)", (key,)).fetchone()
            if row is None or not row[0]:
                continue  # alive (it holds its lock), or another worker is recovering it
            try:
                DBOS._recover_pending_workflows([owner])
                dead.append(owner)
            finally:
                self._alive.execute("SELECT pg_advisory_unlock(%s, 0)", (key,))
        return dead
