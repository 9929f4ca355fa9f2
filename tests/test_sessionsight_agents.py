"""SessionSight's agents driven by test models (and once by the OpenAI adapter over HTTP
against a local server replaying recorded responses): a complete extraction, the partial
result at the tool-call limit, a forced required:validate_schema turn, a negated risk not
raised, an affirmed one flagged whatever the model says, cited answers."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from typer.testing import CliRunner

import tooldb
from tooldb import Registry, Settings
from tooldb.cli import app
from tooldb.models import Message, ToolChoice, ToolSchema, load_model
from tooldb.models.test import FunctionModel, ScriptedModel, call
from tooldb.packs import install
from tooldb.packs.sessionsight import store
from tooldb.packs.sessionsight.runner import ask, extract, summarize

from .wire_server import FIXTURES, wire_server

FULL = {
    "session_info": {
        "session_id": {"value": "P01-S3", "confidence": 1.0},
        "date": {"value": "2026-01-20", "confidence": 1.0},
        "session_number": {"value": 3, "confidence": 0.9},
    },
    "presenting_concerns": {
        "concerns": {"value": ["worry", "fortune telling"], "confidence": 0.8},
    },
    "mood": {
        "score": {"value": 5, "confidence": 0.9},
        "scale_name": {"value": "GAD-7", "confidence": 0.9},
        "scale_score": {"value": 13, "confidence": 0.9},
    },
    "risk": {
        "suicidal_ideation": {"value": "negated", "confidence": 0.95},
        "self_harm": {"value": "not_assessed", "confidence": 0.7},
        "harm_to_others": {"value": "negated", "confidence": 0.95},
    },
    "mental_status": {"orientation": {"value": "oriented x4", "confidence": 0.8}},
    "interventions": {"modalities": {"value": ["CBT", "worry postponement"], "confidence": 0.9}},
    "diagnoses": {
        "items": {
            "value": [
                {"name": "Generalized anxiety disorder", "code": "F41.1", "status": "primary"},
                {"name": "major depressive disorder", "code": None, "status": "rule_out"},
            ],
            "confidence": 0.9,
        }
    },
    "progress": {"summary": {"value": "completed three thought records", "confidence": 0.7}},
    "next_steps": {"homework": {"value": "Worry time 6:30 pm, 20 minutes", "confidence": 0.9}},
}


@pytest.fixture
def clinic(tmp_path: Path) -> Iterator[Registry]:
    url = f"sqlite:///{tmp_path / 'registry.db'}"
    registry = tooldb.open(url, settings=Settings(embedder="hash", url=url))
    install(registry, "sessionsight", f"sqlite:///{tmp_path / 'sessionsight.db'}")
    yield registry
    registry.close()


def note_of(messages: list[Message]) -> str:
    return messages[1].content.split("Note:\n", 1)[1]


def test_complete_extraction_negated_risk_not_raised(clinic: Registry) -> None:
    def model(messages: list[Message], tools: list[ToolSchema], choice: ToolChoice) -> Any:
        done = [m.name for m in messages if m.role == "tool"]
        if not done:
            return [
                call("check_risk_keywords", {"text": note_of(messages)}),
                call("lookup_diagnosis_code", {"text": "GAD"}),
            ]
        if "validate_schema" not in done:
            return call("validate_schema", {"extraction": FULL})
        return "```json\n" + json.dumps(FULL) + "\n```"

    result = extract(clinic, "P01-S3", model=FunctionModel(model))
    assert result["status"] == "complete", result
    assert result["requires_review"] is False, result["review_reasons"]
    assert len(result["completed_sections"]) == 9
    assert result["extraction"]["risk"]["suicidal_ideation"]["value"] == "negated"
    assert result["tool_calls"] == 3
    stored = store.session(str(result_db(clinic)), clinic.tenant, "P01-S3")
    assert stored["extraction"]["mood"]["score"]["value"] == 5
    assert stored["requires_review"] is False


def result_db(registry: Registry) -> str:
    from tooldb.packs.sessionsight.runner import database

    return database(registry)


def test_affirmed_risk_is_flagged_whatever_the_model_says(clinic: Registry) -> None:
    wrong = json.loads(json.dumps(FULL))
    wrong["session_info"]["session_id"]["value"] = "P02-S1"
    script = ScriptedModel([json.dumps(wrong)])  # claims SI negated; the note endorses it
    result = extract(clinic, "P02-S1", model=script)
    assert result["requires_review"] is True
    assert any("suicidal ideation" in reason for reason in result["review_reasons"])
    risk = result["extraction"]["risk"]["suicidal_ideation"]
    assert risk["value"] == "affirmed" and "the model said 'negated'" in risk["evidence"]
    assert {f["category"] for f in result["risk_findings"]} >= {"suicidal_ideation"}


def test_a_risk_the_model_affirms_is_flagged_even_where_context_does_not(
    clinic: Registry,
) -> None:
    cautious = json.loads(json.dumps(FULL))
    cautious["risk"]["self_harm"] = {"value": "affirmed", "confidence": 0.6}
    result = extract(clinic, "P01-S3", model=ScriptedModel([json.dumps(cautious)]))
    assert result["requires_review"] is True
    assert result["review_reasons"] == ["the extraction marks self harm affirmed"]
    assert result["extraction"]["risk"]["self_harm"]["value"] == "affirmed"


def test_tool_call_limit_returns_the_partial_extraction_with_its_sections(
    clinic: Registry,
) -> None:
    partial = {k: FULL[k] for k in ("session_info", "presenting_concerns", "mood")}

    def model(messages: list[Message], tools: list[ToolSchema], choice: ToolChoice) -> Any:
        return [
            call("validate_schema", {"extraction": partial}),
            call("check_risk_keywords", {"text": "Denies SI/HI."}),
            call("lookup_diagnosis_code", {"text": "GAD"}),
            call("lookup_diagnosis_code", {"text": "MDD"}),
        ]  # never answers: 4 calls a turn reach the 15-call limit in the 4th turn

    result = extract(clinic, "P01-S3", model=FunctionModel(model))
    assert result["status"] == "partial" and result["run_status"] == "partial"
    assert result["requires_review"] is True
    assert "15 tool calls" in result["review_reasons"][0]
    assert result["extraction_source"] == "last validated"
    assert set(result["completed_sections"]) >= {"session_info", "presenting_concerns", "mood"}
    assert "risk" in result["completed_sections"]  # filled from ConText, never left empty
    assert "diagnoses" in result["missing_sections"]
    assert result["tool_calls"] == 15


def test_a_run_with_nothing_validated_still_returns_sections(clinic: Registry) -> None:
    loop = FunctionModel(lambda m, t, c: call("check_risk_keywords", {"text": "x"}))
    result = extract(clinic, "P06-S5", model=loop)
    assert result["status"] == "partial" and result["requires_review"]
    assert result["extraction_source"] == "none"
    assert {"session_info", "risk"} <= set(result["completed_sections"])
    assert result["extraction"]["risk"]["suicidal_ideation"]["value"] == "affirmed"


def test_forced_required_validate_schema_reaches_the_model(clinic: Registry) -> None:
    choices: list[ToolChoice] = []

    def model(messages: list[Message], tools: list[ToolSchema], choice: ToolChoice) -> Any:
        choices.append(choice)
        if len(choices) == 1:
            return call("validate_schema", {"extraction": FULL})
        return json.dumps(FULL)

    result = extract(
        clinic, "P01-S3", model=FunctionModel(model), tool_choice="required:validate_schema"
    )
    assert choices[0] == ToolChoice("required", "validate_schema")
    assert choices[1] == ToolChoice("auto")  # required applies to the first turn only
    assert result["status"] == "complete"


def test_extractor_without_a_model_says_it_needs_one(clinic: Registry) -> None:
    with pytest.raises(tooldb.UsageError, match="needs a model"):
        extract(clinic, "P01-S1")


def test_qa_answer_cites_sessions_and_unknown_citations_are_flagged(clinic: Registry) -> None:
    def model(messages: list[Message], tools: list[ToolSchema], choice: ToolChoice) -> Any:
        results = [m for m in messages if m.role == "tool"]
        if not results:
            return call("search_sessions", {"query": "nightmares", "patient_id": "P03"})
        hits = json.loads(results[0].content)["hits"]
        ids = sorted(hit["session_id"] for hit in hits[:2])
        return f"Nightmares fell from 4 nights a week [{ids[0]}] to once a week [{ids[1]}]."

    result = ask(clinic, "How are the nightmares?", patient_id="P03", model=FunctionModel(model))
    assert result["requires_review"] is False, result["review_reasons"]
    assert {c["session_id"] for c in result["citations"]} == {"P03-S1", "P03-S6"}
    made_up = ask(clinic, "Any SI?", model=ScriptedModel(["No SI was reported [P03-S99]."]))
    assert made_up["requires_review"] is True
    assert "P03-S99" in made_up["review_reasons"][-1]


def test_summarizer_reports_trend_and_what_works(clinic: Registry) -> None:
    def model(messages: list[Message], tools: list[ToolSchema], choice: ToolChoice) -> Any:
        results = {m.name: json.loads(m.content) for m in messages if m.role == "tool"}
        if not results:
            return [
                call("get_mood_trend", {"patient_id": "P04"}),
                call("identify_effective_interventions", {"patient_id": "P04"}),
            ]
        trend = results["get_mood_trend"]
        best = results["identify_effective_interventions"]["ranked"][0]
        return (
            f"Trend: {trend['direction']} ({trend['slope_per_week']}/week) "
            f"[{trend['moods'][0]['session_id']}] [{trend['moods'][-1]['session_id']}]. "
            f"What works: {best['intervention']} [{best['session_ids'][0]}]."
        )

    result = summarize(clinic, "P04", model=FunctionModel(model))
    assert result["answer"].startswith("Trend: improving")
    assert {"P04-S1", "P04-S8"} <= {c["session_id"] for c in result["citations"]}


def test_extraction_over_http_with_the_openai_adapter(
    clinic: Registry, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The recorded exchange: a forced validate_schema call, a risk check, the answer."""
    monkeypatch.setenv("TEST_OPENAI_KEY", "sk-test-0123456789abcdef")
    recorded = json.loads((FIXTURES / "openai" / "sessionsight_extraction.json").read_text())
    with wire_server() as server:
        server.reply(*recorded["responses"])
        settings = Settings(
            model_base_url=f"{server.url}/v1",
            model_api_key_env="TEST_OPENAI_KEY",
            model_max_retries=0,
        )
        model = load_model("openai:gpt-4o-mini", settings)
        result = extract(clinic, "P06-S5", model=model, tool_choice="required:validate_schema")
    first, second, third = (request.body for request in server.requests)
    assert first["tool_choice"] == {"type": "function", "function": {"name": "validate_schema"}}
    assert second["tool_choice"] == "auto"
    assert {t["function"]["name"] for t in first["tools"]} >= {
        "validate_schema",
        "score_confidence",
    }
    assert third["messages"][-1]["role"] == "tool"  # the risk check's result went back
    assert result["status"] == "complete"
    # The model wrote "negated" for SI; the note endorses passive SI: flagged, corrected.
    assert result["requires_review"] is True
    assert result["extraction"]["risk"]["suicidal_ideation"]["value"] == "affirmed"
    assert result["extraction"]["risk"]["self_harm"]["value"] == "negated"


def test_cli_extract_with_a_registered_test_model(clinic: Registry) -> None:
    from tooldb.models import register_model

    register_model("test:sessionsight", ScriptedModel([json.dumps(FULL)]))
    url = clinic.settings.resolved_url
    runner = CliRunner()
    out = runner.invoke(
        app, ["--db", url, "sessionsight", "extract", "P01-S3", "--model", "test:sessionsight"]
    )
    assert out.exit_code == 0, out.output
    assert "complete (9/9 sections" in out.output
