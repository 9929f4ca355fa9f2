"""The dashboard: server-rendered pages (Jinja2, autoescaped) over the same registry as
the API. Signing in stores the key in an HttpOnly, SameSite=Strict cookie; every form
carries a CSRF token bound to that key; changing a tool or undoing an act needs the
``admin`` scope, whatever the page shows."""

from __future__ import annotations

import json
import math
from collections.abc import Awaitable, Callable
from importlib.resources import files
from typing import Any, TypeVar
from urllib.parse import quote, urlsplit

import jinja2
from fastapi import APIRouter, FastAPI, Form, Query, Request
from fastapi.responses import HTMLResponse, RedirectResponse, Response
from fastapi.staticfiles import StaticFiles
from fastapi.templating import Jinja2Templates

from ..errors import NotFound, ToolDBError
from ..registry import Registry
from ..types import RunStatus
from .api_runs import run_details
from .app import COOKIE, ServerState, state_of
from .auth import Principal, Scope
from .problems import status_of
from .views import WeekCounts, draw_graph, sparkline

PAGE = 50
_Handler = TypeVar("_Handler", bound=Callable[..., Awaitable[Response]])
_package = files("tooldb.server")
templates = Jinja2Templates(
    env=jinja2.Environment(
        loader=jinja2.FileSystemLoader(str(_package / "templates")),
        autoescape=True,
        undefined=jinja2.StrictUndefined,
    )
)
templates.env.filters["pretty"] = lambda value: json.dumps(
    value, indent=2, ensure_ascii=False, default=str
)
templates.env.filters["pct"] = lambda rate: "-" if rate is None else f"{rate:.0%}"
templates.env.filters["ms"] = lambda v: "-" if v is None else f"{v:.1f}"
templates.env.filters["score"] = lambda v: "-" if v is None else f"{v:.3f}"


class _SignIn(Exception):
    """No signed-in key: the page sends the browser to /login."""


def _principal(request: Request) -> Principal:
    state = state_of(request)
    if state.config.no_auth:
        return state.no_auth_principal()
    key = request.cookies.get(COOKIE)
    principal = state.principal_of_key(key) if key else None
    if principal is None:
        raise _SignIn
    return principal


def _registry(request: Request, principal: Principal) -> Registry:
    return state_of(request).registry(principal.tenant)


def _render(
    request: Request, name: str, principal: Principal | None, code: int = 200, **context: Any
) -> HTMLResponse:
    state: ServerState = state_of(request)
    context.update(
        principal=principal,
        admin=principal is not None and principal.may(Scope.ADMIN),
        csrf=state.csrf.token(principal) if principal else "",
        no_auth=state.config.no_auth,
        path=request.url.path,
    )
    return templates.TemplateResponse(request, name, context, status_code=code)


def _check_form(request: Request, principal: Principal, csrf: str, needed: Scope) -> None:
    if not state_of(request).csrf.check(principal, csrf):
        raise _Refused("the form's CSRF token is missing or wrong: reload the page and retry")
    if not principal.may(needed):
        raise _Refused(f"your key has scope {principal.scope.label!r}; this needs {needed.label!r}")


class _Refused(Exception):
    """A request the key's scope does not allow (answered 403 with the message)."""


def install(app: FastAPI) -> None:
    """Add the dashboard's pages, forms, error pages and static files to ``app``."""
    app.mount("/static", StaticFiles(directory=str(_package / "static")), name="static")
    app.state.week_counts = WeekCounts()
    app.include_router(router)
    for exception, handler in _HANDLERS.items():
        app.add_exception_handler(exception, handler)


def _week_counts(request: Request) -> WeekCounts:
    """Each app keeps its own cache of complete days' call counts."""
    counts: WeekCounts = request.app.state.week_counts
    return counts


router = APIRouter(include_in_schema=False)
_HANDLERS: dict[type[Exception], Callable[[Request, Any], Awaitable[Response]]] = {}


def _handles(exception: type[Exception]) -> Callable[[_Handler], _Handler]:
    """Register ``handler`` as the dashboard's answer to ``exception`` (see install)."""

    def register(handler: _Handler) -> _Handler:
        _HANDLERS[exception] = handler
        return handler

    return register


@_handles(_SignIn)
async def _sign_in(request: Request, _: _SignIn) -> Response:
    target = request.url.path + (f"?{request.url.query}" if request.url.query else "")
    return RedirectResponse(f"/login?next={quote(target)}", status_code=303)


@_handles(_Refused)
async def _refused(request: Request, exc: _Refused) -> Response:
    return _render(request, "error.html", None, 403, message=str(exc))


@router.get("/login")
def login_page(request: Request, next: str = "/") -> HTMLResponse:
    return _render(request, "login.html", None, next=_local(next), message="")


@router.post("/login")
def login(request: Request, key: str = Form(...), next: str = Form("/")) -> Response:
    principal = state_of(request).principal_of_key(key.strip())
    if principal is None:
        return _render(
            request, "login.html", None, 401, next=_local(next),
            message="That key is unknown or revoked.",
        )  # fmt: skip
    response = RedirectResponse(_local(next), status_code=303)
    secure = request.url.scheme == "https"
    response.set_cookie(COOKIE, key.strip(), httponly=True, samesite="strict", secure=secure)
    return response


@router.post("/logout")
def logout() -> Response:
    response = RedirectResponse("/login", status_code=303)
    response.delete_cookie(COOKIE)
    return response


@router.get("/")
def tools_page(request: Request, page: int = Query(1, ge=1)) -> HTMLResponse:
    principal = _principal(request)
    registry = _registry(request, principal)
    every = registry.list(include_disabled=True)
    pages = max(1, math.ceil(len(every) / PAGE))
    shown = every[(page - 1) * PAGE : page * PAGE]
    names = [t.name for t in shown]
    days = _week_counts(request).counts(registry.store, registry.tenant, names)
    p50 = registry.store.recent_p50_ms(registry.tenant, names)
    rows = [
        {"tool": t, "p50": p50.get(t.name), "spark": sparkline(days.get(t.name, []))} for t in shown
    ]
    return _render(
        request, "tools.html", principal, rows=rows, page=page, pages=pages,
        total=len(every),
    )  # fmt: skip


@router.post("/tools/{name}/{action}")
def tool_action(request: Request, name: str, action: str, csrf: str = Form("")) -> Response:
    principal = _principal(request)
    _check_form(request, principal, csrf, Scope.ADMIN)
    registry = _registry(request, principal)
    if action == "enable":
        registry.enable(name)
    elif action == "disable":
        registry.disable(name)
    else:
        raise _Refused(f"unknown action {action!r}: enable or disable")
    return RedirectResponse(_back(request), status_code=303)


@router.get("/runs")
def runs_page(
    request: Request, status: str = "", page: int = Query(1, ge=1), review: bool = False
) -> HTMLResponse:
    principal = _principal(request)
    registry = _registry(request, principal)
    chosen = status if status in {s.value for s in RunStatus} else None
    found = registry.store.runs_page(
        registry.tenant, status=chosen, review=review, limit=PAGE + 1,
        offset=(page - 1) * PAGE,
    )  # fmt: skip
    return _render(
        request, "runs.html", principal, runs=found[:PAGE], more=len(found) > PAGE,
        page=page, status=chosen or "", review=review,
        statuses=[s.value for s in RunStatus],
    )  # fmt: skip


@router.get("/review")
def review_page(request: Request, page: int = Query(1, ge=1)) -> HTMLResponse:
    return runs_page(request, "", page, True)


@router.get("/runs/{run_id}")
def run_page(request: Request, run_id: str) -> HTMLResponse:
    principal = _principal(request)
    registry = _registry(request, principal)
    try:
        details = run_details(registry, run_id)
    except NotFound as exc:
        return _render(request, "error.html", principal, 404, message=str(exc))
    drawing = draw_graph(registry.trace(run_id).graph)
    return _render(request, "run.html", principal, run=details, drawing=drawing)


@router.get("/calls/{call_id}")
def call_page(request: Request, call_id: int) -> HTMLResponse:
    principal = _principal(request)
    try:
        found = _registry(request, principal).explain(call_id)
    except NotFound as exc:
        return _render(request, "error.html", principal, 404, message=str(exc))
    return _render(request, "call.html", principal, found=found)


@router.get("/ooda")
def ooda_page(request: Request, analyse: bool = False) -> HTMLResponse:
    """The acts, and on request a fresh analysis (it reads the whole window of the
    call log, so it is not done on every view)."""
    principal = _principal(request)
    optimizer = _registry(request, principal).ooda
    return _render(
        request, "ooda.html", principal, acts=optimizer.history(100), analysed=analyse,
        findings=optimizer.findings() if analyse else [],
    )  # fmt: skip


@router.post("/ooda/acts/{act_id}/undo")
def undo_act(request: Request, act_id: int, csrf: str = Form("")) -> Response:
    principal = _principal(request)
    _check_form(request, principal, csrf, Scope.ADMIN)
    _registry(request, principal).ooda.undo(act_id)
    return RedirectResponse("/ooda", status_code=303)


@router.get("/select")
def select_page(request: Request, task: str = "", k: int = Query(5, ge=1, le=50)) -> HTMLResponse:
    principal = _principal(request)
    selection, message = None, ""
    if task.strip():
        try:
            selection = _registry(request, principal).select(task, k, record=False)
        except ToolDBError as exc:
            message = str(exc)
    return _render(
        request, "select.html", principal, task=task, k=k, selection=selection,
        message=message,
    )  # fmt: skip


@_handles(ToolDBError)
async def _tooldb_error(request: Request, exc: ToolDBError) -> Response:
    if request.url.path.startswith("/api/"):
        from .problems import tooldb_problem

        return tooldb_problem(exc)
    status, _ = status_of(exc)
    return _render(request, "error.html", None, status, message=str(exc))


def _back(request: Request) -> str:
    """The page a form was posted from, if it was one of this server's, else ``/``."""
    referer = urlsplit(request.headers.get("referer", ""))
    if referer.netloc and referer.netloc != request.url.netloc:
        return "/"
    return (
        _local(referer.path + (f"?{referer.query}" if referer.query else ""))
        if referer.path
        else "/"
    )


def _local(target: str) -> str:
    """Only redirect within this server (no ``//evil.example`` after signing in)."""
    return target if target.startswith("/") and target[1:2] not in ("/", "\\") else "/"
