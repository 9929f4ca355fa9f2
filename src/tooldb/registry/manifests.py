"""Manifests: tools declared in YAML, JSON or JSON Lines.

Accepted shapes: a list of tools, ``{"tools": [...]}``, or a single tool
object; ``.jsonl``/``.ndjson`` files hold one tool object per line. Every entry
is checked before anything is written, and every problem is reported with its
position, so a manifest loads whole or not at all.
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Iterator, Mapping, Sized
from pathlib import Path
from typing import Any

import yaml
from pydantic import ValidationError

from ..binding import json_type_name, normalize_parameters
from ..errors import DefinitionError, UsageError
from ..types import Progress, ToolSpec

MAX_REPORTED = 20
PROGRESS_EVERY = 1000
KNOWN_FIELDS = [*ToolSpec.model_fields, "timeout"]


def read_manifest(path: str | Path, *, progress: Progress | None = None) -> list[ToolSpec]:
    """Parse and validate a manifest file into specs (no registration)."""
    file = Path(path)
    if not file.is_file():
        raise UsageError(f"manifest {file} does not exist or is not a file")
    entries = list(_entries(file))
    return specs_from_entries(entries, source=str(file), progress=progress)


def specs_from_entries(
    entries: Iterable[tuple[str, Any]], source: str, *, progress: Progress | None = None
) -> list[ToolSpec]:
    """Validate (position, entry) pairs; raise one DefinitionError listing every problem."""
    specs: list[ToolSpec] = []
    problems: list[str] = []
    seen: dict[str, str] = {}
    total = len(entries) if isinstance(entries, Sized) else None
    for done, (where, entry) in enumerate(entries, start=1):
        if progress is not None and (done % PROGRESS_EVERY == 0 or done == total):
            progress(done, total, "reading")
        try:
            spec = spec_from_mapping(entry)
        except DefinitionError as exc:
            problems.append(f"{where}: {exc}")
            continue
        if spec.name in seen:
            problems.append(
                f"{where}: duplicate tool name {spec.name!r} (first at {seen[spec.name]})"
            )
            continue
        seen[spec.name] = where
        specs.append(spec)
    if problems:
        shown = problems[:MAX_REPORTED]
        more = (
            f"\n  ... and {len(problems) - len(shown)} more" if len(problems) > len(shown) else ""
        )
        entries_word = "entry" if len(problems) == 1 else "entries"
        raise DefinitionError(
            f"manifest {source} has {len(problems)} invalid {entries_word}:\n  "
            + "\n  ".join(shown)
            + more
        )
    return specs


def spec_from_mapping(entry: Any) -> ToolSpec:
    """One manifest entry (any parameter form) to a normalised ToolSpec."""
    if isinstance(entry, DefinitionError):  # a line that did not parse
        raise entry
    if not isinstance(entry, Mapping):
        raise DefinitionError(f"a tool must be an object, got {json_type_name(entry)}")
    data = dict(entry)
    name = data.get("name")
    label = f"{_short(name)}: " if isinstance(name, str) and name else ""
    if "timeout" in data:
        if "timeout_s" in data:
            raise DefinitionError(f"{label}give 'timeout' or 'timeout_s', not both")
        data["timeout_s"] = data.pop("timeout")
    try:
        data["parameters"] = normalize_parameters(data.get("parameters"))
        return ToolSpec.model_validate(data)
    except DefinitionError as exc:
        raise DefinitionError(f"{label}{exc}") from None
    except ValidationError as exc:
        raise DefinitionError(f"{label}{_pydantic_problems(exc)}") from None


def _short(value: str) -> str:
    text = repr(value)
    return text if len(text) <= 80 else f"{text[:80]}…"


def _pydantic_problems(exc: ValidationError) -> str:
    parts = []
    for error in exc.errors():
        field = _short(".".join(str(p) for p in error["loc"]) or "tool")
        message = error["msg"].removeprefix("Value error, ")
        if error["type"] == "missing":
            message = "is required"
        elif error["type"] == "extra_forbidden":
            message = f"is not a known field (known: {', '.join(KNOWN_FIELDS)})"
        parts.append(f"field {field} {message}")
    return "; ".join(parts)


def _entries(file: Path) -> Iterator[tuple[str, Any]]:
    text = _read_text(file)
    if file.suffix.lower() in {".jsonl", ".ndjson"}:
        yield from _jsonl_entries(text)
        return
    try:
        document = _load_json(text) if file.suffix.lower() == ".json" else _load_yaml(text)
    except (ValueError, RecursionError, yaml.YAMLError) as exc:
        raise DefinitionError(f"manifest {file} cannot be parsed: {_reason(exc)}") from None
    if isinstance(document, Mapping) and "tools" in document:
        extra = sorted(str(key) for key in document if key != "tools")
        if extra:  # a silently ignored key would be a silently ignored intention
            raise DefinitionError(f"manifest {file}: unknown top-level keys {extra} (only 'tools')")
        document = document["tools"]
    elif isinstance(document, Mapping):
        document = [document]
    if not isinstance(document, list):
        raise DefinitionError(f"manifest {file} must hold a list of tools or {{'tools': [...]}}")
    for index, entry in enumerate(document, start=1):
        yield f"tool #{index}", entry


def _read_text(file: Path) -> str:
    try:
        return file.read_text(encoding="utf-8-sig")
    except UnicodeDecodeError as exc:
        raise DefinitionError(f"manifest {file} is not UTF-8 text: {exc}") from None


def _jsonl_entries(text: str) -> Iterator[tuple[str, Any]]:
    # Split on newlines only: str.splitlines would also split on U+2028 inside strings.
    for number, line in enumerate(text.split("\n"), start=1):
        if not line.strip():
            continue
        try:
            yield f"line {number}", _load_json(line)
        except (ValueError, RecursionError) as exc:
            yield f"line {number}", DefinitionError(f"not valid JSON: {_reason(exc)}")


def _load_json(text: str) -> Any:
    return json.loads(text, parse_constant=_reject_constant)


def _reject_constant(name: str) -> Any:
    raise ValueError(f"{name} is not a JSON value")


class _Loader(yaml.SafeLoader):
    """Safe YAML that keeps ``2024-01-01`` a string: a parameter default or a
    description must not turn into a ``date`` that JSON cannot hold."""


_Loader.yaml_implicit_resolvers = {
    first: [(tag, regexp) for tag, regexp in resolvers if tag != "tag:yaml.org,2002:timestamp"]
    for first, resolvers in yaml.SafeLoader.yaml_implicit_resolvers.items()
}


def _load_yaml(text: str) -> Any:
    return yaml.load(text, Loader=_Loader)  # a SafeLoader subclass


def _reason(exc: BaseException) -> str:
    return "nested too deeply" if isinstance(exc, RecursionError) else str(exc)
