"""The agent loop's own cost, with a scripted model (no model latency): issue 5's S1-S4.

    .venv/bin/python bench/agent_overhead.py [--rounds 3] [--db URL]

S1: 100 turns of one `add` call each, then a final answer (µs per turn; also the cost
of turn 1-10 vs turn 91-100, to show no growth with history). S2: one turn of 10 async
calls that sleep 100 ms (wall ms). S3: S1 with 20 turns and 1,000 registered tools,
where the loop selects the tools to offer (µs per turn, ratio to S1 at 20 turns; the
scenario asks the same task every run, so its vector and pool are remembered
(selection_cache.py): also measured with a new task each run, nothing remembered). S4:
invalid arguments first, then valid: what the model is told and how many turns it
takes. Recording and run persistence are on (SQLite file; hash embedder, so model
loading is not measured).
"""

from __future__ import annotations

import argparse
import asyncio
import itertools
import statistics
import sys
import tempfile
import time
from dataclasses import replace
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # the padding tools' module

import tooldb
from tooldb import AgentLoop, FunctionModel, Limits, Registry, Settings, tool
from tooldb.models import Message, ModelTurn, ToolSchema, call
from tooldb.models.base import ToolChoice


@tool
def add(a: int, b: int) -> int:
    """Add two integers."""
    return a + b


@tool
async def nap(seconds: float) -> str:
    """Sleep a while."""
    await asyncio.sleep(seconds)
    return "ok"


def open_registry(
    url: str | None, tools: int = 0, tenant: str = "default", held_calls: int | None = None
) -> Registry:
    url = url or f"sqlite:///{Path(tempfile.mkdtemp()) / 'bench.db'}"
    settings = Settings(url=url, embedder="hash", tenant=tenant)
    if held_calls is not None:  # None: the default (every call committed before the model)
        settings = replace(settings, agent_held_calls=held_calls)
    reg = tooldb.open(url, settings=settings)
    reg.add(add, nap)
    if tools:
        reg.add(*[
            {"name": f"tool_{i:04d}", "description": f"Synthetic tool number {i} of the bench.",
             "target": "tests.sample_tools:echo",
             "parameters": {"a": {"type": "int"}, "b": {"type": "string"}, "c": {"type": "float"}}}
            for i in range(tools)
        ])  # fmt: skip
    return reg


#: S1(20) and S3 runs per round: a 20-turn run takes ~4 ms, so a single one per round
#: let one slow commit (the disk) move the ratio by up to 0.3.
PAIRS = 5


def turns_model(turns: int, stamps: list[float]) -> FunctionModel:
    """An O(1) counter, like the peers' scripted models (../shared/bench-peers)."""
    done = itertools.count()

    def decide(messages: list[Message], tools: list[ToolSchema], choice: ToolChoice) -> object:
        stamps.append(time.perf_counter())
        turn = next(done)
        return call("add", {"a": turn, "b": 1}) if turn < turns else "done"

    return FunctionModel(decide)


def s1(
    reg: Registry, turns: int, tools: list[str] | None, task: str = "add numbers"
) -> tuple[float, list[float]]:
    stamps: list[float] = []
    limits = Limits(max_iterations=turns + 2, max_tool_calls=turns + 1)
    loop = AgentLoop(reg, turns_model(turns, stamps), tools=tools, limits=limits)
    start = time.perf_counter()
    result = loop.run(task)
    total = time.perf_counter() - start
    assert result.status.value == "success", result.review_reason
    gaps = [b - a for a, b in itertools.pairwise(stamps)]
    return total, gaps


def s2(reg: Registry) -> float:
    model = FunctionModel(
        lambda messages, *_: (
            [call("nap", {"seconds": 0.1}) for _ in range(10)]
            if not any(m.role == "tool" for m in messages)
            else "done"
        )
    )
    start = time.perf_counter()
    AgentLoop(reg, model, tools=["nap"]).run("nap")
    return time.perf_counter() - start


def s4(reg: Registry) -> tuple[str, int]:
    script = iter([call("add", {"a": "abc", "b": 2}), call("add", {"a": 5, "b": 2}), "7"])
    told: list[str] = []

    def decide(messages: list[Message], *_: object) -> ModelTurn | object:
        if messages[-1].role == "tool" and not told:
            told.append(messages[-1].content)
        return next(script)

    result = AgentLoop(reg, FunctionModel(decide), tools=["add"]).run("add")
    return told[0], result.iterations


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--db", default=None, help="store URL (default: a fresh SQLite file)")
    parser.add_argument(
        "--held-calls",
        type=int,
        default=None,
        help="agent_held_calls (default: the setting's default; 64: the opt-in group commit)",
    )
    args = parser.parse_args()
    reg = open_registry(args.db, held_calls=args.held_calls)
    big = open_registry(args.db, tools=1000, tenant="bench-1000-tools", held_calls=args.held_calls)
    big.select("add two integers", 8)  # build the index once, as a long-lived process would
    s1(reg, 5, ["add"])  # warm up imports and caches
    s1(big, 5, None)
    per_turn, early, late, per_turn_20, s2s, s3, s3_new = [], [], [], [], [], [], []
    fresh = itertools.count()
    # Every scenario once per round, so each sees the same machine (this disk's write
    # latency drifts over seconds) and S3/S1 compares like with like.
    for _ in range(args.rounds):
        total, gaps = s1(reg, 100, ["add"])
        per_turn.append(total / 100 * 1e6)
        early.append(statistics.median(gaps[:10]) * 1e6)
        late.append(statistics.median(gaps[-10:]) * 1e6)
        for _ in range(PAIRS):  # short runs: several per round, S1 and S3 alternated
            per_turn_20.append(s1(reg, 20, ["add"])[0] / 20 * 1e6)
            s3.append(s1(big, 20, None)[0] / 20 * 1e6)
            s3_new.append(s1(big, 20, None, f"add numbers, case {next(fresh)}")[0] / 20 * 1e6)
        s2s.append(s2(reg) * 1000)
    told, turns = s4(reg)
    rows = [
        ("S1 µs/turn (100 turns)", f"{statistics.median(per_turn):,.0f}"),
        ("S1 turn 1-10 vs 91-100 (µs)",
         f"{statistics.median(early):,.0f} vs {statistics.median(late):,.0f}"),
        ("S1 µs/turn (20 turns)", f"{statistics.median(per_turn_20):,.0f}"),
        ("S2 ms (10 x 100 ms async)", f"{statistics.median(s2s):,.0f}"),
        ("S3 µs/turn (1,000 tools, selection)", f"{statistics.median(s3):,.0f}"),
        ("S3 / S1(20)", f"{statistics.median(s3) / statistics.median(per_turn_20):.2f}x"),
        ("S3, a new task each run: µs/turn", f"{statistics.median(s3_new):,.0f}"),
        ("S3, a new task each run / S1(20)",
         f"{statistics.median(s3_new) / statistics.median(per_turn_20):.2f}x"),
        ("S4 turns to recover", str(turns)),
        ("S4 model is told", told),
    ]  # fmt: skip
    width = max(len(name) for name, _ in rows)
    print(f"{'scenario':<{width}}  value")
    for name, value in rows:
        print(f"{name:<{width}}  {value}")
    reg.close()
    big.close()


if __name__ == "__main__":
    main()
