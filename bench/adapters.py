"""What tooldb's framework adapters (tooldb.integrations) add per call, in each framework.

    .venv/bin/python bench/adapters.py [--rounds 7] [--calls 2000] [--db URL]

Per framework, the same function ``add(a: int, b: int) -> int`` registered natively in
the framework (LangChain ``StructuredTool``, OpenAI Agents ``function_tool``, Pydantic
AI ``Tool``) and through tooldb's adapter (bound, run and recorded by tooldb, on a
SQLite file by default):

- **call**: one tool call through the framework's own invocation path, no model
  (LangChain ``tool.invoke`` of a tool call, as ``ToolNode`` does; the Agents SDK's
  ``on_invoke_tool``; Pydantic AI's toolset ``call_tool``): median µs per call;
- **S1**: the peers' scenario (../shared/bench-peers): a scripted O(1) model makes one
  ``add`` call per turn for 100 turns, then answers, through the framework's agent
  (LangGraph ``create_react_agent``, ``Runner.run``, ``Agent.run``): median µs/turn of
  wall time and of the process's CPU time (less moved by other processes' load).

Native and adapter alternate (blocks of calls; S1 runs in pairs, the order swapped each
round) so machine drift lands on both. The difference of the call medians is the
adapter's cost per call (target: at most 150 µs with every call recorded); S1's is the
median of the paired differences, which a loaded machine's noise can swamp (a turn
costs the framework 50-500 times what a call does). Every adapter call is checked to be
in tooldb's call log.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import statistics
import sys
import tempfile
import time
import warnings
from collections.abc import Callable
from pathlib import Path
from typing import Any

os.environ.setdefault("OPENAI_AGENTS_DISABLE_TRACING", "1")
for key in ("LANGSMITH_TRACING", "LANGCHAIN_TRACING_V2"):
    os.environ.pop(key, None)
warnings.filterwarnings("ignore")

import tooldb  # noqa: E402
from tooldb import Registry, Settings  # noqa: E402

TURNS = 100
TARGET_US = 150.0


def add(a: int, b: int) -> int:
    """Add two integers."""
    return a + b


def script(turns: int) -> list[Any]:
    """The model's turns: ``turns`` calls of add, then the answer."""
    return [("add", {"a": i, "b": 1}) for i in range(turns)] + ["done"]


# -- LangChain / LangGraph -----------------------------------------------------------
class LangGraph:
    name = "LangGraph (create_react_agent)"

    def __init__(self, registry: Registry) -> None:
        from langchain_core.tools import StructuredTool

        from tooldb.integrations.langchain import as_tools

        self.native = StructuredTool.from_function(add)
        self.adapter = as_tools(registry, names=["add"])[0]
        self.config = {"recursion_limit": 10_000, "configurable": {"thread_id": "bench"}}
        self.call_input = {"name": "add", "args": {"a": 1, "b": 2}, "id": "c", "type": "tool_call"}

    def call(self, tool: Any, n: int) -> list[float]:
        times = []
        for _ in range(n):
            start = time.perf_counter()
            tool.invoke(self.call_input, self.config)
            times.append(time.perf_counter() - start)
        return times

    def s1(self, tool: Any, turns: int) -> tuple[float, float]:
        from langchain_core.language_models.chat_models import BaseChatModel
        from langchain_core.messages import AIMessage
        from langchain_core.outputs import ChatGeneration, ChatResult
        from langchain_core.utils.function_calling import convert_to_openai_tool
        from langgraph.prebuilt import create_react_agent

        steps = script(turns)

        class Scripted(BaseChatModel):
            turn: int = 0

            @property
            def _llm_type(self) -> str:
                return "scripted"

            def bind_tools(self, tools: Any, **kwargs: Any) -> Any:
                return self.bind(tools=[convert_to_openai_tool(t) for t in tools], **kwargs)

            def _generate(self, messages: Any, stop: Any = None, run_manager: Any = None,
                          **kwargs: Any) -> ChatResult:  # fmt: skip
                step = steps[self.turn]
                self.turn += 1
                message = (
                    AIMessage(content=step) if isinstance(step, str)
                    else AIMessage("", tool_calls=[{"name": step[0], "args": step[1],
                                                    "id": f"c{self.turn}"}])
                )  # fmt: skip
                return ChatResult(generations=[ChatGeneration(message=message)])

            async def _agenerate(self, *args: Any, **kwargs: Any) -> ChatResult:
                return self._generate(*args, **kwargs)

        agent = create_react_agent(Scripted(), [tool])
        start, cpu = time.perf_counter(), time.process_time()
        state = asyncio.run(agent.ainvoke({"messages": [("user", "go")]}, self.config))
        elapsed = (time.perf_counter() - start, time.process_time() - cpu)
        assert state["messages"][-1].content == "done"
        return elapsed


# -- OpenAI Agents SDK --------------------------------------------------------------
class OpenAIAgents:
    name = "OpenAI Agents SDK (Runner.run)"

    def __init__(self, registry: Registry) -> None:
        from agents import RunConfig, function_tool, set_tracing_disabled

        from tooldb.integrations.openai_agents import as_tools

        set_tracing_disabled(True)
        self.native = function_tool(add)
        self.adapter = as_tools(registry, names=["add"])[0]
        self.run_config = RunConfig(tracing_disabled=True, group_id="bench")

    def call(self, tool: Any, n: int) -> list[float]:
        from agents import RunContextWrapper
        from agents.tool_context import ToolContext

        arguments = json.dumps({"a": 1, "b": 2})
        context = ToolContext.from_agent_context(
            RunContextWrapper(None), "c", tool_name="add", tool_arguments=arguments,
            run_config=self.run_config,
        )  # fmt: skip

        async def many() -> list[float]:
            times = []
            for _ in range(n):
                start = time.perf_counter()
                await tool.on_invoke_tool(context, arguments)
                times.append(time.perf_counter() - start)
            return times

        return asyncio.run(many())

    def s1(self, tool: Any, turns: int) -> tuple[float, float]:
        from agents import Agent, Model, ModelResponse, Runner, Usage
        from openai.types.responses import (
            ResponseFunctionToolCall,
            ResponseOutputMessage,
            ResponseOutputText,
        )

        steps = iter(script(turns))

        class Scripted(Model):
            turn = 0

            async def get_response(self, *args: Any, **kwargs: Any) -> ModelResponse:
                step = next(steps)
                self.turn += 1
                output: list[Any]
                if isinstance(step, str):
                    text = ResponseOutputText(type="output_text", text=step, annotations=[])
                    output = [
                        ResponseOutputMessage(
                            id="m",
                            type="message",
                            role="assistant",
                            status="completed",
                            content=[text],
                        )
                    ]
                else:
                    output = [
                        ResponseFunctionToolCall(
                            id=f"f{self.turn}",
                            call_id=f"c{self.turn}",
                            type="function_call",
                            name=step[0],
                            arguments=json.dumps(step[1]),
                            status="completed",
                        )
                    ]
                return ModelResponse(output=output, usage=Usage(requests=1), response_id=None)

            def stream_response(self, *args: Any, **kwargs: Any) -> Any:
                raise RuntimeError("scripted: no streaming (use Runner.run)")

        agent = Agent(name="bench", instructions="bench", model=Scripted(), tools=[tool])
        start, cpu = time.perf_counter(), time.process_time()
        result = asyncio.run(
            Runner.run(agent, "go", max_turns=turns + 10, run_config=self.run_config)
        )
        elapsed = (time.perf_counter() - start, time.process_time() - cpu)
        assert result.final_output == "done"
        return elapsed


# -- Pydantic AI --------------------------------------------------------------------
class PydanticAI:
    name = "Pydantic AI (Agent.run)"

    def __init__(self, registry: Registry) -> None:
        from pydantic_ai import Tool
        from pydantic_ai.toolsets import FunctionToolset

        from tooldb.integrations.pydantic_ai import toolset

        self.native = FunctionToolset([Tool(add, takes_ctx=False)])
        self.adapter = toolset(registry, names=["add"])

    def call(self, toolset: Any, n: int) -> list[float]:
        from pydantic_ai import RunContext
        from pydantic_ai.models.test import TestModel
        from pydantic_ai.usage import RunUsage

        context = RunContext(deps=None, model=TestModel(), usage=RunUsage(), prompt="bench",
                             run_id="bench")  # fmt: skip

        async def many() -> list[float]:
            tool = (await toolset.get_tools(context))["add"]
            times = []
            for _ in range(n):
                start = time.perf_counter()
                arguments = tool.args_validator.validate_python({"a": 1, "b": 2})
                await toolset.call_tool("add", arguments, context, tool)
                times.append(time.perf_counter() - start)
            return times

        return asyncio.run(many())

    def s1(self, toolset: Any, turns: int) -> float:
        from pydantic_ai import Agent
        from pydantic_ai.messages import ModelResponse, TextPart, ToolCallPart
        from pydantic_ai.models.function import FunctionModel
        from pydantic_ai.usage import RequestUsage, UsageLimits

        steps = iter(script(turns))
        usage = RequestUsage(input_tokens=1, output_tokens=1)
        turn = iter(range(10**9))

        async def decide(messages: Any, info: Any) -> ModelResponse:
            step = next(steps)
            if isinstance(step, str):
                return ModelResponse(parts=[TextPart(step)], usage=usage)
            call = ToolCallPart(step[0], json.dumps(step[1]), tool_call_id=f"c{next(turn)}")
            return ModelResponse(parts=[call], usage=usage)

        agent = Agent(FunctionModel(decide), toolsets=[toolset])
        limits = UsageLimits(request_limit=None, tool_calls_limit=None)
        start, cpu = time.perf_counter(), time.process_time()
        result = asyncio.run(agent.run("go", usage_limits=limits))
        elapsed = (time.perf_counter() - start, time.process_time() - cpu)
        assert result.output == "done"
        return elapsed


FRAMEWORKS: dict[str, Callable[[Registry], Any]] = {
    "langgraph": LangGraph,
    "openai-agents": OpenAIAgents,
    "pydantic-ai": PydanticAI,
}


def median_us(values: list[float], per: int = 1) -> float:
    return statistics.median(values) / per * 1e6


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--rounds", type=int, default=7, help="S1 runs per framework and side")
    parser.add_argument("--calls", type=int, default=2000, help="direct calls per side")
    parser.add_argument("--db", default=None, help="store URL (default: a fresh SQLite file)")
    parser.add_argument("--only", choices=sorted(FRAMEWORKS), action="append")
    args = parser.parse_args()
    url = args.db or f"sqlite:///{Path(tempfile.mkdtemp()) / 'bench.db'}"
    registry = tooldb.open(url, settings=Settings(url=url, embedder="hash"))
    registry.add(add)
    rows = []
    for key in args.only or FRAMEWORKS:
        framework = FRAMEWORKS[key](registry)
        before = len(registry.calls(tool="add", limit=10**9))
        native_calls: list[float] = []
        adapter_calls: list[float] = []
        native_s1: list[tuple[float, float]] = []
        adapter_s1: list[tuple[float, float]] = []
        framework.call(framework.native, 200)  # warm up both paths
        framework.call(framework.adapter, 200)
        framework.s1(framework.native, 5)
        framework.s1(framework.adapter, 5)
        block = max(1, args.calls // 10)
        for _ in range(10):  # alternating blocks: drift lands on both sides
            native_calls += framework.call(framework.native, block)
            adapter_calls += framework.call(framework.adapter, block)
        for round_ in range(args.rounds):  # pairs, the order swapped every round
            sides = [(framework.native, native_s1), (framework.adapter, adapter_s1)]
            for tool, times in sides if round_ % 2 == 0 else sides[::-1]:
                times.append(framework.s1(tool, TURNS))
        recorded = len(registry.calls(tool="add", limit=10**9)) - before
        expected = 200 + 5 + block * 10 + TURNS * args.rounds
        call_native, call_adapter = median_us(native_calls), median_us(adapter_calls)
        s1 = []
        for side in (0, 1):  # wall time, then CPU time (the process's, all its threads)
            native = [run[side] for run in native_s1]
            adapter = [run[side] for run in adapter_s1]
            paired = [a - n for n, a in zip(native, adapter, strict=True)]
            s1 += [median_us(native, TURNS), median_us(adapter, TURNS), median_us(paired, TURNS)]
        rows.append((framework.name, call_native, call_adapter, *s1, f"{recorded}/{expected}"))
    header = (
        "| framework | call native µs | call tooldb µs | added µs | S1 native µs/turn "
        "| S1 tooldb µs/turn | S1 added (paired) | S1 CPU native | S1 CPU tooldb "
        "| S1 CPU added (paired) | calls recorded |"
    )
    print(header)
    print("|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|")
    for name, cn, ca, *s1, recorded in rows:
        cells = " | ".join(f"{v:+,.0f}" if i % 3 == 2 else f"{v:,.0f}" for i, v in enumerate(s1))
        print(f"| {name} | {cn:,.0f} | {ca:,.0f} | {ca - cn:+,.0f} | {cells} | {recorded} |")
    worst = max(r[2] - r[1] for r in rows)
    verdict = "met" if worst <= TARGET_US else "missed"
    print(f"\nworst added cost of a call {worst:,.0f} µs: target {TARGET_US:.0f} µs {verdict}")
    print(f"(python {sys.version.split()[0]}, {url.split(':')[0]}, load {os.getloadavg()[0]:.1f})")
    registry.close()


if __name__ == "__main__":
    main()
