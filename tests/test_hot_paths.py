"""The per-call fast paths: SQLite's per-thread connections and the reused SIGALRM handler."""

from __future__ import annotations

import signal
import threading
import time
from pathlib import Path

import pytest
import sqlalchemy as sa

import tooldb
from tooldb import Registry, Settings, tool
from tooldb.errors import StoreError
from tooldb.executors.deadline import DeadlineExceeded, deadline
from tooldb.stores.hot_connections import HotConnections


@tool
def plus(a: int, b: int) -> int:
    """Add two integers."""
    return a + b


def _open(tmp_path: Path) -> Registry:
    url = f"sqlite:///{tmp_path / 'hot.db'}"
    reg = tooldb.open(url, settings=Settings(url=url, embedder="hash"))
    reg.add(plus)
    return reg


def test_each_thread_keeps_one_connection_outside_the_pool(tmp_path: Path) -> None:
    reg = _open(tmp_path)
    store = reg.store
    hot = store._hot
    assert isinstance(hot, HotConnections)
    for _ in range(20):
        assert reg.call("plus", {"a": 1, "b": 2}).output == "3"
    seen: list[object] = []

    def worker() -> None:
        reg.call("plus", {"a": 2, "b": 2})
        seen.append(hot.get())

    threads = [threading.Thread(target=worker) for _ in range(3)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    main = hot.get()
    assert main not in seen and len({id(c) for c in seen}) == 3
    assert len(hot._open) == 4  # one per thread that called, not one per call
    assert store.engine.pool.checkedout() == 0  # detached: no pool slot held
    assert store.count_calls("default", "plus") == 23
    reg.close()
    assert hot._open == []
    with pytest.raises(StoreError, match="closed"):
        hot.get()


def test_a_failed_statement_discards_the_threads_connection(tmp_path: Path) -> None:
    reg = _open(tmp_path)
    hot = reg.store._hot
    assert hot is not None
    before = hot.get()
    hot.discard(before)
    after = hot.get()
    assert after is not before
    assert reg.call("plus", {"a": 1, "b": 1}).output == "2"
    reg.close()


def test_only_sqlite_files_get_per_thread_connections(postgres_url: str) -> None:
    assert not HotConnections.suits(sa.create_engine("sqlite://"))  # one shared connection
    reg = tooldb.open(postgres_url, settings=Settings(url=postgres_url, embedder="hash"))
    try:
        assert reg.store._hot is None  # PostgreSQL keeps its pool
        reg.add(plus)
        assert reg.call("plus", {"a": 1, "b": 1}).output == "2"
    finally:
        reg.close()


def test_the_alarm_handler_outlives_a_deadline_but_ignores_stray_alarms() -> None:
    with deadline(5):
        time.sleep(0.001)  # a block that ends well before its deadline
    installed = signal.getsignal(signal.SIGALRM)
    signal.setitimer(signal.ITIMER_REAL, 0.01)  # an alarm with no deadline armed
    time.sleep(0.05)  # nothing raised
    with pytest.raises(DeadlineExceeded), deadline(0.05):
        time.sleep(2)
    assert signal.getsignal(signal.SIGALRM) is installed


def test_an_applications_alarm_handler_is_never_replaced() -> None:
    fired: list[int] = []

    def application_handler(signum: int, _frame: object) -> None:
        fired.append(signum)

    previous = signal.signal(signal.SIGALRM, application_handler)
    try:
        with pytest.raises(DeadlineExceeded), deadline(0.05):  # the watchdog thread instead
            while True:
                time.sleep(0.001)
        assert signal.getsignal(signal.SIGALRM) is application_handler
        assert fired == []
    finally:
        signal.signal(signal.SIGALRM, previous)
