"""Run leases: how a run whose process died is told from one still under way.

A run's row carries its ``owner`` (host:pid:nonce) and ``lease_expires_at``. While
runs of this process are under way, one daemon thread per store renews their leases
every quarter of ``agent_run_lease_s`` in one UPDATE. A process that is killed, crashes
or loses its machine stops renewing, so its ``running`` runs' leases expire, and the next
``tooldb.open`` (or ``Registry.sweep_runs``, ``tooldb runs``) marks them
``interrupted``. This works across processes and machines sharing one database (a pid
check would only work on one host); the price is that a dead run is seen as such up to
one lease after its death, and a process stalled longer than a lease (stopped, swapped
out) has its runs marked ``interrupted`` although it may still end them (its final
status then replaces ``interrupted``).
"""

from __future__ import annotations

import logging
import os
import socket
import threading
import time
import uuid
import weakref
from typing import Any

from ..stores import Store

logger = logging.getLogger(__name__)

#: Renewals per lease: a lease outlives three missed renewals.
RENEWALS_PER_LEASE = 4


def owner_id() -> str:
    """Who runs a run: the host, the process and a nonce (pids are reused)."""
    return f"{socket.gethostname()}:{os.getpid()}:{_NONCE}"


class RunLeases:
    """The leases of one store's runs in this process, renewed by one daemon thread that
    runs while there are runs (and stops when there are none)."""

    def __init__(self, store: Store) -> None:
        self._store = weakref.ref(store)
        self._lock = threading.Lock()
        #: run id -> (its lease in seconds, the object whose life bounds the run's)
        self._runs: dict[str, tuple[float, weakref.ref[Any]]] = {}
        self._wake = threading.Event()
        self._thread: threading.Thread | None = None
        self._interval = 0.0  # what the thread waits between renewals

    def hold(self, run_id: str, lease_s: float, alive: Any) -> None:
        """Renew ``run_id``'s lease until ``release`` or until ``alive`` is collected (a run
        whose code was abandoned without ending it must not be kept alive forever)."""
        with self._lock:
            self._runs[run_id] = (lease_s, weakref.ref(alive))
            if self._thread is None or not self._thread.is_alive():
                self._thread = threading.Thread(
                    target=self._renew_loop, name="tooldb-run-leases", daemon=True
                )
                self._thread.start()
            elif lease_s / RENEWALS_PER_LEASE < self._interval:
                self._wake.set()  # a shorter lease than the thread waits for: renew sooner

    def release(self, run_id: str) -> None:
        with self._lock:
            self._runs.pop(run_id, None)

    def _due(self) -> tuple[list[str], float, float] | None:
        """The runs to renew, their lease and the wait before the next renewal; None when
        there are none (the thread then ends)."""
        with self._lock:
            for run_id, (_, alive) in list(self._runs.items()):
                if alive() is None:
                    del self._runs[run_id]
            if not self._runs:
                self._thread = None
                return None
            lease = min(lease for lease, _ in self._runs.values())
            self._interval = lease / RENEWALS_PER_LEASE
            return list(self._runs), lease, self._interval

    def _renew_loop(self) -> None:
        while True:
            due = self._due()
            if due is None:
                return
            _, _, interval = due
            self._wake.wait(interval)
            self._wake.clear()
            due = self._due()
            if due is None:
                return
            run_ids, lease, _ = due
            store = self._store()
            if store is None:
                return
            try:
                store.renew_run_leases(run_ids, time.time() + lease)
            except Exception as exc:  # the database is away: try again next time
                logger.warning("could not renew the leases of %d run(s): %s", len(run_ids), exc)


_NONCE = uuid.uuid4().hex[:8]
_LEASES: weakref.WeakKeyDictionary[Store, RunLeases] = weakref.WeakKeyDictionary()
_LEASES_LOCK = threading.Lock()


def leases_for(store: Store) -> RunLeases:
    with _LEASES_LOCK:
        leases = _LEASES.get(store)
        if leases is None:
            leases = _LEASES[store] = RunLeases(store)
        return leases


def _forked() -> None:
    """A forked child runs none of its parent's runs: it must not renew their leases."""
    global _NONCE, _LEASES, _LEASES_LOCK
    _NONCE = uuid.uuid4().hex[:8]
    _LEASES = weakref.WeakKeyDictionary()
    _LEASES_LOCK = threading.Lock()


if hasattr(os, "register_at_fork"):
    os.register_at_fork(after_in_child=_forked)
