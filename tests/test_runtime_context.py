"""Parameters the runtime fills (issue 28.5): declared with ``x-tooldb-context`` in a
schema or ``Runtime(...)`` on a Python parameter; hidden from the model and from MCP
clients; filled (whatever the caller sent) on every path: call, call_many, the agent
loop, the router, the MCP server; recorded with the call."""

from __future__ import annotations

from typing import Any

import pytest

from tooldb import ArgumentError, DefinitionError, Registry, Runtime, use_session
from tooldb.agents import AgentLoop
from tooldb.binding.runtime import visible_schema
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
