"""Long-lived MCP client sessions, owned by one background event-loop thread.

The MCP SDK is async (anyio), and a session's transport — a server subprocess
or an HTTP connection — must be opened and closed by the same task. So one
daemon thread runs an asyncio loop for the whole process, and each session
lives in its own task there: started on demand, shared by every call and
thread, and discarded when its server exits, breaks or hangs, so that the next
call starts a fresh one. Synchronous callers submit coroutines to that loop.

A call is never retried: a server that dies mid-call may have acted, so the
call fails and only the next one gets a new session.
"""

from __future__ import annotations

import asyncio
import contextvars
import logging
import math
import os
import tempfile
from collections.abc import AsyncIterator, Coroutine
from concurrent.futures import TimeoutError as FutureTimeout
from contextlib import AbstractAsyncContextManager, asynccontextmanager
from typing import IO, TYPE_CHECKING, Any, Protocol, TypeVar

from ..background_loop import BackgroundLoop, background_loop
from ..errors import ExecutionError, ToolTimeout
from .config import ServerConfig

if TYPE_CHECKING:
    from mcp import Client
    from mcp.types import CallToolResult, Tool

logger = logging.getLogger(__name__)

CONNECT_TIMEOUT_S = 30.0
LIST_TIMEOUT_S = 30.0
_GRACE_S = 5.0  # a sync caller waits this much longer than the call's own limits
_CLOSE_WAIT_S = 15.0
_MAX_PAGES = 100
_STDERR_TAIL = 4000
_STDERR_LINES = 8
_T = TypeVar("_T")
SDK_HINT = "the mcp tool kind needs the MCP SDK: pip install 'tooldb[mcp]'"


class HttpGuard(Protocol):
    """How sessions reach servers over HTTP (executors/mcp_guard.py implements it with
    the ``http_allowed_hosts`` policy; this layer cannot import it)."""

    async def check(self, url: str) -> None:
        """Raise (an ExecutionError) unless the URL's host may be connected to."""

    def client(self) -> Any:
        """A new httpx2.AsyncClient whose every connection is checked."""


NO_GUARD = (
    "MCP servers over HTTP need a host guard (http_allowed_hosts): this session manager "
    "was made without one; use the registry's, or SessionManager(http_guard=...)"
)


def sdk_available() -> bool:
    try:
        import mcp  # noqa: F401
    except ImportError:
        return False
    return True


def _loop_thread() -> BackgroundLoop:
    return background_loop("tooldb-mcp")


class _EofWatch:
    """A transport read stream that notes when the server side ended (process exit)."""

    def __init__(self, inner: Any, session: _Session) -> None:
        self._inner = inner
        self._session = session

    @property
    def last_context(self) -> Any:
        return getattr(self._inner, "last_context", None)

    async def receive(self) -> Any:
        import anyio

        try:
            return await self._inner.receive()
        except (anyio.EndOfStream, anyio.ClosedResourceError, anyio.BrokenResourceError):
            self._session.ended = True
            raise

    async def aclose(self) -> None:
        await self._inner.aclose()

    def __aiter__(self) -> _EofWatch:
        return self

    async def __anext__(self) -> Any:
        import anyio

        try:
            return await self.receive()
        except anyio.EndOfStream:
            raise StopAsyncIteration from None

    async def __aenter__(self) -> _EofWatch:
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.aclose()


@asynccontextmanager
async def _watched(
    transport: AbstractAsyncContextManager[Any], session: _Session
) -> AsyncIterator[tuple[Any, Any]]:
    async with transport as (read_stream, write_stream):
        yield _EofWatch(read_stream, session), write_stream


class _Session:
    """One connected client; its task owns the transport from open to close."""

    def __init__(
        self, config: ServerConfig, connect_timeout_s: float, guard: HttpGuard | None = None
    ) -> None:
        self.config = config
        self._guard = guard
        self.client: Client | None = None
        self.ended = False
        self._stop = asyncio.Event()
        # The server's stderr, kept for error messages; closed when the session ends.
        self._stderr: IO[bytes] | None = (
            tempfile.TemporaryFile() if config.transport == "stdio" else None  # noqa: SIM115
        )
        self._stderr_tail = ""
        self.ready: asyncio.Future[None] = asyncio.get_running_loop().create_future()
        self._process: list[Any] = []  # the stdio server process, once spawned
        _hook_spawn()
        self._task = asyncio.create_task(self._own(connect_timeout_s))

    @property
    def usable(self) -> bool:
        """Starting or connected, and the server has not gone away."""
        if self.ended or self._task.done():
            return False
        pid = getattr(self._process[0], "pid", None) if self._process else None
        return pid is None or not _exited(pid)

    async def _own(self, connect_timeout_s: float) -> None:
        import anyio
        from mcp import Client

        _SPAWNED.set(self._process)  # this task's context: seen by the spawn hook
        try:
            with anyio.CancelScope(deadline=anyio.current_time() + connect_timeout_s) as scope:
                async with Client(_watched(self._transport(), self), cache=None) as client:
                    scope.deadline = math.inf
                    self.client = client
                    self.ready.set_result(None)
                    await self._stop.wait()
            if not self.ready.done():
                self.ready.set_exception(TimeoutError(f"no answer in {connect_timeout_s:g} s"))
        except Exception as exc:
            if not self.ready.done():
                self.ready.set_exception(exc)
            else:
                logger.debug("MCP session %s ended with %r", self.config.describe(), exc)
        finally:
            self.ended = True
            self.client = None
            if not self.ready.done():
                self.ready.set_exception(ExecutionError("the session was cancelled while starting"))
            self._keep_stderr()

    def _transport(self) -> AbstractAsyncContextManager[Any]:
        if self.config.transport == "http":
            return _guarded_http(self.config.url, self._guard)
        from mcp import StdioServerParameters
        from mcp.client.stdio import stdio_client

        params = StdioServerParameters(
            command=self.config.command,
            args=list(self.config.args),
            env=self.config.environment(),
        )
        return stdio_client(params, errlog=self._stderr)  # type: ignore[arg-type]

    def stderr_size(self) -> int:
        if self._stderr is None or self._stderr.closed:
            return 0
        return os.fstat(self._stderr.fileno()).st_size

    def stderr_tail(self, since: int = 0) -> str:
        """The last lines the server wrote to stderr after offset ``since`` (read
        with pread: the server's writes share the file offset)."""
        if self._stderr is None or self._stderr.closed:
            return self._stderr_tail
        size = self.stderr_size()
        start = max(since, size - _STDERR_TAIL)
        text = os.pread(self._stderr.fileno(), size - start, start).decode("utf-8", "replace")
        lines = [line.rstrip() for line in text.splitlines() if line.strip()]
        return "\n".join(lines[-_STDERR_LINES:])

    def _keep_stderr(self) -> None:
        if self._stderr is not None and not self._stderr.closed:
            self._stderr_tail = self.stderr_tail()
            self._stderr.close()

    async def stop(self) -> None:
        """Close the client; a stdio server gets EOF, then SIGTERM, then SIGKILL (SDK)."""
        self._stop.set()
        if not self.ready.done():
            self._task.cancel()
        await asyncio.wait({self._task})


@asynccontextmanager
async def _guarded_http(url: str, guard: HttpGuard | None) -> AsyncIterator[Any]:
    """The streamable-HTTP transport on a client whose connections the guard checks; the
    URL is checked first (a clear error before any connection is opened)."""
    from mcp.client.streamable_http import streamable_http_client

    if guard is None:
        raise ExecutionError(NO_GUARD)
    await guard.check(url)
    async with guard.client() as client, streamable_http_client(url, http_client=client) as io:
        yield io


class SessionManager:
    """The MCP sessions of one registry, keyed by server connection. ``http_guard``
    checks the hosts of servers reached over HTTP (without one, they are refused)."""

    def __init__(
        self, connect_timeout_s: float = CONNECT_TIMEOUT_S, *, http_guard: HttpGuard | None = None
    ) -> None:
        self.connect_timeout_s = connect_timeout_s
        self.http_guard = http_guard
        self._sessions: dict[str, _Session] = {}  # touched only on the loop thread
        self._stopping: set[asyncio.Task[None]] = set()
        self._pid = os.getpid()
        self._used = False
        self._closed = False

    # -- synchronous API -----------------------------------------------------
    def start(self, config: ServerConfig) -> None:
        """Connect now (outside any call's timeout) unless a live session exists."""
        if not self._connected(config):
            self._wait(self._session(config), self.connect_timeout_s)

    def _connected(self, config: ServerConfig) -> bool:
        """A lock-free look from the caller's thread (a hint: the loop re-checks), which
        spares a warm call the round trip to the loop thread."""
        session = self._sessions.get(config.key) if self._pid == os.getpid() else None
        return session is not None and session.usable and session.client is not None

    def list_tools(self, config: ServerConfig, timeout_s: float = LIST_TIMEOUT_S) -> list[Tool]:
        return self._wait(self._list(config, timeout_s), self.connect_timeout_s + timeout_s)

    def call_tool(
        self,
        config: ServerConfig,
        name: str,
        arguments: dict[str, Any],
        timeout_s: float | None,
        label: str,
    ) -> CallToolResult:
        limit = None if timeout_s is None else self.connect_timeout_s + timeout_s
        return self._wait(self._call(config, name, arguments, timeout_s, label), limit)

    async def acall_tool(
        self,
        config: ServerConfig,
        name: str,
        arguments: dict[str, Any],
        timeout_s: float | None,
        label: str,
    ) -> CallToolResult:
        coro = self._call(config, name, arguments, timeout_s, label)
        runner = self._runner()
        if asyncio.get_running_loop() is runner.loop:
            return await coro
        return await asyncio.wrap_future(runner.submit(coro))

    def close(self) -> None:
        """Stop every session of this manager (called by ``Registry.close``)."""
        if self._closed:
            return
        self._closed = True
        if self._used and self._pid == os.getpid():
            self._wait(self._stop_all(), _CLOSE_WAIT_S)

    def session_count(self) -> int:
        return len(self._sessions)

    # -- plumbing --------------------------------------------------------------
    def _runner(self) -> BackgroundLoop:
        if self._pid != os.getpid():  # a forked child cannot use the parent's sessions
            self._sessions, self._stopping, self._pid = {}, set(), os.getpid()
        self._used = True
        return _loop_thread()

    def _wait(self, coro: Coroutine[Any, Any, _T], limit: float | None) -> _T:
        future = self._runner().submit(coro)
        try:
            return future.result(None if limit is None else limit + _GRACE_S)
        except FutureTimeout:
            raise ToolTimeout(f"the MCP session loop did not answer in {limit:g} s") from None
        finally:
            future.cancel()

    async def _session(self, config: ServerConfig) -> _Session:
        if self._closed:
            raise ExecutionError("the registry was closed: its MCP sessions are stopped")
        session = self._sessions.get(config.key)
        if session is None or not session.usable:
            if session is not None:
                self._discard(session)
            session = _Session(config, self.connect_timeout_s, self.http_guard)
            self._sessions[config.key] = session
        try:
            await asyncio.shield(session.ready)
        except Exception as exc:
            self._discard(session)
            raise ExecutionError(
                f"cannot start MCP server ({config.describe()}): {_reason(exc)}"
                + _stderr_note(session)
            ) from None
        return session

    async def _list(self, config: ServerConfig, timeout_s: float) -> list[Tool]:
        import anyio

        session = await self._session(config)
        assert session.client is not None
        tools: list[Tool] = []
        cursor: str | None = None
        try:
            with anyio.fail_after(timeout_s):
                for _ in range(_MAX_PAGES):
                    page = await session.client.list_tools(cursor=cursor)
                    tools.extend(page.tools)
                    cursor = page.next_cursor
                    if cursor is None:
                        break
        except Exception as exc:
            self._discard(session)
            raise ExecutionError(
                f"MCP server ({config.describe()}) did not list its tools: {_reason(exc)}"
                + _stderr_note(session)
            ) from None
        return tools

    async def _call(
        self,
        config: ServerConfig,
        name: str,
        arguments: dict[str, Any],
        timeout_s: float | None,
        label: str,
    ) -> CallToolResult:
        import anyio
        from mcp import MCPError
        from mcp.types import CONNECTION_CLOSED

        session = await self._session(config)
        assert session.client is not None
        since = session.stderr_size()
        try:
            with anyio.fail_after(timeout_s):
                return await session.client.call_tool(name, arguments)
        except TimeoutError:
            self._discard(session)
            raise ToolTimeout(
                f"tool {label!r} timed out after {timeout_s:g} s; its MCP server "
                f"({config.describe()}) was stopped and will restart on the next call"
            ) from None
        except MCPError as exc:
            if exc.code != CONNECTION_CLOSED:  # the server answered: the session is fine
                raise ExecutionError(
                    f"MCP server ({config.describe()}) refused the call of {name!r}: {exc.message}"
                ) from None
            self._discard(session)
            raise ExecutionError(
                f"MCP server ({config.describe()}) closed the connection during the call of "
                f"{name!r} (it exited or crashed)" + _stderr_note(session, since)
            ) from None
        except Exception as exc:
            self._discard(session)
            raise ExecutionError(
                f"the call of {name!r} on MCP server ({config.describe()}) failed: {_reason(exc)}"
                + _stderr_note(session, since)
            ) from None

    def _discard(self, session: _Session) -> None:
        """Forget the session and stop it in the background (the caller does not wait)."""
        if self._sessions.get(session.config.key) is session:
            del self._sessions[session.config.key]
        task = asyncio.get_running_loop().create_task(session.stop())
        self._stopping.add(task)
        task.add_done_callback(self._stopping.discard)

    async def _stop_all(self) -> None:
        for session in list(self._sessions.values()):
            self._discard(session)
        if self._stopping:
            await asyncio.wait(set(self._stopping), timeout=_CLOSE_WAIT_S)


#: The server process a session is starting, recorded by the spawn hook below.
_SPAWNED: contextvars.ContextVar[list[Any] | None] = contextvars.ContextVar(
    "tooldb_mcp_spawned", default=None
)
_HOOKED = False


def _hook_spawn() -> None:
    """Record each stdio server process the SDK spawns for the session starting it.

    A server that died between calls is only noticed by the session once the event loop
    has read its end-of-file and reaped it, which can take longer than the next call takes
    to arrive; that call would go into a dead pipe. With the process at hand, ``waitid``
    answers at once whether it has exited. The SDK exposes no handle, so its (private)
    spawn function is wrapped; if it is ever renamed, sessions fall back to noticing late.
    """
    global _HOOKED
    if _HOOKED:
        return
    _HOOKED = True
    try:
        from mcp.client import stdio
    except ImportError:
        return
    original = getattr(stdio, "_create_platform_compatible_process", None)
    if original is None:
        return

    async def spawn(*args: Any, **kwargs: Any) -> Any:
        process = await original(*args, **kwargs)
        holder = _SPAWNED.get()
        if holder is not None:
            holder.append(process)
        return process

    stdio._create_platform_compatible_process = spawn


def _exited(pid: int) -> bool:
    """True if our child ``pid`` has exited (without reaping it: asyncio's watcher does).

    On Linux the process state is read from /proc: while asyncio's watcher thread blocks
    in ``waitpid`` on the child, ``waitid(WNOHANG | WNOWAIT)`` reports a zombie as still
    running (seen here), whereas its state there is ``Z`` at once.
    """
    try:
        with open(f"/proc/{pid}/stat", "rb") as handle:
            stat = handle.read()
        return stat[stat.rindex(b")") + 2 : stat.rindex(b")") + 3] in {b"Z", b"X"}
    except FileNotFoundError:  # reaped
        return True
    except OSError:  # no /proc here: ask the kernel
        pass
    try:
        return os.waitid(os.P_PID, pid, os.WEXITED | os.WNOHANG | os.WNOWAIT) is not None
    except ChildProcessError:  # already reaped
        return True
    except (AttributeError, OSError):  # no waitid on this platform
        return False


def _reason(exc: BaseException) -> str:
    """The innermost cause, readable (task groups wrap errors in exception groups)."""
    while isinstance(exc, BaseExceptionGroup) and exc.exceptions:
        exc = exc.exceptions[0]
    message = getattr(exc, "message", None) or str(exc)
    return f"{type(exc).__name__}: {message}" if message else type(exc).__name__


def _stderr_note(session: _Session, since: int = 0) -> str:
    tail = session.stderr_tail(since)
    return f"; its stderr ends with:\n{tail}" if tail else ""
