"""``/api/tools``, ``/api/select``, ``/api/calls`` and ``/api/stats``: the registry's
tools, calling them, selection and the call log, for the key's tenant."""

from __future__ import annotations

from typing import Any

from fastapi import APIRouter, Body, Query, Request
from fastapi.responses import JSONResponse
from pydantic import BaseModel, Field

from ..errors import UsageError
from ..types import ToolKind
from .app import Admin, Caller, Reader, registry_for
from .auth import Principal

router = APIRouter(tags=["tools"])

#: Kinds a manifest posted over HTTP may not register: a python tool imports and runs
#: any module of the server's environment. Register those with the CLI on the server.
_LOCAL_ONLY_KINDS = {ToolKind.PYTHON.value}


class CallRequest(BaseModel):
    arguments: dict[str, Any] | None = None
    run_id: str | None = None
    timeout_s: float | None = Field(default=None, gt=0)


class SelectRequest(BaseModel):
    task: str
    k: int = Field(default=5, ge=1, le=100)
    category: str | None = None
    kind: str | None = None
    record: bool = True


@router.get("/tools")
def list_tools(
    request: Request,
    category: str | None = None,
    kind: str | None = None,
    include_disabled: bool = False,
    principal: Principal = Reader,
) -> dict[str, Any]:
    """The tenant's tools with their statistics, by name."""
    registry = registry_for(principal, request)
    tools = registry.list(category=category, kind=kind, include_disabled=include_disabled)
    return {"tools": [tool.summary() for tool in tools]}


@router.get("/tools/{name}")
def show_tool(name: str, request: Request, principal: Principal = Reader) -> dict[str, Any]:
    """One tool, its statistics and every version."""
    registry = registry_for(principal, request)
    tool = registry.get(name)
    return {
        "tool": tool.summary(),
        "versions": [v.model_dump(mode="json") for v in registry.versions(name)],
    }


@router.post("/tools", status_code=201)
def add_tools(
    request: Request,
    manifest: Any = Body(
        ...,
        description='A manifest: one tool object, a list of them, or {"tools": [...]}',
        examples=[{"tools": [{"name": "get_pet", "kind": "http", "target": "GET http://..."}]}],
    ),
    principal: Principal = Admin,
) -> dict[str, Any]:
    """Register the tools of a manifest body (JSON), all or none: a new name is created,
    a changed definition becomes a new version, an identical one is unchanged."""
    entries = (
        manifest.get("tools") if isinstance(manifest, dict) and "tools" in manifest else manifest
    )
    entries = entries if isinstance(entries, list) else [entries]
    for entry in entries:
        if isinstance(entry, dict) and str(entry.get("kind", "python")) in _LOCAL_ONLY_KINDS:
            raise UsageError(
                f"tool {entry.get('name')!r}: {entry.get('kind', 'python')} tools run code of the "
                "server's environment; register them with `tooldb add` on the server"
            )
    registry = registry_for(principal, request)
    outcomes = registry.add(*entries)
    return {
        "tools": [
            {"name": o.record.name, "version": o.record.version, "status": o.status}
            for o in outcomes
        ],
        "embedding_error": registry.embedding_error,
    }


@router.post("/tools/{name}/enable")
def enable_tool(name: str, request: Request, principal: Principal = Admin) -> dict[str, Any]:
    registry_for(principal, request).enable(name)
    return {"name": name, "enabled": True}


@router.post("/tools/{name}/disable")
def disable_tool(name: str, request: Request, principal: Principal = Admin) -> dict[str, Any]:
    registry_for(principal, request).disable(name)
    return {"name": name, "enabled": False}


@router.delete("/tools/{name}")
def remove_tool(name: str, request: Request, principal: Principal = Admin) -> dict[str, Any]:
    """Delete the tool and its versions; its recorded calls are kept."""
    registry_for(principal, request).remove(name)
    return {"name": name, "removed": True}


@router.post("/tools/{name}/call")
async def call_tool(
    name: str, request: Request, body: CallRequest | None = None, principal: Principal = Caller
) -> JSONResponse:
    """Bind, run and record one call; the ToolResult. 200 whether the tool succeeded or
    failed (``success`` says which), 404 no such tool, 422 the arguments do not bind,
    400 the tool is disabled or the request cannot be done."""
    body = body or CallRequest()
    registry = registry_for(principal, request)
    result = await registry.acall(
        name, body.arguments or {}, run_id=body.run_id, timeout_s=body.timeout_s
    )
    return JSONResponse(result.model_dump(mode="json"))


@router.post("/select")
def select(body: SelectRequest, request: Request, principal: Principal = Reader) -> dict[str, Any]:
    """The k enabled tools most likely to do the task, best first, each with every part
    of its score (relevance from dense and lexical, success, latency, final)."""
    registry = registry_for(principal, request)
    found = registry.select(
        body.task, body.k, category=body.category, kind=body.kind, record=body.record
    )
    return found.model_dump(mode="json")


@router.get("/calls")
def list_calls(
    request: Request,
    tool: str | None = None,
    run_id: str | None = None,
    limit: int = Query(default=50, ge=0, le=1000),
    principal: Principal = Reader,
) -> dict[str, Any]:
    """The call log, newest first, by tool and run."""
    calls = registry_for(principal, request).calls(tool=tool, run_id=run_id, limit=limit)
    return {"calls": [call.model_dump(mode="json") for call in calls]}


@router.get("/calls/{call_id}/explain")
def explain_call(call_id: int, request: Request, principal: Principal = Reader) -> dict[str, Any]:
    """A call walked back to its run, task and the selection decision behind it."""
    return registry_for(principal, request).explain(call_id).model_dump(mode="json")


@router.get("/stats")
def stats(request: Request, principal: Principal = Reader) -> dict[str, Any]:
    """Every tool, enabled or not, with its live statistics."""
    tools = registry_for(principal, request).stats()
    return {"tools": [{"name": t.name, "enabled": t.enabled, **t.stats.summary()} for t in tools]}
