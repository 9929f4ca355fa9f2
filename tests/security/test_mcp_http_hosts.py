"""MCP servers over HTTP go through ``http_allowed_hosts`` like HTTP tools: under the
default ``public`` policy a server on a loopback address (or a name resolving to one)
is refused on import and on every call, before any connection is opened; the check
also holds at connection time (what DNS answers then), and a listed host connects."""

from __future__ import annotations

import socket
import threading
from collections.abc import Iterator

import pytest

import tooldb
from tooldb import Settings, ToolSpec
from tooldb.errors import ToolDBError

pytest.importorskip("mcp")


class Listener:
    """A TCP port on 127.0.0.1 that counts the connections made to it (and drops them)."""

    def __init__(self) -> None:
        self.sock = socket.socket()
        self.sock.bind(("127.0.0.1", 0))
        self.sock.listen(16)
        self.port = self.sock.getsockname()[1]
        self.accepted = 0
        self._thread = threading.Thread(target=self._accept, daemon=True)
        self._thread.start()

    def _accept(self) -> None:
        while True:
            try:
                conn, _ = self.sock.accept()
            except OSError:
                return
            self.accepted += 1
            conn.close()

    def close(self) -> None:
        self.sock.close()


@pytest.fixture
def listener() -> Iterator[Listener]:
    server = Listener()
    yield server
    server.close()


def _open(url: str, **settings: object) -> tooldb.Registry:
    return tooldb.open(url, settings=Settings(url=url, embedder="hash", **settings))  # type: ignore[arg-type]


@pytest.mark.parametrize("host", ["127.0.0.1", "localhost", "[::ffff:127.0.0.1]", "2130706433"])
def test_importing_a_loopback_server_is_refused_before_connecting(
    sqlite_url: str, listener: Listener, host: str
) -> None:
    with _open(sqlite_url) as registry, pytest.raises(ToolDBError, match="not allowed"):
        registry.add_mcp("local", url=f"http://{host}:{listener.port}/mcp")
    assert listener.accepted == 0


def test_calling_a_stored_loopback_server_is_refused_before_connecting(
    store_url: str, listener: Listener
) -> None:
    """A row written elsewhere (another process's policy, a manifest) is checked when
    called: every new session, so every call and reconnection."""
    spec = ToolSpec(
        name="local__echo",
        kind="mcp",
        target="local/echo",
        metadata={"server": {"transport": "http", "url": f"http://127.0.0.1:{listener.port}/mcp"}},
    )
    with _open(store_url) as registry:
        registry.add(spec)
        for _ in range(2):
            result = registry.call("local__echo", {})
            assert not result.success and "not allowed" in (result.error or "")
    assert listener.accepted == 0


def test_the_connection_itself_is_checked(
    sqlite_url: str, listener: Listener, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Past the URL check (DNS may answer differently at connection time), the client's
    connections are checked on the addresses actually used."""
    from tooldb.executors.mcp_guard import McpHostGuard

    async def passes(self: McpHostGuard, url: str) -> None:
        return None

    monkeypatch.setattr(McpHostGuard, "check", passes)
    with _open(sqlite_url) as registry, pytest.raises(ToolDBError, match="not allowed"):
        registry.add_mcp("local", url=f"http://127.0.0.1:{listener.port}/mcp")
    assert listener.accepted == 0


def test_a_listed_host_is_connected_to(sqlite_url: str, listener: Listener) -> None:
    with _open(sqlite_url, http_allowed_hosts=("127.0.0.1",)) as registry:
        with pytest.raises(ToolDBError) as failure:  # not an MCP server: it drops us
            registry.add_mcp("local", url=f"http://127.0.0.1:{listener.port}/mcp")
        assert "not allowed" not in str(failure.value)
    assert listener.accepted >= 1


def test_a_url_without_a_host_or_with_a_bad_port_is_refused_clearly() -> None:
    """Promise: the guard's URL check gives a clear error for a URL with no host (tooldb's
    own configuration refuses one earlier; the guard holds for any caller) or a port
    out of range."""
    import asyncio

    from tooldb.errors import ExecutionError
    from tooldb.executors.mcp_guard import McpHostGuard

    guard = McpHostGuard(["public"])
    with pytest.raises(ExecutionError, match=r"^MCP server URL 'http:///mcp' has no host$"):
        asyncio.run(guard.check("http:///mcp"))
    with pytest.raises(
        ExecutionError, match=r"^MCP server URL 'http://a\.example:99999/mcp': Port out of range"
    ):
        asyncio.run(guard.check("http://a.example:99999/mcp"))


def test_the_guarded_client_follows_no_redirect_and_ignores_the_environment() -> None:
    """Promise (executors/mcp_guard.py): the SDK follows same-origin redirects itself, the
    client ignores proxy settings from the environment, and the SDK's own timeouts hold
    (30 s to connect and write, 300 s to read)."""
    from tooldb.executors.mcp_guard import McpHostGuard

    client = McpHostGuard(["127.0.0.1"]).client()
    assert client.follow_redirects is False and client.trust_env is False
    timeout = client.timeout
    assert (timeout.connect, timeout.write, timeout.read) == (30.0, 30.0, 300.0)


def test_an_httpx2_whose_pool_cannot_be_replaced_is_refused(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """Promise: the guard replaces the transport's pool; an httpx2 without one (another
    version) is refused rather than run unguarded. The other version is the one edge
    that cannot be reached for real, so the transport is replaced here."""
    import httpx2

    from tooldb.executors.mcp_guard import McpHostGuard

    class PoolLess:
        def __init__(self, **_: object) -> None:
            """Takes the pool options the guard passes and keeps none."""

    monkeypatch.setattr(httpx2, "AsyncHTTPTransport", PoolLess)
    with pytest.raises(
        RuntimeError, match=r"^this httpx2 version is not supported by tooldb's host guard$"
    ):
        McpHostGuard(["127.0.0.1"]).client()
