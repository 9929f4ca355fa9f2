"""Which hosts HTTP tools may reach: checked by name before a request is sent, and again
by address when a connection is opened (so DNS cannot change the answer in between).

Patterns of the ``http_allowed_hosts`` setting:

* ``public`` (the default): any host whose *every* address is public, i.e. not loopback,
  private, link-local (cloud metadata at 169.254.169.254), unique-local, shared, multicast,
  reserved or unspecified;
* ``*``: any host at all (switches the guard off);
* ``api.example.com``: that host name; ``*.example.com``: any name below example.com;
* ``127.0.0.1``, ``::1``: that address; ``10.0.0.0/8``: that network.

A host named by a name pattern is allowed whatever it resolves to (the operator named
it). Any other host is resolved and each of its addresses must be listed or, with
``public``, be public: a DNS name that points at 127.0.0.1 is refused like 127.0.0.1.
"""

from __future__ import annotations

import ipaddress
import socket
import ssl
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from typing import Any

import anyio
import httpcore
import httpx

from ..errors import ExecutionError

IPAddress = ipaddress.IPv4Address | ipaddress.IPv6Address
IPNetwork = ipaddress.IPv4Network | ipaddress.IPv6Network


class HostNotAllowed(ExecutionError):
    """The host (or an address it resolves to) is not allowed by ``http_allowed_hosts``."""


class HostUnresolved(ExecutionError):
    """The host name does not resolve."""


@dataclass(frozen=True)
class HostPolicy:
    """Parsed ``http_allowed_hosts``: decides per host name and per resolved address."""

    public: bool
    anything: bool
    names: frozenset[str]
    suffixes: tuple[str, ...]
    networks: tuple[IPNetwork, ...]

    @classmethod
    def from_patterns(cls, patterns: Iterable[str]) -> HostPolicy:
        public = anything = False
        names: set[str] = set()
        suffixes: list[str] = []
        networks: list[IPNetwork] = []
        for raw in patterns:
            pattern = raw.strip().lower()
            if pattern == "public":
                public = True
            elif pattern == "*":
                anything = True
            elif pattern.startswith("*."):
                suffixes.append(_normal_name(pattern[1:]))
            else:
                network = _network(pattern)
                if network is not None:
                    networks.append(network)
                else:
                    names.add(_normal_name(pattern))
        return cls(public, anything, frozenset(names), tuple(suffixes), tuple(networks))

    def allows_name(self, host: str) -> bool:
        """True when the host is allowed by name alone (no address check needed)."""
        name = _normal_name(host)
        return self.anything or name in self.names or name.endswith(self.suffixes)

    def allows_address(self, address: IPAddress) -> bool:
        if any(address in network for network in self.networks):
            return True
        embedded = _embedded_ipv4(address)
        if embedded is not None and any(embedded in network for network in self.networks):
            return True
        return self.public and is_public(address)

    def check_addresses(self, host: str, addresses: Sequence[str]) -> None:
        """Raise HostNotAllowed unless the host is allowed by name or every address is."""
        if self.allows_name(host):
            return
        if not addresses:
            raise HostNotAllowed(f"host {host!r} does not resolve to any address")
        for text in addresses:
            address = ipaddress.ip_address(text.split("%", 1)[0])
            if not self.allows_address(address):
                shown = repr(host) if host == text else f"{host!r} (address {text})"
                raise HostNotAllowed(
                    f"host {shown} is not allowed: it is not a public address and not listed in "
                    "the http_allowed_hosts setting (TOOLDB_HTTP_ALLOWED_HOSTS)"
                )

    def resolve(self, host: str, port: int) -> list[str]:
        """The host's addresses, after checking them all (or the name) against the policy."""
        addresses = _literal(host) or _getaddrinfo(host, port)
        self.check_addresses(host, addresses)
        return addresses

    async def aresolve(self, host: str, port: int) -> list[str]:
        addresses = _literal(host)
        if not addresses:
            try:
                infos = await anyio.getaddrinfo(host, port, type=socket.SOCK_STREAM)
            except OSError as exc:
                raise HostUnresolved(f"cannot resolve host {host!r}: {exc}") from None
            addresses = _unique(str(info[4][0]) for info in infos)
        self.check_addresses(host, addresses)
        return addresses


_NAT64 = ipaddress.ip_network("64:ff9b::/96")


def is_public(address: IPAddress) -> bool:
    """Globally routable unicast; everything an SSRF would aim at is excluded, including
    IPv6 forms that carry an IPv4 address (mapped, NAT64, 6to4, Teredo)."""
    embedded = _embedded_ipv4(address)
    if embedded is not None and not is_public(embedded):
        return False
    return address.is_global and not address.is_multicast


def _embedded_ipv4(address: IPAddress) -> ipaddress.IPv4Address | None:
    if not isinstance(address, ipaddress.IPv6Address):
        return None
    if address.ipv4_mapped is not None:
        return address.ipv4_mapped
    if address in _NAT64:
        return ipaddress.IPv4Address(int(address) & 0xFFFFFFFF)
    if address.sixtofour is not None:
        return address.sixtofour
    if address.teredo is not None:
        return address.teredo[1]
    return None


def _network(pattern: str) -> IPNetwork | None:
    try:
        return ipaddress.ip_network(pattern.strip("[]"), strict=False)
    except ValueError:
        return None


def _normal_name(host: str) -> str:
    name = host.strip().strip("[]").lower().rstrip(".")
    try:
        return name.encode("idna").decode("ascii") if not name.isascii() else name
    except UnicodeError:
        return name


def _literal(host: str) -> list[str]:
    try:
        return [str(ipaddress.ip_address(host.strip("[]")))]
    except ValueError:
        return []


def _getaddrinfo(host: str, port: int) -> list[str]:
    try:
        infos = socket.getaddrinfo(host, port, type=socket.SOCK_STREAM)
    except OSError as exc:
        raise HostUnresolved(f"cannot resolve host {host!r}: {exc}") from None
    return _unique(str(info[4][0]) for info in infos)


def _unique(items: Iterable[str]) -> list[str]:
    return list(dict.fromkeys(items))


# -- connect-time guard ----------------------------------------------------------------


class _GuardedBackend(httpcore.NetworkBackend):
    """Resolves and checks the host itself, then connects to a checked address only."""

    def __init__(self, policy: HostPolicy) -> None:
        self.policy = policy
        self.inner = httpcore.SyncBackend()

    def connect_tcp(
        self,
        host: str,
        port: int,
        timeout: float | None = None,
        local_address: str | None = None,
        socket_options: Iterable[Any] | None = None,
    ) -> httpcore.NetworkStream:
        error: Exception | None = None
        for address in self.policy.resolve(host, port):
            try:
                return self.inner.connect_tcp(address, port, timeout, local_address, socket_options)
            except httpcore.ConnectError as exc:
                error = exc
        assert error is not None
        raise error

    def connect_unix_socket(self, *args: Any, **kwargs: Any) -> httpcore.NetworkStream:
        raise HostNotAllowed("HTTP tools do not connect to Unix sockets")

    def sleep(self, seconds: float) -> None:
        self.inner.sleep(seconds)


async def connect_checked(
    policy: HostPolicy,
    inner: Any,
    connect_error: type[Exception],
    host: str,
    port: int,
    timeout: float | None,
    local_address: str | None,
    socket_options: Iterable[Any] | None,
) -> Any:
    """Connect ``inner`` (an async httpcore-style backend) to the first of ``host``'s
    addresses that the policy allows and that answers: every address is checked as it is
    used, so a name cannot rebind to a refused one between the check and the connect."""
    error: Exception | None = None
    for address in await policy.aresolve(host, port):
        try:
            return await inner.connect_tcp(address, port, timeout, local_address, socket_options)
        except connect_error as exc:
            error = exc
    assert error is not None
    raise error


class _AsyncGuardedBackend(httpcore.AsyncNetworkBackend):
    def __init__(self, policy: HostPolicy) -> None:
        self.policy = policy
        self.inner = httpcore.AnyIOBackend()

    async def connect_tcp(
        self,
        host: str,
        port: int,
        timeout: float | None = None,
        local_address: str | None = None,
        socket_options: Iterable[Any] | None = None,
    ) -> httpcore.AsyncNetworkStream:
        return await connect_checked(
            self.policy, self.inner, httpcore.ConnectError, host, port, timeout, local_address,
            socket_options,
        )  # fmt: skip

    async def connect_unix_socket(self, *args: Any, **kwargs: Any) -> httpcore.AsyncNetworkStream:
        raise HostNotAllowed("HTTP tools do not connect to Unix sockets")

    async def sleep(self, seconds: float) -> None:
        await self.inner.sleep(seconds)


class _GuardedTransport(httpx.HTTPTransport):
    def __init__(self, policy: HostPolicy, ssl_context: ssl.SSLContext) -> None:
        super().__init__(verify=False)  # cheap: this pool and its context are replaced
        _expect_pool(self, httpcore.ConnectionPool)
        self._pool = httpcore.ConnectionPool(
            ssl_context=ssl_context,
            network_backend=_GuardedBackend(policy),
            max_connections=MAX_CONNECTIONS,
            max_keepalive_connections=MAX_KEEPALIVE,
            keepalive_expiry=KEEPALIVE_EXPIRY_S,
        )


class _AsyncGuardedTransport(httpx.AsyncHTTPTransport):
    def __init__(self, policy: HostPolicy, ssl_context: ssl.SSLContext) -> None:
        super().__init__(verify=False)
        _expect_pool(self, httpcore.AsyncConnectionPool)
        self._pool = httpcore.AsyncConnectionPool(
            ssl_context=ssl_context,
            network_backend=_AsyncGuardedBackend(policy),
            max_connections=MAX_CONNECTIONS,
            max_keepalive_connections=MAX_KEEPALIVE,
            keepalive_expiry=KEEPALIVE_EXPIRY_S,
        )


#: httpx's own defaults (``httpx.Limits()``): a bare httpcore pool would allow only 10
#: connections, so a ``call_many`` of 100 http calls ran in waves of 10.
MAX_CONNECTIONS, MAX_KEEPALIVE, KEEPALIVE_EXPIRY_S = 100, 20, 5.0


def _expect_pool(transport: object, kind: type) -> None:
    # httpx does not expose the network backend; replacing its pool is the one private
    # step, so fail loudly if a future httpx changes it rather than run unguarded.
    if not isinstance(getattr(transport, "_pool", None), kind):
        raise RuntimeError("this httpx version is not supported by tooldb's host guard")


_HEADERS = {"User-Agent": "tooldb", "Accept": "application/json, */*;q=0.5"}


def ssl_context() -> ssl.SSLContext:
    """A verifying TLS context (certifi's CAs); costly to build, so share one."""
    return httpx.create_ssl_context()


def guarded_client(policy: HostPolicy, tls: ssl.SSLContext | None = None) -> httpx.Client:
    """A pooled client whose every connection goes through the policy; no env proxies,
    no automatic redirects (the caller checks each hop)."""
    transport = _GuardedTransport(policy, tls or ssl_context())
    return httpx.Client(
        transport=transport, trust_env=False, follow_redirects=False, headers=_HEADERS
    )


def guarded_async_client(
    policy: HostPolicy, tls: ssl.SSLContext | None = None
) -> httpx.AsyncClient:
    transport = _AsyncGuardedTransport(policy, tls or ssl_context())
    return httpx.AsyncClient(
        transport=transport, trust_env=False, follow_redirects=False, headers=_HEADERS
    )
