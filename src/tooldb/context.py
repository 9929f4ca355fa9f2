"""The LoopContext of the agent run a tool call belongs to, as a context variable.

The agent loop sets it around each call; the Python executor hands it to tools
that declared a ``LoopContext`` parameter (``CONTEXT_KEY`` in their metadata).
Context variables follow the call into worker threads (``run_blocking`` copies
them) and into tasks, so parallel calls of one turn each see their own run.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from contextlib import contextmanager
from contextvars import ContextVar

from .types import LoopContext

#: A LoopContext, or what builds it when a tool first asks (most calls never do).
ContextSource = LoopContext | Callable[[], LoopContext]

#: Tool metadata key naming the parameter that receives the LoopContext.
CONTEXT_KEY = "context_parameter"

_CURRENT: ContextVar[ContextSource | None] = ContextVar("tooldb_loop_context", default=None)
#: The access level a skill granted for the call in progress (None: no restriction).
_ACCESS: ContextVar[str | None] = ContextVar("tooldb_access", default=None)


def current_access() -> str | None:
    """``read``, ``write`` or ``execute`` when a skill's grant limits this call, else None."""
    return _ACCESS.get()


@contextmanager
def use_access(level: str | None) -> Iterator[None]:
    token = _ACCESS.set(level)
    try:
        yield
    finally:
        _ACCESS.reset(token)


def current_context() -> LoopContext | None:
    """The LoopContext of the run in progress here, or None outside a run."""
    source = _CURRENT.get()
    if source is None or isinstance(source, LoopContext):
        return source
    return source()


@contextmanager
def use_context(context: ContextSource) -> Iterator[None]:
    token = _CURRENT.set(context)
    try:
        yield
    finally:
        _CURRENT.reset(token)
