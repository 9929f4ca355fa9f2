"""`tooldb select`, `embed` and `doctor`: one JSON document, exit codes, on both stores."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from tests.test_cli import as_json, tooldb

ROOT = Path(__file__).resolve().parents[1]


@pytest.fixture
def url(store_url: str) -> str:
    assert tooldb(store_url, "add", "python", "tooldb.examples.basic").exit_code == 0
    return store_url


def test_select_prints_explained_candidates_and_records_the_decision(url: str) -> None:
    document = as_json(url, "select", "convert 30 degrees celsius to fahrenheit", "-k", "3")
    assert [c["rank"] for c in document["candidates"]] == [1, 2, 3]
    best = document["candidates"][0]
    assert best["name"] == "convert_temperature"
    assert {"final", "relevance", "dense", "lexical", "success", "latency", "calls"} <= set(best)
    assert document["decision_id"] >= 1 and document["embedder"] == "hash:256"
    text = tooldb(url, "select", "count the words of a text", "-k", "2")
    assert text.exit_code == 0 and "word_count" in text.stdout


def test_select_filters_and_bad_input(url: str) -> None:
    document = as_json(url, "select", "numbers", "--category", "math", "-k", "10")
    assert {c["category"] for c in document["candidates"]} == {"math"}
    assert as_json(url, "select", "numbers", "--category", "nope")["candidates"] == []
    error = as_json(url, "select", "   ", code=2)
    assert "task" in error["error"]["message"]
    assert tooldb(url, "select", "x", "-k", "-1").exit_code == 2


def test_embed_and_doctor(url: str, monkeypatch: pytest.MonkeyPatch) -> None:
    report = as_json(url, "doctor")
    assert report["embedder"] == "hash:256" and report["missing_embeddings"] == 0
    assert report["tools"] == report["enabled_tools"] == report["embeddings"]["hash:256"]
    assert report["schema"] == report["schema_expected"]
    monkeypatch.setenv("TOOLDB_EMBEDDER", "hash:32")
    assert as_json(url, "doctor")["missing_embeddings"] == report["tools"]
    result = as_json(url, "embed")
    assert result == {"embedder": "hash:32", "embedded": report["tools"]}
    assert as_json(url, "embed", "--rebuild")["embedded"] == 0
    monkeypatch.setenv("TOOLDB_EMBEDDER", "none")
    selection = tooldb(url, "select", "slug", "--json")
    assert selection.exit_code == 0
    assert json.loads(selection.stdout)["candidates"][0]["dense"] is None
    assert "lexical only" in selection.stderr


def test_unknown_embedder_is_a_usage_error(url: str, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("TOOLDB_EMBEDDER", "word2vec")
    error = as_json(url, "select", "slug", code=2)
    assert "unknown embedder 'word2vec'" in error["error"]["message"]
