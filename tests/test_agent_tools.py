"""Agents as tools (kind `agent`): the status protocol, needs_retry in the calling loop,
shared state, recursion limits, parallel delegation, router agents, the CLI."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path

import pytest

import tests.sample_tools as st
import tooldb
from tests.overlap import Gauge
from tests.test_cli import as_json
from tooldb import AgentSpec, Registry, Settings
from tooldb.agents import AgentLoop
from tooldb.errors import UsageError
from tooldb.models import FunctionModel, Message, ToolSchema, call, register_model
from tooldb.models import unregister_model as unregister
from tooldb.models.base import ToolChoice
from tooldb.types import RunStatus, ToolKind


@pytest.fixture
def reg(registry: Registry) -> Iterator[Registry]:
    registry.add(st.add, st.echo, st.whoami, st.sleep_async)
    yield registry
    for name in ("test:worker", "test:a", "test:b", "test:c", "test:d", "test:slow"):
        unregister(name)


def _task(messages: list[Message]) -> str:
    return next(m.content for m in messages if m.role == "user")


def _results(messages: list[Message]) -> list[Message]:
    return [m for m in messages if m.role == "tool"]


def _agent(reg: Registry, name: str, model: str, **fields: object) -> None:
    reg.add_agent(AgentSpec(name=name, model=model, as_tool=True, **fields))  # type: ignore[arg-type]


def test_an_agent_registered_as_a_tool_answers_with_the_status_protocol(reg: Registry) -> None:
    register_model("test:worker", FunctionModel(lambda m, *_: f"done: {_task(m)}"))
    _agent(reg, "worker", "test:worker", description="Does work on a task.")
    tool = reg.get("worker")
    assert tool.spec.kind is ToolKind.AGENT and tool.spec.category == "agents"
    assert tool.spec.parameters["required"] == ["task"]
    result = reg.call("worker", {"task": "sweep", "context": {"room": "hall"}})
    assert result.success and result.output.startswith("done: sweep")
    assert '"room": "hall"' in result.output  # the context reached the agent's task
    status = result.data
    assert status["status"] == "success" and status["refinement"] is None
    child = reg.store.get_run(reg.tenant, status["run_id"])
    assert child is not None and child.agent == "worker" and child.parent_run_id is None
    assert reg.select("someone to do work on a task", 3).names[0] == "worker"


def test_the_calling_loop_gets_the_answer_and_the_child_run_links_to_it(reg: Registry) -> None:
    register_model("test:worker", FunctionModel(lambda m, *_: f"42 for {_task(m)}"))
    _agent(reg, "worker", "test:worker")

    def boss(messages: list[Message], *_: object) -> object:
        done = _results(messages)
        return call("worker", {"task": "the answer"}) if not done else f"got {done[0].content}"

    result = AgentLoop(reg, FunctionModel(boss), tools=["worker"]).run("delegate")
    assert result.status is RunStatus.SUCCESS and result.output == "got 42 for the answer"
    children = reg.store.list_runs(reg.tenant, parent_run_id=result.run_id)
    assert [c.agent for c in children] == ["worker"]
    assert [c.tool_name for c in reg.calls(run_id=result.run_id)] == ["worker"]
    assert reg.trace(result.run_id).tree["events"][-1]["run_id"] == children[0].id


def test_needs_retry_goes_back_to_the_model_with_the_refinement(reg: Registry) -> None:
    def picky(messages: list[Message], *_: object) -> object:
        task = _task(messages)
        if "Paris" in task:
            return "sunny in Paris"
        if "forever" in task:
            return json.dumps({"status": "error", "message": "cannot do that"})
        return json.dumps({"status": "needs_retry", "message": "which city?",
                           "refinement": "name one city", "target": "weather"})  # fmt: skip

    register_model("test:worker", FunctionModel(picky))
    _agent(reg, "worker", "test:worker")
    seen: list[str] = []

    def boss(messages: list[Message], *_: object) -> object:
        done = _results(messages)
        if done:
            seen.append(done[-1].content)
        if len(done) == 0:
            return call("worker", {"task": "the weather"})
        if len(done) == 1:
            return call("worker", {"task": "the weather in Paris"})
        if len(done) == 2:
            return call("worker", {"task": "work forever"})
        return "ok"

    result = AgentLoop(reg, FunctionModel(boss), tools=["worker"]).run("weather")
    assert result.status is RunStatus.SUCCESS
    assert seen[0].startswith(
        "Error: needs_retry: which city? (refine: name one city) (target: weather)"
    )
    assert "call 'worker' again with the task refined as asked: 2 retries left" in seen[0]
    assert seen[1] == "sunny in Paris"
    assert seen[2].startswith("Error: error: cannot do that")
    uses = result.tool_calls
    assert [u.success for u in uses] == [False, True, False]


def test_needs_retry_spends_the_retry_budget(reg: Registry) -> None:
    register_model(
        "test:worker",
        FunctionModel(lambda *_: json.dumps({"status": "needs_retry", "message": "vague"})),
    )
    _agent(reg, "worker", "test:worker")
    told: list[str] = []

    def boss(messages: list[Message], *_: object) -> object:
        done = _results(messages)
        if done:
            told.append(done[-1].content)
        return call("worker", {"task": "something"}) if len(done) < 4 else "gave up"

    AgentLoop(reg, FunctionModel(boss), tools=["worker"]).run("x")
    assert "1 retry left" in told[1] and "no retries left" in told[2]
    assert told[3].startswith("Error: not run:") and "answered needs_retry) 3 times" in told[3]


def test_a_child_that_hits_its_limit_answers_needs_retry(reg: Registry) -> None:
    register_model("test:worker", FunctionModel(lambda *_: call("echo", {"text": "again"})))
    _agent(reg, "worker", "test:worker", tools=["echo"], limits={"max_iterations": 2})
    result = reg.call("worker", {"task": "loop"})
    assert not result.success and result.data["status"] == "needs_retry"
    assert "reached the limit of 2 iterations" in result.data["refinement"]


def test_shared_state_is_seen_both_ways_and_persisted(reg: Registry) -> None:
    def worker(messages: list[Message], *_: object) -> object:
        return call("whoami", {"note": "child"}) if not _results(messages) else "noted"

    register_model("test:worker", FunctionModel(worker))
    _agent(reg, "worker", "test:worker", tools=["whoami"])

    def boss(messages: list[Message], *_: object) -> object:
        done = _results(messages)
        if not done:
            return call("whoami", {"note": "parent"})
        if len(done) == 1:
            return call("worker", {"task": "note it"})
        return "done"

    result = AgentLoop(reg, FunctionModel(boss), tools=["whoami", "worker"]).run("share")
    assert result.status is RunStatus.SUCCESS
    # the parent's call, then the child's; the child's status and payload under its name
    final = {"seen": 2, "worker_status": "success", "worker_result": "noted"}
    assert result.data["state"] == final
    stored = reg.store.get_run_details(reg.tenant, result.run_id)
    assert stored is not None and stored["data"]["state"] == final
    child = reg.store.list_runs(reg.tenant, parent_run_id=result.run_id)[0]
    child_row = reg.store.get_run_details(reg.tenant, child.id)
    assert child_row is not None and child_row["data"]["state"] == {"seen": 2}  # as it ended


def test_recursion_and_depth_are_bounded(reg: Registry) -> None:
    def delegate_to(name: str) -> FunctionModel:
        def decide(messages: list[Message], *_: object) -> object:
            done = _results(messages)
            return call(name, {"task": "deeper"}) if not done else done[0].content

        return FunctionModel(decide)

    register_model("test:a", delegate_to("b"))
    register_model("test:b", delegate_to("a"))
    # Two agents that name each other: the first is registered disabled until the second
    # exists (integrity, issue 28.3), then registered again, which enables it.
    reg.add_agent(AgentSpec(name="a", model="test:a", as_tool=True, tools=["b"]),
                  allow_missing=True)  # fmt: skip
    _agent(reg, "b", "test:b", tools=["a"])
    _agent(reg, "a", "test:a", tools=["b"])
    looped = reg.call("a", {"task": "go"})
    assert looped.success  # the cycle is refused inside, and that refusal is the answer
    assert "agent 'a' would call itself: a -> b -> a" in looped.output

    register_model("test:c", delegate_to("d"))
    register_model("test:d", FunctionModel(lambda *_: "bottom"))
    _agent(reg, "d", "test:d")
    _agent(reg, "c", "test:c", tools=["d"])
    url = reg.settings.url
    shallow = tooldb.open(url, settings=Settings(embedder="hash", url=url, agent_max_depth=1))
    refused = shallow.call("c", {"task": "go"})
    shallow.close()
    assert "agents nested 2 deep (c -> d): the limit is agent_max_depth = 1" in refused.output
    assert reg.call("c", {"task": "go"}).output == "bottom"  # depth 2 <= 3 by default


def test_agent_tools_called_in_one_turn_run_in_parallel(reg: Registry) -> None:
    gauge = Gauge()

    async def slow(messages: list[Message], tools: list[ToolSchema], _: ToolChoice) -> object:
        await gauge.hold_until(2)  # until the other agent's turn is in too
        return f"slow {_task(messages)}"

    register_model("test:slow", FunctionModel(slow))
    _agent(reg, "slowpoke", "test:slow")

    def boss(messages: list[Message], *_: object) -> object:
        done = _results(messages)
        if not done:
            return [call("slowpoke", {"task": "one"}), call("slowpoke", {"task": "two"})]
        return " | ".join(m.content for m in done)

    result = AgentLoop(reg, FunctionModel(boss), tools=["slowpoke"]).run("both")
    assert result.output == "slow one | slow two"
    assert gauge.peak == 2  # both agents' model turns were in flight at once


def test_an_agent_without_a_model_routes(reg: Registry) -> None:
    reg.add_agent(AgentSpec(name="calc", tools=["add"], as_tool=True))
    result = reg.call("calc", {"task": "add 2 and 3"})
    assert result.success and result.output == "5" and result.data["status"] == "success"


def test_bad_definitions(reg: Registry) -> None:
    with pytest.raises(UsageError, match="a python tool has that name"):
        reg.add_agent(AgentSpec(name="add", model="test:worker", as_tool=True))
    with pytest.raises(UsageError, match="non-empty 'task'"):
        from tooldb.agents.orchestrate import _task_text

        _task_text({"task": "  "})


def test_cli_add_agent_as_tool(store_url: str, tmp_path: Path) -> None:
    path = tmp_path / "agent.yaml"
    path.write_text("name: helper\ndescription: Helps with chores.\ntools: [add]\n")
    as_json(store_url, "add", "python", "tests.sample_tools")
    added = as_json(store_url, "add", "agent", str(path), "--as-tool")
    assert added == {"agent": "helper", "changed": True, "as_tool": True}
    listed = {t["name"]: t["kind"] for t in as_json(store_url, "list")["tools"]}
    assert listed["helper"] == "agent"
    called = as_json(store_url, "call", "helper", "--args", '{"task": "add 2 and 3"}')
    assert called["success"] and called["data"]["status"] == "success"
