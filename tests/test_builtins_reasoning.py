"""Built-in reasoning strategies on the registry's configured model (a FunctionModel
registered under a model name), each request a recorded sub-run with its tokens."""

from __future__ import annotations

import itertools
from collections.abc import Iterator
from typing import Any

import pytest

import tooldb
from tooldb import Registry, Settings
from tooldb.builtins import add_builtins
from tooldb.models import (
    FunctionModel,
    Message,
    ModelTurn,
    ScriptedModel,
    ToolCall,
    Usage,
    register_model,
    unregister_model,
)

MODEL = "test:reasoner"


def system_and_user(messages: list[Message]) -> tuple[str, str]:
    system = next((m.content or "" for m in messages if m.role == "system"), "")
    user = next((m.content or "" for m in messages if m.role == "user"), "")
    return system, user


@pytest.fixture
def reasoning(sqlite_url: str) -> Iterator[Registry]:
    settings = Settings(embedder="hash", url=sqlite_url, model=MODEL)
    with tooldb.open(sqlite_url, settings=settings) as registry:
        add_builtins(registry, ["reasoning"])
        yield registry
    unregister_model(MODEL)


def ok(registry: Registry, tool: str, arguments: dict[str, Any]) -> Any:
    result = registry.call(tool, arguments)
    assert result.success, result.error
    return result.data


def test_chain_of_thought_is_a_recorded_sub_run(reasoning: Registry) -> None:
    def answer(messages: list[Message], *_: Any) -> ModelTurn:
        system, user = system_and_user(messages)
        assert "step by step" in system and "17 * 3" in user
        return ModelTurn(
            text="17 * 3 = 51.\nAnswer: 51", usage=Usage(input_tokens=40, output_tokens=9)
        )

    register_model(MODEL, FunctionModel(answer))
    found = ok(reasoning, "chain_of_thought", {"question": "What is 17 * 3?"})
    assert found["answer"] == "51" and len(found["sub_runs"]) == 1
    run = reasoning.store.get_run(reasoning.tenant, found["sub_runs"][0])
    assert run is not None and run.status.value == "success" and run.model == "test:function"
    assert (found["input_tokens"], found["output_tokens"]) == (run.input_tokens, run.output_tokens)
    assert (run.input_tokens, run.output_tokens) == (40, 9)


def test_self_consistency_takes_the_majority(reasoning: Registry) -> None:
    answers = itertools.cycle(["Answer: 12", "Answer: 12.", "Answer: 13"])
    register_model(MODEL, FunctionModel(lambda *_: next(answers)))
    found = ok(reasoning, "self_consistency", {"question": "How many?", "n": 3})
    assert found["answer"] == "12" and found["agreement"] == pytest.approx(0.667)
    assert len(found["sub_runs"]) == 3
    assert "'n'" in reasoning.call("self_consistency", {"question": "q", "n": 50}).error  # type: ignore[operator]


def test_tree_of_thought_keeps_the_best_scored_path(reasoning: Registry) -> None:
    def decide(messages: list[Message], *_: Any) -> str:
        system, user = system_and_user(messages)
        if system.startswith("Propose"):
            return "1. try brute force\n2. use the formula n(n+1)/2"
        if system.startswith("Rate"):
            return "1: 3\n2: 9"
        assert "use the formula" in user
        return "By the formula, 5050.\nAnswer: 5050"

    register_model(MODEL, FunctionModel(decide))
    found = ok(reasoning, "tree_of_thought", {"question": "Sum 1..100", "breadth": 2, "depth": 1})
    assert found["answer"] == "5050" and found["path"] == ["use the formula n(n+1)/2"]
    assert found["score"] == 9 and len(found["sub_runs"]) == 3


def test_reflexion_drafts_critiques_and_revises(reasoning: Registry) -> None:
    register_model(MODEL, ScriptedModel(["draft with a typo", "fix the typo", "clean draft",
                                         "NO ISSUES"]))  # fmt: skip
    found = ok(reasoning, "reflexion", {"task": "Write a line", "rounds": 3})
    assert found["answer"] == "clean draft"
    assert found["drafts"] == ["draft with a typo", "clean draft"]
    assert found["critiques"] == ["fix the typo", "NO ISSUES"]


def test_reasoning_without_a_model_says_so(sqlite_url: str) -> None:
    with tooldb.open(sqlite_url, settings=Settings(embedder="hash", url=sqlite_url)) as registry:
        add_builtins(registry, ["reasoning"])
        result = registry.call("chain_of_thought", {"question": "q"})
    assert not result.success and "none is configured" in (result.error or "")


def test_reasoning_inside_an_agent_run_is_a_child_run(reasoning: Registry) -> None:
    register_model(MODEL, FunctionModel(lambda *_: "Answer: 4"))
    agent = ScriptedModel([ToolCall(id="c1", name="chain_of_thought",
                                    arguments={"question": "2 + 2?"}), "It is 4."])  # fmt: skip
    result = tooldb.AgentLoop(reasoning, agent, tools=["chain_of_thought"]).run("add 2 and 2")
    assert result.success and result.output == "It is 4."
    children = reasoning.store.list_runs(reasoning.tenant, parent_run_id=result.run_id)
    assert len(children) == 1 and children[0].model == "test:function"
