"""The agent protocol, whole: needs_retry re-runs its target with the refinement under a
per-target cap (the run flagged for review past it), the state contract (reads given,
writes checked, status and payload written back), envelopes validated, tool choice
enforced by tooldb, a tool that cannot be imported still recorded in a run, run ids by
prefix in the CLI."""

from __future__ import annotations

import importlib
import json
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest
from typer.testing import CliRunner

import tooldb
from tooldb import AgentSpec, LoopContext, Registry, Settings
from tooldb.agents import AgentLoop, run_task
from tooldb.cli import app
from tooldb.errors import UsageError
from tooldb.models import FunctionModel, Message, ScriptedModel, call, register_model
from tooldb.models import unregister_model as unregister
from tooldb.types import RunStatus

runner = CliRunner()
MODELS = ("test:writer", "test:boss", "test:liar", "test:chatty")


def put_draft(text: str, ctx: LoopContext | None = None) -> str:
    """Store a draft text in the run's shared state."""
    assert ctx is not None
    ctx.state["draft"] = text
    return f"stored {text!r}"


def scribble(key: str, ctx: LoopContext | None = None) -> str:
    """Write a key of the run's state (to break a contract)."""
    assert ctx is not None
    ctx.state[key] = "scribbled"
    return "ok"


def check_draft(ctx: LoopContext | None = None) -> dict[str, object]:
    """Check that the draft in the run's state is written in upper case."""
    assert ctx is not None
    draft = ctx.state.get("draft", "")
    if draft and draft == draft.upper():
        return {"status": "success", "message": f"draft {draft!r} is fine", "data": draft}
    return {
        "status": "needs_retry",
        "message": f"draft {draft!r} is not in upper case",
        "refinement": "write the draft in upper case",
        "target": "writer",
    }


def echo_upper(text: str) -> str:
    """Return the text in upper case."""
    return text.upper()


@pytest.fixture
def reg(sqlite_url: str) -> Iterator[Registry]:
    registry = tooldb.open(sqlite_url, settings=Settings(embedder="hash", url=sqlite_url))
    registry.add(put_draft, scribble, check_draft, echo_upper)
    yield registry
    registry.close()
    for name in MODELS:
        unregister(name)


def _results(messages: list[Message]) -> list[Message]:
    return [m for m in messages if m.role == "tool"]


def _writer(fixes: bool, seen: list[str]) -> FunctionModel:
    """The writer agent's model: drafts 'hello', in upper case when refined to (if it
    ``fixes``); records the task it was given."""

    def decide(messages: list[Message], *_: object) -> object:
        task = next(m.content for m in messages if m.role == "user")
        if not _results(messages):
            seen.append(task)
            upper = fixes and "upper case" in task
            return call("put_draft", {"text": "HELLO" if upper else "hello"})
        return "drafted"

    return FunctionModel(decide)


def _boss() -> FunctionModel:
    """The orchestrator: writer, then checker, then answers with what it was told."""

    def decide(messages: list[Message], *_: object) -> object:
        done = _results(messages)
        if not done:
            return call("writer", {"task": "write hello"})
        if len(done) == 1:
            return call("checker", {"task": "check the draft"})
        return done[-1].content

    return FunctionModel(decide)


def _system(reg: Registry, fixes: bool, cap: int = 2) -> list[str]:
    seen: list[str] = []
    register_model("test:writer", _writer(fixes, seen))
    register_model("test:boss", _boss())
    reg.add_agent(AgentSpec(name="writer", model="test:writer", tools=["put_draft"],
                            reads=["topic"], writes=["draft"], as_tool=True))  # fmt: skip
    reg.add_agent(AgentSpec(name="checker", model="none", tools=["check_draft"],
                            reads=["draft"], writes=[], as_tool=True))  # fmt: skip
    reg.add_agent(AgentSpec(name="boss", model="test:boss", tools=["writer", "checker"],
                            retries={"writer": cap}))  # fmt: skip
    return seen


def test_needs_retry_re_runs_its_target_with_the_refinement_then_the_asker(
    reg: Registry,
) -> None:
    seen = _system(reg, fixes=True)
    result = run_task(reg, "say hello loudly", agent="boss")
    assert result.status is RunStatus.SUCCESS, result.review_reason
    assert "re-ran 'writer' with the refinement (retry 1 of 2)" in result.output
    assert "checker again: draft 'HELLO' is fine" in result.output
    # the writer's second task carried the refinement and the checker's feedback
    assert len(seen) == 2 and "write the draft in upper case" in seen[1]
    assert "is not in upper case" in seen[1]
    state = result.data["state"]
    assert state["draft"] == "HELLO"
    assert state["checker_status"] == "success" and state["checker_result"] == "HELLO"
    assert state["writer_status"] == "success" and state["writer_result"] == "drafted"
    [link] = result.data["retries"]
    assert link["from"] == "checker" and link["target"] == "writer"
    assert link["attempt"] == 1 and link["cap"] == 2 and link["outcome"] == "success"
    # every re-run is a recorded call of the run: writer, checker, writer again, checker again
    calls = [c.tool_name for c in reg.calls(run_id=result.run_id)]
    assert sorted(calls) == ["checker", "checker", "writer", "writer"]
    shown = runner.invoke(app, ["--db", reg.settings.url, "runs", "show", result.run_id[:12]])
    assert shown.exit_code == 0, shown.output
    assert "retry: checker -> writer (1 of 2): write the draft in upper case -> success" in (
        shown.output
    )


def test_a_retry_cap_reached_ends_the_run_partial_and_flagged(reg: Registry) -> None:
    seen = _system(reg, fixes=False, cap=1)
    result = run_task(reg, "say hello loudly", agent="boss")
    assert result.status is RunStatus.PARTIAL and result.requires_review
    assert result.review_reason is not None and "retry cap reached" in result.review_reason
    assert "retry cap of 1 for 'writer' reached: flagged for review" in result.output
    assert len(seen) == 2  # the first draft and one retry, no more
    outcomes = [link["outcome"] for link in result.data["retries"]]
    assert outcomes == ["failed again", "cap reached"]
    assert result.data["state"]["checker_status"] == "needs_retry"


def test_the_child_gets_the_keys_it_reads_and_nothing_else(reg: Registry) -> None:
    seen: list[str] = []
    register_model("test:writer", _writer(False, seen))
    reg.add_agent(AgentSpec(name="writer", model="test:writer", tools=["put_draft"],
                            reads=["topic"], writes=["draft"], as_tool=True))  # fmt: skip

    def boss(messages: list[Message], *_: object) -> object:
        done = _results(messages)
        if not done:
            return call("scribble", {"key": "topic"})
        return call("writer", {"task": "write"}) if len(done) == 1 else "done"

    result = AgentLoop(reg, FunctionModel(boss), tools=["scribble", "writer"]).run("go")
    assert "State you read:" in seen[0] and '"topic": "scribbled"' in seen[0]
    child = reg.store.list_runs(reg.tenant, parent_run_id=result.run_id)[0]
    child_row = reg.store.get_run_details(reg.tenant, child.id)
    assert child_row is not None
    assert child_row["data"]["state"] == {"topic": "scribbled", "draft": "hello"}
    assert result.data["state"]["draft"] == "hello"


def test_a_write_outside_the_contract_is_an_error_the_caller_sees(reg: Registry) -> None:
    def writer(messages: list[Message], *_: object) -> object:
        return call("scribble", {"key": "secret"}) if not _results(messages) else "done"

    register_model("test:writer", FunctionModel(writer))
    reg.add_agent(AgentSpec(name="writer", model="test:writer", tools=["scribble"],
                            writes=["draft"], as_tool=True))  # fmt: skip
    told: list[str] = []

    def boss(messages: list[Message], *_: object) -> object:
        done = _results(messages)
        if not done:
            return call("writer", {"task": "write"})
        told.append(done[-1].content)
        return "ok"

    result = AgentLoop(reg, FunctionModel(boss), tools=["writer"]).run("go")
    assert "wrote state key(s) ['secret'] outside its contract (writes: ['draft'])" in told[0]
    assert "secret" not in result.data["state"]
    assert result.data["state"]["writer_status"] == "error"


def test_an_envelope_that_does_not_validate_is_an_error(reg: Registry) -> None:
    register_model(
        "test:liar",
        FunctionModel(lambda *_: json.dumps({"status": "maybe", "message": "hm", "x": 1})),
    )
    reg.add_agent(AgentSpec(name="liar", model="test:liar", tools=[], as_tool=True))
    result = reg.call("liar", {"task": "answer"})
    assert not result.success
    assert "answered an envelope that does not validate" in (result.error or "")
    assert "status" in (result.error or "") and "x:" in (result.error or "")


def test_tool_choice_none_runs_no_call_and_tells_the_model(reg: Registry) -> None:
    model = ScriptedModel([call("echo_upper", {"text": "a"}), "in words then"])
    result = AgentLoop(reg, model, tools=["echo_upper"], tool_choice="none").run("say a")
    assert result.status is RunStatus.SUCCESS and result.output == "in words then"
    assert reg.calls(run_id=result.run_id) == []
    told = _results(model.requests[1][0])
    assert "tool choice is 'none'" in told[0].content


def test_tool_choice_required_rejects_a_text_answer_and_other_tools(reg: Registry) -> None:
    model = ScriptedModel(
        [
            "no tools needed",
            call("put_draft", {"text": "x"}),
            call("echo_upper", {"text": "a"}),
            "A",
        ]
    )
    loop = AgentLoop(
        reg, model, tools=["echo_upper", "put_draft"], tool_choice="required:echo_upper"
    )
    result = loop.run("shout a")
    assert result.status is RunStatus.SUCCESS and result.output == "A"
    assert [c.tool_name for c in reg.calls(run_id=result.run_id)] == ["echo_upper"]
    second = model.requests[1][0][-1]
    assert second.role == "user" and "A tool call is required" in second.content
    third = model.requests[2][0][-1]
    assert "must call 'echo_upper'" in third.content and "'put_draft'" in third.content
    # obeyed once, the choice relaxes to auto so the model can answer
    assert model.requests[3][2].mode == "auto"


def test_a_model_that_never_obeys_stops_at_the_iteration_limit(reg: Registry) -> None:
    register_model("test:chatty", FunctionModel(lambda *_: "words, never a tool"))
    reg.add_agent(AgentSpec(name="chatty", model="test:chatty", tools=["echo_upper"],
                            tool_choice="required"))  # fmt: skip
    result = run_task(reg, "shout", agent="chatty", limits={"max_iterations": 3})
    assert result.status is RunStatus.PARTIAL and result.iterations == 3
    assert "3 iterations" in (result.review_reason or "")


def test_an_agent_that_inherits_its_model_needs_one(reg: Registry) -> None:
    reg.add_agent(AgentSpec(name="needy", model="inherit", tools=["echo_upper"]))
    with pytest.raises(UsageError, match="agent 'needy' needs a model"):
        run_task(reg, "shout", agent="needy")


def test_a_tool_whose_module_is_gone_fails_recorded_inside_a_run(
    reg: Registry, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    module = tmp_path / "vanishing_tools.py"
    module.write_text("def double(x: int) -> int:\n    'Double a number.'\n    return 2 * x\n")
    monkeypatch.syspath_prepend(str(tmp_path))
    reg.add(importlib.import_module("vanishing_tools").double)
    module.unlink()
    sys.modules.pop("vanishing_tools", None)
    importlib.invalidate_caches()
    fresh = tooldb.open(reg.settings.url, settings=reg.settings)
    model = ScriptedModel([call("double", {"x": 2}), "done"])
    result = AgentLoop(fresh, model, tools=["double"]).run("double 2")
    [use] = result.tool_calls
    assert not use.success and "cannot import 'vanishing_tools'" in (use.error or "")
    [record] = fresh.calls(run_id=result.run_id)
    assert record.tool_name == "double" and not record.success and use.call_id == record.id
    fresh.close()


def test_runs_show_and_trace_take_a_unique_prefix(reg: Registry) -> None:
    model = ScriptedModel([call("echo_upper", {"text": "a"}), "A"])
    result = AgentLoop(reg, model, tools=["echo_upper"]).run("shout a")
    url = reg.settings.url
    for command in (["runs", "show"], ["trace"]):
        out = runner.invoke(app, ["--db", url, *command, result.run_id[:12]])
        assert out.exit_code == 0 and result.run_id in out.output, out.output
    missing = runner.invoke(app, ["--db", url, "trace", "fffffffffffz"])
    assert missing.exit_code == 2 and "no run 'fffffffffffz'" in missing.output
