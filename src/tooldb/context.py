"""What the call in progress belongs to, as context variables: the registry running
it, the agent run (its LoopContext) and the access level a skill granted.

``Registry.call``/``acall`` set the registry (built-in tools that inspect it, and the
``agent`` kind, read it back); the agent loop sets the LoopContext and the access
level around each call; the Python executor hands the LoopContext to tools that
declared a ``LoopContext`` parameter (``CONTEXT_KEY`` in their metadata). Context
variables follow the call into worker threads (``run_blocking`` copies them) and
into tasks, so parallel calls of one turn each see their own run, and tenants that
share executors never see each other's registry.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from contextlib import contextmanager
from contextvars import ContextVar, Token
from typing import TYPE_CHECKING

from .errors import UsageError
from .types import LoopContext

if TYPE_CHECKING:
    from .registry import Registry

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


_SESSION: ContextVar[str | None] = ContextVar("tooldb_session", default=None)


def current_session() -> str | None:
    """The session the caller set for the calls in progress (``use_session``), or None."""
    return _SESSION.get()


@contextmanager
def use_session(session_id: str | None) -> Iterator[None]:
    """Calls in this block belong to session ``session_id`` (tools that declare a
    ``session_id`` runtime parameter receive it): an MCP session, a chat thread."""
    token = _SESSION.set(session_id)
    try:
        yield
    finally:
        _SESSION.reset(token)


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


#: What ``enter_call`` set, for ``leave_call``.
CallScope = tuple[Token[ContextSource | None], Token[str | None]]


def enter_call(context: ContextSource, level: str | None) -> CallScope:
    """``use_context`` and ``use_access`` at once, without two generator-based context
    managers (the agent loop does this around every call): pair with ``leave_call``
    in a ``finally``."""
    return _CURRENT.set(context), _ACCESS.set(level)


def leave_call(scope: CallScope) -> None:
    _ACCESS.reset(scope[1])
    _CURRENT.reset(scope[0])


_CALLING: ContextVar[Registry | None] = ContextVar("tooldb_calling_registry", default=None)


class calling:
    """Sets the registry running the call in progress (``current_registry``) for the
    block: a plain class, as it wraps every call."""

    __slots__ = ("_registry", "_token")

    def __init__(self, registry: Registry) -> None:
        self._registry = registry

    def __enter__(self) -> None:
        self._token = _CALLING.set(self._registry)

    def __exit__(self, *_: object) -> None:
        _CALLING.reset(self._token)


def current_registry() -> Registry:
    """The registry running this call; a clear error outside a registry call."""
    registry = _CALLING.get()
    if registry is None:
        raise UsageError(
            "this built-in tool inspects the registry that runs it: call it through "
            "registry.call (or `tooldb call`), not directly"
        )
    return registry
