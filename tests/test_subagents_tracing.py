"""Sub-agents (child runs, in parallel, recorded with their parent) and OpenTelemetry spans."""

from __future__ import annotations

import json

import pytest
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

import tests.sample_tools as st
from tests.overlap import GAUGE, overlap
from tooldb import Registry
from tooldb.agents import AgentLoop
from tooldb.agents.tracing import Tracer
from tooldb.models import FunctionModel, Message, ModelTurn, ScriptedModel, ToolSchema, call
from tooldb.models.base import ToolChoice
from tooldb.types import RunStatus


@pytest.fixture
def reg(registry: Registry) -> Registry:
    registry.add(st.add, st.echo, st.sleep_async, st.whoami, overlap)
    return registry


def delegating_model() -> FunctionModel:
    """The parent delegates two sub-tasks in one turn; each child waits for the other
    (the ``overlap`` gauge), asks who it is, and answers; the parent then summarises."""

    def decide(messages: list[Message], tools: list[ToolSchema], _: ToolChoice) -> object:
        task = messages[0].content if messages[0].role == "user" else messages[1].content
        done = [m for m in messages if m.role == "tool"]
        if task.startswith("sub:"):
            if not done:
                return [call("overlap", {"expected": 2}), call("whoami", {"note": task})]
            return f"child done: {task}"
        if not done:
            return [
                call("subagent", {"task": "sub: one", "tools": ["overlap", "whoami"]}),
                call("subagent", {"task": "sub: two", "tools": ["overlap", "whoami"]}),
            ]
        return " | ".join(m.content for m in done)

    return FunctionModel(decide)


def test_subagents_run_in_parallel_and_record_their_parent(reg: Registry) -> None:
    GAUGE.__init__()
    loop = AgentLoop(reg, delegating_model(), tools=["overlap", "whoami"], subagents=True)
    result = loop.run("do two things")
    assert result.status is RunStatus.SUCCESS
    assert result.output == "child done: sub: one | child done: sub: two"
    assert GAUGE.peak == 2  # both children were inside their tool at once: side by side
    children = reg.store.list_runs(reg.tenant, parent_run_id=result.run_id)
    assert len(children) == 2 and all(c.status is RunStatus.SUCCESS for c in children)
    # the children's tools saw they are sub-agents of this run, and shared its state
    seen = [json.loads(text) for c in children for text in _uses(reg, c.id) if text]
    assert len(seen) == 2
    assert all(s["is_subagent"] and s["parent"] == result.run_id for s in seen)
    # children cannot start sub-agents of their own
    child_messages = reg.store.run_messages(children[0].id)
    assert child_messages[0]["role"] == "user"


def _uses(reg: Registry, run_id: str) -> list[str | None]:
    return [c.output_preview for c in reg.calls(run_id=run_id, tool="whoami")]


def test_a_subagent_may_only_use_the_parents_tools(reg: Registry) -> None:
    model = ScriptedModel([call("subagent", {"task": "sneak", "tools": ["add"]}), "ok"])
    result = AgentLoop(reg, model, tools=["echo"], subagents=True).run("x")
    assert "not offered: ['add']" in (result.tool_calls[0].error or "")


def test_spans_follow_the_genai_conventions(reg: Registry) -> None:
    exporter = InMemorySpanExporter()
    provider = TracerProvider()
    provider.add_span_processor(SimpleSpanProcessor(exporter))
    tracer = Tracer(provider.get_tracer("test"))
    model = ScriptedModel([[call("add", {"a": 1}, id="c1"), call("echo", {})], "done"])
    result = AgentLoop(reg, model, tools=["add", "echo"], tracer=tracer).run("trace me")
    spans = {span.name: span for span in exporter.get_finished_spans()}
    run = spans["invoke_agent tooldb"]
    assert run.attributes is not None
    assert run.attributes["gen_ai.operation.name"] == "invoke_agent"
    assert run.attributes["gen_ai.conversation.id"] == result.run_id
    assert run.attributes["gen_ai.usage.input_tokens"] == 20
    chat = spans["chat scripted"]
    assert chat.attributes is not None and chat.attributes["gen_ai.operation.name"] == "chat"
    assert chat.attributes["gen_ai.usage.output_tokens"] == 5
    tool = spans["execute_tool add"]
    assert tool.attributes is not None and tool.attributes["gen_ai.tool.call.id"] == "c1"
    assert tool.parent is not None and tool.parent.span_id == run.context.span_id
    failed = spans["execute_tool echo"]
    assert failed.status.status_code.name == "ERROR"


def test_tracing_is_a_no_op_without_a_provider(reg: Registry) -> None:
    result = AgentLoop(reg, ScriptedModel(["hi"]), tools=["add"]).run("x")
    assert result.status is RunStatus.SUCCESS


def test_hostile_model_output_never_escapes_as_an_exception(reg: Registry) -> None:
    def chaos(messages: list[Message], *_: object) -> ModelTurn:
        n = len(messages)
        turns = [
            ModelTurn(tool_calls=[call("", "")]),
            ModelTurn(tool_calls=[call("add", "null")]),
            ModelTurn(tool_calls=[call("add", '{"a": 1e999}')]),
            ModelTurn(tool_calls=[call("echo", {"text": "\x00" * 10 + "\ud800"})]),
        ]
        return turns[n % len(turns)]

    result = AgentLoop(reg, FunctionModel(chaos), tools=["add", "echo"]).run("chaos")
    assert result.status is RunStatus.PARTIAL and result.requires_review
    assert reg.store.get_run(reg.tenant, result.run_id) is not None
    assert len(reg.store.run_messages(result.run_id)) > 3


GLOBAL_PROVIDER_SCRIPT = """
import sys
import tooldb
from opentelemetry import trace
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter
from tooldb.agents import AgentLoop
from tooldb.models import ScriptedModel, call
import tests.sample_tools as st

reg = tooldb.open(sys.argv[1])
reg.add(st.add)
loop = AgentLoop(reg, ScriptedModel([call("add", {"a": 1}), "done"]), tools=["add"])
loop.run("before a provider")  # the API's no-op tracer: nothing to export, nothing built
exporter = InMemorySpanExporter()
provider = TracerProvider()
provider.add_span_processor(SimpleSpanProcessor(exporter))
trace.set_tracer_provider(provider)  # installed after the loop was built
loop.model = ScriptedModel([call("add", {"a": 1}), "done"])
loop.run("after")
print(sorted(span.name for span in exporter.get_finished_spans()))
"""


def test_the_default_tracer_follows_a_provider_installed_later(sqlite_url: str) -> None:
    """Without a provider the loop builds no spans; the application may install one at
    any time (a process-wide setting, hence the subprocess)."""
    import subprocess
    import sys

    done = subprocess.run(
        [sys.executable, "-c", GLOBAL_PROVIDER_SCRIPT, sqlite_url],
        capture_output=True,
        text=True,
        timeout=60,
        check=True,
    )
    assert (
        done.stdout.strip() == "['chat scripted', 'chat scripted', 'execute_tool add', "
        "'invoke_agent tooldb']"
    )
