"""The HTTP host policy on its own: how ``http_allowed_hosts`` patterns are read, which
names and addresses they allow, and the guarded clients' connections to a real server on
127.0.0.1 (issue 30: the guard's surviving and unreached mutants)."""

from __future__ import annotations

import asyncio
import http.server
import ipaddress
import socket
import threading
import time
from typing import Any

import httpcore
import httpx
import pytest

from tooldb.examples.pets_server import PetsServer
from tooldb.executors import http_guard
from tooldb.executors.http_guard import (
    HostNotAllowed,
    HostPolicy,
    HostUnresolved,
    guarded_async_client,
    guarded_client,
    is_public,
)

REFUSED = (
    "is not allowed: it is not a public address and not listed in the http_allowed_hosts "
    "setting (TOOLDB_HTTP_ALLOWED_HOSTS)"
)


def policy(*patterns: str) -> HostPolicy:
    return HostPolicy.from_patterns(patterns)


def ip(text: str) -> ipaddress.IPv4Address | ipaddress.IPv6Address:
    return ipaddress.ip_address(text)


def test_patterns_are_read_whatever_their_case_and_spacing() -> None:
    read = policy(
        " Public ", "*", "*.Example.COM.", "API.example.org", "10.0.0.0/8", "[::1]", "127.0.0.1"
    )
    assert read == HostPolicy(
        public=True,
        anything=True,
        names=frozenset({"api.example.org"}),
        suffixes=(".example.com",),
        networks=(
            ipaddress.ip_network("10.0.0.0/8"),
            ipaddress.ip_network("::1/128"),
            ipaddress.ip_network("127.0.0.1/32"),
        ),
    )
    assert policy("public") == HostPolicy(True, False, frozenset(), (), ())
    assert policy("*") == HostPolicy(False, True, frozenset(), (), ())
    assert policy("10.1.2.3/8").networks == (ipaddress.ip_network("10.0.0.0/8"),)  # not strict


def test_names_and_suffixes_match_whole_labels_in_any_case() -> None:
    named = policy("*.example.com", "api.example.org", "Bücher.example")
    assert named.names == frozenset({"api.example.org", "xn--bcher-kva.example"})
    for host in ("a.example.com", "A.B.EXAMPLE.COM.", "api.example.org", "[api.example.org]"):
        assert named.allows_name(host), host
    assert named.allows_name("BÜCHER.example") and named.allows_name("xn--bcher-kva.example")
    for host in ("example.com", "notexample.com", "api.example.org.evil", "127.0.0.1"):
        assert not named.allows_name(host), host
    # only spaces, brackets and one final dot are trimmed, before the case is folded
    assert policy("xa.example").allows_name("XA.example")
    assert not policy("example.com").allows_name("example.comX")
    assert policy("*").allows_name("anything.at.all")
    assert not policy("public").allows_name("example.com")


def test_a_name_that_is_not_valid_idna_is_kept_as_given() -> None:
    # "a..b" cannot be IDNA-encoded (an empty label): it is compared as written
    assert policy("ü..example").allows_name("Ü..EXAMPLE")
    assert not policy("ü..example").allows_name("u..example")


def test_addresses_are_allowed_by_network_by_embedded_ipv4_or_as_public() -> None:
    private = policy("10.0.0.0/8")
    assert private.allows_address(ip("10.1.2.3"))
    assert not private.allows_address(ip("11.0.0.1"))
    assert not private.allows_address(ip("8.8.8.8"))  # not listed, and public is not on
    for form in ("::ffff:10.1.2.3", "64:ff9b::a01:203"):  # the listed address, carried in IPv6
        assert private.allows_address(ip(form)), form
    assert not private.allows_address(ip("64:ff9b::b00:1"))  # 11.0.0.1 carried
    public = policy("public")
    assert public.allows_address(ip("8.8.8.8")) and public.allows_address(ip("2001:4860::8888"))
    for address in ("10.1.2.3", "127.0.0.1", "169.254.169.254", "::1", "fc00::1", "0.0.0.0"):
        assert not public.allows_address(ip(address)), address


def test_multicast_is_never_public() -> None:
    assert not is_public(ip("ff0e::1"))  # a global-scope multicast group
    assert not is_public(ip("224.0.0.1"))
    assert is_public(ip("2001:4860::8888"))


def test_only_ipv6_forms_that_carry_an_ipv4_address_are_unwrapped() -> None:
    unwrap = http_guard._embedded_ipv4
    assert unwrap(ip("10.0.0.1")) is None
    assert unwrap(ip("2001:4860::8888")) is None
    assert unwrap(ip("::ffff:10.0.0.1")) == ip("10.0.0.1")
    assert unwrap(ip("64:ff9b::a00:1")) == ip("10.0.0.1")
    assert unwrap(ip("2002:a00:1::1")) == ip("10.0.0.1")  # 6to4


def test_check_addresses_names_the_refused_address() -> None:
    guard = policy("public")
    with pytest.raises(HostNotAllowed) as refused:
        guard.check_addresses("internal.example", ["8.8.8.8", "10.0.0.1"])
    assert str(refused.value) == f"host 'internal.example' (address 10.0.0.1) {REFUSED}"
    with pytest.raises(HostNotAllowed) as literal:
        guard.check_addresses("10.0.0.1", ["10.0.0.1"])
    assert str(literal.value) == f"host '10.0.0.1' {REFUSED}"
    with pytest.raises(HostNotAllowed, match="fe80::1%eth0"):  # a zone id is not an address
        guard.check_addresses("link.example", ["fe80::1%eth0"])
    with pytest.raises(HostNotAllowed) as empty:
        guard.check_addresses("nothing.example", [])
    assert str(empty.value) == "host 'nothing.example' does not resolve to any address"
    guard.check_addresses("dns.example", ["8.8.8.8", "2001:4860::8888"])  # every one public
    policy("dns.example").check_addresses("dns.example", [])  # allowed by name: not checked


def test_resolve_reads_literals_and_resolves_names_once_per_address() -> None:
    local = policy("127.0.0.0/8", "::1")
    assert local.resolve("127.0.0.1", 80) == ["127.0.0.1"]
    assert local.resolve("[::1]", 80) == ["::1"]
    assert asyncio.run(local.aresolve("[::1]", 80)) == ["::1"]
    resolved = local.resolve("localhost", 80)
    assert "127.0.0.1" in resolved and len(resolved) == len(set(resolved))
    assert asyncio.run(local.aresolve("localhost", 80)) == resolved
    with pytest.raises(HostNotAllowed, match=r"'localhost' \(address 127.0.0.1\)"):
        policy("public").resolve("localhost", 80)
    with pytest.raises(HostNotAllowed, match=r"'localhost' \(address 127.0.0.1\)"):
        asyncio.run(policy("public").aresolve("localhost", 80))


def test_a_name_that_does_not_resolve_is_reported() -> None:
    for resolve in (policy("public").resolve, policy("public").aresolve):
        with pytest.raises(HostUnresolved) as failed:
            result = resolve("no-such-host.invalid", 80)
            if asyncio.iscoroutine(result):
                asyncio.run(result)
        assert str(failed.value).startswith("cannot resolve host 'no-such-host.invalid': ")
        assert len(str(failed.value)) > len("cannot resolve host 'no-such-host.invalid': ")


def test_the_guarded_clients_reach_an_allowed_host_only(pets: PetsServer) -> None:
    with guarded_client(policy("127.0.0.1")) as client:
        answer = client.get(f"{pets.url}/pets/1")
    assert answer.status_code == 200 and answer.json()["name"] == "Rex"
    headers = {k.lower(): v for k, v in pets.seen[-1].headers.items()}
    assert headers["user-agent"] == "tooldb"
    assert headers["accept"] == "application/json, */*;q=0.5"
    with guarded_client(policy("public")) as client, pytest.raises(HostNotAllowed):
        client.get(f"{pets.url}/pets/1")

    async def fetch(guard: HostPolicy) -> httpx.Response:
        async with guarded_async_client(guard) as client:
            return await client.get(f"{pets.url}/pets/2")

    assert asyncio.run(fetch(policy("127.0.0.1"))).json()["name"] == "Tom"
    assert pets.seen[-1].headers["User-Agent"] == "tooldb"
    with pytest.raises(HostNotAllowed):
        asyncio.run(fetch(policy("public")))


def test_the_guarded_clients_follow_no_redirect_trust_no_environment_and_pool_like_httpx(
    pets: PetsServer,
) -> None:
    for client in (guarded_client(policy("127.0.0.1")), guarded_async_client(policy("::1"))):
        assert client.follow_redirects is False and client.trust_env is False
        pool = client._transport._pool  # type: ignore[attr-defined]
        assert (pool._max_connections, pool._max_keepalive_connections) == (100, 20)
        assert pool._keepalive_expiry == 5.0
        assert pool._ssl_context.verify_mode == http_guard.ssl_context().verify_mode
    with guarded_client(policy("127.0.0.1")) as client:
        moved = client.get(f"{pets.url}/redirect", params={"to": "/pets/1"})
    assert moved.is_redirect and len(pets.seen) == 1


def test_a_connection_refused_on_every_address_is_raised() -> None:
    with socket.socket() as probe:  # a port nothing listens on
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    with guarded_client(policy("127.0.0.1")) as client, pytest.raises(httpx.ConnectError):
        client.get(f"http://127.0.0.1:{port}/")

    async def fetch() -> None:
        async with guarded_async_client(policy("127.0.0.1")) as client:
            await client.get(f"http://127.0.0.1:{port}/")

    with pytest.raises(httpx.ConnectError):
        asyncio.run(fetch())


class _Ok(http.server.BaseHTTPRequestHandler):
    def do_GET(self) -> None:
        self.send_response(200)
        self.send_header("Content-Length", "2")
        self.end_headers()
        self.wfile.write(b"ok")

    def log_message(self, *_args: Any) -> None:
        """No access log on the test's output."""


def test_the_connection_goes_to_the_checked_address() -> None:
    """A server on 127.0.0.2 only: a connection made to anything but the address the
    policy checked (say, the default loopback address) finds nothing listening."""
    server = http.server.HTTPServer(("127.0.0.2", 0), _Ok)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    url = f"http://127.0.0.2:{server.server_address[1]}/"
    try:
        with guarded_client(policy("127.0.0.2")) as client:
            assert client.get(url).text == "ok"

        async def fetch() -> str:
            async with guarded_async_client(policy("127.0.0.2")) as client:
                return (await client.get(url)).text

        assert asyncio.run(fetch()) == "ok"
    finally:
        server.shutdown()
        server.server_close()


def test_the_connect_timeout_reaches_the_socket() -> None:
    """A listener whose backlog is full drops new handshakes: the connect hangs until
    the client's connect timeout, which both guarded backends must pass on."""
    with socket.socket() as listener:
        listener.bind(("127.0.0.1", 0))
        listener.listen(0)
        port = listener.getsockname()[1]
        waiting = [socket.socket() for _ in range(3)]
        for sock in waiting:
            sock.setblocking(False)
            sock.connect_ex(("127.0.0.1", port))
        time.sleep(0.2)
        url, timeout = f"http://127.0.0.1:{port}/", httpx.Timeout(5, connect=0.3)
        outcome: list[BaseException] = []

        def fetch_sync() -> None:
            try:
                with guarded_client(policy("127.0.0.1")) as client:
                    client.get(url, timeout=timeout)
            except BaseException as exc:  # what the thread saw, checked below
                outcome.append(exc)

        thread = threading.Thread(target=fetch_sync, daemon=True)
        thread.start()
        thread.join(10)
        assert [type(e) for e in outcome] == [httpx.ConnectTimeout]

        async def fetch_async() -> None:
            async with guarded_async_client(policy("127.0.0.1")) as client:
                await client.get(url, timeout=timeout)

        with pytest.raises(httpx.ConnectTimeout):
            asyncio.run(asyncio.wait_for(fetch_async(), 10))
        for sock in waiting:
            sock.close()


def test_the_backends_refuse_unix_sockets_and_sleep_through_their_inner_backend() -> None:
    sync_backend = http_guard._GuardedBackend(policy("*"))
    with pytest.raises(HostNotAllowed) as refused:
        sync_backend.connect_unix_socket("/run/docker.sock")
    assert str(refused.value) == "HTTP tools do not connect to Unix sockets"
    sync_backend.sleep(0.001)
    async_backend = http_guard._AsyncGuardedBackend(policy("*"))
    with pytest.raises(HostNotAllowed) as refused:
        asyncio.run(async_backend.connect_unix_socket("/run/docker.sock"))
    assert str(refused.value) == "HTTP tools do not connect to Unix sockets"
    asyncio.run(async_backend.sleep(0.001))
    assert isinstance(async_backend.inner, httpcore.AnyIOBackend)


def test_an_httpx_without_the_expected_pool_is_refused() -> None:
    with pytest.raises(RuntimeError) as refused:
        http_guard._expect_pool(object(), httpcore.ConnectionPool)
    assert str(refused.value) == "this httpx version is not supported by tooldb's host guard"
    http_guard._expect_pool(httpx.HTTPTransport(), httpcore.ConnectionPool)
