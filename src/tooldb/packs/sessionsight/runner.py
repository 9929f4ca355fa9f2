"""Running SessionSight's agents with the pack's guarantees around the loop's result.

The loop (agents/loop.py) runs the agent and stops at its limits with ``partial`` and
``requires_review``. Around it, for the extractor, this module:

- never hands back nothing: the extraction is the model's final JSON (when the run
  succeeded and it holds sections), else the last one
  it passed to ``validate_schema``/``score_confidence`` (kept in the run's state), and
  session info from the database and the risk section from ConText are filled in when
  missing, so even a run stopped at its first turn returns two sections;
- sets ``requires_review`` for every affirmed or possible risk finding in the note,
  whatever the model wrote (and puts ConText's status in the risk section, saying so);
- lowers each field's confidence to its evidence in the note (``score_confidence``);
- stores the extraction with the session.

For the Q&A agent and the summarizer it checks the citations: session ids in the answer
that exist for this tenant; an answer citing none is flagged for review.
"""

from __future__ import annotations

import json
import re
from typing import TYPE_CHECKING, Any

from ...agents.run import run_task
from ...errors import NotFound, UsageError
from ...models import Model
from .. import DATABASE_KEY
from . import store
from .extraction import (
    RISK_FIELDS,
    SECTIONS,
    STATE_KEY,
    apply_scores,
    completed_sections,
    score,
    validate,
)
from .history import category_status
from .risk import assess

if TYPE_CHECKING:
    from ...registry import Registry
    from ...types import RunResult

EXTRACTOR = "sessionsight_extractor"
QA = "sessionsight_qa"
SUMMARIZER = "sessionsight_summarizer"
NEEDS_MODEL = (
    "the {agent} agent needs a model: pass --model provider:model (or set the `model` "
    "setting); without one, the deterministic tools still work, e.g. "
    '`tooldb call check_risk_keywords --args \'{{"text": "Denies SI/HI."}}\'`'
)
#: The agents' ``model``: the caller's model, never the router (agents/run.py).
INHERIT = "inherit"
_SESSION_ID = re.compile(r"\b[A-Za-z0-9]+-S\d+\b")


def database(registry: Registry) -> str:
    """The database the pack was installed with (read from one of its tools)."""
    try:
        url = registry.get("get_session_detail").spec.metadata.get(DATABASE_KEY)
    except NotFound:
        url = None
    if not isinstance(url, str):
        raise UsageError(
            "the sessionsight pack is not installed: run `tooldb add pack sessionsight`"
        )
    return url


def _model(registry: Registry, agent: str, model: str | Model | None) -> str | Model:
    own = registry.agent(agent).model
    chosen = model or (own if own != INHERIT else None) or registry.settings.model
    if not chosen:
        raise UsageError(NEEDS_MODEL.format(agent=agent))
    return chosen


def _json_object(text: str) -> dict[str, Any] | None:
    """The first JSON object in a model's answer (bare or in a code fence)."""
    decoder = json.JSONDecoder()
    for match in re.finditer(r"\{", text):
        try:
            value, _ = decoder.raw_decode(text[match.start() :])
        except json.JSONDecodeError:
            continue
        if isinstance(value, dict):
            return value
    return None


def _state(result: RunResult) -> dict[str, Any]:
    data = result.data if isinstance(result.data, dict) else {}
    state = data.get("state")
    return state if isinstance(state, dict) else {}


def extract(
    registry: Registry,
    session_id: str,
    *,
    model: str | Model | None = None,
    tool_choice: str | None = None,
    save: bool = True,
) -> dict[str, Any]:
    """Run the extractor on one session's note; the result is never empty."""
    url = database(registry)
    row = store.session(url, registry.tenant, session_id)
    chosen = _model(registry, EXTRACTOR, model)
    task = (
        f"Extract session {session_id} (patient {row['patient_id']}, {row['session_date']}).\n"
        f"Note:\n{row['note']}"
    )
    result = run_task(registry, task, agent=EXTRACTOR, model=chosen, tool_choice=tool_choice)
    answer = _json_object(result.output or "") if result.status.value == "success" else None
    source = "final answer"
    if answer is None or not set(answer) & set(SECTIONS):
        kept = _state(result).get(STATE_KEY)
        answer, source = (kept, "last validated") if isinstance(kept, dict) else ({}, "none")
    extraction: dict[str, Any] = json.loads(json.dumps(answer))
    reasons: list[str] = []
    if result.requires_review:
        reasons.append(result.review_reason or f"the run ended {result.status}")
    if "session_info" not in extraction:
        extraction["session_info"] = {
            "session_id": {"value": session_id, "confidence": 1.0},
            "date": {"value": row["session_date"], "confidence": 1.0},
        }
    findings = assess(row["note"])["findings"]
    reasons += _guard_risk(extraction, category_status(findings))
    # The session's record is evidence too (its id and date are not always in the note).
    record = f"Session {session_id}, {row['session_date']}, patient {row['patient_id']}."
    scored = score(extraction, f"{record}\n{row['note']}")
    extraction = apply_scores(extraction, scored)
    check = validate(extraction)
    done = completed_sections(extraction)
    complete = result.status.value == "success" and check["complete"]
    if not complete and not reasons:
        reasons.append(
            "the extraction is incomplete: "
            + ", ".join(check["missing_sections"] or check["errors"])
        )
    if check["errors"]:
        reasons.append(f"{len(check['errors'])} schema error(s)")
    requires_review = bool(reasons)
    if save:
        store.save_extraction(url, registry.tenant, session_id, extraction, requires_review)
    return {
        "session_id": session_id,
        "run_id": result.run_id,
        "status": "complete" if complete else "partial",
        "run_status": result.status.value,
        "requires_review": requires_review,
        "review_reasons": reasons,
        "completed_sections": done,
        "missing_sections": check["missing_sections"],
        "extraction": extraction,
        "extraction_source": source,
        "risk_findings": [f for f in findings if f["status"] in ("affirmed", "possible")],
        "validation": {"errors": check["errors"], "warnings": check["warnings"]},
        "low_confidence": scored["low_confidence"],
        "tool_calls": _ran(result),
    }


def _ran(result: RunResult) -> int:
    """Tool calls that ran (the loop also lists the calls it refused past a limit)."""
    return sum(1 for use in result.tool_calls if not (use.error or "").startswith("not run:"))


def _guard_risk(extraction: dict[str, Any], found: dict[str, str]) -> list[str]:
    """Put ConText's status in the risk section where the note affirms (or suggests) a
    risk the model did not; the reasons for review: one per risk affirmed or possible by
    ConText or by the model (a flag is never lowered, only raised)."""
    risk = extraction.setdefault("risk", {})
    if not isinstance(risk, dict):
        risk = extraction["risk"] = {}
    reasons = []
    for category in RISK_FIELDS:
        status = found.get(category)
        said = risk.get(category, {}).get("value") if isinstance(risk.get(category), dict) else None
        if said in ("affirmed", "possible") and status not in ("affirmed", "possible"):
            reasons.append(f"the extraction marks {category.replace('_', ' ')} {said}")
        if status is None:
            if said is None:
                risk[category] = {"value": "not_assessed", "confidence": 0.9}
            continue
        if status in ("affirmed", "possible"):
            reasons.append(f"{status} risk finding: {category.replace('_', ' ')}")
        if said != status and (status in ("affirmed", "possible") or said is None):
            risk[category] = {
                "value": status,
                "confidence": 0.9,
                "evidence": f"ConText on the note (the model said {said!r})",
            }
    return reasons


def _citations(registry: Registry, url: str, text: str) -> tuple[list[dict[str, str]], list[str]]:
    cited, unknown, seen = [], [], set()
    for session_id in _SESSION_ID.findall(text):
        if session_id in seen:
            continue
        seen.add(session_id)
        try:
            row = store.session(url, registry.tenant, session_id)
        except NotFound:
            unknown.append(session_id)
            continue
        cited.append(
            {
                "session_id": session_id,
                "patient_id": row["patient_id"],
                "session_date": row["session_date"],
            }
        )
    return cited, unknown


def _answer(registry: Registry, agent: str, task: str, model: str | Model | None) -> dict[str, Any]:
    url = database(registry)
    result = run_task(registry, task, agent=agent, model=_model(registry, agent, model))
    cited, unknown = _citations(registry, url, result.output or "")
    reasons = (
        [result.review_reason or f"the run ended {result.status.value}"]
        if result.requires_review
        else []
    )
    if not cited:
        reasons.append("the answer cites no session")
    if unknown:
        reasons.append(f"the answer cites sessions that do not exist: {', '.join(unknown)}")
    return {
        "run_id": result.run_id,
        "status": result.status.value,
        "answer": result.output,
        "citations": cited,
        "requires_review": bool(reasons),
        "review_reasons": reasons,
        "tool_calls": _ran(result),
    }


def ask(
    registry: Registry,
    question: str,
    *,
    patient_id: str | None = None,
    model: str | Model | None = None,
) -> dict[str, Any]:
    """The Q&A agent's answer to a clinician's question, with its citations checked."""
    if not question.strip():
        raise UsageError("the question must not be empty")
    if patient_id is not None:
        store.patient(database(registry), registry.tenant, patient_id)
    task = f"Patient {patient_id}: {question}" if patient_id else question
    return _answer(registry, QA, task, model)


def summarize(
    registry: Registry, patient_id: str, *, model: str | Model | None = None
) -> dict[str, Any]:
    """The summarizer's account of a patient's course (trend, what works, what changed)."""
    store.patient(database(registry), registry.tenant, patient_id)
    task = f"Summarize the course of therapy of patient {patient_id}."
    return _answer(registry, SUMMARIZER, task, model)
