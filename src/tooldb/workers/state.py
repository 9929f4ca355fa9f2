"""What one worker process holds: its settings, its id, one registry per tenant whose
runs it executes (each with its in-process selection index, kept current from the store
by every ``select``: selection/index.py) and the tool slots of per-tool limits."""

from __future__ import annotations

import threading
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import replace
from typing import TYPE_CHECKING

from ..executors import Executor
from ..settings import Settings
from .limits import LimitedExecutor, Slots

if TYPE_CHECKING:
    from ..registry import Registry


class WorkerState:
    def __init__(
        self,
        settings: Settings,
        executor_id: str,
        database_url: str,
        tenant_concurrency: int | None = None,
    ) -> None:
        self.settings = settings
        self.executor_id = executor_id
        self.slots = Slots(database_url)
        #: Runs of one tenant at once across the workers (``--tenant-concurrency``).
        self.tenant_concurrency = tenant_concurrency
        self._registries: dict[str, Registry] = {}
        self._lock = threading.Lock()

    def registry_for(self, tenant: str) -> Registry:
        with self._lock:
            registry = self._registries.get(tenant)
            if registry is None:
                registry = self._registries[tenant] = self._open(tenant)
            return registry

    def _open(self, tenant: str) -> Registry:
        from ..registry import open_registry

        registry = open_registry(settings=replace(self.settings, tenant=tenant), create=False)
        limit_tools(registry, self.slots)
        return registry

    def close(self) -> None:
        with self._lock:
            for registry in self._registries.values():
                registry.close()
            self._registries.clear()
        self.slots.close()


def limit_tools(registry: Registry, slots: Slots) -> None:
    """Route every tool of ``registry`` through the cluster-wide slots of limited tools."""
    wrapped: dict[object, Executor] = {
        kind: LimitedExecutor(executor, slots, registry.tenant)
        for kind, executor in registry.executors.items()
    }
    registry.executors.update(wrapped)  # type: ignore[arg-type]


_CURRENT: WorkerState | None = None


def install(state: WorkerState | None) -> None:
    global _CURRENT
    _CURRENT = state


def current() -> WorkerState:
    if _CURRENT is None:
        raise RuntimeError("no tooldb worker runs in this process")
    return _CURRENT


def registry_for(tenant: str) -> Registry:
    return current().registry_for(tenant)


def executor_id() -> str:
    return current().executor_id


#: The slot name of a tenant's runs (names hold no control character: no tool has it).
RUN_SLOT = "\x00run"


@contextmanager
def tenant_slot(tenant: str) -> Iterator[None]:
    """Hold one of the tenant's run slots while a run executes, when the worker limits
    a tenant's runs. DBOS's partitioned queue already limits them, but its claim can let
    two workers start one each at the same moment; the slot, an advisory lock, cannot."""
    worker = current()
    if worker.tenant_concurrency is None:
        yield
        return
    with worker.slots.held(tenant, RUN_SLOT, worker.tenant_concurrency, None):
        yield
