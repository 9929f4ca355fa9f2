"""``/api/runs``: agent runs (a page by status or review flag, one run with its turns,
calls and sub-runs, its provenance trace) and a server-sent-events stream of a run's
events while it runs."""

from __future__ import annotations

import asyncio
import json
from collections.abc import AsyncIterator
from typing import Any

from fastapi import APIRouter, Query, Request
from fastapi.responses import StreamingResponse
from starlette.concurrency import run_in_threadpool

from ..errors import NotFound
from ..registry import Registry
from ..types import RunStatus
from .app import Reader, registry_for
from .auth import Principal

router = APIRouter(tags=["runs"])

#: How often a run's stream looks for new events, and for how long at most.
POLL_S = 0.25
MAX_STREAM_S = 3600.0


def run_details(registry: Registry, run_id: str) -> dict[str, Any]:
    """A run with its messages (turns), its calls (oldest first) and its sub-runs."""
    details = registry.store.get_run_details(registry.tenant, run_id)
    if details is None:
        raise NotFound(f"no run {run_id!r} in tenant {registry.tenant!r}")
    details["messages"] = registry.store.run_messages(run_id)
    calls = registry.calls(run_id=run_id, limit=10_000)
    details["calls"] = [c.model_dump(mode="json") for c in sorted(calls, key=lambda c: c.id)]
    children = registry.store.list_runs(registry.tenant, parent_run_id=run_id, limit=1000)
    details["children"] = [child.model_dump(mode="json") for child in children]
    return details


@router.get("/runs")
def list_runs(
    request: Request,
    status: RunStatus | None = None,
    review: bool = False,
    limit: int = Query(default=50, ge=1, le=1000),
    offset: int = Query(default=0, ge=0),
    principal: Principal = Reader,
) -> dict[str, Any]:
    """Runs, newest first: by ``status``, or only those flagged ``requires_review``."""
    registry = registry_for(principal, request)
    found = registry.store.runs_page(
        registry.tenant,
        status=status.value if status else None,
        review=review,
        limit=limit,
        offset=offset,
    )
    return {"runs": [run.model_dump(mode="json") for run in found]}


@router.get("/runs/{run_id}")
def show_run(run_id: str, request: Request, principal: Principal = Reader) -> dict[str, Any]:
    return run_details(registry_for(principal, request), run_id)


@router.get("/runs/{run_id}/trace")
def trace_run(run_id: str, request: Request, principal: Principal = Reader) -> dict[str, Any]:
    """The run's provenance: a graph and a time-ordered tree (docs/provenance.md)."""
    return registry_for(principal, request).trace(run_id).model_dump(mode="json")


@router.get("/runs/{run_id}/events", response_class=StreamingResponse)
async def run_events(
    run_id: str, request: Request, principal: Principal = Reader
) -> StreamingResponse:
    """Server-sent events of a run: ``message`` (each turn's message as written),
    ``call`` (each recorded call), then ``end`` with the run's final status. Events
    already written come first, so a late subscriber misses nothing."""
    registry = registry_for(principal, request)
    run = await run_in_threadpool(registry.store.get_run, registry.tenant, run_id)
    if run is None:
        raise NotFound(f"no run {run_id!r} in tenant {registry.tenant!r}")
    return StreamingResponse(
        _events(registry, run_id, request),
        media_type="text/event-stream",
        headers={"Cache-Control": "no-store", "X-Accel-Buffering": "no"},
    )


async def _events(registry: Registry, run_id: str, request: Request) -> AsyncIterator[str]:
    seen_messages, seen_calls = -1, 0
    loop = asyncio.get_running_loop()
    deadline = loop.time() + MAX_STREAM_S
    while True:
        run = await run_in_threadpool(registry.store.get_run, registry.tenant, run_id)
        messages = await run_in_threadpool(registry.store.run_messages, run_id)
        calls = await run_in_threadpool(registry.calls, run_id=run_id, limit=10_000)
        for message in messages:
            if message["seq"] > seen_messages:
                seen_messages = message["seq"]
                yield _event("message", message)
        for call in sorted(calls, key=lambda c: c.id):
            if call.id > seen_calls:
                seen_calls = call.id
                yield _event("call", call.model_dump(mode="json"))
        if run is None or run.status is not RunStatus.RUNNING or loop.time() > deadline:
            status = run.status.value if run is not None else "gone"
            yield _event("end", {"run_id": run_id, "status": status})
            return
        if await request.is_disconnected():
            return
        await asyncio.sleep(POLL_S)


def _event(kind: str, data: Any) -> str:
    return f"event: {kind}\ndata: {json.dumps(data, default=str, ensure_ascii=False)}\n\n"
