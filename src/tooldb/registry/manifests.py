"""Manifests: tools declared in YAML, JSON or JSON Lines.

Accepted shapes: a list of tools, ``{"tools": [...]}``, or a single tool
object; ``.jsonl``/``.ndjson`` files hold one tool object per line. Every entry
is checked before anything is written. By default an invalid tool is skipped and
a parameter default of the wrong type coerced losslessly or dropped, each with its
position and reason (``Found.skipped``, ``Found.repaired``); ``strict`` loads the
manifest whole or not at all, every problem reported with its position.

A file past ``max_bytes`` (setting ``manifest_max_bytes``) is refused unread, and
YAML whose aliases would expand past ``MAX_ALIAS_EXPANSION`` nodes (an alias bomb:
468 bytes that grow to gigabytes once walked) is refused before it is built.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Iterable, Iterator, Mapping, Sized
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, NamedTuple

import yaml
from pydantic import ValidationError

from ..binding import json_type_name, normalize_parameters
from ..errors import DefinitionError, ToolDBError, UsageError
from ..stores import PutOutcome
from ..types import Progress, ToolSpec

MAX_REPORTED = 20
PROGRESS_EVERY = 1000
KNOWN_FIELDS = [*ToolSpec.model_fields, "timeout"]
#: Nodes that YAML aliases may add to a manifest once expanded.
MAX_ALIAS_EXPANSION = 100_000
MAX_BYTES = 10_000_000


class Skipped(NamedTuple):
    """A tool an import left out or changed: where it was (a position or a name), why."""

    tool: str
    reason: str


@dataclass
class Found:
    """What an import read: the valid specs, what was skipped, what was repaired."""

    specs: list[ToolSpec]
    skipped: list[Skipped] = field(default_factory=list)
    repaired: list[Skipped] = field(default_factory=list)

    def runnable(self, check: Callable[[ToolSpec], None]) -> list[ToolSpec]:
        """The specs ``check`` accepts (it can run here); the others move to ``skipped``."""
        kept = []
        for spec in self.specs:
            try:
                check(spec)
            except ToolDBError as exc:
                self.skipped.append(Skipped(spec.name, str(exc)))
                continue
            kept.append(spec)
        return kept


class Imported(list[PutOutcome]):
    """The outcomes of an import (a list, as ``register`` returns), with the tools it
    ``skipped`` and those whose definition it ``repaired``, each with its reason."""

    def __init__(
        self,
        outcomes: Iterable[PutOutcome] = (),
        skipped: Iterable[Skipped] = (),
        repaired: Iterable[Skipped] = (),
    ) -> None:
        super().__init__(outcomes)
        self.skipped = list(skipped)
        self.repaired = list(repaired)


def read_manifest(
    path: str | Path,
    *,
    progress: Progress | None = None,
    strict: bool = True,
    max_bytes: int = MAX_BYTES,
) -> list[ToolSpec]:
    """Parse and validate a manifest file into specs (no registration), all or none."""
    return find_manifest(path, progress=progress, strict=strict, max_bytes=max_bytes).specs


def find_manifest(
    path: str | Path,
    *,
    progress: Progress | None = None,
    strict: bool = False,
    max_bytes: int = MAX_BYTES,
) -> Found:
    """Parse and validate a manifest file: the valid tools, the skipped and repaired."""
    file = Path(path)
    if not file.is_file():
        raise UsageError(f"manifest {file} does not exist or is not a file")
    entries = list(_entries(file, max_bytes))
    return find_specs(entries, source=str(file), progress=progress, strict=strict)


def specs_from_entries(
    entries: Iterable[tuple[str, Any]], source: str, *, progress: Progress | None = None
) -> list[ToolSpec]:
    """Validate (position, entry) pairs; raise one DefinitionError listing every problem."""
    return find_specs(entries, source, progress=progress, strict=True).specs


def find_specs(
    entries: Iterable[tuple[str, Any]],
    source: str,
    *,
    progress: Progress | None = None,
    strict: bool = False,
) -> Found:
    """Validate (position, entry) pairs. Strict: raise one DefinitionError listing every
    problem; else skip each invalid entry and repair wrong defaults, saying so."""
    specs: list[ToolSpec] = []
    problems: list[str] = []
    found = Found(specs)
    seen: dict[str, str] = {}
    total = len(entries) if isinstance(entries, Sized) else None
    for done, (where, entry) in enumerate(entries, start=1):
        if progress is not None and (done % PROGRESS_EVERY == 0 or done == total):
            progress(done, total, "reading")
        repairs: list[str] | None = None if strict else []
        try:
            spec = spec_from_mapping(entry, repairs=repairs)
        except DefinitionError as exc:
            problems.append(f"{where}: {exc}")
            found.skipped.append(Skipped(where, str(exc)))
            continue
        if spec.name in seen:
            reason = f"duplicate tool name {spec.name!r} (first at {seen[spec.name]})"
            problems.append(f"{where}: {reason}")
            found.skipped.append(Skipped(where, reason))
            continue
        seen[spec.name] = where
        specs.append(spec)
        found.repaired.extend(Skipped(spec.name, note) for note in repairs or ())
    if problems and strict:
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
    return found


def spec_from_mapping(entry: Any, *, repairs: list[str] | None = None) -> ToolSpec:
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
        data["parameters"] = normalize_parameters(data.get("parameters"), repairs=repairs)
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


def _entries(file: Path, max_bytes: int = MAX_BYTES) -> Iterator[tuple[str, Any]]:
    text = _read_text(file, max_bytes)
    if file.suffix.lower() in {".jsonl", ".ndjson"}:
        yield from _jsonl_entries(text)
        return
    try:
        document = _load_json(text) if file.suffix.lower() == ".json" else _load_yaml(text)
    except (ValueError, RecursionError, yaml.YAMLError) as exc:
        raise DefinitionError(f"manifest {file} cannot be parsed: {_reason(exc)}") from None
    except DefinitionError as exc:  # its aliases expand too far
        raise DefinitionError(f"manifest {file} is refused: {exc}") from None
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


def _read_text(file: Path, max_bytes: int) -> str:
    too_big = f"manifest {file} is larger than manifest_max_bytes ({max_bytes} bytes)"
    if file.stat().st_size > max_bytes:
        raise DefinitionError(f"{too_big}; split it or raise the setting")
    with file.open("rb") as handle:
        data = handle.read(max_bytes + 1)  # the file may have grown since
    if len(data) > max_bytes:
        raise DefinitionError(f"{too_big}; split it or raise the setting")
    try:
        return data.decode("utf-8-sig")
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

    def compose_document(self) -> Any:
        """The document's nodes, refused if its aliases expand past the budget."""
        node = super().compose_document()
        _check_expansion(node)
        return node


_Loader.yaml_implicit_resolvers = {
    first: [(tag, regexp) for tag, regexp in resolvers if tag != "tag:yaml.org,2002:timestamp"]
    for first, resolvers in yaml.SafeLoader.yaml_implicit_resolvers.items()
}


def _check_expansion(root: Any) -> None:
    """Count the nodes the document has once every alias is expanded (each node's size
    computed once, so a bomb is measured without being built); refuse it past
    ``MAX_ALIAS_EXPANSION`` more than it has written out, or if it contains itself."""
    sizes: dict[int, int] = {}
    written: set[int] = set()
    stack: list[tuple[Any, bool]] = [(root, False)]
    on_path: set[int] = set()
    while stack:
        node, leaving = stack.pop()
        children = _children(node)
        if leaving:
            on_path.discard(id(node))
            sizes[id(node)] = min(1 + sum(sizes[id(c)] for c in children), 1 << 62)
            continue
        if id(node) in on_path:
            raise DefinitionError("the YAML refers to itself through an alias (a cycle)")
        if id(node) in sizes:
            continue
        written.add(id(node))
        on_path.add(id(node))
        stack.append((node, True))
        stack.extend((child, False) for child in children if id(child) not in sizes)
    expanded = sizes[id(root)]
    if expanded - len(written) > MAX_ALIAS_EXPANSION:
        raise DefinitionError(
            f"its YAML aliases expand to {_count(expanded)} nodes from {len(written)} written;"
            f" more than {MAX_ALIAS_EXPANSION} added by aliases is refused (an alias bomb?)"
        )


def _children(node: Any) -> list[Any]:
    if isinstance(node, yaml.MappingNode):
        return [part for pair in node.value for part in pair]
    if isinstance(node, yaml.SequenceNode):
        return list(node.value)
    return []


def _count(n: int) -> str:
    return f"{n:,}" if n < 1 << 62 else "more than 4.6e18"


def _load_yaml(text: str) -> Any:
    return yaml.load(text, Loader=_Loader)  # a SafeLoader subclass


def _reason(exc: BaseException) -> str:
    return "nested too deeply" if isinstance(exc, RecursionError) else str(exc)
