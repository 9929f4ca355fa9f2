"""The LLM tool-calling loop, driven by scripted models against real stores."""

from __future__ import annotations

import asyncio
import json
from collections.abc import Iterator
from dataclasses import replace
from typing import Any

import pytest

import tests.sample_tools as st
import tooldb
from tooldb import Registry
from tooldb.agents import AgentLoop, Limits
from tooldb.errors import ModelError, NotFound
from tooldb.models import FunctionModel, Message, ModelTurn, ScriptedModel, ToolChoice, call
from tooldb.types import RunStatus


@pytest.fixture
def reg(registry: Registry) -> Registry:
    registry.add(st.add, st.echo, st.fail, st.sleep_async, st.whoami)
    return registry


#: The opt-in group commit the tests of grouping use (the default, 1, groups nothing).
GROUP = 64


@pytest.fixture
def grouped(reg: Registry) -> Iterator[Registry]:
    """``reg``'s tools with group commit opted into (``agent_held_calls = GROUP``)."""
    settings = replace(reg.settings, agent_held_calls=GROUP)
    with tooldb.open(settings.resolved_url, settings=settings) as registry:
        yield registry


def test_answers_after_a_tool_call_and_persists_the_run(reg: Registry) -> None:
    model = ScriptedModel([call("add", {"a": 2, "b": 3}), "2 + 3 = 5"])
    result = AgentLoop(reg, model, tools=["add"]).run("add 2 and 3")
    assert result.status is RunStatus.SUCCESS and result.output == "2 + 3 = 5"
    assert [(u.tool, u.success, u.output) for u in result.tool_calls] == [("add", True, "5")]
    assert result.iterations == 2 and result.input_tokens == 20
    stored = reg.store.get_run(reg.tenant, result.run_id)
    assert stored is not None and stored.status is RunStatus.SUCCESS
    assert stored.tool_calls == 1 and stored.task == "add 2 and 3"
    roles = [m["role"] for m in reg.store.run_messages(result.run_id)]
    assert roles == ["user", "assistant", "tool", "assistant"]
    calls = reg.calls(run_id=result.run_id)
    assert [c.tool_name for c in calls] == ["add"]
    # a lone call is recorded with its turn's messages; its id reaches the history
    assert result.tool_calls[0].call_id == calls[0].id
    assert reg.get("add").stats.usage_count == 1
    # the model saw the tool result on its second turn, tied to its call id
    sent = model.requests[1][0]
    assert sent[-1].role == "tool" and sent[-1].content == "5"
    assert sent[-1].tool_call_id == sent[-2].tool_calls[0].id


def test_errors_go_back_to_the_model_and_the_loop_goes_on(reg: Registry) -> None:
    model = ScriptedModel(
        [
            [
                call("add", {"a": "x"}),
                call("no_such_tool", {}),
                call("echo", "{not json"),
                call("echo", "[1, 2]"),
                call("fail", {"message": "kaput"}),
            ],
            "gave up politely",
        ]
    )
    result = AgentLoop(reg, model, tools=["add", "echo", "fail"]).run("do things")
    assert result.status is RunStatus.SUCCESS
    told = [m.content for m in model.requests[1][0][-5:]]
    assert "parameter 'a' expected integer" in told[0] and "retries left" in told[0]
    assert "unknown tool 'no_such_tool'" in told[1] and "add" in told[1]
    assert "not valid JSON" in told[2]
    assert "must be a JSON object" in told[3]
    assert "kaput" in told[4]
    assert all(m.is_error for m in model.requests[1][0][-5:])


def test_argument_retry_budget_stops_calling_a_tool(reg: Registry) -> None:
    model = ScriptedModel([call("add", {"a": "x"})] * 4 + ["done"])
    loop = AgentLoop(reg, model, tools=["add"], limits=Limits(max_retries_per_tool=1))
    result = loop.run("add")
    assert [u.success for u in result.tool_calls] == [False] * 4
    errors = [u.error or "" for u in result.tool_calls]
    assert "1 retry left" in errors[0] and "no retries left" in errors[1]
    assert all("retry budget (1) is used up" in e for e in errors[2:])
    # only the two attempts within the budget reached the registry (and its log)
    assert len(reg.calls(run_id=result.run_id)) == 2


def test_calls_of_one_turn_run_in_parallel_and_come_back_in_order(reg: Registry) -> None:
    calls = [call("sleep_async", {"seconds": 0.3}) for _ in range(5)]
    calls.insert(2, call("echo", {"text": "middle"}))
    model = ScriptedModel([calls, "ok"])
    result = AgentLoop(reg, model, tools=["sleep_async", "echo"]).run("sleep")
    assert result.status is RunStatus.SUCCESS
    tool_messages = model.requests[1][0][-6:]
    assert [m.tool_call_id for m in tool_messages] == [c.id for c in calls]
    assert tool_messages[2].content == "middle"
    # five 0.3 s sleeps in sequence would take 1.5 s
    assert result.duration_ms < 1200


def test_iteration_limit_returns_a_partial_result_flagged_for_review(reg: Registry) -> None:
    model = ScriptedModel([call("add", {"a": 1})], repeat_last=True)
    result = AgentLoop(reg, model, tools=["add"], limits=Limits(max_iterations=3)).run("loop")
    assert result.status is RunStatus.PARTIAL and result.requires_review
    assert result.review_reason == "reached the limit of 3 iterations"
    assert result.output == "2" and len(result.tool_calls) == 3
    stored = reg.store.get_run(reg.tenant, result.run_id)
    assert stored is not None and stored.status is RunStatus.PARTIAL and stored.requires_review


def test_fifty_calls_in_one_turn_stop_at_the_tool_call_limit(reg: Registry) -> None:
    model = ScriptedModel([[call("add", {"a": i}) for i in range(50)], "never reached"])
    result = AgentLoop(reg, model, tools=["add"]).run("many")
    assert result.status is RunStatus.PARTIAL
    assert result.review_reason == "reached the limit of 15 tool calls"
    assert sum(u.success for u in result.tool_calls) == 15
    assert len(result.tool_calls) == 50
    assert "limit of 15 tool calls" in (result.tool_calls[20].error or "")
    assert len(reg.calls(run_id=result.run_id, limit=100)) == 15


def test_a_model_that_never_stops_hits_the_wall_clock(reg: Registry) -> None:
    async def slow(messages: list[Message], tools: object, choice: object) -> ModelTurn:
        await asyncio.sleep(0.2)
        return ModelTurn(tool_calls=[call("echo", {"text": "again"})])

    loop = AgentLoop(
        reg, FunctionModel(slow), tools=["echo"], limits=Limits(timeout_s=0.5, max_iterations=100)
    )
    result = loop.run("forever")
    assert result.status is RunStatus.PARTIAL
    assert result.review_reason == "reached the time limit of 0.5 s"
    assert result.output == "again" and 1 <= len(result.tool_calls) <= 3


def test_empty_turns_end_the_run(reg: Registry) -> None:
    model = ScriptedModel([ModelTurn(), ModelTurn(), "late"])
    result = AgentLoop(reg, model, tools=["echo"]).run("say something")
    assert result.status is RunStatus.PARTIAL
    assert result.review_reason == "the model returned 2 empty turns"
    assert model.requests[1][0][-1].content.startswith("Your last reply was empty")


def test_a_failing_model_ends_the_run_with_an_error_kept_in_the_store(reg: Registry) -> None:
    def broken(*_: object) -> str:
        raise ModelError("HTTP 500 from provider")

    result = AgentLoop(reg, FunctionModel(broken), tools=["echo"]).run("x")
    assert result.status is RunStatus.ERROR and "HTTP 500" in (result.error or "")
    stored = reg.store.get_run(reg.tenant, result.run_id)
    assert stored is not None and stored.status is RunStatus.ERROR


def test_tool_choice_required_applies_to_the_first_turn_then_relaxes(reg: Registry) -> None:
    model = ScriptedModel([call("add", {"a": 1}), "two"])
    AgentLoop(reg, model, tools=["add"], tool_choice="required:add").run("add")
    assert model.requests[0][2] == ToolChoice("required", "add")
    assert model.requests[1][2] == ToolChoice("auto")
    none_model = ScriptedModel(["plain answer"])
    AgentLoop(reg, none_model, tools=["add"], tool_choice="none").run("talk")
    assert none_model.requests[0][2] == ToolChoice("none")


def test_tools_receive_the_loop_context(reg: Registry) -> None:
    model = ScriptedModel([call("echo", {"text": "first"}), call("whoami", {"note": "hi"}), "done"])
    result = AgentLoop(reg, model, tools=["echo", "whoami"]).run("who")
    seen = json.loads(result.tool_calls[1].output)
    assert seen == {
        "note": "hi",
        "run": result.run_id,
        "iteration": 1,
        "history": ["echo"],
        "is_subagent": False,
        "parent": None,
    }
    # the context parameter is not part of the tool's schema
    assert "ctx" not in reg.get("whoami").spec.parameters["properties"]
    assert json.loads(reg.call("whoami", {"note": "direct"}).output)["run"] is None


def test_without_a_tool_list_selection_offers_tools_and_search_adds_more(reg: Registry) -> None:
    model = ScriptedModel(
        [call("search_tools", {"query": "sleep for some seconds", "k": 2}), "found"]
    )
    result = AgentLoop(reg, model, select_k=1).run("add two integers")
    first = [t.name for t in model.requests[0][1]]
    assert first[0] == "search_tools" and len(first) == 2
    second = [t.name for t in model.requests[1][1]]
    assert len(second) > len(first) and "sleep_async" in second
    assert result.status is RunStatus.SUCCESS
    assert len(reg.store.list_decisions(reg.tenant, run_id=result.run_id)) == 2


def test_unknown_pinned_tool_is_a_usage_error(reg: Registry) -> None:
    from tooldb.errors import NotFound

    with pytest.raises(NotFound, match=r"^tools not found or disabled: missing_tool, gone$"):
        AgentLoop(reg, ScriptedModel(["x"]), tools=["add", "missing_tool", "gone"]).run("x")


def test_nul_and_lone_surrogates_are_persisted_cleanly(reg: Registry) -> None:
    """PostgreSQL's jsonb rejects NUL and UTF-8 has no lone surrogates: messages and the
    run's data keep everything else verbatim."""
    hostile = "a\x00b \ud800 c ü 🙂"
    model = ScriptedModel([call("echo", {"text": hostile}), f"said {hostile}"])
    result = AgentLoop(reg, model, tools=["echo"]).run(f"echo {hostile}")
    assert result.status is RunStatus.SUCCESS
    stored = reg.store.get_run_details(reg.tenant, result.run_id)
    assert stored is not None and stored["status"] == "success"
    assert "\\x00" in stored["task"] and "ü 🙂" in stored["task"]
    assert stored["data"]["tool_calls"][0]["tool"] == "echo"
    messages = reg.store.run_messages(result.run_id)
    assert [m["role"] for m in messages] == ["user", "assistant", "tool", "assistant"]
    assert all("\x00" not in json.dumps(m) for m in messages)
    assert "ü 🙂" in messages[-1]["content"] and "\\x00" in messages[-1]["content"]


def _appends(reg: Registry, monkeypatch: pytest.MonkeyPatch) -> list[list[str]]:
    """The roles of every separate ``append_run_messages`` of the store, in order."""
    appended: list[list[str]] = []
    original = reg.store.append_run_messages

    def spy(run_id: str, rows: list[tuple[int, int, str, str]]) -> None:
        appended.append([role for _, _, role, _ in rows])
        original(run_id, rows)

    monkeypatch.setattr(reg.store, "append_run_messages", spy)
    return appended


def test_a_lone_calls_turn_commits_with_its_call_record(
    grouped: Registry, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A turn of one call writes its messages in the call record's transaction; what
    happens without a wait is held and committed together: the task before the first
    call of a tool not yet known to be quick, then turn 0's call and turn 1's rejected
    arguments before turn 2's two calls run beside each other, then turn 3's call and
    the answer as the run ends."""
    # Any successful call counts as quick: on a loaded machine a trivial call can take
    # over QUICK_MS, which would add a commit (test_a_slow_tool_commits_before_it_runs)
    monkeypatch.setattr("tooldb.agents.loop.QUICK_MS", 1e9)
    reg = grouped
    sizes = _group_commits(reg, monkeypatch)
    model = ScriptedModel(
        [
            call("add", {"a": 1, "b": 2}),
            call("add", {"a": "x"}),
            [call("add", {"a": 2, "b": 2}), call("echo", {"text": "hi"})],
            call("echo", {"text": "ho"}),
            "done",
        ]
    )
    result = AgentLoop(reg, model, tools=["add", "echo"]).run("add things")
    assert result.status is RunStatus.SUCCESS
    stored = reg.store.run_messages(result.run_id)
    assert [m["seq"] for m in stored] == list(range(11))
    assert [(m["iteration"], m["role"], m.get("content", "")) for m in stored] == [
        (0, "user", "add things"),
        (0, "assistant", ""),
        (0, "tool", "3"),
        (1, "assistant", ""),
        (1, "tool", f"Error: {result.tool_calls[1].error}"),
        (2, "assistant", ""),
        (2, "tool", "4"),
        (2, "tool", "hi"),
        (3, "assistant", ""),
        (3, "tool", "ho"),
        (4, "assistant", "done"),
    ]
    assert stored[4]["is_error"] and "expected integer" in stored[4]["content"]
    assert stored[1]["tool_calls"][0]["name"] == "add" and stored[2]["tool_call_id"]
    assert sizes == [0, 2, 1]
    recorded = reg.calls(run_id=result.run_id)
    assert len(recorded) == 5  # the rejected arguments are logged too
    ran = sorted(c.id for c in recorded if c.error_kind is None)
    assert sorted(u.call_id for u in result.tool_calls if u.call_id is not None) == ran


def test_a_slow_tool_commits_before_it_runs(
    grouped: Registry, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A tool whose last call in the run took QUICK_MS or more may block: what is held
    is committed before each of its calls; a quick one's calls stay in the group."""
    reg = grouped
    sizes = _group_commits(reg, monkeypatch)
    turns = [call("add", {"a": i, "b": 1}) for i in range(3)]
    monkeypatch.setattr("tooldb.agents.loop.QUICK_MS", 0.0)  # nothing is quick
    AgentLoop(reg, ScriptedModel([*turns, "done"]), tools=["add"]).run("slow")
    assert sizes == [0, 1, 1, 1]  # the task, then each call before the next runs
    sizes.clear()
    monkeypatch.setattr("tooldb.agents.loop.QUICK_MS", 1e9)  # every call is quick
    AgentLoop(reg, ScriptedModel([*turns, "done"]), tools=["add"]).run("quick")
    assert sizes == [0, 3]  # the task before the first call, then all three at the end


def test_a_turn_is_appended_when_its_call_is_not_recorded(
    store_url: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Recording off: the turn's messages still persist."""
    from tooldb import Settings
    from tooldb import open as open_registry

    reg = open_registry(store_url, settings=Settings(url=store_url, record_calls=False))
    try:
        reg.add(st.add)
        appended = _appends(reg, monkeypatch)
        model = ScriptedModel([call("add", {"a": 1, "b": 2}), "3"])
        result = AgentLoop(reg, model, tools=["add"]).run("add")
        assert result.tool_calls[0].output == "3" and result.tool_calls[0].call_id is None
        assert appended == [["user"], ["assistant", "tool"], ["assistant"]]
        assert reg.calls(run_id=result.run_id) == []
    finally:
        reg.close()


def test_a_store_that_fails_the_turns_commit_ends_the_run_with_the_error(
    reg: Registry, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The loop does not crash: the run ends flagged for review, its row says why."""
    from tooldb.errors import StoreError

    def failing(*args: object) -> tuple[list[int], list[int]]:
        raise StoreError("store x failed: disk I/O error")

    monkeypatch.setattr(reg.store, "record_group", failing)
    model = ScriptedModel([call("add", {"a": 1, "b": 2}), "no luck"])
    result = AgentLoop(reg, model, tools=["add"]).run("add")
    assert result.status is RunStatus.ERROR and result.requires_review
    assert "store x failed: disk I/O error" in (result.error or "")
    assert result.review_reason == result.error
    stored = reg.store.get_run(reg.tenant, result.run_id)
    assert stored is not None and stored.status is RunStatus.ERROR


def _group_commits(reg: Registry, monkeypatch: pytest.MonkeyPatch) -> list[int]:
    """The number of call records of every group commit, in order."""
    sizes: list[int] = []
    original = reg.store.record_group

    def spy(calls: list[Any], *more: Any) -> tuple[list[int], list[int]]:
        sizes.append(len(calls))
        return original(calls, *more)

    monkeypatch.setattr(reg.store, "record_group", spy)
    return sizes


def test_turns_that_do_not_wait_are_committed_in_groups(
    grouped: Registry, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Group commit opted into (``agent_held_calls = 64``), a model that answers at once
    and a quick tool: the task, then 150 turns in 3 commits (64 at most each), every call
    recorded with its id and messages, the statistics exact."""
    held, reg = GROUP, grouped
    # a call that happens to take 1 ms (a collection, a page fault on a busy machine)
    # would add a commit: test_a_slow_tool_commits_before_it_runs covers that
    monkeypatch.setattr("tooldb.agents.loop.QUICK_MS", 1e9)
    sizes = _group_commits(reg, monkeypatch)
    turns = 150
    model = FunctionModel(
        lambda messages, *_: (
            call("add", {"a": len(messages), "b": 1}) if len(messages) < 2 * turns else "done"
        )
    )
    limits = Limits(max_iterations=turns + 2, max_tool_calls=turns)
    result = AgentLoop(reg, model, tools=["add"], limits=limits).run("add a lot")
    assert result.status is RunStatus.SUCCESS and len(result.tool_calls) == turns
    assert sizes == [0, held, held, turns - 2 * held]  # 0: the task alone
    recorded = reg.calls(run_id=result.run_id, limit=1000)
    assert sorted(c.id for c in recorded) == [u.call_id for u in result.tool_calls]
    assert reg.get("add").stats.usage_count == turns
    stored = reg.store.run_messages(result.run_id)
    assert [m["seq"] for m in stored] == list(range(2 * turns + 2))
    details = reg.store.get_run_details(reg.tenant, result.run_id)
    assert details is not None
    data = details["data"] if isinstance(details["data"], dict) else json.loads(details["data"])
    assert [u["call_id"] for u in data["tool_calls"]] == [u.call_id for u in result.tool_calls]


def test_by_default_every_call_is_committed_before_the_model_sees_it(
    reg: Registry, monkeypatch: pytest.MonkeyPatch
) -> None:
    """``agent_held_calls = 1`` (the default): nothing held, so a killed process loses no
    call (each is in the store before the next model turn, even with no wait between)."""
    settings = reg.settings
    assert settings.agent_held_calls == 1
    with tooldb.open(settings.resolved_url, settings=settings) as strict:
        strict.add(st.add)
        sizes = _group_commits(strict, monkeypatch)
        stored: list[int] = []

        def decide(messages: list[Message], *_: object) -> object:
            runs = strict.store.list_runs(strict.tenant, limit=1)
            stored.append(len(strict.calls(run_id=runs[0].id)) if runs else -1)
            turn = sum(m.role == "tool" for m in messages)
            return call("add", {"a": turn, "b": 1}) if turn < 5 else "done"

        result = AgentLoop(strict, FunctionModel(decide), tools=["add"]).run("add")
    assert result.status is RunStatus.SUCCESS
    assert [n for n in sizes if n] == [1] * 5 and stored == [0, 1, 2, 3, 4, 5]
    assert all(u.call_id is not None for u in result.tool_calls)


def test_every_turn_is_committed_before_the_run_waits(reg: Registry) -> None:
    """A model that makes the loop wait (any real one) sees the previous turn's record
    and messages in the store; so does a tool that is not known to be quick."""
    seen: list[tuple[int, int]] = []
    run_ids: list[str] = []

    def stored() -> tuple[int, int]:
        run_id = reg.store.list_runs(reg.tenant, limit=1)[0].id
        run_ids.append(run_id)
        return len(reg.calls(run_id=run_id)), len(reg.store.run_messages(run_id))

    async def decide(messages: list[Message], *_: object) -> object:
        await asyncio.sleep(0)  # suspends: the loop commits before it waits
        seen.append(stored())
        turn = sum(m.role == "tool" for m in messages)
        return call("add", {"a": turn, "b": 1}) if turn < 3 else "done"

    result = AgentLoop(reg, FunctionModel(decide), tools=["add"]).run("add")
    assert result.status is RunStatus.SUCCESS
    assert seen == [(0, 1), (1, 3), (2, 5), (3, 7)]
    assert all(u.call_id is not None for u in result.tool_calls)


def test_a_run_offers_the_current_version_of_each_tool(reg: Registry) -> None:
    """The toolbox reuses the registry's cached records only while a tool's version is
    current: a tool changed or disabled between runs is offered as it is now."""
    first = ScriptedModel(["nothing to do"])
    AgentLoop(reg, first, tools=["echo", "add"]).run("look")
    louder = {
        "name": "echo",
        "description": "Echo, now louder.",
        "target": "tests.sample_tools:echo",
        "parameters": {"text": {"type": "string"}},
    }
    reg.add(louder)
    second = ScriptedModel(["nothing to do"])
    AgentLoop(reg, second, tools=["echo", "add"]).run("look")
    offered = {tool.name: tool.description for tool in second.requests[0][1]}
    assert offered["echo"] == "Echo, now louder."
    reg.disable("add")
    third = FunctionModel(lambda *_: "nothing to do")
    with pytest.raises(NotFound, match="add"):
        AgentLoop(reg, third, tools=["echo", "add"]).run("look")


def test_a_run_stopped_by_keyboard_interrupt_marks_itself_interrupted(reg: Registry) -> None:
    """The process is going down: the run row says so (and keeps its call) before the
    exception goes on, rather than waiting for its lease to expire."""
    turns = iter([call("add", {"a": 1, "b": 2})])

    def decide(*_: object) -> object:
        for turn in turns:
            return turn
        raise KeyboardInterrupt

    with pytest.raises(KeyboardInterrupt):
        AgentLoop(reg, FunctionModel(decide), tools=["add"]).run("add, then ^C")
    (run,) = reg.store.list_runs(reg.tenant, limit=5)
    assert run.status is RunStatus.INTERRUPTED and run.requires_review
    assert "KeyboardInterrupt" in (run.review_reason or "") and run.tool_calls == 1
    assert reg.sweep_runs() == []


@pytest.mark.parametrize("held", [1, GROUP])
def test_argument_errors_in_a_run_are_logged_but_not_counted(reg: Registry, held: int) -> None:
    """The loop's commits, one per call or grouped, count like ``Registry.call``: bad
    arguments are the model's mistake, not the tool's, so they touch neither usage nor
    success."""
    settings = replace(reg.settings, agent_held_calls=held)
    with tooldb.open(settings.resolved_url, settings=settings) as opened:
        _argument_errors_are_not_counted(opened)


def _argument_errors_are_not_counted(reg: Registry) -> None:
    model = ScriptedModel(
        [call("add", {"a": "two"}), call("add", {"b": 1}), call("add", {"a": 1, "b": 2}), "3"]
    )
    result = AgentLoop(reg, model, tools=["add"]).run("add 1 and 2")
    assert result.status is RunStatus.SUCCESS and result.output == "3"
    assert [u.success for u in result.tool_calls] == [False, False, True]
    stats = reg.get("add").stats
    assert (stats.usage_count, stats.success_count) == (1, 1)
    logged = reg.calls(run_id=result.run_id)
    assert sorted(c.error_kind.value if c.error_kind else "ok" for c in logged) == [
        "arguments", "arguments", "ok",
    ]  # fmt: skip


def test_a_limit_reached_on_a_turn_with_text_and_calls_returns_the_text(reg: Registry) -> None:
    turn = ModelTurn(text="So far: 1 + 2 = 3.", tool_calls=[call("add", {"a": 1, "b": 2})])
    model = ScriptedModel([turn], repeat_last=True)
    result = AgentLoop(reg, model, tools=["add"], limits=Limits(max_iterations=1)).run("add")
    assert result.status is RunStatus.PARTIAL and result.requires_review
    assert result.review_reason == "reached the limit of 1 iterations"
    assert result.output == "So far: 1 + 2 = 3."  # the model's last words, not the tool's "3"
    model = ScriptedModel([turn, [call("add", {"a": 5})] * 20])
    result = AgentLoop(reg, model, tools=["add"], limits=Limits(max_tool_calls=3)).run("add")
    assert result.review_reason == "reached the limit of 3 tool calls"
    assert result.output == "So far: 1 + 2 = 3."


@pytest.mark.parametrize("per_turn", [1, 2])
def test_the_tool_call_limit_counts_the_whole_run(reg: Registry, per_turn: int) -> None:
    """Promise (agents/limits.py): ``max_tool_calls`` is a budget for the whole run,
    whether the calls come one per turn or several: exactly that many run, the rest are
    refused with why, and the run ends partial."""
    turn = [call("add", {"a": 1, "b": 2})] * per_turn
    model = ScriptedModel([turn] * 6 + ["done"])
    result = AgentLoop(reg, model, tools=["add"], limits=Limits(max_tool_calls=3)).run("add")
    assert result.status is RunStatus.PARTIAL
    assert result.review_reason == "reached the limit of 3 tool calls"
    ran = [use for use in result.tool_calls if use.success]
    refused = [use for use in result.tool_calls if not use.success]
    assert len(ran) == 3 and len(reg.calls(run_id=result.run_id)) == 3
    assert refused and all(
        use.error == "not run: this run's limit of 3 tool calls is reached" for use in refused
    )
