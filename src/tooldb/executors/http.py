"""HTTP tools: ``"METHOD URL-template"`` targets sent with httpx through the host guard.

One pooled client per executor (and one async client per event loop); only hosts the
``http_allowed_hosts`` setting allows are ever connected to; secrets are looked up at
call time by name (``settings.secrets``, then the environment) and never stored.
See ``http_plan`` for how arguments map onto the request.
"""

from __future__ import annotations

import asyncio
import os
import ssl
import threading
import weakref
from typing import TYPE_CHECKING, Any

from ..errors import DefinitionError, ExecutionError
from ..settings import Settings
from ..types import ToolKind, ToolRecord, ToolSpec
from .http_plan import HttpPlan, Outgoing, build_request, parse_plan

if TYPE_CHECKING:
    import httpx

    from .http_guard import HostPolicy
    from .http_transfer import Transfer


class HttpExecutor:
    """Runs http tools; httpx is imported on the first call, not at startup."""

    kind = ToolKind.HTTP

    def __init__(self, settings: Settings | None = None) -> None:
        self.settings = settings or Settings()
        self._plans: dict[str, HttpPlan] = {}
        self._lock = threading.Lock()
        self._client: httpx.Client | None = None
        self._client_pid = 0
        self._async_clients: weakref.WeakKeyDictionary[
            asyncio.AbstractEventLoop, httpx.AsyncClient
        ] = weakref.WeakKeyDictionary()
        self._shared: tuple[HostPolicy, ssl.SSLContext] | None = None

    def check(self, spec: ToolSpec) -> None:
        parse_plan(spec)

    def prepare(self, tool: ToolRecord) -> None:
        """Parse the plan and load httpx, the policy and the TLS context (once)."""
        self._plan(tool)
        self._warm()

    def blocking(self, tool: ToolRecord) -> bool:
        """Yes: in ``call_many`` a request is bound, sent with the pooled sync client and
        recorded in one worker-thread hop. httpx's async stack (anyio, httpcore) costs
        about twice the CPU per request, which on two cores made ten parallel calls
        1.4x one call's time instead of 1.2x (bench/parallel.py). ``arun`` (async
        client, cancellable mid-request) stays for callers on their own loop."""
        return True

    def run(self, tool: ToolRecord, arguments: dict[str, Any], timeout_s: float | None) -> Any:
        from .http_transfer import send

        return send(self.client(), self._transfer(tool, arguments, timeout_s))

    async def arun(
        self, tool: ToolRecord, arguments: dict[str, Any], timeout_s: float | None
    ) -> Any:
        from .http_transfer import asend

        transfer = self._transfer(tool, arguments, timeout_s)
        try:
            return await asyncio.wait_for(asend(self.async_client(), transfer), transfer.timeout_s)
        except TimeoutError:
            raise transfer.timed_out() from None

    def fetch_document(self, url: str) -> bytes:
        """GET a document (an OpenAPI spec) through the same host guard and size cap."""
        from .http_transfer import Transfer, send

        self._warm()
        accept = ("Accept", "application/json, application/yaml;q=0.9, */*;q=0.5")
        outgoing = Outgoing("GET", url, [], [accept])
        cap = self.settings.http_max_response_bytes
        body: bytes = send(
            self.client(),
            Transfer("OpenAPI document", outgoing, self.settings.http_timeout_s, cap, raw=True),
        )
        return body

    def secret(self, name: str) -> str | None:
        """A secret's value: the settings' ``secrets`` table first, then the environment."""
        return self.settings.secrets.get(name) or os.environ.get(name)

    def policy(self) -> HostPolicy:
        return self._warm()[0]

    def _warm(self) -> tuple[HostPolicy, ssl.SSLContext]:
        if self._shared is None:
            from . import http_transfer  # noqa: F401  (imports httpx before the clock)
            from .http_guard import HostPolicy, ssl_context

            with self._lock:
                if self._shared is None:
                    policy = HostPolicy.from_patterns(self.settings.http_allowed_hosts)
                    self._shared = (policy, ssl_context())
        return self._shared

    def client(self) -> httpx.Client:
        """The shared synchronous client (a new one in a forked child)."""
        from .http_guard import guarded_client

        policy, tls = self._warm()
        with self._lock:
            if self._client is None or self._client_pid != os.getpid():
                self._client = guarded_client(policy, tls)
                self._client_pid = os.getpid()
            return self._client

    def async_client(self) -> httpx.AsyncClient:
        """The shared client of the running event loop (async connections belong to one)."""
        from .http_guard import guarded_async_client

        policy, tls = self._warm()
        loop = asyncio.get_running_loop()
        with self._lock:
            client = self._async_clients.get(loop)
            if client is None:
                client = self._async_clients[loop] = guarded_async_client(policy, tls)
            return client

    def close(self) -> None:
        with self._lock:
            client, self._client = self._client, None
        if client is not None and self._client_pid == os.getpid():
            client.close()

    def _plan(self, tool: ToolRecord) -> HttpPlan:
        plan = self._plans.get(tool.content_hash)
        if plan is None:
            try:
                plan = parse_plan(tool.spec)
            except DefinitionError as exc:
                raise ExecutionError(str(exc)) from None
            with self._lock:
                if len(self._plans) > 10_000:
                    self._plans.clear()
                self._plans[tool.content_hash] = plan
        return plan

    def _transfer(
        self, tool: ToolRecord, arguments: dict[str, Any], timeout_s: float | None
    ) -> Transfer:
        from .http_transfer import Transfer

        try:
            outgoing = build_request(self._plan(tool), arguments, self.secret)
        except ExecutionError as exc:
            raise ExecutionError(f"tool {tool.name!r}: {exc}") from None
        cap = self.settings.http_timeout_s
        timeout = min(timeout_s, cap) if timeout_s else cap
        max_bytes = self.settings.http_max_response_bytes
        return Transfer(f"tool {tool.name!r}", outgoing, timeout, max_bytes)
