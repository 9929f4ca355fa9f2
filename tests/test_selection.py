"""Selection: the right few tools, explained, kept current, learning from use, on both stores."""

from __future__ import annotations

import time
from typing import Any

import pytest

import tooldb
from tooldb import Registry, Settings, UsageError
from tooldb.registry.manifests import spec_from_mapping
from tooldb.selection import index as tool_index
from tooldb.stores import TenantState
from tooldb.types import ToolSpec

from .ooda_support import log_calls

CATALOGUE: list[dict[str, Any]] = [
    {"name": "get_weather_forecast", "category": "weather",
     "description": "Weather forecast for a city: temperature, rain and wind for the next days.",
     "parameters": {"city": {"type": "string", "required": True}}},
    {"name": "convert_currency", "category": "finance",
     "description": "Convert an amount of money from one currency to another at today's rate.",
     "parameters": {"amount": {"type": "number", "required": True},
                    "from_currency": {"type": "string"}, "to_currency": {"type": "string"}}},
    {"name": "send_email", "category": "communication",
     "description": "Send an email message to a recipient with a subject and a body.",
     "parameters": {"to": {"type": "string"}, "subject": {"type": "string"}}},
    {"name": "search_flights", "category": "travel",
     "description": "Search airline flights between two airports on a date.",
     "parameters": {"origin": {"type": "string"}, "destination": {"type": "string"}}},
    {"name": "translate_text", "category": "language",
     "description": "Translate a text into another language.",
     "parameters": {"text": {"type": "string"}, "target_language": {"type": "string"}}},
]  # fmt: skip


def _spec(entry: dict[str, Any], **changes: Any) -> ToolSpec:
    return spec_from_mapping({"target": "tests.sample_tools:echo", **entry, **changes})


@pytest.fixture
def catalogue(registry: Registry) -> Registry:
    registry.register([_spec(entry) for entry in CATALOGUE])
    return registry


@pytest.mark.parametrize(
    ("task", "expected"),
    [
        ("what will the weather be in Paris tomorrow", "get_weather_forecast"),
        ("how much is 100 dollars in euros, convert the currency", "convert_currency"),
        ("email my boss the report", "send_email"),
        ("find flights from Boston to Denver", "search_flights"),
        ("translate this sentence into German", "translate_text"),
    ],
)
def test_the_right_tool_comes_first(catalogue: Registry, task: str, expected: str) -> None:
    selection = catalogue.select(task, k=3)
    assert selection.candidates[0].name == expected
    assert [c.rank for c in selection.candidates] == [1, 2, 3]


def test_candidates_explain_their_scores(catalogue: Registry) -> None:
    best = catalogue.select("weather forecast for Paris", k=5).candidates[0]
    assert best.dense is not None and 0 < best.dense <= 1
    assert best.lexical > 0 and best.relevance == pytest.approx(1.0, abs=1e-6)
    # A new tool sits exactly at the prior: history has not moved it.
    assert best.success == pytest.approx(0.9) and best.latency == pytest.approx(0.5)
    assert best.final == pytest.approx(best.relevance)
    assert best.calls == 0 and best.category == "weather" and best.kind == "python"


def test_every_selection_is_recorded_as_a_decision(catalogue: Registry) -> None:
    selection = catalogue.select("send an email", k=2, run_id="run-1")
    assert selection.decision_id is not None
    decision = catalogue.store.get_decision(catalogue.tenant, selection.decision_id)
    assert decision is not None
    assert decision["task"] == "send an email" and decision["chosen"] == "send_email"
    assert decision["run_id"] == "run-1" and decision["k"] == 2
    assert [c["name"] for c in decision["candidates"]] == selection.names
    assert catalogue.select("send an email", record=False).decision_id is None


def test_filters(catalogue: Registry) -> None:
    assert catalogue.select("convert", k=5, category="weather").names == ["get_weather_forecast"]
    assert catalogue.select("anything", k=5, category="no-such-category").names == []
    assert catalogue.select("anything", k=5, kind="sql").names == []
    allowed = ["send_email", "translate_text"]
    assert set(catalogue.select("weather", k=5, names=allowed).names) == set(allowed)
    assert catalogue.select("weather", k=5, names=["unknown_tool"]).names == []


def test_index_follows_changes_made_through_any_registry(catalogue: Registry) -> None:
    assert catalogue.select("weather", k=1).names == ["get_weather_forecast"]
    other = tooldb.open(catalogue.settings.url, settings=catalogue.settings)
    try:
        other.disable("get_weather_forecast")
        assert "get_weather_forecast" not in catalogue.select("weather forecast", k=5).names
        other.enable("get_weather_forecast")
        other.register([_spec(CATALOGUE[0], name="get_weather_forecast_v2")])
        assert set(catalogue.select("weather forecast", k=2).names) == {
            "get_weather_forecast",
            "get_weather_forecast_v2",
        }
        other.remove("get_weather_forecast")
        assert catalogue.select("weather forecast", k=1).names == ["get_weather_forecast_v2"]
        other.register([_spec(CATALOGUE[4], description="Look up stock prices on the market.")])
        assert catalogue.select("stock market prices", k=1).names == ["translate_text"]
    finally:
        other.close()


def test_failing_tool_sinks_and_new_tool_is_not_punished(registry: Registry) -> None:
    twins = [
        {"name": "resize_image_a", "target": "tests.sample_tools:fail",
         "description": "Resize an image to a width and height.",
         "parameters": {"message": {"type": "string", "default": "broken"}}},
        {"name": "resize_image_b", "target": "tests.sample_tools:echo_message",
         "description": "Resize an image to a width and height.",
         "parameters": {"message": {"type": "string", "default": "broken"}}},
    ]  # fmt: skip
    registry.register([_spec(entry) for entry in twins])
    before = registry.select("resize an image", k=2).candidates
    for candidate in before:  # no history: exactly at the prior, nothing added or taken
        assert candidate.success == pytest.approx(0.9) and candidate.calls == 0
        assert candidate.final == pytest.approx(candidate.relevance, abs=1e-6)
    for _ in range(20):
        assert not registry.call("resize_image_a").success
    after = registry.select("resize an image", k=2).candidates
    assert [c.name for c in after] == ["resize_image_b", "resize_image_a"]
    failing = after[1]
    assert failing.calls == 20 and failing.success < 0.25
    assert failing.final < failing.relevance - 0.15


def test_hostile_requests(catalogue: Registry) -> None:
    for task in ("", "   ", None, 42):
        with pytest.raises(UsageError, match="task"):
            catalogue.select(task, k=3)  # type: ignore[arg-type]
    for k in (-1, 1.5, True, 10_001, "3"):
        with pytest.raises(UsageError, match="k must be"):
            catalogue.select("weather", k=k)  # type: ignore[arg-type]
    assert catalogue.select("weather", k=0).candidates == []
    assert len(catalogue.select("weather", k=1000).candidates) == len(CATALOGUE)
    huge = "weather forecast " * 70_000  # over 1 MB
    assert catalogue.select(huge, k=1).names == ["get_weather_forecast"]
    for task in ("天気予報を教えて", "🌧️☀️", "météo à Paris", "'; DROP TABLE tools; --"):
        selection = catalogue.select(task, k=2)
        assert len(selection.candidates) == 2
    assert catalogue.list()  # nothing was dropped


def test_lexical_only_without_an_embedder(store_url: str) -> None:
    settings = Settings(url=store_url, embedder="none")
    with tooldb.open(store_url, settings=settings) as registry:
        registry.register([_spec(entry) for entry in CATALOGUE])
        selection = registry.select("translate into German", k=2)
        assert selection.names[0] == "translate_text"
        assert selection.candidates[0].dense is None
        assert any("lexical only" in note for note in selection.notes)


def test_tools_waiting_for_embeddings_and_a_switched_embedder(store_url: str) -> None:
    with tooldb.open(store_url, settings=Settings(url=store_url, embedder="none")) as registry:
        registry.register([_spec(entry) for entry in CATALOGUE])
    switched = Settings(url=store_url, embedder="hash:64")
    with tooldb.open(store_url, settings=switched) as registry:
        notes = registry.select("weather", k=1).notes
        assert any(f"{len(CATALOGUE)} of {len(CATALOGUE)} tools" in n for n in notes)
        assert any("tooldb embed" in n for n in notes)
        assert registry.embed() == len(CATALOGUE)
        assert registry.select("weather", k=1).notes == []
    with tooldb.open(store_url, settings=Settings(url=store_url, embedder="hash")) as registry:
        notes = registry.select("weather", k=1).notes
        assert any("embedded by another embedder" in n for n in notes)
        assert registry.embed() == len(CATALOGUE)
        assert registry.embed() == 0
        assert registry.store.embedding_counts(registry.tenant) == {"hash:256": len(CATALOGUE)}


def test_tenants_do_not_see_each_others_tools(catalogue: Registry) -> None:
    other = tooldb.open(catalogue.settings.url, "acme", settings=catalogue.settings)
    try:
        assert other.select("weather forecast", k=5).names == []
        other.register([_spec(CATALOGUE[0], name="acme_weather")])
        assert other.select("weather forecast", k=5).names == ["acme_weather"]
        assert "acme_weather" not in catalogue.select("weather forecast", k=5).names
    finally:
        other.close()


def test_another_registrys_calls_move_the_ranking(registry: Registry) -> None:
    """Statistics are read from the store on every select (never cached): calls recorded
    through another registry on the same database count at once."""
    twins = [
        {"name": f"resize_image_{suffix}", "target": "tests.sample_tools:fail",
         "description": "Resize an image to a width and height.",
         "parameters": {"message": {"type": "string", "default": "broken"}}}
        for suffix in ("a", "b")
    ]  # fmt: skip
    registry.register([_spec(entry) for entry in twins])
    first = registry.select("resize an image", k=2).names
    other = tooldb.open(registry.settings.url, settings=registry.settings)
    try:
        for _ in range(10):
            assert not other.call(first[0]).success
        after = registry.select("resize an image", k=2).candidates
        assert [c.name for c in after] == first[::-1]
        assert after[1].calls == 10 and after[1].success < 0.4
    finally:
        other.close()


def test_active_stats_are_the_called_tools_only(catalogue: Registry) -> None:
    ids = {tool.name: tool.id for tool in catalogue.list()}
    for _ in range(3):
        catalogue.call("send_email", {"to": "a@b.c", "subject": "hi"})
    store = catalogue.store
    everything = store.live_stats(catalogue.tenant, list(ids.values()))
    active = store.active_stats(catalogue.tenant, list(ids.values()))
    assert set(everything) == set(ids.values())
    assert active == {ids["send_email"]: everything[ids["send_email"]]}
    assert active[ids["send_email"]].usage_count == 3
    assert store.active_stats("another tenant", list(ids.values())) == {}
    assert store.active_stats(catalogue.tenant, []) == {}


def test_the_decision_holds_the_candidates_as_returned(catalogue: Registry) -> None:
    selection = catalogue.select("convert 100 dollars to euros", k=3, category="finance")
    decision = catalogue.store.get_decision(catalogue.tenant, selection.decision_id or 0)
    assert decision is not None and decision["filters"] == {"category": "finance"}
    assert decision["candidates"] == [c.model_dump(mode="json") for c in selection.candidates]


def test_pool_stats_read_the_state_with_the_statistics(catalogue: Registry) -> None:
    store, tenant = catalogue.store, catalogue.tenant
    ids = {tool.name: tool.id for tool in catalogue.list()}
    assert store.pool_stats(tenant, list(ids.values())) == ({}, store.tenant_state(tenant))
    catalogue.call("send_email", {"to": "a@b.c", "subject": "hi"})
    stats, state = store.pool_stats(tenant, list(ids.values()))
    assert set(stats) == {ids["send_email"]} and stats[ids["send_email"]].usage_count == 1
    assert state == store.tenant_state(tenant)
    assert store.pool_stats("nobody", list(ids.values())) == ({}, TenantState(0, 0))


def test_a_select_on_a_current_mirror_reads_the_state_once(
    catalogue: Registry, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The state comes with the statistics; a mirror found behind is brought up and the
    pool ranked again, so a change made elsewhere between two selects is never missed."""
    catalogue.select("weather", k=1)
    reads: list[str] = []
    store = catalogue.store
    original = store.tenant_state
    monkeypatch.setattr(
        store, "tenant_state", lambda tenant: reads.append(tenant) or original(tenant)
    )
    assert catalogue.select("weather forecast", k=1).names == ["get_weather_forecast"]
    assert reads == []
    with tooldb.open(catalogue.settings.url, settings=catalogue.settings) as other:
        other.disable("get_weather_forecast")
    assert "get_weather_forecast" not in catalogue.select("weather forecast", k=5).names


def test_a_big_load_hands_the_freed_heap_back(
    registry: Registry, monkeypatch: pytest.MonkeyPatch
) -> None:
    release = tool_index.release_freed_memory
    calls: list[int] = []
    monkeypatch.setattr(tool_index, "RELEASE_AFTER_ROWS", len(CATALOGUE))
    monkeypatch.setattr(tool_index, "release_freed_memory", lambda: calls.append(1))
    registry.register([_spec(entry) for entry in CATALOGUE[:-1]])
    registry.select("weather", k=1)  # a load below the threshold
    registry.register([_spec(CATALOGUE[-1])])
    registry.select("weather", k=1)  # one tool reloaded
    assert calls == []
    with tooldb.open(registry.settings.url, settings=registry.settings) as other:
        other.select("weather", k=1)  # a fresh index loads all of them
    assert calls == [1]
    release()  # the real one: harmless anywhere


def test_a_filter_no_store_can_hold_is_recorded_escaped(catalogue: Registry) -> None:
    selection = catalogue.select("weather", k=2, names=["\ud800", "a\x00b", "send_email"])
    assert selection.names == ["send_email"]
    decision = catalogue.store.get_decision(catalogue.tenant, selection.decision_id or 0)
    assert decision is not None
    assert decision["filters"] == {"names": ["\\ud800", "a\\x00b", "send_email"]}


def test_latency_scores_by_hand_and_the_faster_twin_first(registry: Registry) -> None:
    """latency = 0.5 + trust * (1 / (1 + avg / ref) - 0.5), trust = n / (n + prior);
    final = relevance + 0.3 (success - 0.9) + 0.05 (latency - 0.5)."""
    twin = {"description": "Compress a folder into a zip archive.", "category": "files"}
    registry.register([_spec({"name": "zip_slow", **twin}), _spec({"name": "zip_fast", **twin})])
    now = time.time()
    log_calls(registry, "zip_slow", [True] * 10, start=now - 60, end=now - 1,
              durations=[3000.0] * 10)  # fmt: skip
    log_calls(registry, "zip_fast", [True] * 10, start=now - 60, end=now - 1,
              durations=[100.0] * 10)  # fmt: skip
    trust = 10 / (10 + 5)
    expected = {
        "zip_fast": 0.5 + trust * (1 / (1 + 100 / 1000) - 0.5),
        "zip_slow": 0.5 + trust * (1 / (1 + 3000 / 1000) - 0.5),
    }
    success = (10 + 5 * 0.9) / (10 + 5)
    selection = registry.select("zip this folder into an archive", k=2)
    assert selection.names == ["zip_fast", "zip_slow"]
    for candidate in selection.candidates:
        assert candidate.calls == 10
        assert candidate.latency == pytest.approx(expected[candidate.name], abs=1e-6)
        assert candidate.success == pytest.approx(success, abs=1e-6)
        bonus = 0.3 * (success - 0.9) + 0.05 * (expected[candidate.name] - 0.5)
        assert candidate.final == pytest.approx(candidate.relevance + bonus, abs=1e-5)
    fast, slow = selection.candidates
    assert fast.relevance == pytest.approx(slow.relevance, abs=1e-6)  # twins: only speed differs
    assert fast.final - slow.final == pytest.approx(
        0.05 * (expected["zip_fast"] - expected["zip_slow"]), abs=1e-5
    )


BUNDLED_CATALOGUE: list[dict[str, Any]] = [
    *CATALOGUE,
    {"name": "resize_image", "category": "media",
     "description": "Resize a picture to a given width and height in pixels."},
    {"name": "query_database", "category": "data",
     "description": "Run a read-only SQL query against the analytics warehouse."},
    {"name": "create_calendar_event", "category": "productivity",
     "description": "Put a meeting on the calendar at a date and time with attendees."},
    {"name": "summarize_document", "category": "language",
     "description": "Write a short summary of a long document."},
]  # fmt: skip


@pytest.mark.parametrize(
    ("task", "expected"),
    [
        ("is it going to pour in Oslo this weekend", "get_weather_forecast"),
        ("how many yen would I get for 50 pounds", "convert_currency"),
        ("book me a plane ticket to Lisbon", "search_flights"),
        ("make this photo smaller", "resize_image"),
        ("schedule a meeting with Ana on Friday at 3pm", "create_calendar_event"),
        ("give me the gist of this long report", "summarize_document"),
        ("put this paragraph into Spanish", "translate_text"),
    ],
)
def test_the_bundled_minilm_ranks_a_small_catalogue(
    sqlite_url: str, task: str, expected: str
) -> None:
    """The README's headline claim with the default embedder (elsewhere tests use ``hash``):
    paraphrases that share few words with the right tool still find it first."""
    settings = Settings(url=sqlite_url, embedder="local")
    with tooldb.open(sqlite_url, settings=settings) as registry:
        registry.register([_spec(entry) for entry in BUNDLED_CATALOGUE])
        selection = registry.select(task, k=3)
        assert selection.embedder is not None and "minilm" in selection.embedder.lower()
        assert selection.notes == []
        best = selection.candidates[0]
        assert best.name == expected, selection.names
        assert best.dense is not None and best.dense > 0
