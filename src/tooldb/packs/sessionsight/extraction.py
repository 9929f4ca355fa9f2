"""The extraction's JSON Schema, ``validate_schema`` and ``score_confidence``.

An extraction has nine sections (session info, presenting concerns, mood, risk, mental
status, interventions, diagnoses, progress, next steps); each section is an object of
fields and every field is ``{"value": ..., "confidence": 0..1}`` (``evidence``, the
words of the note it rests on, optional). ``data/extraction.schema.json`` is the schema.
"""

from __future__ import annotations

import json
import re
from functools import cache
from pathlib import Path
from typing import Any

from jsonschema import Draft202012Validator

from ...decorators import tool
from ...errors import UsageError
from ...types import LoopContext
from .risk import assess

SCHEMA_FILE = Path(__file__).parent / "data" / "extraction.schema.json"
SECTIONS = [
    "session_info",
    "presenting_concerns",
    "mood",
    "risk",
    "mental_status",
    "interventions",
    "diagnoses",
    "progress",
    "next_steps",
]
RISK_FIELDS = ["suicidal_ideation", "self_harm", "harm_to_others", "substance_use", "abuse"]
LOW_CONFIDENCE = 0.5
#: Where the loop's tools keep the latest extraction they saw (LoopContext.state).
STATE_KEY = "sessionsight_extraction"


@cache
def schema() -> dict[str, Any]:
    loaded: dict[str, Any] = json.loads(SCHEMA_FILE.read_text(encoding="utf-8"))
    return loaded


def parse_extraction(extraction: Any) -> dict[str, Any]:
    """An extraction given as an object or as JSON text; a clear error otherwise."""
    if isinstance(extraction, str):
        try:
            extraction = json.loads(extraction)
        except json.JSONDecodeError as exc:
            raise UsageError(f"extraction is not valid JSON: {exc}") from None
    if not isinstance(extraction, dict):
        raise UsageError(f"extraction must be a JSON object, got {type(extraction).__name__}")
    return extraction


def completed_sections(extraction: dict[str, Any]) -> list[str]:
    """Sections present, valid, and holding at least one field with a value."""
    validator = Draft202012Validator(schema())
    done = []
    for name in SECTIONS:
        section = extraction.get(name)
        if not isinstance(section, dict) or not section:
            continue
        if any(True for _ in validator.iter_errors({name: section})):
            continue
        if any(
            isinstance(f, dict) and f.get("value") not in (None, "", []) for f in section.values()
        ):
            done.append(name)
    return done


def validate(extraction: dict[str, Any]) -> dict[str, Any]:
    errors = [
        f"{'/'.join(str(p) for p in error.absolute_path) or '(root)'}: {error.message}"
        for error in sorted(Draft202012Validator(schema()).iter_errors(extraction), key=str)
    ]
    done = completed_sections(extraction)
    missing = [name for name in SECTIONS if name not in done]
    warnings = [f"section {name} is missing or empty" for name in missing]
    for name in SECTIONS:
        section = extraction.get(name)
        if not isinstance(section, dict):
            continue
        for key, field in section.items():
            confidence = field.get("confidence") if isinstance(field, dict) else None
            if isinstance(confidence, int | float) and confidence < LOW_CONFIDENCE:
                warnings.append(f"{name}.{key}: low confidence {field['confidence']}")
    return {
        "valid": not errors,
        "complete": not errors and not missing,
        "errors": errors,
        "warnings": warnings,
        "completed_sections": done,
        "missing_sections": missing,
    }


@tool(category="clinical")
def validate_schema(extraction: dict[str, Any], ctx: LoopContext | None = None) -> dict[str, Any]:
    """Check a session extraction against SessionSight's JSON Schema.

    The extraction is an object with the sections session_info, presenting_concerns,
    mood, risk, mental_status, interventions, diagnoses, progress and next_steps; every
    field inside a section is {"value": ..., "confidence": 0..1, "evidence": "..."}.
    Risk fields (suicidal_ideation, self_harm, harm_to_others, substance_use, abuse) take
    a status: affirmed, negated, historical, hypothetical, possible, other, not_assessed.
    Returns errors (schema violations, by path), warnings (missing sections, low
    confidence), completed_sections and missing_sections. Call it on partial work too:
    the last extraction validated is kept if the run stops early.

    Args:
        extraction: The extraction object.
    """
    parsed = parse_extraction(extraction)
    if ctx is not None:
        ctx.state[STATE_KEY] = parsed
    return validate(parsed)


_WORD = re.compile(r"[a-z0-9]+")
_STOP = frozenset(
    [
        "a",
        "an",
        "and",
        "the",
        "of",
        "to",
        "in",
        "on",
        "with",
        "for",
        "is",
        "was",
        "are",
        "be",
        "by",
        "at",
        "as",
        "or",
        "no",
        "not",
    ]
)


def _support(value: Any, text: str, words: set[str]) -> float:
    """How much of ``value`` the note's text shows: 1 all of it, 0 none."""
    if value is None or value == "" or value == []:
        return 1.0  # nothing claimed, nothing to support
    if isinstance(value, bool):
        return 0.5
    if isinstance(value, int | float):
        number = f"{value:g}"
        return 1.0 if re.search(rf"(?<![\d.]){re.escape(number)}(?![\d])", text) else 0.0
    if isinstance(value, list):
        return sum(_support(item, text, words) for item in value) / len(value)
    if isinstance(value, dict):
        parts = [v for v in value.values() if isinstance(v, str | int | float)]
        return sum(_support(p, text, words) for p in parts) / len(parts) if parts else 0.5
    tokens = [w for w in _WORD.findall(str(value).lower()) if w not in _STOP]
    if not tokens:
        return 0.5
    return sum(
        1 for w in tokens if w in words or any(x.startswith(w[:5]) for x in words if len(w) > 5)
    ) / len(tokens)


def score(extraction: dict[str, Any], source_text: str) -> dict[str, Any]:
    """Evidence for each field in the note: words and numbers found, risk statuses
    checked against ConText; ``score`` is the lower of the evidence and the stated
    confidence."""
    text = source_text.lower()
    words = {w for w in _WORD.findall(text) if w not in _STOP}
    risk_status: dict[str, set[str]] = {}
    for finding in assess(source_text)["findings"]:
        risk_status.setdefault(finding["category"], set()).add(finding["status"])
    fields: dict[str, dict[str, Any]] = {}
    for name in SECTIONS:
        section = extraction.get(name)
        if not isinstance(section, dict):
            continue
        for key, field in section.items():
            if not isinstance(field, dict) or "value" not in field:
                continue
            value = field["value"]
            if name == "risk" and key in RISK_FIELDS and isinstance(value, str):
                found = risk_status.get(key, set())
                evidence = 1.0 if value in found or (value == "not_assessed" and not found) else 0.1
            else:
                evidence = _support(value, text, words)
            stated = field.get("confidence")
            stated = float(stated) if isinstance(stated, int | float) else 1.0
            fields[f"{name}.{key}"] = {
                "stated": round(stated, 3),
                "evidence": round(evidence, 3),
                "score": round(min(stated, evidence), 3),
            }
    low = sorted(path for path, f in fields.items() if f["score"] < LOW_CONFIDENCE)
    overall = sum(f["score"] for f in fields.values()) / len(fields) if fields else 0.0
    return {"fields": fields, "low_confidence": low, "overall": round(overall, 3)}


def apply_scores(extraction: dict[str, Any], scored: dict[str, Any]) -> dict[str, Any]:
    """The extraction with each field's confidence lowered to its evidence score."""
    out = json.loads(json.dumps(extraction))
    for path, result in scored["fields"].items():
        section, key = path.split(".", 1)
        out[section][key]["confidence"] = result["score"]
    return out


@tool(category="clinical")
def score_confidence(
    extraction: dict[str, Any], source_text: str, ctx: LoopContext | None = None
) -> dict[str, Any]:
    """Score each field of an extraction by the evidence for it in the note.

    A field whose words or numbers are not in the note scores low; a risk status is
    checked against ConText on the note (claiming "negated" where the note affirms it
    scores 0.1). Each field gets stated (your confidence), evidence and score (the
    lower of the two); low_confidence lists the fields under 0.5 to revisit.

    Args:
        extraction: The extraction object.
        source_text: The note the extraction was made from.
    """
    parsed = parse_extraction(extraction)
    if ctx is not None:
        ctx.state[STATE_KEY] = parsed
    return score(parsed, source_text)
