"""Manifests: tools declared in YAML, JSON or JSON Lines.

Accepted shapes: a list of tools, ``{"tools": [...]}``, or a single tool
object; ``.jsonl``/``.ndjson`` files hold one tool object per line. Every entry
is checked before anything is written, and every problem is reported with its
position, so a manifest loads whole or not at all.
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Iterator, Mapping
from pathlib import Path
from typing import Any

import yaml
from pydantic import ValidationError

from .binding import normalize_parameters
from .errors import DefinitionError, UsageError
from .types import ToolSpec

MAX_REPORTED = 20


def read_manifest(path: str | Path) -> list[ToolSpec]:
    """Parse and validate a manifest file into specs (no registration)."""
    file = Path(path)
    if not file.is_file():
        raise UsageError(f"manifest {file} does not exist or is not a file")
    entries = list(_entries(file))
    return specs_from_entries(entries, source=str(file))


def specs_from_entries(entries: Iterable[tuple[str, Any]], source: str) -> list[ToolSpec]:
    """Validate (position, entry) pairs; raise one DefinitionError listing every problem."""
    specs: list[ToolSpec] = []
    problems: list[str] = []
    seen: dict[str, str] = {}
    for where, entry in entries:
        try:
            spec = spec_from_mapping(entry)
        except DefinitionError as exc:
            problems.append(f"{where}: {exc}")
            continue
        if spec.name in seen:
            problems.append(f"{where}: duplicate tool name {spec.name!r} (first at {seen[spec.name]})")
            continue
        seen[spec.name] = where
        specs.append(spec)
    if problems:
        shown = problems[:MAX_REPORTED]
        more = f"\n  ... and {len(problems) - len(shown)} more" if len(problems) > len(shown) else ""
        raise DefinitionError(
            f"manifest {source} has {len(problems)} invalid entr{'y' if len(problems) == 1 else 'ies'}:\n  "
            + "\n  ".join(shown)
            + more
        )
    return specs


def spec_from_mapping(entry: Any) -> ToolSpec:
    """One manifest entry (any parameter form) to a normalised ToolSpec."""
    if isinstance(entry, DefinitionError):  # a line that did not parse
        raise entry
    if not isinstance(entry, Mapping):
        raise DefinitionError(f"a tool must be an object, got {type(entry).__name__}")
    data = dict(entry)
    label = repr(data["name"]) if isinstance(data.get("name"), str) else "tool"
    if "timeout" in data and "timeout_s" not in data:
        data["timeout_s"] = data.pop("timeout")
    try:
        data["parameters"] = normalize_parameters(data.get("parameters"))
        return ToolSpec.model_validate(data)
    except DefinitionError as exc:
        raise DefinitionError(f"{label}: {exc}") from None
    except ValidationError as exc:
        raise DefinitionError(f"{label}: {_pydantic_problems(exc)}") from None


def _pydantic_problems(exc: ValidationError) -> str:
    parts = []
    for error in exc.errors():
        field = ".".join(str(p) for p in error["loc"]) or "tool"
        message = error["msg"].removeprefix("Value error, ")
        if error["type"] == "missing":
            message = "is required"
        elif error["type"] == "extra_forbidden":
            message = "is not a known field"
        parts.append(f"field {field!r} {message}")
    return "; ".join(parts)


def _entries(file: Path) -> Iterator[tuple[str, Any]]:
    if file.suffix.lower() in {".jsonl", ".ndjson"}:
        yield from _jsonl_entries(file)
        return
    text = file.read_text(encoding="utf-8")
    try:
        document = json.loads(text) if file.suffix.lower() == ".json" else yaml.safe_load(text)
    except (ValueError, yaml.YAMLError) as exc:
        raise DefinitionError(f"manifest {file} cannot be parsed: {exc}") from None
    if isinstance(document, Mapping) and "tools" in document:
        document = document["tools"]
    elif isinstance(document, Mapping):
        document = [document]
    if not isinstance(document, list):
        raise DefinitionError(f"manifest {file} must hold a list of tools or {{'tools': [...]}}")
    for index, entry in enumerate(document, start=1):
        yield f"tool #{index}", entry


def _jsonl_entries(file: Path) -> Iterator[tuple[str, Any]]:
    with file.open(encoding="utf-8") as handle:
        for number, line in enumerate(handle, start=1):
            if not line.strip():
                continue
            try:
                yield f"line {number}", json.loads(line)
            except ValueError as exc:
                yield f"line {number}", DefinitionError(f"not valid JSON: {exc}")
