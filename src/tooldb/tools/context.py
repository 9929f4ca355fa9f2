"""Which registry is running the current call, for built-in tools that inspect it.

A context variable, set by ``Registry.call``/``acall`` around execution: it
follows the call into worker threads (``run_blocking`` copies the context) and
never leaks between tenants sharing executors, because each call sets its own.
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from contextvars import ContextVar
from typing import TYPE_CHECKING

from ..errors import UsageError

if TYPE_CHECKING:
    from ..registry import Registry

_calling: ContextVar[Registry | None] = ContextVar("tooldb_calling_registry", default=None)


@contextmanager
def calling(registry: Registry) -> Iterator[None]:
    token = _calling.set(registry)
    try:
        yield
    finally:
        _calling.reset(token)


def current_registry() -> Registry:
    """The registry running this tool; a clear error outside a registry call."""
    registry = _calling.get()
    if registry is None:
        raise UsageError(
            "this built-in tool inspects the registry that runs it: call it through "
            "registry.call (or `tooldb call`), not directly"
        )
    return registry
