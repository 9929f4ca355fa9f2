"""The sessionsight pack without a model: install (SQLite and PostgreSQL, idempotent, per
tenant), the deterministic tools from the CLI, and their clear errors."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import sqlalchemy as sa
from typer.testing import CliRunner

import tooldb
from tooldb import Settings
from tooldb.cli import app
from tooldb.packs import install
from tooldb.packs.sessionsight import store
from tooldb.packs.sessionsight.extraction import score, validate

from .conftest import scratch_database
from .test_sessionsight_agents import FULL

runner = CliRunner()
CLINICAL = {
    "check_risk_keywords",
    "lookup_diagnosis_code",
    "validate_schema",
    "score_confidence",
    "query_patient_history",
    "get_session_detail",
    "search_sessions",
    "get_patient_timeline",
    "aggregate_metrics",
    "get_mood_trend",
    "identify_effective_interventions",
    "compare_sessions",
}


def cli(url: str, *args: str) -> tuple[int, str]:
    result = runner.invoke(app, ["--db", url, *args])
    return result.exit_code, result.output


def call(url: str, tool: str, **arguments: object) -> object:
    code, out = cli(url, "call", tool, "--args", json.dumps(arguments), "--json")
    assert code == 0, out
    return json.loads(out)["data"]


@pytest.fixture
def installed(sqlite_url: str, tmp_path: Path) -> str:
    code, out = cli(
        sqlite_url, "add", "pack", "sessionsight", "--database", f"sqlite:///{tmp_path / 'ss.db'}"
    )
    assert code == 0, out
    return sqlite_url


def test_install_lists_the_clinical_tools_and_is_idempotent(installed: str, tmp_path: Path) -> None:
    code, out = cli(installed, "list", "--category", "clinical", "--json")
    assert code == 0, out
    assert {tool["name"] for tool in json.loads(out)["tools"]} == CLINICAL
    code, out = cli(installed, "agents", "--json")
    assert {"sessionsight_extractor", "sessionsight_qa", "sessionsight_summarizer"} <= {
        a["name"] for a in json.loads(out)["agents"]
    }
    again = ["add", "pack", "sessionsight", "--database", f"sqlite:///{tmp_path / 'ss.db'}"]
    assert cli(installed, *again)[0] == 0
    with store.engine(f"sqlite:///{tmp_path / 'ss.db'}").connect() as conn:
        count = conn.execute(sa.select(sa.func.count()).select_from(store.sessions)).scalar_one()
    assert count == 48  # seeded once


@pytest.mark.postgres
def test_postgres_database_and_tenants_are_separate(tmp_path: Path) -> None:
    url = f"sqlite:///{tmp_path / 'registry.db'}"
    with scratch_database("sessionsight") as pack_url:
        for tenant in ("clinic_a", "clinic_b"):
            registry = tooldb.open(url, tenant=tenant, settings=Settings(embedder="hash", url=url))
            try:
                report = install(registry, "sessionsight", pack_url)
                assert report.database_url == pack_url
            finally:
                registry.close()
        store.save_extraction(pack_url, "clinic_a", "P01-S1", FULL, False)
        assert store.session(pack_url, "clinic_a", "P01-S1")["extraction"] == FULL
        assert store.session(pack_url, "clinic_b", "P01-S1")["extraction"] is None
        registry = tooldb.open(url, tenant="clinic_b", settings=Settings(embedder="hash", url=url))
        try:
            trend = registry.call("get_mood_trend", {"patient_id": "P02"})
            hits = registry.call("search_sessions", {"query": "cannabis", "patient_id": "P04"})
        finally:
            registry.close()
        store.engine(pack_url).dispose()
    assert trend.success and trend.data["direction"] == "improving"
    assert hits.success and hits.data["hits"][0]["patient_id"] == "P04"
    assert hits.data["mode"] == "hybrid"


def test_risk_statuses_from_the_cli(installed: str) -> None:
    text = (
        "Denies SI/HI. History of SH, none since 2019. If suicidal thoughts return, she will "
        "call 988. Her mother has been drinking heavily. R/o alcohol use disorder. "
        "Reports passive SI last night."
    )
    found = call(installed, "check_risk_keywords", text=text)
    statuses = [(f["text"], f["status"]) for f in found["findings"]]  # type: ignore[index]
    assert statuses == [
        ("SI", "negated"),
        ("HI", "negated"),
        ("SH", "historical"),
        ("suicidal thoughts", "hypothetical"),
        ("drinking", "other"),
        ("alcohol use", "possible"),
        ("passive SI", "affirmed"),
    ]
    assert found["requires_review"] is True  # type: ignore[index]
    span = found["findings"][-1]["span"]  # type: ignore[index]
    assert text[span[0] : span[1]] == "passive SI"
    terms = call(
        installed,
        "check_risk_keywords",
        text="Denies panic attacks.",
        terms=["panic attacks", "insomnia"],
    )
    assert terms["findings"][0]["status"] == "negated"  # type: ignore[index]
    assert terms["not_found"] == ["insomnia"]  # type: ignore[index]
    code, out = cli(
        installed, "call", "check_risk_keywords", "--args", '{"text": "x", "terms": []}'
    )
    assert code != 0 and "terms must be a non-empty list" in out


def test_diagnosis_codes(installed: str) -> None:
    gad = call(installed, "lookup_diagnosis_code", text="GAD")
    assert (gad["code"], gad["title"]) == ("F41.1", "Generalized anxiety disorder")  # type: ignore[index]
    mdd = call(installed, "lookup_diagnosis_code", text="MDD, recurrent, moderate")
    assert mdd["code"] == "F33.1"  # type: ignore[index]
    none = call(installed, "lookup_diagnosis_code", text="feels blah about things")
    assert none["code"] is None and isinstance(none["candidates"], list)  # type: ignore[index]


def test_schema_and_confidence() -> None:
    assert validate(FULL)["complete"] is True
    bad = json.loads(json.dumps(FULL))
    bad["mood"]["score"]["confidence"] = 1.5
    del bad["diagnoses"]
    report = validate(bad)
    assert report["valid"] is False and report["errors"][0].startswith("mood/score/confidence")
    assert report["missing_sections"] == ["mood", "diagnoses"]  # an invalid section is not done
    note = "Mood: client rates mood 5/10. Denies SI/HI. Interventions: CBT."
    scored = score(
        {
            "mood": {"score": {"value": 5, "confidence": 0.9}},
            "risk": {"suicidal_ideation": {"value": "affirmed", "confidence": 0.9}},
            "interventions": {"modalities": {"value": ["EMDR"], "confidence": 0.8}},
        },
        note,
    )
    fields = scored["fields"]
    assert fields["mood.score"]["score"] == 0.9
    assert fields["risk.suicidal_ideation"]["evidence"] == 0.1  # the note negates it
    assert scored["low_confidence"] == ["interventions.modalities", "risk.suicidal_ideation"]


def test_history_tools(installed: str) -> None:
    trend = call(installed, "get_mood_trend", patient_id="P02", from_date="2026-01-20")
    assert trend["direction"] == "improving" and trend["points"] == 6  # type: ignore[index]
    flat = call(installed, "get_mood_trend", patient_id="P05")
    assert flat["direction"] == "stable"  # type: ignore[index]
    diff = call(installed, "compare_sessions", a="P06-S1", b="P06-S8")
    assert {"category": "self_harm", "a": "affirmed", "b": "negated"} in diff["risk_changes"]  # type: ignore[index]
    ranked = call(installed, "identify_effective_interventions", patient_id="P03")
    assert ranked["ranked"][0]["mean_mood_change"] >= ranked["ranked"][-1]["mean_mood_change"]  # type: ignore[index]
    scale = call(installed, "aggregate_metrics", patient_id="P01", metric="scale")
    assert (scale["scale"], scale["first"], scale["last"]) == ("GAD-7", 15.0, 6.0)  # type: ignore[index]
    timeline = call(installed, "get_patient_timeline", patient_id="P06")
    flagged = [s["session_id"] for s in timeline["timeline"] if s["risk_findings"]]  # type: ignore[index]
    assert flagged[:2] == ["P06-S1", "P06-S2"] and "P06-S5" in flagged
    history = call(installed, "query_patient_history", patient_id="P04", count=2)
    assert [s["session_id"] for s in history["sessions"]] == ["P04-S8", "P04-S7"]  # type: ignore[index]


def test_bad_input_is_a_clear_error(installed: str) -> None:
    for tool, arguments, message in [
        ("get_session_detail", {"session_id": "P99-S1"}, "no session 'P99-S1'"),
        ("get_patient_timeline", {"patient_id": "P99"}, "no patient 'P99'; patients: P01"),
        ("aggregate_metrics", {"patient_id": "P01", "metric": "iq"}, "unknown metric 'iq'"),
        ("get_mood_trend", {"patient_id": "P01", "from_date": "Jan 5"}, "YYYY-MM-DD"),
        ("validate_schema", {"extraction": "{not json"}, "expected object, got string"),
        ("query_patient_history", {"patient_id": "P01", "count": 0}, "count must be from 1"),
    ]:
        code, out = cli(installed, "call", tool, "--args", json.dumps(arguments))
        assert code != 0 and message in out, (tool, out)


def test_extractor_without_a_model_says_so(installed: str) -> None:
    code, out = cli(installed, "sessionsight", "extract", "P01-S1")
    assert code == 2 and "needs a model" in out
    code, out = cli(installed, "run", "extract P01-S1", "--agent", "sessionsight_extractor")
    # Never routed: the agents' model is `inherit` ("needs a model" once agents/run.py
    # knows the word, a refused model name before).
    assert code == 2 and "model" in out
    code, out = cli(installed, "runs", "--json")
    assert json.loads(out)["runs"] == []
    code, out = cli(installed, "sessionsight", "extract", "P01-S99", "--model", "test:none")
    assert code != 0 and "no session 'P01-S99'" in out
