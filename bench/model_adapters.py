"""What a provider adapter costs per model turn, apart from the model itself.

For each provider (openai-compatible, anthropic) and a history of 2, 20 and 200
messages with 10 tools offered, the p50 of: building the request body (build),
parsing a recorded tool-calling response (parse), a whole ``complete`` round trip
through the SDK to a 127.0.0.1 server playing that response, the SDK's typed
``create(**body)`` with the same body (what the adapter would cost without its
extra_body route), and the same POST with plain httpx (the floor). A model takes
hundreds of ms per turn; the point is that the adapter adds little and does not grow
with the history.

    PYTHONPATH=. .venv/bin/python bench/model_adapters.py [--turns 100]
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import statistics
import time
from collections.abc import Callable
from typing import Any

import httpx
from tests.wire_server import TOOLS, WireServer, fixture, wire_server

from tooldb import Settings
from tooldb.models import Message, ToolCall, ToolChoice, ToolSchema, load_model

HISTORY_SIZES = (2, 20, 200)


def history(size: int) -> list[Message]:
    """A system prompt, a task, then (call, result) pairs up to ``size`` messages."""
    messages = [Message.system("You are a helpful agent."), Message.user("Weather in Paris?")]
    i = 0
    while len(messages) < size:
        call = ToolCall(id=f"toolu_{i:04d}", name="get_weather", arguments='{"city": "Paris"}')
        messages.append(Message(role="assistant", content="Checking.", tool_calls=[call]))
        messages.append(Message.tool_result(call, '{"temperature": 18, "sky": "clear"}'))
        i += 1
    return messages[:size]


def tools(count: int) -> list[ToolSchema]:
    return [
        t.model_copy(update={"name": f"{t.name}_{i}"}) for i in range(count // 2) for t in TOOLS
    ]


def p50_us(function: Callable[[], Any], repeat: int) -> float:
    samples = []
    for _ in range(repeat):
        start = time.perf_counter()
        function()
        samples.append((time.perf_counter() - start) * 1e6)
    return statistics.median(samples)


def sdk_response(provider: str, body: dict[str, Any]) -> Any:
    if provider == "openai":
        from openai.types.chat import ChatCompletion

        return ChatCompletion.model_validate(body)
    from anthropic.types import Message as AnthropicMessage

    return AnthropicMessage.model_validate(body)


async def round_trips(
    model: Any, server: WireServer, provider: str, messages: list[Message], turns: int
) -> tuple[float, float, float]:
    """ms p50 of ``complete``, of the SDK's typed ``create(**body)`` and of the same POST
    with plain httpx, interleaved so that a busy machine slows all three alike."""
    offered = tools(10)
    body = model.request(messages, offered, ToolChoice())
    path = "/v1/chat/completions" if provider == "openai" else "/v1/messages"
    adapter, typed, raw = [], [], []
    async with httpx.AsyncClient(base_url=server.url) as http:
        client = model._clients.get()
        create = client.chat.completions.create if provider == "openai" else client.messages.create
        await model.complete(messages, offered, ToolChoice())  # the SDK's lazy imports
        for _ in range(turns):
            start = time.perf_counter()
            await model.complete(messages, offered, ToolChoice())
            adapter.append(time.perf_counter() - start)
            start = time.perf_counter()
            await create(**body)
            typed.append(time.perf_counter() - start)
            start = time.perf_counter()
            (await http.post(path, json=body)).json()
            raw.append(time.perf_counter() - start)
    await model.aclose()
    return tuple(statistics.median(x) * 1e3 for x in (adapter, typed, raw))  # type: ignore[return-value]


def measure(provider: str, turns: int) -> list[list[str]]:
    spec = "openai:gpt-4o-mini" if provider == "openai" else "anthropic:claude-haiku-4-5"
    recorded = fixture(provider, "parallel_tool_calls")["response"]
    rows = []
    with wire_server() as server:
        server.reply(recorded)
        base = f"{server.url}/v1" if provider == "openai" else server.url
        settings = Settings(model_base_url=base, model_api_key_env="BENCH_KEY", model_max_retries=0)
        model = load_model(spec, settings)
        offered = tools(10)
        response = sdk_response(provider, recorded["body"])
        parse = p50_us(lambda: model.parse(response), 2000)
        for size in HISTORY_SIZES:
            messages = history(size)
            body = model.request(messages, offered, ToolChoice())
            build = p50_us(lambda m=messages: model.request(m, offered, ToolChoice()), 500)
            adapter, typed, raw = asyncio.run(round_trips(model, server, provider, messages, turns))
            rows.append(
                [provider, str(size), f"{len(json.dumps(body)) / 1000:.1f}", f"{build:.0f}",
                 f"{parse:.0f}", f"{adapter:.1f}", f"{typed:.1f}", f"{raw:.1f}"]
            )  # fmt: skip
    return rows


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--turns", type=int, default=100, help="round trips per cell")
    args = parser.parse_args()
    os.environ.setdefault("BENCH_KEY", "bench-key")
    header = ["provider", "messages", "body kB", "build µs", "parse µs", "complete ms",
              "create() ms", "httpx ms"]  # fmt: skip
    rows = [row for provider in ("openai", "anthropic") for row in measure(provider, args.turns)]
    print("p50 per turn, 10 tools offered, against a 127.0.0.1 server (see the docstring)")
    print(" | ".join(f"{h:>11}" for h in header))
    for row in rows:
        print(" | ".join(f"{cell:>11}" for cell in row))


if __name__ == "__main__":
    main()
