"""The host guard of MCP servers reached over HTTP: ``http_allowed_hosts``, as for HTTP
tools (http_guard.py).

The MCP SDK speaks HTTP through its own client stack (httpx2 over httpcore2), so the
guard is that stack's network backend: every connection it opens, on import, on each
new session and on each reconnection, resolves the host itself, checks each address
against the policy and connects to a checked address only (so a DNS answer that
changes between a check and the connection does not get through). The URL is also
checked by name before a session starts, for a clear error. The client ignores proxy
settings from the environment and never connects to Unix sockets. The policy, httpx2
and httpcore2 are loaded when a session over HTTP starts, never before.
"""

from __future__ import annotations

import functools
from collections.abc import Iterable, Sequence
from typing import TYPE_CHECKING, Any
from urllib.parse import urlsplit

from ..errors import ExecutionError

if TYPE_CHECKING:
    from .http_guard import HostPolicy

#: The MCP SDK's own client timeouts: 30 s to connect and write, 300 s to read (a
#: server may hold an event stream open).
CONNECT_TIMEOUT_S, READ_TIMEOUT_S = 30.0, 300.0


class McpHostGuard:
    """What ``tooldb.mcp.sessions`` uses to reach MCP servers over HTTP (its
    ``HttpGuard``): a check of the URL, and clients whose connections are checked."""

    def __init__(self, allowed_hosts: Sequence[str]) -> None:
        self.allowed_hosts = tuple(allowed_hosts)
        self._policy: HostPolicy | None = None

    @property
    def policy(self) -> HostPolicy:
        if self._policy is None:
            from .http_guard import HostPolicy

            self._policy = HostPolicy.from_patterns(self.allowed_hosts)
        return self._policy

    async def check(self, url: str) -> None:
        """Raise HostNotAllowed unless the URL's host (each of its addresses) is allowed."""
        parts = urlsplit(url)
        host = parts.hostname
        if not host:
            raise ExecutionError(f"MCP server URL {url!r} has no host")
        try:
            port = parts.port or (443 if parts.scheme == "https" else 80)
        except ValueError as exc:
            raise ExecutionError(f"MCP server URL {url!r}: {exc}") from None
        await self.policy.aresolve(host, port)

    def client(self) -> Any:
        """A new httpx2.AsyncClient whose every connection goes through the policy."""
        import httpcore2
        import httpx2

        transport = httpx2.AsyncHTTPTransport(verify=False)  # its pool is replaced below
        if not isinstance(getattr(transport, "_pool", None), httpcore2.AsyncConnectionPool):
            # replacing the pool is the one private step: never run unguarded
            raise RuntimeError("this httpx2 version is not supported by tooldb's host guard")
        transport._pool = httpcore2.AsyncConnectionPool(
            ssl_context=httpx2.create_ssl_context(),
            network_backend=_backend_class()(self.policy),
        )
        return httpx2.AsyncClient(
            transport=transport,
            trust_env=False,
            follow_redirects=False,  # the SDK follows same-origin redirects itself
            timeout=httpx2.Timeout(CONNECT_TIMEOUT_S, read=READ_TIMEOUT_S),
        )


@functools.cache
def _backend_class() -> Any:
    """httpcore2's network backend, guarded (made once, at the first HTTP session)."""
    import httpcore2

    from .http_guard import HostNotAllowed, connect_checked

    class GuardedBackend(httpcore2.AsyncNetworkBackend):
        def __init__(self, policy: HostPolicy) -> None:
            self.policy = policy
            self.inner = httpcore2.AnyIOBackend()

        async def connect_tcp(
            self,
            host: str,
            port: int,
            timeout: float | None = None,
            local_address: str | None = None,
            socket_options: Iterable[Any] | None = None,
        ) -> Any:
            return await connect_checked(
                self.policy, self.inner, httpcore2.ConnectError, host, port, timeout,
                local_address, socket_options,
            )  # fmt: skip

        async def connect_unix_socket(self, *args: Any, **kwargs: Any) -> Any:
            raise HostNotAllowed("MCP servers are not reached through Unix sockets")

        async def sleep(self, seconds: float) -> None:
            await self.inner.sleep(seconds)

    return GuardedBackend
