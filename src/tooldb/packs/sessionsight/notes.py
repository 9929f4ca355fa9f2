"""What the history tools read from a progress note without a model: the mood score, the
rating scale, the interventions and the risk findings (and, once an extraction was made,
the values it holds take precedence)."""

from __future__ import annotations

import re
from typing import Any

from .risk import assess

_MOOD = re.compile(r"\bmood\b[^.\n]{0,40}?\b(\d{1,2}(?:\.\d)?)\s*/\s*10\b", re.IGNORECASE)
_SCALE = re.compile(
    r"\b(PHQ-9|GAD-7|PCL-5|SPIN|ISI|DERS|BDI-II|BAI)\b(?:\s+score)?\s*[:=]?\s*(\d{1,3})\b"
)
_INTERVENTIONS_LINE = re.compile(r"^\s*interventions?\s*:\s*(.+)$", re.IGNORECASE | re.MULTILINE)
#: Interventions recognised in free text when a note has no "Interventions:" line.
KNOWN_INTERVENTIONS = [
    "CBT-I",
    "CBT",
    "cognitive restructuring",
    "behavioral activation",
    "exposure",
    "prolonged exposure",
    "imaginal exposure",
    "in vivo exposure",
    "DBT",
    "chain analysis",
    "distress tolerance",
    "emotion regulation",
    "interpersonal effectiveness",
    "mindfulness",
    "motivational interviewing",
    "psychoeducation",
    "relaxation training",
    "safety planning",
    "sleep restriction",
    "stimulus control",
    "EMDR",
    "ACT",
    "cognitive processing",
    "relapse prevention",
    "supportive therapy",
    "behavioral experiment",
]
METRICS = ["mood", "scale", "risk_findings", "sessions"]


def mood_score(note: str) -> float | None:
    match = _MOOD.search(note)
    return float(match.group(1)) if match else None


def scale_score(note: str) -> tuple[str, int] | None:
    match = _SCALE.search(note)
    return (match.group(1), int(match.group(2))) if match else None


def interventions(note: str) -> list[str]:
    line = _INTERVENTIONS_LINE.search(note)
    if line:
        items = re.split(r",|;|\band\b", line.group(1).rstrip(". "))
        return [item.strip() for item in items if item.strip()]
    lowered = note.lower()
    return [
        name
        for name in KNOWN_INTERVENTIONS
        if re.search(rf"\b{re.escape(name.lower())}\b", lowered)
    ]


def _from_extraction(extraction: Any, section: str, field: str) -> Any:
    try:
        return extraction[section][field]["value"]
    except (KeyError, TypeError):
        return None


def summary(row: dict[str, Any]) -> dict[str, Any]:
    """One session's numbers: date, mood, scale, interventions, risk findings not negated."""
    note, extraction = row["note"], row.get("extraction")
    mood = _from_extraction(extraction, "mood", "score")
    if not isinstance(mood, int | float) or isinstance(mood, bool):
        mood = mood_score(note)
    scale = scale_score(note)
    done = _from_extraction(extraction, "interventions", "modalities")
    risk = [
        {"category": f["category"], "text": f["text"], "status": f["status"]}
        for f in assess(note)["findings"]
        if f["status"] in ("affirmed", "possible")
    ]
    return {
        "session_id": row["session_id"],
        "session_date": row["session_date"],
        "mood": mood,
        "scale": {"name": scale[0], "score": scale[1]} if scale else None,
        "interventions": done if isinstance(done, list) and done else interventions(note),
        "risk_findings": risk,
        "extracted": extraction is not None,
    }
