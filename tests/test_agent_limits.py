"""The agent loop's limits and outcomes, pinned where a one-line change went unnoticed
(issue 30's mutation testing): limits taken from the settings, a named run under a
parent, what an errored or interrupted run keeps, and what a run remembers of its calls."""

from __future__ import annotations

import asyncio
import json
import time
from dataclasses import replace
from typing import Any

import pytest

import tests.sample_tools as st
import tooldb
from tests.overlap import Gauge
from tooldb import AgentSpec, Registry, tool
from tooldb.agents import AgentLoop, Limits
from tooldb.agents.toolbox import Builtin
from tooldb.agents.tracing import Tracer
from tooldb.errors import ModelError, NotFound, StoreError, UsageError
from tooldb.models import (
    FunctionModel,
    Message,
    ModelTurn,
    ScriptedModel,
    ToolSchema,
    Usage,
    call,
    register_model,
    unregister_model,
)
from tooldb.types import LoopContext, RunStatus, ToolResult

#: The gauge of ``blocking_overlap`` (reset it at the start of a test).
BLOCKING = Gauge()


@tool
def blocking_overlap(expected: int = 2) -> str:
    """Block the thread (time.sleep), holding the gauge, until ``expected`` calls are in
    at once or 5 s passed."""
    with BLOCKING.held():
        deadline = time.monotonic() + 5.0
        while BLOCKING.peak < expected and time.monotonic() < deadline:
            time.sleep(0.01)
    return f"peak {BLOCKING.peak}"


@pytest.fixture
def reg(registry: Registry) -> Registry:
    registry.add(st.add, st.echo, st.fail, st.sleep_async, st.sleep_sync, st.whoami,
                 blocking_overlap)  # fmt: skip
    return registry


def test_a_loop_without_limits_takes_each_from_the_settings(reg: Registry) -> None:
    settings = replace(
        reg.settings,
        agent_max_iterations=4,
        agent_max_tool_calls=6,
        agent_max_retries_per_tool=1,
        agent_timeout_s=30.0,
        agent_run_lease_s=7.0,
    )
    expected = Limits(max_iterations=4, max_tool_calls=6, max_retries_per_tool=1, timeout_s=30.0)
    assert Limits.from_settings(settings) == expected
    with tooldb.open(settings.resolved_url, settings=settings) as opened:
        loop = AgentLoop(opened, ScriptedModel([call("add", {"a": 1})], repeat_last=True),
                         tools=["add"])  # fmt: skip
        assert loop.limits == expected
        result = loop.run("add forever")
        assert result.review_reason == "reached the limit of 4 iterations"
        details = opened.store.get_run_details(opened.tenant, result.run_id)
        assert details is not None and details["metadata"]["limits"] == expected.as_json()
        lease = details["lease_expires_at"] - details["started_at"]
        assert lease == pytest.approx(7.0)  # the run's lease is the setting's


def test_unknown_limits_are_refused_naming_the_known_ones() -> None:
    with pytest.raises(UsageError) as raised:
        Limits().updated({"max_turns": 3, "timeout_s": 1.0})
    assert str(raised.value) == (
        "unknown limit(s) ['max_turns']: use "
        "['max_iterations', 'max_retries_per_tool', 'max_tool_calls', 'timeout_s']"
    )
    assert Limits().updated({"timeout_s": 2.0, "max_iterations": None}) == Limits(timeout_s=2.0)
    assert Limits().updated({}) == Limits() == Limits().updated(None)


def test_arun_names_the_run_and_runs_it_under_its_parent(reg: Registry) -> None:
    outer = AgentLoop(reg, ScriptedModel(["nothing to do"]), tools=["add"]).run("outer")
    parent = LoopContext(run_id=outer.run_id, iteration=0, state={"seen": 5})
    model = ScriptedModel([call("whoami", {"note": "n"}), "done"])
    loop = AgentLoop(reg, model, tools=["whoami"])
    result = asyncio.run(loop.arun("the inner task", parent=parent, run_id="inner-run"))
    assert result.run_id == "inner-run" and result.task == "the inner task"
    assert result.status is RunStatus.SUCCESS and result.parent_run_id == outer.run_id
    assert parent.state["seen"] == 6  # the run tree's state is the parent's
    stored = reg.store.get_run(reg.tenant, "inner-run")
    assert stored is not None and stored.parent_run_id == outer.run_id
    assert stored.task == "the inner task"


@pytest.mark.parametrize(
    ("raised", "told"),
    [(ModelError("HTTP 500 from provider"), "HTTP 500 from provider"),
     (ValueError("bad frame"), "ValueError: bad frame")],
)  # fmt: skip
def test_a_model_failing_mid_run_keeps_what_was_gathered(
    reg: Registry, raised: Exception, told: str
) -> None:
    turns = iter([call("add", {"a": 1, "b": 2})])

    def flaky(*_: object) -> object:
        for turn in turns:
            return turn
        raise raised

    model = FunctionModel(flaky)
    result = AgentLoop(reg, model, tools=["add"]).run("add 1 and 2")
    error = f"model {model.id} failed: {told}"
    assert result.status is RunStatus.ERROR and result.error == error
    assert result.requires_review and result.review_reason == error
    assert result.output == "3"  # the last good tool output
    stored = reg.store.get_run(reg.tenant, result.run_id)
    assert stored is not None and stored.output == "3" and stored.requires_review


def test_an_interrupted_run_keeps_its_output_and_the_interrupt_wins_over_the_store(
    reg: Registry, monkeypatch: pytest.MonkeyPatch
) -> None:
    def interrupted_after_one_call() -> FunctionModel:
        turns = iter([call("add", {"a": 1, "b": 2})])

        def decide(*_: object) -> object:
            for turn in turns:
                return turn
            raise KeyboardInterrupt

        return FunctionModel(decide)

    with pytest.raises(KeyboardInterrupt):
        AgentLoop(reg, interrupted_after_one_call(), tools=["add"]).run("add, then ^C")
    (run,) = reg.store.list_runs(reg.tenant, limit=5)
    assert run.status is RunStatus.INTERRUPTED and run.output == "3"

    def store_away(*_: object, **__: object) -> None:
        raise RuntimeError("the store is away")

    monkeypatch.setattr(reg.store, "finish_run", store_away)
    with pytest.raises(KeyboardInterrupt):  # not the store's error: the process is going
        AgentLoop(reg, interrupted_after_one_call(), tools=["add"]).run("add, then ^C")


def test_the_answer_gathered_is_the_last_good_output_with_words_in_it(reg: Registry) -> None:
    model = ScriptedModel(
        [call("echo", {"text": "the answer"}), call("echo", {"text": ""}),
         call("fail", {"message": "kaput"}), call("add", {"a": "x"})],
        repeat_last=True,
    )  # fmt: skip
    loop = AgentLoop(reg, model, tools=["echo", "fail", "add"], limits=Limits(max_iterations=4))
    result = loop.run("echo")
    assert result.review_reason == "reached the limit of 4 iterations"
    assert result.output == "the answer"  # not the empty output nor an error after it
    nothing = ScriptedModel([call("fail", {"message": "kaput"})], repeat_last=True)
    loop = AgentLoop(reg, nothing, tools=["fail"], limits=Limits(max_iterations=2))
    assert loop.run("fail").output == ""


def test_the_history_holds_each_calls_arguments_turn_time_and_output(reg: Registry) -> None:
    long_text = "x" * 2500
    model = ScriptedModel(
        [call("add", {"a": 1, "b": 2}), call("echo", "{not json"),
         call("sleep_async", {"seconds": 0.05}), call("echo", {"text": long_text}), "done"]
    )  # fmt: skip
    result = AgentLoop(reg, model, tools=["add", "echo", "sleep_async"]).run("several")
    uses = result.tool_calls
    assert [u.tool for u in uses] == ["add", "echo", "sleep_async", "echo"]
    assert uses[0].arguments == {"a": 1, "b": 2}
    assert uses[1].arguments == "{not json" and not uses[1].success  # as the model sent them
    assert [u.iteration for u in uses] == [0, 1, 2, 3]
    assert uses[2].duration_ms >= 50
    assert uses[3].output == long_text[:2000]  # the history keeps 2000 characters
    assert model.requests[4][0][-1].content == long_text  # the model saw all of it


def test_runs_sharing_a_loop_run_blocking_tools_beside_each_other(reg: Registry) -> None:
    """Only a run on a loop of its own (``run()``) may run a blocking tool on the loop's
    thread: two ``arun`` on one loop, even on the main thread, each call theirs in a
    worker thread, so both are inside their tool at once."""
    BLOCKING.__init__()

    async def both() -> list[RunStatus]:
        loops = [
            AgentLoop(reg, ScriptedModel([call("blocking_overlap", {}), "done"]),
                      tools=["blocking_overlap"])
            for _ in range(2)
        ]  # fmt: skip
        results = await asyncio.gather(*(loop.arun("block") for loop in loops))
        return [result.status for result in results]

    assert asyncio.run(both()) == [RunStatus.SUCCESS] * 2
    assert BLOCKING.peak == 2


def test_calls_of_one_turn_in_a_run_of_its_own_run_beside_each_other(reg: Registry) -> None:
    """``run()`` may run a turn's lone call on its own thread, never a turn's several."""
    BLOCKING.__init__()
    model = ScriptedModel([[call("blocking_overlap", {}), call("blocking_overlap", {})], "ok"])
    result = AgentLoop(reg, model, tools=["blocking_overlap"]).run("block twice")
    assert result.status is RunStatus.SUCCESS and BLOCKING.peak == 2


def test_a_turn_whose_record_failed_is_still_persisted(
    reg: Registry, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The lone call's record (which was to carry the turn's messages) fails once: the
    model is told, and the turn's messages are appended and committed with the next."""
    original = reg.store.record_group
    failures = [StoreError("store x failed: disk I/O error")]

    def fails_once(calls: list[object], *more: object) -> object:
        if calls and failures:
            raise failures.pop()
        return original(calls, *more)

    monkeypatch.setattr(reg.store, "record_group", fails_once)
    model = ScriptedModel([call("add", {"a": 1, "b": 2}), "no luck"])
    result = AgentLoop(reg, model, tools=["add"]).run("add")
    assert result.status is RunStatus.SUCCESS and not failures
    stored = [(m["role"], m.get("content")) for m in reg.store.run_messages(result.run_id)]
    assert stored == [
        ("user", "add"), ("assistant", None),
        ("tool", "Error: store x failed: disk I/O error"), ("assistant", "no luck"),
    ]  # fmt: skip


def test_each_tool_call_has_its_span_with_its_outcome(reg: Registry) -> None:
    from opentelemetry.sdk.trace import TracerProvider
    from opentelemetry.sdk.trace.export import SimpleSpanProcessor
    from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

    exporter = InMemorySpanExporter()
    provider = TracerProvider()
    provider.add_span_processor(SimpleSpanProcessor(exporter))
    model = ScriptedModel([call("add", {"a": 1}, id="c1"), call("fail", {}, id="c2"), "done"])
    loop = AgentLoop(reg, model, tools=["add", "fail"], tracer=Tracer(provider.get_tracer("t")))
    result = loop.run("trace")
    spans = {span.name: span for span in exporter.get_finished_spans()}
    chat = spans["chat scripted"].attributes
    assert chat is not None and chat["tooldb.iteration"] == 2  # the last of three turns
    assert (chat["gen_ai.provider.name"], chat["gen_ai.request.model"]) == ("test", "scripted")
    ok, failed = spans["execute_tool add"], spans["execute_tool fail"]
    assert ok.attributes is not None and failed.attributes is not None
    assert ok.attributes["gen_ai.tool.name"] == "add"
    assert ok.attributes["gen_ai.tool.call.id"] == "c1"
    assert ok.attributes["tooldb.call.id"] == result.tool_calls[0].call_id
    assert ok.status.status_code.name != "ERROR"
    assert failed.attributes["gen_ai.tool.call.id"] == "c2"
    assert failed.status.status_code.name == "ERROR"


def test_a_tool_that_turned_slow_commits_before_its_next_call(
    reg: Registry, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A tool is quick only while its last call in the run was (under QUICK_MS): once a
    call of it was slow, what is held is committed before its next call runs."""
    monkeypatch.setattr("tooldb.agents.loop.QUICK_MS", 1000.0)
    settings = replace(reg.settings, agent_held_calls=64)
    with tooldb.open(settings.resolved_url, settings=settings) as grouped:
        sizes: list[int] = []
        original = grouped.store.record_group

        def spy(calls: list[object], *more: object) -> object:
            sizes.append(len(calls))
            return original(calls, *more)

        monkeypatch.setattr(grouped.store, "record_group", spy)
        turns = [call("sleep_sync", {"seconds": seconds}) for seconds in (0.0, 1.5, 0.0)]
        result = AgentLoop(grouped, ScriptedModel([*turns, "done"]), tools=["sleep_sync"]).run(
            "quick, slow, quick"
        )
        assert result.status is RunStatus.SUCCESS
        # the task before the first call; the quick and the slow call before the third
        assert sizes == [0, 2, 1]


def test_a_call_tool_runs_the_runs_calls_and_its_result_is_used(reg: Registry) -> None:
    """``call_tool`` (how tooldb.workers runs each call as a durable step) is given the
    tool, its arguments and the run's id, and the model gets what it returns."""
    seen: list[tuple[str, dict[str, Any], str]] = []

    async def through(name: str, arguments: dict[str, Any], run_id: str) -> ToolResult:
        seen.append((name, arguments, run_id))
        return await reg.acall(name, arguments, run_id=run_id)

    model = ScriptedModel([call("add", {"a": 1, "b": 2}), "3"])
    result = AgentLoop(reg, model, tools=["add"], call_tool=through).run("add")
    assert seen == [("add", {"a": 1, "b": 2}, result.run_id)]
    assert result.status is RunStatus.SUCCESS and result.tool_calls[0].output == "3"
    assert model.requests[1][0][-1].content == "3"
    assert [c.tool_name for c in reg.calls(run_id=result.run_id)] == ["add"]


def test_the_model_is_told_how_many_retries_are_left_word_for_word(reg: Registry) -> None:
    model = ScriptedModel([call("add", {"a": "x"})] * 3 + ["done"])
    result = AgentLoop(reg, model, tools=["add"], limits=Limits(max_retries_per_tool=2)).run("add")
    errors = [use.error or "" for use in result.tool_calls]
    assert errors[0].endswith(" (fix the arguments and call again: 2 retries left)")
    assert errors[1].endswith(" (fix the arguments and call again: 1 retry left)")
    assert errors[2].endswith(" (no retries left for this tool)")


def test_a_call_tool_that_raises_is_a_failed_call_the_model_is_told_of(reg: Registry) -> None:
    async def broken(name: str, arguments: dict[str, Any], run_id: str) -> ToolResult:
        raise ValueError(f"no worker for {name}")

    model = ScriptedModel([call("add", {"a": 1}), "gave up"])
    result = AgentLoop(reg, model, tools=["add"], call_tool=broken).run("add")
    assert result.status is RunStatus.SUCCESS
    assert result.tool_calls[0].error == "ValueError: no worker for add"
    assert model.requests[1][0][-1].content == "Error: ValueError: no worker for add"


def test_needs_retry_goes_to_the_protocol_and_a_plain_failure_does_not(reg: Registry) -> None:
    """An agent tool's needs_retry naming another tool of the run: that tool is re-run,
    then the asker with the same task (agents/protocol.py); a tool that merely fails is
    told to the model as it failed, with no retry hint and no retry spent."""
    asked: list[str] = []

    def picky(messages: list[Message], *_: object) -> object:
        asked.append(next(m.content for m in messages if m.role == "user"))
        if len(asked) == 1:
            return json.dumps({"status": "needs_retry", "message": "stale", "target": "whoami",
                               "refinement": "fresher"})  # fmt: skip
        return "fresh answer"

    register_model("test:limits-picky", FunctionModel(picky))
    try:
        reg.add_agent(AgentSpec(name="picky", model="test:limits-picky", as_tool=True))
        model = ScriptedModel(
            [call("whoami", {"note": "hi"}), call("fail", {"message": "kaput"}),
             call("picky", {"task": "the news"}), "ok"]
        )  # fmt: skip
        result = AgentLoop(reg, model, tools=["whoami", "fail", "picky"]).run("news")
    finally:
        unregister_model("test:limits-picky")
    assert result.status is RunStatus.SUCCESS
    assert result.tool_calls[1].error == reg.call("fail", {"message": "kaput"}).error
    assert len(asked) == 2 and asked[0] == asked[1] and asked[0].startswith("the news")
    told = model.requests[3][0][-1].content
    assert told.startswith("picky: needs_retry: stale")
    assert "-> re-ran 'whoami' with the refinement (retry 1 of 2): ok: " in told
    assert f'"run": "{result.run_id}"' in told  # the re-run had the run's context
    assert told.endswith("-> picky again: fresh answer")
    assert [use.tool for use in result.tool_calls] == [
        "whoami", "fail", "whoami", "picky", "picky",
    ]  # fmt: skip


def test_run_under_a_parent_and_the_runs_span(reg: Registry) -> None:
    from opentelemetry.sdk.trace import TracerProvider
    from opentelemetry.sdk.trace.export import SimpleSpanProcessor
    from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

    outer = AgentLoop(reg, ScriptedModel(["nothing to do"]), tools=["add"]).run("outer")
    exporter = InMemorySpanExporter()
    provider = TracerProvider()
    provider.add_span_processor(SimpleSpanProcessor(exporter))
    model = ScriptedModel(["done"])
    loop = AgentLoop(reg, model, tools=["add"], agent="clerk",
                     tracer=Tracer(provider.get_tracer("t")))  # fmt: skip
    parent = LoopContext(run_id=outer.run_id, iteration=0)
    result = loop.run("inner", parent=parent)
    assert result.parent_run_id == outer.run_id
    (span,) = [s for s in exporter.get_finished_spans() if s.name == "invoke_agent clerk"]
    assert span.attributes is not None
    assert span.attributes["gen_ai.conversation.id"] == result.run_id
    assert span.attributes["gen_ai.agent.name"] == "clerk"
    assert span.attributes["gen_ai.request.model"] == model.id


def test_a_cancelled_run_ends_partial_with_why(reg: Registry) -> None:
    async def slow(*_: object) -> str:
        await asyncio.sleep(30)
        return "too late"

    async def cancel_it() -> str:
        loop = AgentLoop(reg, FunctionModel(slow), tools=["add"])
        task = asyncio.ensure_future(loop.arun("wait", run_id="cancelled-run"))
        await asyncio.sleep(0.3)
        task.cancel()
        with pytest.raises(asyncio.CancelledError):
            await task
        return "cancelled-run"

    run_id = asyncio.run(cancel_it())
    stored = reg.store.get_run(reg.tenant, run_id)
    assert stored is not None and stored.status is RunStatus.PARTIAL and stored.requires_review
    assert stored.review_reason == "the run was cancelled by its caller"


def test_a_bug_inside_the_loop_ends_the_run_with_an_error(
    reg: Registry, monkeypatch: pytest.MonkeyPatch
) -> None:
    def bug(*_: object) -> None:
        raise RuntimeError("a bug in tooldb")

    monkeypatch.setattr("tooldb.agents.loop.refuse_turn", bug)
    result = AgentLoop(reg, ScriptedModel(["hello"]), tools=["add"]).run("x")
    assert result.status is RunStatus.ERROR and result.error == "RuntimeError: a bug in tooldb"
    assert result.requires_review and result.review_reason == "the run failed inside tooldb"
    assert result.output == "" and (result.mode, result.model) == ("llm", "test:scripted")
    stored = reg.store.get_run(reg.tenant, result.run_id)
    assert stored is not None and stored.status is RunStatus.ERROR


def test_empty_turns_count_as_iterations_and_only_consecutive_ones_end_a_run(
    reg: Registry,
) -> None:
    """An empty turn is an iteration of its own (its nudge persisted under it); a turn
    with calls between two empty ones resets the count, so the run goes on."""
    model = ScriptedModel([ModelTurn(), call("echo", {"text": "a"}), ModelTurn(), "done"])
    result = AgentLoop(reg, model, tools=["echo"]).run("talk")
    assert result.status is RunStatus.SUCCESS and result.output == "done"
    assert result.iterations == 4 and len(model.requests) == 4
    stored = reg.store.run_messages(result.run_id)
    assert [(m["iteration"], m["role"]) for m in stored] == [
        (0, "user"),
        (0, "assistant"), (0, "user"),
        (1, "assistant"), (1, "tool"),
        (2, "assistant"), (2, "user"),
        (3, "assistant"),
    ]  # fmt: skip


def test_the_tokens_of_every_turn_are_summed(reg: Registry) -> None:
    stamped = {"model": "test:scripted"}  # ScriptedModel's own usage is for unstamped turns
    echo_turn = ModelTurn(
        tool_calls=[call("echo", {"text": "a"})], usage=Usage(input_tokens=3, output_tokens=5),
        **stamped,
    )  # fmt: skip
    answer = ModelTurn(text="done", usage=Usage(input_tokens=7, output_tokens=11), **stamped)
    result = AgentLoop(reg, ScriptedModel([echo_turn, answer]), tools=["echo"]).run("count")
    assert (result.input_tokens, result.output_tokens) == (10, 16)


def test_the_time_limit_is_checked_before_a_turn_that_follows_an_empty_one(
    reg: Registry,
) -> None:
    """A model that blocks (it cannot be interrupted) past the time limit and answers
    nothing: the run ends on the time limit before asking it again."""
    asked: list[int] = []

    def blocking(*_: object) -> ModelTurn:
        asked.append(1)
        time.sleep(0.3)
        return ModelTurn()

    limits = Limits(timeout_s=0.2)
    result = AgentLoop(reg, FunctionModel(blocking), tools=["echo"], limits=limits).run("x")
    assert result.status is RunStatus.PARTIAL
    assert result.review_reason == "reached the time limit of 0.2 s"
    assert len(asked) == 1


def test_the_time_limit_is_checked_after_a_turn_before_the_iteration_limit(
    reg: Registry,
) -> None:
    """A turn whose call outlasts the time limit ends the run on the time limit, even on
    the last iteration allowed."""
    model = ScriptedModel([call("sleep_sync", {"seconds": 0.3}), "never"])
    limits = Limits(timeout_s=0.2, max_iterations=1)
    result = AgentLoop(reg, model, tools=["sleep_sync"], limits=limits).run("x")
    assert result.status is RunStatus.PARTIAL
    assert result.review_reason == "reached the time limit of 0.2 s"
    assert result.output == "slept" and len(model.requests) == 1


def test_a_builtin_given_to_the_loop_is_offered_and_run(reg: Registry) -> None:
    async def shout(arguments: dict[str, Any], ctx: LoopContext) -> ToolResult:
        return ToolResult(success=True, output=str(arguments["text"]).upper() + ctx.run_id[:0])

    schema = ToolSchema(
        name="shout",
        description="Say it louder.",
        parameters={"type": "object", "properties": {"text": {"type": "string"}}},
    )
    model = ScriptedModel([call("shout", {"text": "hey"}), "done"])
    result = AgentLoop(reg, model, tools=["echo"], builtins=[Builtin(schema, shout)]).run("x")
    assert {tool.name for tool in model.requests[0][1]} == {"echo", "shout"}
    assert result.tool_calls[0].success and result.tool_calls[0].output == "HEY"


def test_a_refused_turn_is_an_iteration_whose_refusal_the_model_and_the_log_get(
    reg: Registry,
) -> None:
    """A text answer under ``required``: nothing runs, the model is told which tools it
    may call, and the turn and its refusal are persisted under their own iteration."""
    model = ScriptedModel(["no tools needed", "still none", call("echo", {"text": "a"}), "done"])
    loop = AgentLoop(reg, model, tools=["echo", "add"], tool_choice="required")
    result = loop.run("say a")
    assert result.status is RunStatus.SUCCESS and result.output == "done"
    assert result.iterations == 4 and [u.tool for u in result.tool_calls] == ["echo"]
    told = model.requests[1][0][-1]
    assert told.role == "user" and told.content == (
        "A tool call is required on this turn, not a text answer: call one of the tools "
        "(echo, add)."
    )
    stored = reg.store.run_messages(result.run_id)
    assert [(m["iteration"], m["role"]) for m in stored] == [
        (0, "user"),
        (0, "assistant"), (0, "user"),
        (1, "assistant"), (1, "user"),
        (2, "assistant"), (2, "tool"),
        (3, "assistant"),
    ]  # fmt: skip
    assert stored[2]["content"] == told.content


def test_the_opening_offers_search_and_subagents_only_when_asked(reg: Registry) -> None:
    """``search_tools`` beside pinned tools; ``select_k=0`` selects nothing (and adds no
    search); ``subagents`` offers the subagent tool to a top-level run."""

    def offered(**options: Any) -> set[str]:
        model = ScriptedModel(["done"])
        AgentLoop(reg, model, **options).run("add two integers")
        return {schema.name for schema in model.requests[0][1]}

    assert offered(tools=["echo"]) == {"echo"}
    assert offered(tools=["echo"], search_tools=True) == {"echo", "search_tools"}
    assert offered(select_k=0) == set()
    assert offered(tools=["echo"], subagents=True) == {"echo", "subagent"}


@tool
def note_state(key: str, ctx: LoopContext | None = None) -> str:
    """Write a key of the run's shared state."""
    assert ctx is not None
    ctx.state[key] = "noted"
    return "ok"


def test_a_runs_data_keeps_its_state_and_retries_and_its_duration(reg: Registry) -> None:
    reg.add(note_state)
    model = ScriptedModel([call("note_state", {"key": "k"}), call("sleep_sync", {"seconds": 0.05}),
                           "done"])  # fmt: skip
    result = AgentLoop(reg, model, tools=["note_state", "sleep_sync"]).run("note")
    assert result.data["state"] == {"k": "noted"} and result.data["retries"] == []
    assert result.duration_ms >= 50  # it slept 50 ms: milliseconds, not seconds
    stored = reg.store.get_run_details(reg.tenant, result.run_id)
    assert stored is not None
    assert stored["data"]["state"] == {"k": "noted"} and stored["data"]["retries"] == []


class _NotAwaitable:
    """A model whose ``complete`` is not async (a bug in the model)."""

    id = "test:sync"

    def complete(self, *_: object) -> ModelTurn:
        return ModelTurn(text="sync")


def test_a_model_whose_turn_is_not_awaitable_fails_the_run_with_a_type_error(
    reg: Registry,
) -> None:
    result = AgentLoop(reg, _NotAwaitable(), tools=["echo"]).run("x")  # type: ignore[arg-type]
    assert result.status is RunStatus.ERROR
    assert (result.error or "").startswith("model test:sync failed: TypeError: ")


def test_a_model_that_waits_past_the_time_limit_is_interrupted(reg: Registry) -> None:
    async def slow(*_: object) -> str:
        await asyncio.sleep(3)
        return "late"

    limits = Limits(timeout_s=0.3)
    result = AgentLoop(reg, FunctionModel(slow), tools=["echo"], limits=limits).run("x")
    assert result.status is RunStatus.PARTIAL and result.output == ""
    assert result.review_reason == "reached the time limit of 0.3 s"


@pytest.mark.parametrize("task", ["", "   ", 5])
def test_a_task_must_be_a_non_empty_string(reg: Registry, task: Any) -> None:
    with pytest.raises(UsageError, match=r"^the task must be a non-empty string$"):
        AgentLoop(reg, ScriptedModel(["x"]), tools=["echo"]).run(task)


def test_the_run_row_names_the_agent_and_the_model_and_eight_tools_are_selected_by_default(
    reg: Registry,
) -> None:
    loop = AgentLoop(reg, ScriptedModel(["done"]), tools=["echo"], agent="helper")
    assert loop.select_k == 8
    result = loop.run("x")
    stored = reg.store.get_run(reg.tenant, result.run_id)
    assert stored is not None and (stored.agent, stored.model) == ("helper", "test:scripted")
    assert stored.mode == "llm"
    details = reg.store.get_run_details(reg.tenant, result.run_id)
    assert details is not None and details["metadata"]["tool_choice"] == "auto"


@pytest.mark.parametrize("value", [0, -1, 0.0, True, "5", None])
@pytest.mark.parametrize("name", ["max_iterations", "max_tool_calls", "timeout_s"])
def test_a_limit_must_be_a_positive_number(name: str, value: Any) -> None:
    with pytest.raises(UsageError) as raised:
        Limits(**{name: value})
    assert str(raised.value) == f"limit {name} must be a positive number, got {value!r}"


def test_no_retry_at_all_is_a_limit_but_fewer_is_not() -> None:
    assert Limits(max_retries_per_tool=0).max_retries_per_tool == 0
    with pytest.raises(UsageError, match="max_retries_per_tool"):
        Limits(max_retries_per_tool=-1)
    with pytest.raises(UsageError, match="timeout_s"):  # the limits after it are checked too
        Limits(max_retries_per_tool=0, timeout_s=0)


def test_an_agents_skills_take_every_dependency_once_and_skip_inactive_ones(
    reg: Registry,
) -> None:
    """``b`` depends on ``a`` (listed too, so seen twice) and on ``off``, disabled since;
    ``c`` comes first in the list, so it is the last taken off the stack."""
    for name, depends in [("a", []), ("off", []), ("b", ["a", "off"]), ("c", [])]:
        reg.add_skill({"name": name, "description": f"Skill {name}.", "depends_on": depends})
    reg.disable_definition("skill", "off")
    model = ScriptedModel(["done"])
    AgentLoop(reg, model, skills=["c", "a", "b"]).run("x")
    system = model.requests[0][0][0].content
    assert all(f"- {name}: Skill {name}." in system for name in "abc")
    assert "Skill off." not in system
    with pytest.raises(NotFound) as raised:
        AgentLoop(reg, model, skills=["a", "nope", "gone"]).run("x")
    assert str(raised.value) == "skills not found or inactive: nope, gone"


def test_a_retry_cap_reached_makes_a_successful_run_partial_for_review(reg: Registry) -> None:
    """An agent tool that always answers needs_retry: past the target's cap of 1 the run
    is flagged; it still ends on the model's answer, as partial and for review, with the
    retry chain in its data."""

    def stubborn(*_: object) -> object:
        return json.dumps({"status": "needs_retry", "message": "stale", "target": "whoami",
                           "refinement": "fresher"})  # fmt: skip

    register_model("test:limits-stubborn", FunctionModel(stubborn))
    try:
        reg.add_agent(AgentSpec(name="stubborn", model="test:limits-stubborn", as_tool=True))
        model = ScriptedModel(
            [call("whoami", {"note": "hi"}), call("stubborn", {"task": "the news"}), "ok"]
        )
        loop = AgentLoop(reg, model, tools=["whoami", "stubborn"], retry_caps={"whoami": 1})
        result = loop.run("news")
    finally:
        unregister_model("test:limits-stubborn")
    assert result.status is RunStatus.PARTIAL and result.requires_review
    assert result.output == "ok"
    assert result.review_reason is not None and "retry cap" in result.review_reason
    assert [link["outcome"] for link in result.data["retries"]] == ["failed again", "cap reached"]
    stored = reg.store.get_run(reg.tenant, result.run_id)
    assert stored is not None and stored.status is RunStatus.PARTIAL and stored.requires_review


def test_a_subagent_call_runs_a_child_run_whose_answer_the_parent_gets(reg: Registry) -> None:
    model = ScriptedModel([call("subagent", {"task": "echo a", "tools": ["echo"]}),
                           "the child's answer", "done"])  # fmt: skip
    result = AgentLoop(reg, model, tools=["echo"], subagents=True).run("delegate")
    assert result.status is RunStatus.SUCCESS and result.output == "done"
    child = result.tool_calls[0]
    assert child.tool == "subagent" and child.success and child.output == "the child's answer"
