"""The framework adapters (tooldb.integrations) with the real frameworks, driven by
their own test models: tools selected for the task are offered (a disabled one never),
tooldb's argument error reaches the framework's model and the corrected call runs,
every call is in the call log under a run carrying the task; the docs' and README's
examples run as they are."""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
import warnings
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

import tooldb
from tooldb import NotFound, Registry, Settings, UsageError

from .sample_tools import add, echo

ROOT = Path(__file__).resolve().parent.parent
TASK = "add two integers"


@pytest.fixture
def reg(sqlite_url: str) -> Iterator[Registry]:
    registry = tooldb.open(sqlite_url, settings=Settings(embedder="hash", url=sqlite_url))
    registry.add(add, echo)
    registry.add({"name": "sum_numbers", "description": "Add two integers (retired).",
                  "target": "tests.sample_tools:add",
                  "parameters": {"a": {"type": "int"}, "b": {"type": "int"}}})  # fmt: skip
    registry.disable("sum_numbers")
    yield registry
    registry.close()


def assert_recorded(registry: Registry, run_id: str, task: str, successes: list[bool]) -> None:
    """The calls of ``run_id``, newest first, and its row carrying the task."""
    calls = registry.calls(run_id=run_id)
    assert [c.success for c in calls] == successes
    assert all(c.tool_name == "add" for c in calls)
    run = registry.store.get_run(registry.tenant, run_id)
    assert run is not None and run.task == task


# -- LangChain / LangGraph ---------------------------------------------------------
def langgraph_agent(tools: list[Any], script: list[Any]) -> Any:
    from langchain_core.language_models.fake_chat_models import GenericFakeChatModel
    from langchain_core.messages import AIMessage
    from langgraph.prebuilt import create_react_agent

    class FakeToolCallingModel(GenericFakeChatModel):
        def bind_tools(self, tools: Any, **kwargs: Any) -> Any:
            return self

    messages = [
        step if isinstance(step, str)
        else AIMessage("", tool_calls=[{"name": step[0], "args": step[1], "id": f"c{i}"}])
        for i, step in enumerate(script)
    ]  # fmt: skip
    with warnings.catch_warnings():  # create_react_agent's move to langchain.agents
        warnings.simplefilter("ignore")
        return create_react_agent(FakeToolCallingModel(messages=iter(messages)), tools)


def test_langgraph_agent_corrects_a_call_after_tooldbs_message(reg: Registry) -> None:
    from tooldb.integrations.langchain import as_tools

    tools = as_tools(reg, task=TASK, k=3)
    assert "add" in [t.name for t in tools] and "sum_numbers" not in [t.name for t in tools]
    agent = langgraph_agent(tools, [("add", {"a": "two", "b": 2}), ("add", {"a": 2, "b": 2}), "4"])
    state = agent.invoke(
        {"messages": [("user", "add 2 and 2")]}, {"configurable": {"thread_id": "t-1"}}
    )
    error, result = state["messages"][2], state["messages"][4]
    assert error.status == "error"
    assert error.content == "Error: tool 'add': parameter 'a' expected integer, got string \"two\""
    assert (result.status, result.content) == ("success", "4")
    run_id = tools[0].bridge.run_id("t-1")
    assert_recorded(reg, run_id, TASK, [True, False])
    parent = tools[0].bridge.run_id()
    run = reg.store.get_run(reg.tenant, run_id)
    assert run is not None and run.parent_run_id == parent
    decisions = reg.store.decisions_of_runs(reg.tenant, [parent])  # the selection, above
    assert [d["task"] for d in decisions] == [TASK]
    assert reg.explain(reg.calls(run_id=run_id)[0].id).task == TASK


def test_langgraph_async_calls_without_a_thread_use_the_tools_run(reg: Registry) -> None:
    import asyncio

    from tooldb.integrations.langchain import as_tools

    tools = as_tools(reg, names=["add"])
    agent = langgraph_agent(tools, [("add", {"a": 1, "b": "2"}), "3"])
    state = asyncio.run(agent.ainvoke({"messages": [("user", "1 + 2")]}))
    assert state["messages"][2].content == "3"  # "2" bound losslessly to 2
    assert_recorded(reg, tools[0].bridge.run_id(), "langchain tools: add", [True])


# -- OpenAI Agents SDK ------------------------------------------------------------
class ScriptedAgentsModel:
    """An OpenAI Agents SDK ``Model`` answering from a script (built lazily: the SDK is
    imported only in the tests that use it)."""

    @staticmethod
    def make(script: list[Any]) -> Any:
        from agents import Model, ModelResponse, Usage
        from openai.types.responses import (
            ResponseFunctionToolCall,
            ResponseOutputMessage,
            ResponseOutputText,
        )

        class Scripted(Model):
            def __init__(self) -> None:
                self.steps = iter(script)
                self.outputs: list[str] = []
                self.offered: list[list[str]] = []

            async def get_response(self, system_instructions: Any, input: Any,
                                   model_settings: Any, tools: Any, *args: Any,
                                   **kwargs: Any) -> Any:  # fmt: skip
                self.offered.append([t.name for t in tools])
                if isinstance(input, list) and input[-1].get("type") == "function_call_output":
                    self.outputs.append(input[-1]["output"])
                step = next(self.steps)
                if isinstance(step, str):
                    text = ResponseOutputText(type="output_text", text=step, annotations=[])
                    output: list[Any] = [ResponseOutputMessage(
                        id="m", type="message", role="assistant", status="completed",
                        content=[text])]  # fmt: skip
                else:
                    call_id = f"c{len(self.outputs)}"
                    output = [ResponseFunctionToolCall(
                        id=call_id, call_id=call_id, type="function_call", name=step[0],
                        arguments=json.dumps(step[1]))]  # fmt: skip
                return ModelResponse(output=output, usage=Usage(), response_id=None)

            def stream_response(self, *args: Any, **kwargs: Any) -> Any:
                raise RuntimeError("scripted: no streaming (use Runner.run)")

        return Scripted()


def test_openai_agents_model_reads_tooldbs_message_not_the_sdks(reg: Registry) -> None:
    from agents import Agent, RunConfig, Runner, set_tracing_disabled

    from tooldb.integrations.openai_agents import as_tools

    set_tracing_disabled(True)
    tools = as_tools(reg, task=TASK, k=3)
    script = [("add", {"a": "two", "b": 2}), ("add", {"a": 2, "b": 2}), "4"]
    model = ScriptedAgentsModel.make(script)
    agent = Agent(name="adder", model=model, tools=tools)
    result = Runner.run_sync(agent, "add 2 and 2", run_config=RunConfig(group_id="g-1"))
    assert result.final_output == "4"
    assert "sum_numbers" not in model.offered[0] and "add" in model.offered[0]
    assert model.outputs == [
        "Error: tool 'add': parameter 'a' expected integer, got string \"two\"",
        "4",
    ]
    assert_recorded(reg, tools[0].bridge.run_id("g-1"), TASK, [True, False])


# -- Pydantic AI ------------------------------------------------------------------
def test_pydantic_ai_retry_carries_tooldbs_message(reg: Registry) -> None:
    from pydantic_ai import Agent
    from pydantic_ai.messages import ModelResponse, TextPart, ToolCallPart, ToolReturnPart
    from pydantic_ai.models.function import AgentInfo, FunctionModel

    from tooldb.integrations.pydantic_ai import toolset

    tools = toolset(reg, task=TASK, k=3)
    told: list[tuple[str, str]] = []
    offered: list[list[str]] = []

    def decide(messages: list[Any], info: AgentInfo) -> ModelResponse:
        offered.append([t.name for t in info.function_tools])
        last = messages[-1].parts[-1]
        if isinstance(last, ToolReturnPart):
            told.append((last.outcome, str(last.content)))
            if last.outcome == "success":
                return ModelResponse(parts=[TextPart(f"It is {last.content}.")])
        arguments = {"a": "two" if not told else 2, "b": 2}
        return ModelResponse(parts=[ToolCallPart("add", arguments)])

    result = Agent(FunctionModel(decide), toolsets=[tools]).run_sync("add 2 and 2")
    assert result.output == "It is 4."
    assert told == [
        ("retried", "Error: tool 'add': parameter 'a' expected integer, got string \"two\""),
        ("success", "4"),
    ]
    assert "add" in offered[0] and "sum_numbers" not in offered[0]
    runs = [r for r in reg.store.list_runs(reg.tenant) if r.mode == "pydantic-ai"]
    grouped = [r for r in runs if r.parent_run_id is not None]
    assert len(grouped) == 1 and grouped[0].task == "add 2 and 2"
    assert (grouped[0].status.value, grouped[0].tool_calls) == ("success", 2)  # run ended
    calls = reg.calls(run_id=grouped[0].id)
    assert [c.success for c in calls] == [True, False]


def test_pydantic_ai_test_model_and_dynamic_selection(reg: Registry) -> None:
    from pydantic_ai import Agent
    from pydantic_ai.messages import ModelResponse, TextPart
    from pydantic_ai.models.function import AgentInfo, FunctionModel
    from pydantic_ai.models.test import TestModel

    from tooldb.integrations.pydantic_ai import toolset

    fixed = toolset(reg, names=["add"])
    assert Agent(TestModel(), toolsets=[fixed]).run_sync("add").output == '{"add":"1"}'

    def offered(messages: list[Any], info: AgentInfo) -> ModelResponse:
        return ModelResponse(parts=[TextPart(",".join(t.name for t in info.function_tools))])

    dynamic = toolset(reg, task="echo a text back", k=1, dynamic=True)
    agent = Agent(FunctionModel(offered), toolsets=[dynamic])
    assert agent.run_sync("add two integers").output == "add"
    assert agent.run_sync("echo this text back").output == "echo"
    decisions = reg.store.decisions_of_runs(reg.tenant, [dynamic.bridge.run_id()])
    assert [d["task"] for d in decisions] == ["echo a text back", "add two integers",
                                              "echo this text back"]  # fmt: skip


# -- shared behaviour ---------------------------------------------------------------
@pytest.mark.parametrize("module", ["langchain", "openai_agents"])
def test_named_tools_must_exist_and_be_enabled(reg: Registry, module: str) -> None:
    adapter = __import__(f"tooldb.integrations.{module}", fromlist=["as_tools"])
    with pytest.raises(NotFound, match="sum_numbers"):
        adapter.as_tools(reg, names=["add", "sum_numbers"])
    with pytest.raises(UsageError, match="give a task"):
        adapter.as_tools(reg)
    assert [t.name for t in adapter.as_tools(reg, names=["add"])] == ["add"]


def test_closing_the_tools_finishes_their_runs(reg: Registry) -> None:
    from tooldb.integrations.bridge import ToolBridge

    bridge = ToolBridge(reg, "test", names=["add"])
    assert bridge.call("add", '{"a": 1, "b": 2}').text == "3"
    assert bridge.call("add", "not json").rejected
    reg.disable("add")  # after it was offered: the model is told, nothing runs
    refused = bridge.call("add", {"a": 1})
    assert not refused.ok and "disabled" in refused.text
    reg.enable("add")
    run_id = bridge.run_id()
    assert reg.store.get_run(reg.tenant, run_id).status.value == "running"  # type: ignore[union-attr]
    bridge.close()
    run = reg.store.get_run(reg.tenant, run_id)
    assert run is not None and (run.status.value, run.tool_calls) == ("success", 3)
    assert [c.success for c in reg.calls(run_id=run_id)] == [False, True]


def test_a_bridge_keeps_a_bounded_number_of_keyed_runs_open(
    reg: Registry, monkeypatch: pytest.MonkeyPatch
) -> None:
    from tooldb.integrations import bridge as bridge_module

    monkeypatch.setattr(bridge_module, "MAX_OPEN_RUNS", 2)
    bridge = bridge_module.ToolBridge(reg, "test", task=TASK, k=1)
    first = bridge.run_id("thread-1")
    bridge.call("add", {"a": 1}, key="thread-1")
    bridge.run_id("thread-2")  # the bridge's own run and two threads: thread-1 ends
    run = reg.store.get_run(reg.tenant, first)
    assert run is not None and (run.status.value, run.tool_calls) == ("success", 1)
    assert bridge.run_id("thread-1") != first  # a new run for the returning thread
    own = reg.store.get_run(reg.tenant, bridge.run_id())
    assert own is not None and own.status.value == "running"


@pytest.mark.parametrize(
    ("module", "framework", "extra"),
    [("langchain", "langchain_core", "langchain"), ("openai_agents", "agents", "openai-agents"),
     ("pydantic_ai", "pydantic_ai", "pydantic-ai")],
)  # fmt: skip
def test_a_missing_framework_names_its_extra(module: str, framework: str, extra: str) -> None:
    script = (
        f"import sys; sys.modules[{framework!r}] = None\n"
        f"try:\n    import tooldb.integrations.{module}\n"
        "except ImportError as exc:\n    print(exc)\n"
    )
    out = subprocess.run(
        [sys.executable, "-c", script], capture_output=True, text=True, check=True, env=_env()
    ).stdout
    assert f"pip install 'tooldb[{extra}]'" in out


# -- the documented examples -----------------------------------------------------------
def _env(tmp: Path | None = None) -> dict[str, str]:
    env = {**os.environ, "PYTHONPATH": str(ROOT / "src") + os.pathsep + str(ROOT)}
    if tmp is not None:
        env["TOOLDB_URL"] = f"sqlite:///{tmp / 'registry.db'}"
    return env


def _blocks(path: Path, start: str = "", end: str = "") -> list[str]:
    text = path.read_text(encoding="utf-8")
    if start:
        text = text[text.index(start) : text.index(end, text.index(start))]
    return re.findall(r"```python\n(.*?)```", text, re.S)


DOC_EXAMPLES = _blocks(ROOT / "docs" / "integrations.md")


@pytest.mark.parametrize("example", DOC_EXAMPLES, ids=["langgraph", "openai-agents", "pydantic-ai"])
def test_the_docs_examples_run_offline(example: str, tmp_path: Path) -> None:
    run = subprocess.run(
        [sys.executable, "-W", "ignore", "-c", example],
        capture_output=True, text=True, env=_env(tmp_path), timeout=300,
    )  # fmt: skip
    assert run.returncode == 0, run.stderr[-3000:]
    assert "212" in run.stdout


def test_the_readme_framework_examples_run_verbatim(tmp_path: Path) -> None:
    readme = ROOT / "README.md"
    api = _blocks(readme, "## Python API", "\n## ")[0]
    examples = _blocks(readme, "### tooldb under your agent framework", "\n## ")
    assert len(examples) == 3
    script = "\n".join([api, *examples])
    run = subprocess.run(
        [sys.executable, "-W", "ignore", "-c", script],
        capture_output=True, text=True, env=_env(tmp_path), timeout=300,
    )  # fmt: skip
    assert run.returncode == 0, run.stderr[-3000:]
    assert "HI" in run.stdout
