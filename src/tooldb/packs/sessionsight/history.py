"""SessionSight's tools over a patient's sessions: history, one session, the timeline,
metrics, the mood trend, what helped, and two sessions compared. Each reads the pack's
database (``pack_database``) for the calling registry's tenant."""

from __future__ import annotations

import itertools
from datetime import date
from statistics import mean
from typing import Any

from ...context import current_registry
from ...decorators import tool
from ...errors import UsageError
from .. import pack_database
from . import store
from .notes import METRICS, summary
from .risk import assess

#: Mood points per week below which a trend counts as stable.
STABLE_SLOPE = 0.1


#: When a note has several findings of a category, the one a clinician must see first.
SEVERITY = ["affirmed", "possible", "historical", "hypothetical", "negated", "other"]


def category_status(findings: list[dict[str, Any]]) -> dict[str, str]:
    """Each category's most severe status in one note."""
    out: dict[str, str] = {}
    for finding in findings:
        known = out.get(finding["category"])
        if known is None or SEVERITY.index(finding["status"]) < SEVERITY.index(known):
            out[finding["category"]] = finding["status"]
    return out


def where(tool_name: str) -> tuple[str, str]:
    """The pack database and tenant of the call in progress."""
    return pack_database(tool_name), current_registry().tenant


@tool(category="clinical")
def query_patient_history(patient_id: str, count: int = 5) -> dict[str, Any]:
    """The patient's most recent sessions, newest first, with each full note.

    Use it to read what happened lately before answering about a patient. Session ids
    (like "P01-S3") returned here are what answers should cite.

    Args:
        patient_id: The patient's id, like "P01".
        count: How many recent sessions (1 to 50).
    """
    if not 1 <= count <= 50:
        raise UsageError(f"count must be from 1 to 50, got {count}")
    url, tenant = where("query_patient_history")
    rows = store.patient_sessions(url, tenant, patient_id)
    recent = list(reversed(rows))[:count]
    return {
        "patient": store.patient(url, tenant, patient_id),
        "total_sessions": len(rows),
        "sessions": [
            {k: row[k] for k in ("session_id", "session_date", "note", "requires_review")}
            for row in recent
        ],
    }


@tool(category="clinical")
def get_session_detail(session_id: str) -> dict[str, Any]:
    """One session: its date, full note text, the extraction stored for it (if any) and
    its numbers (mood, scale score, interventions, risk findings not negated).

    Args:
        session_id: The session's id, like "P01-S3".
    """
    url, tenant = where("get_session_detail")
    row = store.session(url, tenant, session_id)
    return {**row, "summary": summary(row)}


@tool(category="clinical")
def get_patient_timeline(patient_id: str) -> dict[str, Any]:
    """Every session of a patient in date order, one line each: date, mood (0-10), rating
    scale score, interventions used and risk findings that are affirmed or possible.

    Args:
        patient_id: The patient's id, like "P01".
    """
    url, tenant = where("get_patient_timeline")
    rows = store.patient_sessions(url, tenant, patient_id)
    return {
        "patient": store.patient(url, tenant, patient_id),
        "timeline": [summary(row) for row in rows],
    }


@tool(category="clinical")
def aggregate_metrics(patient_id: str, metric: str = "mood") -> dict[str, Any]:
    """Aggregate one measure over all of a patient's sessions: count, mean, min, max,
    first, last and change (last - first), with the value of each session.

    Metrics: "mood" (self-rated 0-10), "scale" (the rating scale in the notes, e.g.
    PHQ-9 or GAD-7: lower is better), "risk_findings" (affirmed or possible risk findings
    per session), "sessions" (how many sessions, first and last date).

    Args:
        patient_id: The patient's id, like "P01".
        metric: One of mood, scale, risk_findings, sessions.
    """
    if metric not in METRICS:
        raise UsageError(f"unknown metric {metric!r}: use one of {', '.join(METRICS)}")
    url, tenant = where("aggregate_metrics")
    rows = [summary(row) for row in store.patient_sessions(url, tenant, patient_id)]
    if metric == "sessions":
        return {
            "patient_id": patient_id,
            "metric": metric,
            "count": len(rows),
            "first": rows[0]["session_date"] if rows else None,
            "last": rows[-1]["session_date"] if rows else None,
        }
    values: list[tuple[str, float]] = []
    scale_name = None
    for row in rows:
        if metric == "mood" and row["mood"] is not None:
            values.append((row["session_id"], float(row["mood"])))
        elif metric == "scale" and row["scale"] is not None:
            scale_name = row["scale"]["name"]
            values.append((row["session_id"], float(row["scale"]["score"])))
        elif metric == "risk_findings":
            values.append((row["session_id"], float(len(row["risk_findings"]))))
    numbers = [v for _, v in values]
    return {
        "patient_id": patient_id,
        "metric": metric,
        **({"scale": scale_name} if scale_name else {}),
        "count": len(numbers),
        "mean": round(mean(numbers), 2) if numbers else None,
        "min": min(numbers, default=None),
        "max": max(numbers, default=None),
        "first": numbers[0] if numbers else None,
        "last": numbers[-1] if numbers else None,
        "change": numbers[-1] - numbers[0] if numbers else None,
        "values": [{"session_id": s, "value": v} for s, v in values],
    }


def trend(points: list[tuple[date, float]]) -> dict[str, Any]:
    """Least-squares slope in points per week, and its direction."""
    if len(points) < 2:
        return {"slope_per_week": None, "direction": "insufficient data", "points": len(points)}
    xs = [(day - points[0][0]).days / 7 for day, _ in points]
    ys = [value for _, value in points]
    mx, my = mean(xs), mean(ys)
    spread = sum((x - mx) ** 2 for x in xs)
    slope = (
        sum((x - mx) * (y - my) for x, y in zip(xs, ys, strict=True)) / spread if spread else 0.0
    )
    direction = (
        "stable" if abs(slope) < STABLE_SLOPE else ("improving" if slope > 0 else "worsening")
    )
    return {"slope_per_week": round(slope, 3), "direction": direction, "points": len(points)}


@tool(category="clinical")
def get_mood_trend(
    patient_id: str, from_date: str | None = None, to_date: str | None = None
) -> dict[str, Any]:
    """The patient's self-rated mood (0-10) over time: the least-squares slope in points
    per week and its direction (improving, worsening or stable), between two dates.

    Args:
        patient_id: The patient's id, like "P01".
        from_date: First date included, YYYY-MM-DD (default: the first session).
        to_date: Last date included, YYYY-MM-DD (default: the last session).
    """
    start = store.parse_date(from_date, "from_date")
    end = store.parse_date(to_date, "to_date")
    if start and end and start > end:
        raise UsageError(f"from_date {from_date} is after to_date {to_date}")
    url, tenant = where("get_mood_trend")
    rows = [summary(r) for r in store.patient_sessions(url, tenant, patient_id, start, end)]
    points = [
        (date.fromisoformat(r["session_date"]), float(r["mood"]))
        for r in rows
        if r["mood"] is not None
    ]
    return {
        "patient_id": patient_id,
        "from": rows[0]["session_date"] if rows else from_date,
        "to": rows[-1]["session_date"] if rows else to_date,
        **trend(points),
        "moods": [{"session_id": r["session_id"], "mood": r["mood"]} for r in rows],
    }


@tool(category="clinical")
def identify_effective_interventions(patient_id: str) -> dict[str, Any]:
    """Interventions ranked by the mood change that followed them: for each session, the
    mood at the next session minus the mood at this one, credited to every intervention
    used in this session, averaged. Association, not proof: say so when answering.

    Args:
        patient_id: The patient's id, like "P01".
    """
    url, tenant = where("identify_effective_interventions")
    rows = [summary(r) for r in store.patient_sessions(url, tenant, patient_id)]
    changes: dict[str, list[tuple[str, float]]] = {}
    for here, after in itertools.pairwise(rows):
        if here["mood"] is None or after["mood"] is None:
            continue
        for name in here["interventions"]:
            changes.setdefault(str(name), []).append(
                (here["session_id"], float(after["mood"]) - float(here["mood"]))
            )
    ranked: list[dict[str, Any]] = [
        {
            "intervention": name,
            "mean_mood_change": round(mean(d for _, d in found), 2),
            "sessions": len(found),
            "session_ids": [s for s, _ in found],
        }
        for name, found in changes.items()
    ]
    ranked.sort(key=lambda item: (-item["mean_mood_change"], -item["sessions"]))
    return {
        "patient_id": patient_id,
        "method": "mood at next session - mood this session",
        "ranked": ranked,
    }


@tool(category="clinical")
def compare_sessions(a: str, b: str) -> dict[str, Any]:
    """Compare two sessions: mood and scale change, interventions added and dropped, and
    how each risk finding's status changed (e.g. self-harm affirmed -> negated).

    Args:
        a: The earlier session's id, like "P06-S1".
        b: The later session's id, like "P06-S6".
    """
    url, tenant = where("compare_sessions")
    first, second = (summary(store.session(url, tenant, s)) for s in (a, b))
    notes = {s: store.session(url, tenant, s)["note"] for s in (a, b)}
    status = [category_status(assess(notes[s])["findings"]) for s in (a, b)]
    risk_changes = [
        {
            "category": c,
            "a": status[0].get(c, "not mentioned"),
            "b": status[1].get(c, "not mentioned"),
        }
        for c in sorted(set(status[0]) | set(status[1]))
        if status[0].get(c) != status[1].get(c)
    ]

    def delta(x: Any, y: Any) -> float | None:
        return None if x is None or y is None else float(y) - float(x)

    return {
        "a": first,
        "b": second,
        "mood_change": delta(first["mood"], second["mood"]),
        "scale_change": delta(
            (first["scale"] or {}).get("score"), (second["scale"] or {}).get("score")
        ),
        "interventions_added": [
            i for i in second["interventions"] if i not in first["interventions"]
        ],
        "interventions_dropped": [
            i for i in first["interventions"] if i not in second["interventions"]
        ],
        "risk_changes": risk_changes,
        "days_apart": (
            date.fromisoformat(second["session_date"]) - date.fromisoformat(first["session_date"])
        ).days,
    }
