"""Errors as RFC 9457 problem details (``application/problem+json``).

tooldb's error tree maps onto HTTP as the CLI's exit codes do: a caller's mistake (exit
2) is a 4xx naming what was wrong (404 no such object in this tenant, 422 arguments or
a definition that do not validate, 400 anything else), an unusable store is 503. A tool
that ran and failed is not an error here: ``call`` answers 200 with ``success: false``.
"""

from __future__ import annotations

from typing import Any

from fastapi import FastAPI, Request
from fastapi.exceptions import RequestValidationError
from fastapi.responses import JSONResponse
from starlette.exceptions import HTTPException as StarletteHTTPException

from ..errors import (
    ArgumentError,
    DefinitionError,
    ModelError,
    NotFound,
    StoreError,
    ToolDBError,
    ToolDisabled,
    UsageError,
)

PROBLEM_JSON = "application/problem+json"


def problem(
    status: int, title: str, detail: str, kind: str | None = None, **extra: Any
) -> JSONResponse:
    """A problem response; ``kind`` names tooldb's error type (``urn:tooldb:problem:KIND``)."""
    body: dict[str, Any] = {
        "type": f"urn:tooldb:problem:{kind}" if kind else "about:blank",
        "title": title,
        "status": status,
        "detail": detail,
    }
    body.update({k: v for k, v in extra.items() if v is not None})
    return JSONResponse(body, status_code=status, media_type=PROBLEM_JSON)


def status_of(exc: ToolDBError) -> tuple[int, str]:
    """The HTTP status and problem title for one of tooldb's errors."""
    if isinstance(exc, NotFound):
        return 404, "Not found"
    if isinstance(exc, ArgumentError | DefinitionError):
        return 422, "Invalid input"
    if isinstance(exc, ToolDisabled):
        return 400, "Tool disabled"
    if isinstance(exc, UsageError):
        return 400, "Bad request"
    if isinstance(exc, StoreError):
        return 503, "Store unavailable"
    if isinstance(exc, ModelError):
        return 502, "Model provider failed"
    return 500, "Failed"


def tooldb_problem(exc: ToolDBError) -> JSONResponse:
    status, title = status_of(exc)
    extra: dict[str, Any] = {}
    if isinstance(exc, ArgumentError):
        extra = {"tool": exc.tool, "parameter": exc.parameter, "problems": exc.problems}
    kind = "".join("-" + c.lower() if c.isupper() else c for c in type(exc).__name__)
    return problem(status, title, str(exc), kind.lstrip("-"), **extra)


def install_problem_handlers(app: FastAPI) -> None:
    @app.exception_handler(ToolDBError)
    async def _tooldb(_: Request, exc: ToolDBError) -> JSONResponse:
        return tooldb_problem(exc)

    @app.exception_handler(StarletteHTTPException)
    async def _http(_: Request, exc: StarletteHTTPException) -> JSONResponse:
        titles = {401: "Unauthorized", 403: "Forbidden", 404: "Not found", 405: "Not allowed"}
        response = problem(exc.status_code, titles.get(exc.status_code, "Error"), str(exc.detail))
        for name, value in (exc.headers or {}).items():
            response.headers[name] = value
        return response

    @app.exception_handler(RequestValidationError)
    async def _validation(_: Request, exc: RequestValidationError) -> JSONResponse:
        problems = [
            f"{'.'.join(str(p) for p in error.get('loc', ()))}: {error.get('msg', '')}"
            for error in exc.errors()
        ]
        detail = "; ".join(problems) or "the request does not validate"
        return problem(422, "Invalid request", detail, "request-validation", problems=problems)
