"""``/api/ooda``: self-optimisation for the key's tenant: fresh findings, a cycle (a
dry run proposes, a real one acts), the history of acts, and undoing one."""

from __future__ import annotations

from typing import Any

from fastapi import APIRouter, Query, Request

from .app import Admin, Reader, registry_for
from .auth import Principal

router = APIRouter(tags=["ooda"])


@router.get("/ooda/findings")
def findings(request: Request, principal: Principal = Reader) -> dict[str, Any]:
    """What a fresh analysis of the call log finds (nothing is changed)."""
    found = registry_for(principal, request).ooda.findings()
    return {"findings": [finding.as_json() for finding in found]}


@router.post("/ooda/cycle")
def cycle(request: Request, dry_run: bool = False, principal: Principal = Admin) -> dict[str, Any]:
    """Run one cycle: observe, orient, decide and (unless ``dry_run``) act."""
    return registry_for(principal, request).ooda(dry_run=dry_run).model_dump(mode="json")


@router.get("/ooda/history")
def history(
    request: Request,
    limit: int = Query(default=50, ge=1, le=1000),
    principal: Principal = Reader,
) -> dict[str, Any]:
    acts = registry_for(principal, request).ooda.history(limit)
    return {"acts": [act.model_dump(mode="json") for act in acts]}


@router.post("/ooda/acts/{act_id}/undo")
def undo(act_id: int, request: Request, principal: Principal = Admin) -> dict[str, Any]:
    """Reverse an act (re-enable what it disabled); the reversal is an act of its own."""
    return registry_for(principal, request).ooda.undo(act_id).model_dump(mode="json")
