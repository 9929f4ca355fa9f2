"""The HTTP server: one FastAPI app holding one registry per tenant, the REST API
under ``/api/`` (header keys), the dashboard at ``/`` (a cookie holding the key, CSRF
tokens on its forms), problem details for errors, a request size limit, and CORS only
for the origins configured."""

from __future__ import annotations

import ipaddress
import threading
import time
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from typing import Any

from fastapi import Depends, FastAPI, HTTPException, Request
from fastapi.openapi.docs import get_swagger_ui_html
from fastapi.responses import HTMLResponse
from fastapi.security import HTTPAuthorizationCredentials, HTTPBearer
from starlette.concurrency import run_in_threadpool
from starlette.types import ASGIApp, Message, Receive, Scope, Send

from .. import __version__
from ..errors import UsageError
from ..registry import Registry
from .auth import CsrfTokens, Principal, authenticate, hash_key
from .auth import Scope as KeyScope
from .problems import install_problem_handlers, problem

COOKIE = "tooldb_key"
#: How long a looked-up key is trusted before it is read again (a revoke takes effect
#: within this), so a busy client costs no database read per request.
KEY_CACHE_S = 2.0


@dataclass
class ServerConfig:
    """How the server runs: ``no_auth`` acts as the registry's tenant with ``admin``
    scope for everyone (loopback only), ``max_body_bytes`` caps a request body,
    ``cors_origins`` are the only origins browsers may call the API from."""

    host: str = "127.0.0.1"
    no_auth: bool = False
    max_body_bytes: int = 1 << 20
    cors_origins: list[str] = field(default_factory=list)


def is_loopback(host: str) -> bool:
    if host == "localhost":
        return True
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        return False


class ServerState:
    """The registries the server serves (one per tenant, sharing the store) and its
    key cache and CSRF secret."""

    def __init__(self, registry: Registry, config: ServerConfig) -> None:
        if config.no_auth and not is_loopback(config.host):
            raise UsageError(
                f"--no-auth serves everyone as admin: only on a loopback address, not {config.host}"
            )
        self.base = registry
        self.config = config
        self.csrf = CsrfTokens()
        self._registries: dict[str, Registry] = {registry.tenant: registry}
        self._keys: dict[str, tuple[float, Principal | None]] = {}
        self._lock = threading.Lock()

    def registry(self, tenant: str) -> Registry:
        found = self._registries.get(tenant)
        if found is None:
            with self._lock:
                found = self._registries.get(tenant)
                if found is None:
                    found = self.base.for_tenant(tenant)
                    self._registries[tenant] = found
        return found

    def cached_principal(self, key: str) -> tuple[bool, Principal | None]:
        """(True, the key's principal) when it was looked up lately, else (False, None)."""
        cached = self._keys.get(hash_key(key))
        if cached is not None and time.monotonic() - cached[0] < KEY_CACHE_S:
            return True, cached[1]
        return False, None

    def principal_of_key(self, key: str) -> Principal | None:
        found, principal = self.cached_principal(key)
        if found:
            return principal
        digest, now = hash_key(key), time.monotonic()
        principal = authenticate(self.base.store, key)
        if len(self._keys) > 10_000:
            self._keys.clear()
        self._keys[digest] = (now, principal)
        return principal

    def no_auth_principal(self) -> Principal:
        return Principal(self.base.tenant, KeyScope.ADMIN, "no-auth")


def state_of(request: Request) -> ServerState:
    state: ServerState = request.app.state.tooldb
    return state


async def api_principal(request: Request) -> Principal:
    """The API's caller, from ``Authorization: Bearer KEY`` or ``X-API-Key: KEY``
    (never a cookie: a form on another site cannot post to the API as a signed-in user).
    A key seen in the last ``KEY_CACHE_S`` costs no database read and no thread hop."""
    state = state_of(request)
    if state.config.no_auth:
        return state.no_auth_principal()
    header = request.headers.get("authorization", "")
    key = header[7:].strip() if header[:7].lower() == "bearer " else ""
    key = key or request.headers.get("x-api-key", "").strip()
    if not key:
        raise HTTPException(
            401, "no API key: send Authorization: Bearer KEY", {"WWW-Authenticate": "Bearer"}
        )
    found, principal = state.cached_principal(key)
    if not found:
        principal = await run_in_threadpool(state.principal_of_key, key)
    if principal is None:
        raise HTTPException(
            401, "the API key is unknown or revoked", {"WWW-Authenticate": "Bearer"}
        )
    return principal


#: Declares the key in the OpenAPI description (Swagger UI's Authorize button); the
#: key itself is read by ``api_principal``, which also takes ``X-API-Key``.
_bearer = HTTPBearer(auto_error=False, description="An API key: `tooldb keys create`")


def require(scope: KeyScope) -> Callable[..., Awaitable[Principal]]:
    """A dependency: the caller, who must hold at least ``scope``."""

    async def dependency(
        request: Request, _: HTTPAuthorizationCredentials | None = Depends(_bearer)
    ) -> Principal:
        principal = await api_principal(request)
        if not principal.may(scope):
            raise HTTPException(
                403, f"this key has scope {principal.scope.label!r}; this needs {scope.label!r}"
            )
        return principal

    return dependency


def registry_for(principal: Principal, request: Request) -> Registry:
    return state_of(request).registry(principal.tenant)


Reader = Depends(require(KeyScope.READ))
Caller = Depends(require(KeyScope.CALL))
Admin = Depends(require(KeyScope.ADMIN))


class BodyLimit:
    """Refuse a request body over ``max_bytes`` (413), whether it declares its length
    or streams it in chunks, before the app reads it all; and say how long the server
    took to answer (``Server-Timing: app;dur=MS``, shown by browsers' developer tools
    and read by bench/http_api.py)."""

    def __init__(self, app: ASGIApp, max_bytes: int) -> None:
        self.app = app
        self.max_bytes = max_bytes

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        for name, value in scope.get("headers", []):
            if name == b"content-length" and value.isdigit() and int(value) > self.max_bytes:
                await self._refuse(scope, receive, send)
                return
        seen = 0
        too_large = False
        started = time.perf_counter()

        async def counted() -> Message:
            nonlocal seen, too_large
            if too_large:
                return {"type": "http.disconnect"}
            message = await receive()
            if message["type"] == "http.request":
                seen += len(message.get("body", b""))
                if seen > self.max_bytes:
                    too_large = True  # the app sees the client gone, and is not answered
                    return {"type": "http.disconnect"}
            return message

        async def unless_too_large(message: Message) -> None:
            if too_large:
                return
            if message["type"] == "http.response.start":
                took = f"app;dur={(time.perf_counter() - started) * 1000:.3f}".encode()
                message["headers"] = [*message.get("headers", []), (b"server-timing", took)]
            await send(message)

        try:
            await self.app(scope, counted, unless_too_large)
        except Exception:
            if not too_large:
                raise
        if too_large:
            await self._refuse(scope, receive, send)

    async def _refuse(self, scope: Scope, receive: Receive, send: Send) -> None:
        detail = f"the request body is over {self.max_bytes} bytes"
        await problem(413, "Request too large", detail)(scope, receive, send)


def create_app(registry: Registry, config: ServerConfig | None = None) -> FastAPI:
    """The app serving ``registry`` (and its store's other tenants, by key)."""
    from . import api_ooda, api_runs, api_tools, dashboard

    config = config or ServerConfig()
    app = FastAPI(
        title="tooldb",
        version=__version__,
        description="The tool registry over HTTP: tools, calls, selection, runs, OODA.",
        openapi_url="/api/openapi.json",
        docs_url=None,  # served below from the package's own copy of Swagger UI
        redoc_url=None,
    )

    @app.get("/docs", include_in_schema=False)
    def docs() -> HTMLResponse:
        """The interactive API reference, with Swagger UI vendored in the package
        (static/swagger-ui/, no CDN)."""
        return get_swagger_ui_html(
            openapi_url="/api/openapi.json",
            title="tooldb API",
            swagger_js_url="/static/swagger-ui/swagger-ui-bundle.js",
            swagger_css_url="/static/swagger-ui/swagger-ui.css",
            swagger_favicon_url="data:,",
        )

    app.state.tooldb = ServerState(registry, config)
    install_problem_handlers(app)
    for module in (api_tools, api_runs, api_ooda):
        app.include_router(module.router, prefix="/api")
    dashboard.install(app)
    if config.cors_origins:
        from fastapi.middleware.cors import CORSMiddleware

        app.add_middleware(
            CORSMiddleware,
            allow_origins=config.cors_origins,
            allow_methods=["GET", "POST", "DELETE"],
            allow_headers=["Authorization", "X-API-Key", "Content-Type"],
        )
    app.add_middleware(BodyLimit, max_bytes=config.max_body_bytes)
    return app


Handler = Callable[..., Awaitable[Any]]
