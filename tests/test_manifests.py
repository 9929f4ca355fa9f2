"""Manifests: tools declared in YAML, JSON or JSON Lines, loaded whole or not at all."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
import yaml

import tooldb
from tooldb import DefinitionError, Registry, Returns, ToolKind, UsageError
from tooldb.registry.manifests import MAX_REPORTED, read_manifest, spec_from_mapping

SQL = "'; DROP TABLE tools; --"

ADD = {
    "name": "adder",
    "description": "Add two integers.",
    "category": "math",
    "target": "tests.sample_tools:add",
    "parameters": {"a": {"type": "int", "required": True}, "b": {"type": "int", "default": 5}},
    "returns": "scalar",
}
ECHO = {
    "name": "echo",
    "target": "tests.sample_tools:echo",
    "parameters": {
        "type": "object",
        "properties": {"text": {"type": "string"}},
        "required": ["text"],
    },
    "returns": "text",
}
ADD_SCHEMA = {
    "type": "object",
    "properties": {"a": {"type": "integer"}, "b": {"type": "integer", "default": 5}},
    "required": ["a"],
    "additionalProperties": False,
}


def write(tmp_path: Path, name: str, document: Any) -> Path:
    """A manifest file: YAML or JSON by suffix, JSONL from a list of lines."""
    path = tmp_path / name
    if isinstance(document, str):
        path.write_text(document, encoding="utf-8")
    elif path.suffix in {".jsonl", ".ndjson"}:
        path.write_text("\n".join(json.dumps(item) for item in document) + "\n", encoding="utf-8")
    elif path.suffix == ".json":
        path.write_text(json.dumps(document), encoding="utf-8")
    else:
        path.write_text(yaml.safe_dump(document, allow_unicode=True), encoding="utf-8")
    return path


def problems_of(path: Path) -> str:
    with pytest.raises(DefinitionError) as info:
        read_manifest(path)
    return str(info.value)


@pytest.fixture
def registry(sqlite_url: str) -> Any:
    reg = tooldb.open(sqlite_url)
    yield reg
    reg.close()


# -- shapes and formats ------------------------------------------------------------


@pytest.mark.parametrize("suffix", [".yaml", ".yml", ".json"])
@pytest.mark.parametrize(
    "shape", ["tools", "list", "single"], ids=["tools-object", "list", "single-object"]
)
def test_shapes(tmp_path: Path, suffix: str, shape: str) -> None:
    document: Any = {"tools": [ADD, ECHO]} if shape == "tools" else [ADD, ECHO]
    if shape == "single":
        document = ADD
    specs = read_manifest(write(tmp_path, f"tools{suffix}", document))
    assert [s.name for s in specs] == (["adder"] if shape == "single" else ["adder", "echo"])
    assert specs[0].parameters == ADD_SCHEMA
    assert specs[0].returns is Returns.SCALAR
    assert specs[0].kind is ToolKind.PYTHON


@pytest.mark.parametrize("suffix", [".jsonl", ".ndjson", ".JSONL"])
def test_json_lines(tmp_path: Path, suffix: str) -> None:
    path = tmp_path / f"tools{suffix}"
    path.write_text(f"{json.dumps(ADD)}\n\n   \n{json.dumps(ECHO)}\r\n", encoding="utf-8")
    assert [s.name for s in read_manifest(path)] == ["adder", "echo"]


def test_yaml_written_by_hand(tmp_path: Path) -> None:
    path = write(
        tmp_path,
        "tools.yaml",
        """
tools:
  - name: summarize
    description: Summarise a text.
    target: tests.sample_tools:echo
    timeout: 2.5
    parameters:
      prompt: {type: string, required: true}
      maxTokens: {type: int, default: 100}
      since: {type: date, default: 2024-01-01}
      id: uniqueidentifier
    metadata:
      released: 2024-05-01
""",
    )
    [spec] = read_manifest(path)
    assert spec.timeout_s == 2.5
    assert spec.parameters == {
        "type": "object",
        "properties": {
            "prompt": {"type": "string"},
            "maxTokens": {"type": "integer", "default": 100},
            "since": {"type": "string", "format": "date", "default": "2024-01-01"},
            "id": {"type": "string", "format": "uuid"},
        },
        "required": ["prompt"],
        "additionalProperties": False,
    }
    assert spec.metadata == {"released": "2024-05-01"}  # YAML dates stay text


def test_standard_and_compact_parameters_are_stored_normalised(
    tmp_path: Path, registry: Registry
) -> None:
    registry.add_manifest(write(tmp_path, "tools.json", {"tools": [ADD, ECHO]}))
    assert registry.get("adder").spec.parameters == ADD_SCHEMA
    assert registry.get("echo").spec.parameters == {
        **ECHO["parameters"],
        "additionalProperties": False,
    }


def test_bom_is_accepted(tmp_path: Path) -> None:
    path = tmp_path / "tools.json"
    path.write_bytes(b"\xef\xbb\xbf" + json.dumps([ADD]).encode())
    assert [s.name for s in read_manifest(path)] == ["adder"]


def test_json_lines_split_on_newlines_only(tmp_path: Path) -> None:
    entry = {**ECHO, "description": "before\u2028after\u0085end"}
    path = tmp_path / "tools.jsonl"
    path.write_text(json.dumps(entry, ensure_ascii=False) + "\n", encoding="utf-8")
    assert read_manifest(path)[0].description == "before\u2028after\u0085end"


def test_empty_list_is_no_tools(tmp_path: Path) -> None:
    assert read_manifest(write(tmp_path, "tools.yaml", {"tools": []})) == []


# -- problems, with their position ----------------------------------------------------


def test_every_problem_is_reported_with_its_position(tmp_path: Path) -> None:
    document = [
        ADD,
        {"name": "no_target"},
        {**ECHO, "name": "colourful", "colour": "red"},
        {**ECHO, "name": "bad_params", "parameters": {"x": {"type": "strnig"}}},
        "just a string",
        {**ADD, "kind": "teleport", "name": "bad_kind"},
        {**ADD},
    ]
    text = problems_of(write(tmp_path, "tools.yaml", document))
    assert text.startswith(f"manifest {tmp_path / 'tools.yaml'} has 6 invalid entries:\n")
    lines = text.splitlines()[1:]
    assert lines[0] == "  tool #2: 'no_target': field 'target' is required"
    assert lines[1].startswith("  tool #3: 'colourful': field 'colour' is not a known field")
    assert "(known: name, description, category, kind, target, parameters," in lines[1]
    assert lines[2].startswith("  tool #4: 'bad_params': unknown parameter type 'strnig' at ")
    assert lines[3] == "  tool #5: a tool must be an object, got string"
    assert lines[4].startswith("  tool #6: 'bad_kind': field 'kind' Input should be 'python'")
    assert lines[5] == "  tool #7: duplicate tool name 'adder' (first at tool #1)"


def test_json_lines_problems_name_the_line(tmp_path: Path) -> None:
    path = tmp_path / "tools.jsonl"
    path.write_text(
        "\n".join([json.dumps(ADD), "", "{not json", "[1, 2]", json.dumps(ADD), '{"name": "x"}']),
        encoding="utf-8",
    )
    text = problems_of(path)
    assert "has 4 invalid entries" in text
    assert "line 3: not valid JSON: Expecting property name" in text
    assert "line 4: a tool must be an object, got array" in text
    assert "line 5: duplicate tool name 'adder' (first at line 1)" in text
    assert "line 6: 'x': field 'target' is required" in text


def test_one_problem_is_one_entry(tmp_path: Path) -> None:
    text = problems_of(write(tmp_path, "tools.json", [{**ADD, "returns": "table-ish"}]))
    assert "has 1 invalid entry:" in text
    assert "tool #1: 'adder': field 'returns' Input should be" in text


def test_many_problems_are_capped(tmp_path: Path) -> None:
    text = problems_of(write(tmp_path, "tools.json", [{"name": f"t{i}"} for i in range(25)]))
    assert "has 25 invalid entries" in text
    assert text.count("field 'target' is required") == MAX_REPORTED
    assert text.endswith(f"... and {25 - MAX_REPORTED} more")


@pytest.mark.parametrize(
    ("entry", "message"),
    [
        ({"target": "m:f"}, "tool #1: field 'name' is required"),
        (
            {"name": "", "target": "m:f"},
            "tool #1: field 'name' Value error, tool name must be a non-empty",
        ),
        ({"name": "x", "target": "   "}, "target must not be empty"),
        (
            {"name": "x", "target": "m:f", "timeout": -1},
            "field 'timeout_s' Input should be greater",
        ),
        ({"name": "x", "target": "m:f", "parameters": []}, "parameters must be an object"),
        (
            {"name": "x", "target": "m:f", "parameters": {"n": {"type": "int", "default": "ten"}}},
            "'x': parameter 'n': default \"ten\" does not match",
        ),
        ({"name": "x", "target": "m:f", "description": "nul\x00"}, "contains a NUL character"),
        ({"name": 5, "target": "m:f"}, "field 'name' Input should be a valid string"),
        ({"name": "n" * 5000, "target": "m:f"}, "'nnnnnnnnnn"),
    ],
)
def test_invalid_entries(tmp_path: Path, entry: dict[str, Any], message: str) -> None:
    text = problems_of(write(tmp_path, "t.json", [entry]))
    assert message.replace("Value error, ", "") in text
    assert len(text) < 1000


@pytest.mark.parametrize(
    ("name", "content", "message"),
    [
        ("t.yaml", "tools: [\n  {name: x", "cannot be parsed: while parsing a flow"),
        ("t.yaml", "a: 1\n---\nb: 2\n", "cannot be parsed: expected a single document"),
        ("t.json", '{"tools": [', "cannot be parsed: Expecting value: line 1 column 12"),
        ("t.json", '[{"name": "x", "target": "m:f", "metadata": {"v": NaN}}]', "NaN is not"),
        ("t.json", "[" * 100_000, "cannot be parsed: nested too deeply"),
        ("t.yaml", "", "must hold a list of tools"),
        ("t.yaml", "just text\n", "must hold a list of tools"),
        ("t.json", "42", "must hold a list of tools"),
        ("t.json", '{"tools": {"name": "x"}}', "must hold a list of tools"),
        ("t.json", '{"tools": [], "defaults": {}}', "unknown top-level keys ['defaults']"),
    ],
)
def test_unreadable_manifests(tmp_path: Path, name: str, content: str, message: str) -> None:
    assert message in problems_of(write(tmp_path, name, content))


def test_not_utf8(tmp_path: Path) -> None:
    for name in ("t.yaml", "t.jsonl"):
        path = tmp_path / name
        path.write_bytes(b"name: caf\xe9\n")
        assert "is not UTF-8 text" in problems_of(path)


def test_missing_file_is_a_usage_error(tmp_path: Path) -> None:
    with pytest.raises(UsageError, match="does not exist or is not a file") as info:
        read_manifest(tmp_path / "nope.yaml")
    assert not isinstance(info.value, DefinitionError)
    with pytest.raises(UsageError, match="is not a file"):
        read_manifest(tmp_path)


def test_timeout_alias() -> None:
    assert spec_from_mapping({**ECHO, "timeout": 1}).timeout_s == 1
    with pytest.raises(DefinitionError, match="'echo': give 'timeout' or 'timeout_s', not both"):
        spec_from_mapping({**ECHO, "timeout": 1, "timeout_s": 2})


# -- through the registry: all or nothing -------------------------------------------


def test_sql_tool_that_cannot_run_is_rejected_by_the_registry(
    tmp_path: Path, registry: Registry
) -> None:
    query = {"name": "top_customers", "kind": "sql", "target": "SELECT * FROM customers"}
    path = write(tmp_path, "tools.yaml", {"tools": [ADD, query]})
    assert [s.kind for s in read_manifest(path)] == [ToolKind.PYTHON, ToolKind.SQL]
    with pytest.raises(DefinitionError, match="sql tool 'top_customers': returns must be"):
        registry.add_manifest(path, strict=True)
    assert registry.list(include_disabled=True) == []
    outcomes = registry.add_manifest(path)  # by default: the valid tools, the rest skipped
    assert [o.record.name for o in outcomes] == ["adder"]
    assert [s.tool for s in outcomes.skipped] == ["top_customers"]
    assert "returns must be" in outcomes.skipped[0].reason


def test_a_bad_entry_writes_nothing(tmp_path: Path, registry: Registry) -> None:
    path = write(tmp_path, "tools.json", [ADD, ECHO, {"name": "broken"}])
    with pytest.raises(DefinitionError, match="tool #3"):
        registry.add_manifest(path, strict=True)
    assert registry.list(include_disabled=True) == []
    outcomes = registry.add_manifest(path)
    assert [o.record.name for o in outcomes] == ["adder", "echo"]
    assert [s.tool for s in outcomes.skipped] == ["tool #3"]


def test_an_unimportable_target_writes_nothing(tmp_path: Path, registry: Registry) -> None:
    path = write(tmp_path, "t.json", [ADD, {**ECHO, "target": "tests.no_such_module:echo"}])
    with pytest.raises(DefinitionError, match=r"tests\.no_such_module"):
        registry.add_manifest(path, strict=True)
    assert registry.list(include_disabled=True) == []


def test_manifest_parameters_are_authoritative(tmp_path: Path, registry: Registry) -> None:
    outcomes = registry.add_manifest(write(tmp_path, "tools.yaml", [ADD, ECHO]))
    assert [o.status for o in outcomes] == ["created", "created"]
    result = registry.call("adder", {"a": "2"})  # the manifest's default b=5, not the function's 1
    assert result.success, result.error
    assert result.data == 7 and result.output == "7"
    assert registry.call("adder", '{"a": 2, "b": 3}').data == 5
    with pytest.raises(tooldb.ArgumentError, match="unknown parameter 'c'"):
        registry.call("adder", {"a": 1, "c": 2})
    again = registry.add_manifest(write(tmp_path, "tools.yaml", [ADD, ECHO]))
    assert [o.status for o in again] == ["unchanged", "unchanged"]


def test_declared_parameter_the_function_lacks_fails_the_call(
    tmp_path: Path, registry: Registry
) -> None:
    entry = {**ECHO, "parameters": {"text": "str", "shout": {"type": "bool", "default": False}}}
    registry.add_manifest(write(tmp_path, "tools.json", [entry]))
    result = registry.call("echo", {"text": "hi"})  # called as echo(text="hi", shout=False)
    assert not result.success
    assert result.error is not None and "shout" in result.error


HOSTILE = ["it's", 'say "hi"', "semi;colon", SQL, "naïve 名前", "🔧 wrench", "back\\slash"]


@pytest.mark.parametrize("suffix", [".yaml", ".json", ".jsonl"])
def test_hostile_text_in_every_field_is_stored_verbatim(
    tmp_path: Path, registry: Registry, suffix: str
) -> None:
    entries = [
        {
            "name": text,
            "description": f"{text} description",
            "category": text,
            "target": "tests.sample_tools:echo",
            "parameters": {
                "text": {"type": "string", "required": True, "description": text},
                "mode": {"type": "string", "enum": [text, SQL], "default": text},
            },
            "metadata": {text: [text, {"nested": text}]},
        }
        for text in HOSTILE
    ]
    registry.add_manifest(write(tmp_path, f"tools{suffix}", entries))
    assert sorted(t.name for t in registry.list()) == sorted(HOSTILE)
    for entry in entries:
        spec = registry.get(entry["name"]).spec
        assert (spec.name, spec.description, spec.category) == (
            entry["name"],
            entry["description"],
            entry["category"],
        )
        assert spec.metadata == entry["metadata"]
        props = spec.parameters["properties"]
        assert props["mode"] == {
            "type": "string",
            "enum": [entry["name"], SQL],
            "default": entry["name"],
        }
        assert props["text"]["description"] == entry["name"]


def test_hostile_arguments_reach_a_manifest_tool_verbatim(
    tmp_path: Path, registry: Registry
) -> None:
    registry.add_manifest(write(tmp_path, "tools.json", [ECHO]))
    for text in [*HOSTILE, "x" * 1_000_000]:
        result = registry.call("echo", {"text": text})
        assert result.success and result.data == text
    assert len(registry.list()) == 1


def test_bulk_import_reports_each_stage(sqlite_url: str, tmp_path: Path) -> None:
    registry = tooldb.open(sqlite_url, settings=tooldb.Settings(embedder="hash", url=sqlite_url))
    path = tmp_path / "big.jsonl"
    lines = [
        json.dumps({"name": f"tool_{i}", "description": f"Tool number {i} of the batch.",
                    "target": "tests.sample_tools:echo"})
        for i in range(2_500)
    ]  # fmt: skip
    path.write_text("\n".join(lines), encoding="utf-8")
    seen: list[tuple[str, int, int | None]] = []

    def report(done: int, total: int | None, stage: str = "embedding") -> None:
        seen.append((stage, done, total))

    outcomes = registry.add_manifest(path, progress=report)
    assert len(outcomes) == 2_500 and {o.status for o in outcomes} == {"created"}
    stages = list(dict.fromkeys(stage for stage, _, _ in seen))
    assert stages == ["reading", "writing", "embedding"]
    for stage in stages:
        done = [d for s, d, _ in seen if s == stage]
        assert done == sorted(done) and done[-1] == 2_500, (stage, done)
        assert {t for s, _, t in seen if s == stage} == {2_500}
    assert registry.select("tool number 1234", k=1).names == ["tool_1234"]
    registry.close()
