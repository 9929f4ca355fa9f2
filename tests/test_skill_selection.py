"""Skills are found like tools: select_skills, `tooldb select --skills`, the agent's
skill index (top skill_index_k for the task) and the search_skills built-in."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path

import pytest
from typer.testing import CliRunner

import tests.sample_tools as st
import tooldb
from tooldb import Registry, Settings
from tooldb.agents import AgentLoop
from tooldb.cli import app
from tooldb.errors import UsageError
from tooldb.models import ScriptedModel, call
from tooldb.types import RunStatus, SkillSpec

#: (name, description, instructions): a small catalogue an agent might really hold.
CATALOGUE = [
    ("weather-report", "Current weather and forecasts for a city.",
     "Look up the forecast for the place the user names; give temperature and rain."),
    ("sql-reporting", "Query the sales database and summarise the figures.",
     "Write a SELECT over the orders table; group by month; never UPDATE or DELETE."),
    ("email-triage", "Sort an inbox: label, archive and draft replies to messages.",
     "Read unread mail, label it by sender, draft short replies for the user to send."),
    ("pdf-extraction", "Pull text and tables out of PDF documents.",
     "Open the PDF, extract the pages' text, turn tables into CSV."),
    ("git-history", "Explain a repository's commits, branches and blame.",
     "Use the log and blame to say who changed a line and why."),
    ("calendar-scheduling", "Find free slots and book meetings in a calendar.",
     "Check attendees' availability, propose three slots, create the event."),
    ("image-editing", "Resize, crop and convert photos and images.",
     "Keep the aspect ratio unless asked; convert to PNG or JPEG."),
    ("translation", "Translate text between languages, keeping the tone.",
     "Detect the source language; translate; keep names and numbers as they are."),
]  # fmt: skip


def skill(name: str, description: str, instructions: str = "", **extra: object) -> SkillSpec:
    return SkillSpec(name=name, description=description, instructions=instructions, **extra)


@pytest.fixture
def reg(registry: Registry) -> Registry:
    for name, description, instructions in CATALOGUE:
        registry.add_skill(skill(name, description, instructions))
    return registry


@pytest.mark.parametrize(
    ("task", "expected"),
    [
        ("what is the forecast in Paris tomorrow", "weather-report"),
        ("summarise last month's sales figures from the database", "sql-reporting"),
        ("draft replies to my unread mail", "email-triage"),
        ("extract the tables from this PDF", "pdf-extraction"),
        ("who changed this line in the repository", "git-history"),
        ("book a meeting with Ana next week", "calendar-scheduling"),
        ("crop this photo and convert it to PNG", "image-editing"),
        ("translate this letter into German", "translation"),
    ],
)
def test_the_right_skill_ranks_first_with_its_scores(
    reg: Registry, task: str, expected: str
) -> None:
    found = reg.select_skills(task, 3)
    assert found.names[0] == expected, found.candidates
    best = found.candidates[0]
    assert best.rank == 1 and best.final == best.relevance == 1.0
    assert best.dense is not None and best.lexical > 0  # both retrievers explained
    assert found.embedder == reg.embedder.id if reg.embedder else False
    assert [c.final for c in found.candidates] == sorted(
        (c.final for c in found.candidates), reverse=True
    )


def test_minilm_finds_a_skill_by_meaning_without_shared_words(sqlite_url: str) -> None:
    with tooldb.open(sqlite_url, settings=Settings(embedder="local", url=sqlite_url)) as reg:
        for name, description, instructions in CATALOGUE:
            reg.add_skill(skill(name, description, instructions))
        found = reg.select_skills("will I need an umbrella in Oslo", 3)
        assert found.names[0] == "weather-report"
        assert found.embedder is not None and "minilm" in found.embedder.lower()


def test_the_readme_finds_the_example_skill_by_task(sqlite_url: str) -> None:
    """The README's tour line, with its default embedder."""
    with tooldb.open(sqlite_url, settings=Settings(embedder="local", url=sqlite_url)) as reg:
        reg.add_module("tooldb.examples.basic")
        reg.add_skill(Path(__file__).resolve().parents[1] / "examples" / "skill_catalog")
        task = "give me the average and the total of my monthly expenses"
        assert reg.select_skills(task, 2).names[0] == "number-summary"


def test_disabled_and_inactive_skills_are_never_returned(reg: Registry) -> None:
    reg.disable_definition("skill", "weather-report")
    reg.add_skill(skill("old-weather", "Weather forecasts, retired.", active=False))
    found = reg.select_skills("what is the weather forecast", 10)
    assert "weather-report" not in found.names and "old-weather" not in found.names
    assert len(found.names) == len(CATALOGUE) - 1
    reg.enable_definition("skill", "weather-report")
    assert reg.select_skills("what is the weather forecast", 1).names == ["weather-report"]


def test_skills_are_per_tenant(reg: Registry) -> None:
    other = reg.for_tenant("other")
    assert other.select_skills("what is the weather forecast", 5).names == []
    other.add_skill(skill("tide-tables", "High and low tides for a harbour."))
    assert other.select_skills("what is the weather forecast", 5).names == ["tide-tables"]
    assert "tide-tables" not in reg.select_skills("tides for a harbour", 20).names


def test_unchanged_skills_are_not_embedded_again_and_a_changed_one_is(reg: Registry) -> None:
    reg.select_skills("forecast", 3)
    ranker = reg._skill_ranker
    assert ranker is not None and ranker.embedded == len(CATALOGUE)
    reg.select_skills("translate a letter", 3)
    assert ranker.embedded == len(CATALOGUE)  # nothing re-embedded
    reg.add_skill(skill("translation", "Subtitle videos in another language."))
    assert reg.select_skills("subtitle this video", 1).names == ["translation"]
    assert ranker.embedded == len(CATALOGUE) + 1  # only the changed one


def test_a_new_process_loads_the_stored_vectors_instead_of_embedding(
    reg: Registry, store_url: str
) -> None:
    """Skill vectors outlive the process (migration 0014): a second registry on the same
    store embeds nothing it has not seen, ranks the same, and only a changed skill is
    embedded again; vectors of content no skill has any more are dropped."""
    first = reg.select_skills("what is the forecast in Paris tomorrow", 3)
    before = {row["content_hash"] for row in reg.store.list_skills(reg.tenant)}
    other_process = tooldb.open(store_url, settings=Settings(embedder="hash", url=store_url))
    try:
        again = other_process.select_skills("what is the forecast in Paris tomorrow", 3)
        ranker = other_process._skill_ranker
        assert ranker is not None and ranker.embedded == 0
        assert again.candidates == first.candidates
        other_process.add_skill(skill("translation", "Subtitle videos in another language."))
        assert other_process.select_skills("subtitle this video", 1).names == ["translation"]
        assert ranker.embedded == 1
        embedder = ranker.embedder.id  # type: ignore[union-attr]
        now = {row["content_hash"] for row in reg.store.list_skills(reg.tenant)}
        kept = reg.store.skill_vectors(reg.tenant, embedder, sorted(before | now))
        assert set(kept) == now  # the old translation's vector is gone
        # another tenant's identical skill is embedded for that tenant, not shared
        tenant_b = other_process.for_tenant("b")
        tenant_b.add_skill(skill(*CATALOGUE[0]))
        tenant_b.select_skills("forecast", 1)
        assert tenant_b._skill_ranker is not None and tenant_b._skill_ranker.embedded == 1
    finally:
        other_process.close()


def test_bad_requests_are_refused(reg: Registry) -> None:
    with pytest.raises(UsageError, match="task"):
        reg.select_skills("  ", 3)
    with pytest.raises(UsageError, match="k must be"):
        reg.select_skills("forecast", -1)
    assert reg.select_skills("forecast", 0).names == []


def test_cli_select_skills_json(store_url: str, tmp_path: Path) -> None:
    folder = tmp_path / "skills"
    for name, description, instructions in CATALOGUE[:4]:
        (folder / name).mkdir(parents=True)
        (folder / name / "SKILL.md").write_text(
            f"---\nname: {name}\ndescription: {json.dumps(description)}\n---\n{instructions}\n"
        )
    runner = CliRunner()
    added = runner.invoke(app, ["--db", store_url, "add", "skill", str(folder)])
    assert added.exit_code == 0, added.output
    task = "summarise sales from the database"
    arguments = ["--db", store_url, "select", "--skills", task, "-k", "2", "--json"]
    result = runner.invoke(app, arguments)
    assert result.exit_code == 0, result.output
    document = json.loads(result.stdout)
    assert document["candidates"][0]["name"] == "sql-reporting"
    assert len(document["candidates"]) == 2
    assert {"final", "relevance", "dense", "lexical", "description"} <= set(
        document["candidates"][0]
    )
    table = runner.invoke(app, ["--db", store_url, "select", "--skills", "crop a photo"])
    assert table.exit_code == 0 and "skill(s)" in table.stdout
    mixed = runner.invoke(app, ["--db", store_url, "select", "--skills", "x", "--kind", "sql"])
    assert mixed.exit_code == 2 and "not --skills" in mixed.output


#: Thirty topics for an agent with many skills; the task is about invoices.
TOPICS = [
    "invoices", "weather", "email", "calendar", "translation", "images", "pdf", "git",
    "sql", "spreadsheets", "slides", "music", "maps", "flights", "hotels", "recipes",
    "fitness", "stocks", "crypto", "news", "podcasts", "contracts", "payroll", "tickets",
    "inventory", "shipping", "surveys", "logs", "backups", "dns",
]  # fmt: skip


@pytest.fixture
def many(registry: Registry) -> Iterator[Registry]:
    registry.add(st.add)
    for topic in TOPICS:
        tools = ["add"] if topic == "payroll" else []
        description = f"Work with {topic}: create, read and update {topic}."
        instructions = f"How to handle {topic} well."
        registry.add_skill(
            {
                "name": f"{topic}-skill",
                "tools": tools,
                "description": description,
                "instructions": instructions,
            }
        )
    yield registry


def test_an_agent_with_30_skills_sees_the_top_k_and_searches_the_rest(many: Registry) -> None:
    k = many.settings.skill_index_k
    names = [f"{topic}-skill" for topic in TOPICS]
    model = ScriptedModel(
        [
            call("search_skills", {"query": "salaries and payroll", "k": 3}),
            call("load_skill", {"name": "payroll-skill"}),
            call("add", {"a": 1, "b": 2}),
            "done",
        ]
    )
    result = AgentLoop(many, model, skills=names).run("create the invoices for March")
    assert result.status is RunStatus.SUCCESS, result.error
    messages, tools, _ = model.requests[0]
    system = messages[0].content
    listed = [line[2:].split(":")[0] for line in system.splitlines() if line.startswith("- ")]
    assert len(listed) == k and "invoices-skill" in listed  # the task's skill is shown
    assert listed == [name for name in names if name in listed]  # in the agent's order
    assert "payroll-skill" not in listed and "search_skills" in system
    assert {t.name for t in tools} == {"load_skill", "search_skills"}
    load = next(t for t in tools if t.name == "load_skill")
    assert "enum" not in load.parameters["properties"]["name"]  # no 30 names in the schema
    searched = model.requests[1][0][-1].content
    assert searched.splitlines()[0].startswith("- payroll-skill:")
    loaded = model.requests[2][0][-1].content
    assert "How to handle payroll well." in loaded
    assert "add" in {t.name for t in model.requests[2][1]}  # the skill's tool is offered
    assert model.requests[3][0][-1].content.strip() == "3"


def test_an_agent_with_few_skills_lists_them_all(many: Registry) -> None:
    names = [f"{topic}-skill" for topic in TOPICS[:5]]
    model = ScriptedModel(["done"])
    AgentLoop(many, model, skills=names).run("create the invoices for March")
    messages, tools, _ = model.requests[0]
    assert all(f"- {name}:" in messages[0].content for name in names)
    assert [t.name for t in tools] == ["load_skill"]
