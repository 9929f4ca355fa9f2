"""Parameters the runtime fills (issue 28.5): declared with ``x-tooldb-context`` in a
schema or ``Runtime(...)`` on a Python parameter; hidden from the model and from MCP
clients; filled (whatever the caller sent) on every path: call, call_many, the agent
loop, the router, the MCP server; recorded with the call."""

from __future__ import annotations

import re
from typing import Any

import pytest

from tooldb import ArgumentError, DefinitionError, LoopContext, Registry, Runtime, use_session
from tooldb.agents import AgentLoop
from tooldb.binding.binder import Binder
from tooldb.binding.runtime import runtime_parameters, visible_schema
from tooldb.context import use_context
from tooldb.mcp.server import RegistryTools
from tooldb.models import FunctionModel, Message, ScriptedModel, ToolChoice, ToolSchema, call


@pytest.fixture
def reg(registry: Registry) -> Registry:
    registry.add_module("tests.runtime_tools")
    return registry


def test_the_schema_marks_them_and_the_model_never_sees_them(reg: Registry) -> None:
    schema = reg.get("note_thought").spec.parameters
    assert schema["properties"]["run_id"]["x-tooldb-context"] == "run_id"
    assert schema["properties"]["session"]["x-tooldb-context"] == "session_id"
    assert set(visible_schema(schema)["properties"]) == {"thought"}
    required = reg.get("needs_a_run").spec.parameters["required"]
    assert (
        required == ["run_id"]
        and visible_schema(reg.get("needs_a_run").spec.parameters)["required"] == []
    )
    offered: list[ToolSchema] = []

    def decide(messages: list[Message], tools: list[ToolSchema], _: ToolChoice) -> object:
        offered.extend(tools)
        done = [m for m in messages if m.role == "tool"]
        return "ok" if done else call("note_thought", {"thought": "x", "run_id": "forged"})

    result = AgentLoop(reg, FunctionModel(decide), tools=["note_thought"]).run("think")
    (shown,) = [t for t in offered if t.name == "note_thought"][:1]
    assert set(shown.parameters["properties"]) == {"thought"}
    (use,) = result.tool_calls
    assert use.success
    (recorded,) = reg.calls(run_id=result.run_id)
    assert recorded.arguments["run_id"] == result.run_id  # not "forged": filled, recorded
    assert recorded.arguments["session"] == result.run_id  # a run is its own session
    assert recorded.arguments["tenant"] == reg.tenant


def test_outside_a_run(reg: Registry) -> None:
    result = reg.call("note_thought", {"thought": "alone", "tenant": "someone-else"})
    assert result.success
    assert result.data["tenant"] == reg.tenant and result.data["run_id"] is None
    assert result.data["session"].startswith("call-")  # a call of its own is a session
    with use_session("chat-42"):
        assert reg.call("note_thought", {"thought": "in a chat"}).data["session"] == "chat-42"
    with pytest.raises(
        ArgumentError, match=r"'run_id' is filled by the runtime .*not part of a run"
    ):
        reg.call("needs_a_run", {})
    other = reg.for_tenant("other")
    other.add_module("tests.runtime_tools")
    assert other.call("note_thought", {"thought": "t"}).data["tenant"] == "other"


def test_call_many_and_the_router_fill_them(reg: Registry) -> None:
    requests = [("note_thought", {"thought": "a"}), ("note_thought", {"thought": "b"})]
    results = reg.call_many(requests, run_id="batch-1")
    assert all(r.success and r.data["tenant"] == reg.tenant for r in results)
    routed = reg.run('note the thought "the sky is blue"')
    assert routed.mode == "router"
    assert routed.status.value == "success", routed.error
    (recorded,) = reg.calls(run_id=routed.run_id)
    assert recorded.arguments["run_id"] == routed.run_id
    assert recorded.arguments["session"] == routed.run_id


def test_mcp_clients_see_the_schema_without_them(reg: Registry) -> None:
    tools = {t.name: t for t in RegistryTools(reg).list_tools()}
    schema: dict[str, Any] = tools["note_thought"].input_schema
    assert set(schema["properties"]) == {"thought"}
    result = RegistryTools(reg).call_tool("note_thought", {"thought": "via mcp"})
    assert not result.is_error
    (recorded,) = reg.calls(tool="note_thought")
    assert recorded.arguments["tenant"] == reg.tenant


def test_any_kind_of_tool_may_declare_them_and_bad_fields_are_refused(reg: Registry) -> None:
    reg.add(
        {
            "name": "session_echo",
            "kind": "script",
            "target": "def main(text, sessionId):\n"
            "    return {'text': text, 'session': sessionId}\n",
            "parameters": {
                "type": "object",
                "properties": {
                    "text": {"type": "string"},
                    "sessionId": {"type": "string", "x-tooldb-context": "session_id"},
                },
                "required": ["text", "sessionId"],
            },
        }
    )
    with use_session("s-1"):
        result = reg.call("session_echo", {"text": "hi"})
    assert result.success, result.error
    assert result.data == {"text": "hi", "session": "s-1"}
    with pytest.raises(DefinitionError, match="x-tooldb-context must be one of run_id"):
        reg.add({"name": "bad", "kind": "python", "target": "tests.sample_tools:echo",
                 "parameters": {"type": "object", "properties": {
                     "text": {"type": "string", "x-tooldb-context": "password"}}}})  # fmt: skip
    with pytest.raises(DefinitionError, match="the runtime fills run_id"):
        Runtime("password")
    assert ScriptedModel  # the module's test models are used above


def test_a_runs_context_wins_over_the_callers_run_id(reg: Registry) -> None:
    """Promise: inside an agent run, every field comes from its LoopContext (the run,
    the agent, the iteration, the parent run), whatever the caller or model sent."""
    inside = LoopContext(
        run_id="run-7", iteration=3, agent="planner", parent_run_id="run-1", is_subagent=True
    )
    sent = {"run_id": "forged", "agent": "forged", "iteration": 99, "parent_run_id": "forged"}
    with use_context(inside):
        result = reg.call("where_am_i", sent, run_id="the-callers-run")
    assert result.success, result.error
    assert result.data == {"run_id": "run-7", "agent": "planner", "iteration": 3,
                           "parent": "run-1"}  # fmt: skip


def test_outside_a_run_what_was_sent_for_a_run_only_field_is_dropped(reg: Registry) -> None:
    """Promise: a model or user never sets a runtime parameter; outside a run the
    run-only fields have no value, so what was sent is removed, not passed on."""
    sent = {"agent": "forged", "iteration": 5, "parent_run_id": "forged"}
    result = reg.call("where_am_i", sent, run_id="batch-9")
    assert result.success, result.error
    assert result.data == {"run_id": "batch-9", "agent": None, "iteration": None,
                           "parent": None}  # fmt: skip
    first = reg.call("note_thought", {"thought": "a"}).data["session"]
    second = reg.call("note_thought", {"thought": "b"}).data["session"]
    assert re.fullmatch(r"call-[0-9a-f]{12}", first) and first != second


def test_the_errors_name_the_fields_and_why_there_is_no_value() -> None:
    """Promise: a clear error for an unknown field (listing the ones that exist) and
    for a required parameter with no value (outside a run, or none set)."""
    fields = "run_id, session_id, tenant, agent, iteration, parent_run_id"
    with pytest.raises(DefinitionError, match=re.escape(f"the runtime fills {fields}") + "$"):
        Runtime("password")
    bad = {"properties": {"p": {"x-tooldb-context": "password"}}}
    with pytest.raises(DefinitionError, match=re.escape(f"one of {fields}, got 'password'")):
        runtime_parameters(bad)
    assert visible_schema({"type": "object"}) == {"type": "object"}  # no properties at all
    schema = {
        "type": "object",
        "properties": {
            "tenant": {"type": "string", "x-tooldb-context": "tenant"},
            "run": {"type": "string", "x-tooldb-context": "run_id"},
        },
        "required": ["tenant"],
    }
    with pytest.raises(ArgumentError) as no_tenant:
        Binder("t", schema).bind({})
    assert str(no_tenant.value).endswith("(x-tooldb-context: tenant), and none is set")
    schema["required"] = ["run"]
    with pytest.raises(ArgumentError) as no_run:
        Binder("t", schema).bind({}, tenant="acme")
    assert str(no_run.value).endswith(
        "(x-tooldb-context: run_id), and this call is not part of a run"
    )
