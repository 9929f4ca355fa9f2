"""Issue 20, items 11 and 12 (manifests): an alias bomb and an oversized file are
refused with exit 2 before they cost anything; a manifest with some invalid tools or
defaults of the wrong type imports what is valid and reports the rest."""

from __future__ import annotations

import json
import time
from pathlib import Path

import pytest
from typer.testing import CliRunner

import tooldb
from tooldb import DefinitionError
from tooldb.cli import app

# 468 bytes: nine levels of nine aliases, 9**9 = 387 million strings once expanded
BOMB = """\
a: &a ["lol","lol","lol","lol","lol","lol","lol","lol","lol"]
b: &b [*a,*a,*a,*a,*a,*a,*a,*a,*a]
c: &c [*b,*b,*b,*b,*b,*b,*b,*b,*b]
d: &d [*c,*c,*c,*c,*c,*c,*c,*c,*c]
e: &e [*d,*d,*d,*d,*d,*d,*d,*d,*d]
f: &f [*e,*e,*e,*e,*e,*e,*e,*e,*e]
g: &g [*f,*f,*f,*f,*f,*f,*f,*f,*f]
h: &h [*g,*g,*g,*g,*g,*g,*g,*g,*g]
i: &i [*h,*h,*h,*h,*h,*h,*h,*h,*h]
"""
BOMB_TOOL = """\
tools:
  - name: bomb
    target: tests.sample_tools:echo
    metadata: &m0 {x: [a, a, a, a, a, a, a, a, a, a]}
    description: x
  - {name: b1, target: "m:f", metadata: &m1 {x: [*m0,*m0,*m0,*m0,*m0,*m0,*m0,*m0,*m0,*m0]}}
  - {name: b2, target: "m:f", metadata: &m2 {x: [*m1,*m1,*m1,*m1,*m1,*m1,*m1,*m1,*m1,*m1]}}
  - {name: b3, target: "m:f", metadata: &m3 {x: [*m2,*m2,*m2,*m2,*m2,*m2,*m2,*m2,*m2,*m2]}}
  - {name: b4, target: "m:f", metadata: &m4 {x: [*m3,*m3,*m3,*m3,*m3,*m3,*m3,*m3,*m3,*m3]}}
  - {name: b5, target: "m:f", metadata: &m5 {x: [*m4,*m4,*m4,*m4,*m4,*m4,*m4,*m4,*m4,*m4]}}
  - {name: b6, target: "m:f", metadata: &m6 {x: [*m5,*m5,*m5,*m5,*m5,*m5,*m5,*m5,*m5,*m5]}}
"""
ECHO = {"name": "echo", "target": "tests.sample_tools:echo", "parameters": {"text": "str"}}


def cli(url: str, *args: str) -> object:
    return CliRunner().invoke(app, ["--db", url, *args])


@pytest.mark.parametrize("document", [BOMB, BOMB_TOOL], ids=["bomb", "bomb-in-metadata"])
def test_a_yaml_alias_bomb_is_refused_quickly(
    tmp_path: Path, sqlite_url: str, document: str
) -> None:
    path = tmp_path / "bomb.yaml"
    path.write_text(document)
    start = time.perf_counter()
    result = cli(sqlite_url, "add", "manifest", str(path))
    assert time.perf_counter() - start < 10
    assert result.exit_code == 2, result.output  # type: ignore[attr-defined]
    assert "alias bomb" in result.stderr  # type: ignore[attr-defined]


def test_aliases_within_the_budget_still_work(tmp_path: Path, sqlite_url: str) -> None:
    path = tmp_path / "ok.yaml"
    path.write_text(
        "- {name: one, target: 'tests.sample_tools:echo', parameters: &p {text: str}}\n"
        "- {name: two, target: 'tests.sample_tools:echo', parameters: *p}\n"
    )
    with tooldb.open(sqlite_url) as registry:
        assert [o.record.name for o in registry.add_manifest(path)] == ["one", "two"]


def test_a_yaml_document_that_contains_itself_is_refused(tmp_path: Path) -> None:
    path = tmp_path / "loop.yaml"
    path.write_text("&a [*a]\n")
    with pytest.raises(DefinitionError, match="refers to itself"):
        tooldb.registry.manifests.read_manifest(path)


def test_a_manifest_past_the_size_limit_is_refused_unread(
    tmp_path: Path, sqlite_url: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    path = tmp_path / "big.json"
    path.write_text(json.dumps([{**ECHO, "description": "x" * 2_000_000}]))
    monkeypatch.setenv("TOOLDB_MANIFEST_MAX_BYTES", "1000000")
    result = cli(sqlite_url, "add", "manifest", str(path))
    assert result.exit_code == 2  # type: ignore[attr-defined]
    assert "larger than manifest_max_bytes (1000000 bytes)" in result.stderr  # type: ignore[attr-defined]
    monkeypatch.setenv("TOOLDB_MANIFEST_MAX_BYTES", "3000000")
    assert cli(sqlite_url, "add", "manifest", str(path)).exit_code == 0  # type: ignore[attr-defined]


APIGEN_LIKE = [
    {**ECHO, "name": "ok"},
    {  # "250" for an integer, "true" for a boolean: coerced losslessly
        "name": "search",
        "target": "tests.sample_tools:echo",
        "parameters": {
            "type": "object",
            "properties": {
                "text": {"type": "string"},
                "limit": {"type": "integer", "default": "250"},
                "safe": {"type": "boolean", "default": "true"},
                "lang": {"type": "string", "default": 7},
                "mode": {"type": "string", "enum": ["a", "b"], "default": "c"},
            },
        },
    },
    {"name": "broken", "kind": "telepathy", "target": "x"},
    {**ECHO, "name": "ok"},  # a duplicate
]


def test_a_manifest_imports_what_is_valid_and_reports_the_rest(
    tmp_path: Path, sqlite_url: str
) -> None:
    path = tmp_path / "apigen.json"
    path.write_text(json.dumps(APIGEN_LIKE))
    result = cli(sqlite_url, "add", "manifest", str(path), "--json")
    assert result.exit_code == 0, result.output  # type: ignore[attr-defined]
    report = json.loads(result.stdout)  # type: ignore[attr-defined]
    assert [t["name"] for t in report["tools"]] == ["ok", "search"]
    assert [s["tool"] for s in report["skipped"]] == ["tool #3", "tool #4"]
    assert "duplicate tool name 'ok'" in report["skipped"][1]["reason"]
    repaired = [r["reason"] for r in report["repaired"]]
    assert repaired == [
        "parameter 'limit': default \"250\" coerced to 250",
        "parameter 'safe': default \"true\" coerced to true",
        "parameter 'lang': default 7 coerced to \"7\"",
        "parameter 'mode': default \"c\" dropped ('c' is not one of ['a', 'b'])",
    ]
    with tooldb.open(sqlite_url) as registry:
        properties = registry.get("search").spec.parameters["properties"]
        assert properties["limit"]["default"] == 250 and "default" not in properties["mode"]
        bound = registry.bind("search", {"text": "hi"}).arguments
        assert bound == {"text": "hi", "limit": 250, "safe": True, "lang": "7"}
    strict = cli(sqlite_url, "add", "manifest", str(path), "--strict")
    assert strict.exit_code == 2 and "4 invalid entries" not in strict.stderr  # type: ignore[attr-defined]
    assert "does not match its own schema" in strict.stderr  # type: ignore[attr-defined]


def test_a_manifest_with_nothing_valid_exits_2(tmp_path: Path, sqlite_url: str) -> None:
    path = tmp_path / "bad.yaml"
    path.write_text("tools:\n  - name: x\n    kind: telepathy\n    target: helper\n")
    result = cli(sqlite_url, "add", "manifest", str(path))
    assert result.exit_code == 2 and "field 'kind'" in result.stderr  # type: ignore[attr-defined]
