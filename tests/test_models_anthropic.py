"""The Anthropic provider against a real HTTP server playing recorded Messages API traffic."""

from __future__ import annotations

import asyncio
from collections.abc import Iterator
from typing import Any

import pytest

from tooldb import Settings
from tooldb.errors import ModelError, UsageError
from tooldb.models import (
    Message,
    ModelTurn,
    StopReason,
    ToolCall,
    ToolChoice,
    ToolSchema,
    Usage,
    load_model,
)
from tooldb.models.anthropic import AnthropicModel

from .wire_server import TOOLS, WEATHER, WireServer, fixture, wire_server

KEY = "sk-ant-api03-test-0123456789abcdef"


@pytest.fixture(autouse=True)
def _no_provider_env(monkeypatch: pytest.MonkeyPatch) -> None:
    for name in ("ANTHROPIC_API_KEY", "ANTHROPIC_BASE_URL", "ANTHROPIC_AUTH_TOKEN"):
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setenv("ANTHROPIC_API_KEY", KEY)


@pytest.fixture
def server() -> Iterator[WireServer]:
    with wire_server() as running:
        yield running


def model_for(server: WireServer, **settings: Any) -> Any:
    values: dict[str, Any] = {
        "model_base_url": server.url,
        "model_max_tokens": 256,
        "model_max_retries": 0,
        **settings,
    }
    return load_model("anthropic:claude-haiku-4-5", Settings(**values))


def sent_key(headers: dict[str, str]) -> str | None:
    """The key as the SDK sent it: ``x-api-key`` (the documented header) or, in newer
    SDKs, ``Authorization: Bearer``."""
    bearer = headers.get("authorization", "")
    return headers.get("x-api-key") or (bearer[7:] if bearer.startswith("Bearer ") else None)


def complete(
    model: Any,
    messages: list[Message],
    tools: list[ToolSchema] | None = None,
    choice: str = "auto",
    *,
    close: bool = True,
) -> ModelTurn:
    """One turn on a fresh event loop, closing the loop's client after it (or not)."""

    async def turn() -> ModelTurn:
        try:
            answer: ModelTurn = await model.complete(
                messages, tools or [], ToolChoice.parse(choice)
            )
            return answer
        finally:
            if close:
                await model.aclose()

    return asyncio.run(turn())


WEATHER_CALL = ToolCall(
    id="toolu_01T1x1fJ34qAmk2tNTrN7Up6", name="get_weather", arguments='{"city": "Tokyo"}'
)
TIME_CALL = ToolCall(
    id="toolu_01Kp7mW9vR3xQ2nB8cY4hJ6z", name="get_time", arguments='{"city": "Tokyo"}'
)
BROKEN_TIME_CALL = TIME_CALL.model_copy(update={"arguments": "{city: Tokyo"})

CASES: dict[str, tuple[list[Message], list[ToolSchema], str, ModelTurn]] = {
    "text_answer": (
        [
            Message.system("You are a terse assistant."),
            Message.user("What is the capital of France?"),
            Message.system("Answer in one word."),
        ],
        [],
        "auto",
        ModelTurn(text="Paris.", usage=Usage(input_tokens=27, output_tokens=5)),
    ),
    "single_tool_call": (
        [Message.user("What's the weather like in Paris today?")],
        TOOLS,
        "auto",
        ModelTurn(
            text="I'll check the current weather in Paris.",
            tool_calls=[
                ToolCall(
                    id="toolu_01A09q90qw90lq917835lq9",
                    name="get_weather",
                    arguments='{"city": "Paris", "unit": "celsius"}',
                )
            ],
            stop_reason=StopReason.TOOL_CALLS,
            usage=Usage(input_tokens=472, output_tokens=89),
        ),
    ),
    "parallel_tool_calls": (
        [Message.user("Weather and local time in Tokyo?")],
        TOOLS,
        "required",
        ModelTurn(
            tool_calls=[WEATHER_CALL, TIME_CALL],
            stop_reason=StopReason.TOOL_CALLS,
            usage=Usage(input_tokens=489, output_tokens=112),
        ),
    ),
    "tool_result_round_trip": (
        [
            Message.system("Answer with the tools."),
            Message.user("Weather and local time in Tokyo?"),
            Message(
                role="assistant",
                content="Checking both.",
                tool_calls=[WEATHER_CALL, BROKEN_TIME_CALL],
            ),
            Message.tool_result(WEATHER_CALL, '{"temperature": 18, "sky": "clear"}'),
            Message.tool_result(BROKEN_TIME_CALL, "arguments are not valid JSON", is_error=True),
            Message.user("Celsius please."),
        ],
        TOOLS,
        "required:get_time",
        ModelTurn(
            text="Tokyo is clear at 18 °C; I could not get the local time.",
            usage=Usage(input_tokens=702, output_tokens=21),
        ),
    ),
    "max_tokens_stop": (
        [Message.user("Write a long poem about the sea.")],
        [],
        "auto",
        ModelTurn(
            text="The sea, the sea, the restless grey,\nthat rolls and",
            stop_reason=StopReason.MAX_TOKENS,
            usage=Usage(input_tokens=15, output_tokens=16),
        ),
    ),
    "refusal": (
        [Message.user("Help me pick a lock.")],
        [],
        "auto",
        ModelTurn(stop_reason=StopReason.REFUSAL, usage=Usage(input_tokens=13, output_tokens=0)),
    ),
}


@pytest.mark.parametrize("case", list(CASES))
def test_recorded_exchange(server: WireServer, case: str) -> None:
    recorded = fixture("anthropic", case)
    messages, tools, choice, expected = CASES[case]
    server.reply(recorded["response"])
    max_tokens = recorded["request"]["max_tokens"]
    turn = complete(model_for(server, model_max_tokens=max_tokens), messages, tools, choice)

    (request,) = server.requests
    assert (request.method, request.path) == ("POST", "/v1/messages")
    assert request.body == recorded["request"]
    assert sent_key(request.headers) == KEY
    assert request.headers["anthropic-version"]
    assert turn == expected.model_copy(update={"model": recorded["response"]["body"]["model"]})


@pytest.mark.parametrize(
    ("choice", "wire"),
    [
        ("auto", {"type": "auto"}),
        ("required", {"type": "any"}),
        ("none", {"type": "none"}),
        ("required:get_weather", {"type": "tool", "name": "get_weather"}),
    ],
)
def test_tool_choice_on_the_wire(server: WireServer, choice: str, wire: Any) -> None:
    server.reply(fixture("anthropic", "text_answer")["response"])
    complete(model_for(server), [Message.user("hi")], [WEATHER], choice)
    assert server.requests[0].body["tool_choice"] == wire


def test_without_tools_no_tools_and_no_tool_choice_are_sent(server: WireServer) -> None:
    server.reply(fixture("anthropic", "text_answer")["response"])
    complete(model_for(server), [Message.user("hi")], [], "required")
    body = server.requests[0].body
    assert "tools" not in body and "tool_choice" not in body and "system" not in body


def test_history_edge_cases_on_the_wire(server: WireServer) -> None:
    """Non-object JSON arguments go as _raw; an empty assistant turn is dropped; results
    of two turns stay in two user messages; a tool without description omits it."""
    server.reply(fixture("anthropic", "text_answer")["response"])
    listing = ToolCall(id="toolu_a", name="get_weather", arguments="[1, 2]")
    again = ToolCall(id="toolu_b", name="get_weather", arguments="")
    history = [
        Message.user("hi"),
        Message(role="assistant", content=""),
        Message.user("weather?"),
        Message(role="assistant", tool_calls=[listing]),
        Message.tool_result(listing, "bad"),
        Message(role="assistant", tool_calls=[again]),
        Message.tool_result(again, "18 C"),
    ]
    complete(model_for(server), history, [ToolSchema(name="get_weather")])
    body = server.requests[0].body
    use_a = {
        "type": "tool_use",
        "id": "toolu_a",
        "name": "get_weather",
        "input": {"_raw": "[1, 2]"},
    }
    use_b = {"type": "tool_use", "id": "toolu_b", "name": "get_weather", "input": {}}
    result_a = {"type": "tool_result", "tool_use_id": "toolu_a", "content": "bad"}
    result_b = {"type": "tool_result", "tool_use_id": "toolu_b", "content": "18 C"}
    assert body["messages"] == [
        {"role": "user", "content": "hi"},
        {"role": "user", "content": "weather?"},
        {"role": "assistant", "content": [use_a]},
        {"role": "user", "content": [result_a]},
        {"role": "assistant", "content": [use_b]},
        {"role": "user", "content": [result_b]},
    ]
    assert body["tools"] == [
        {"name": "get_weather", "input_schema": {"type": "object", "properties": {}}}
    ]


def test_unknown_blocks_and_stop_reasons(server: WireServer) -> None:
    """Blocks the adapter does not use (thinking) are skipped; pause_turn is OTHER."""
    body = fixture("anthropic", "single_tool_call")["response"]["body"]
    body["content"].insert(
        0, {"type": "thinking", "thinking": "The user wants...", "signature": "EqQB"}
    )
    body["stop_reason"] = "pause_turn"
    server.reply({"status": 200, "body": body})
    turn = complete(model_for(server), [Message.user("weather?")], [WEATHER])
    assert turn.text == "I'll check the current weather in Paris."
    assert turn.stop_reason is StopReason.OTHER and len(turn.tool_calls) == 1


@pytest.mark.parametrize(
    ("case", "status", "text"),
    [
        ("error_401", 401, "invalid x-api-key (authentication_error)"),
        ("error_429", 429, "This request would exceed the rate limit for your organization"),
        ("error_500", 500, "Internal server error (api_error)"),
        ("error_529", 529, "Overloaded (overloaded_error)"),
    ],
)
def test_error_bodies_become_model_errors(
    server: WireServer, case: str, status: int, text: str
) -> None:
    server.reply(fixture("anthropic", case)["response"])
    with pytest.raises(ModelError) as caught:
        complete(model_for(server), [Message.user("hi")])
    message = str(caught.value)
    assert f"model provider 'anthropic' (model 'claude-haiku-4-5' at {server.url})" in message
    assert f"HTTP {status}: {text}" in message
    assert KEY not in message
    assert caught.value.status == status and caught.value.model == "claude-haiku-4-5"
    assert len(server.requests) == 1
    if status == 401:
        assert "[the key sent was from $ANTHROPIC_API_KEY]" in message


def test_retries_follow_the_setting(server: WireServer) -> None:
    server.reply(
        fixture("anthropic", "error_529")["response"],
        fixture("anthropic", "text_answer")["response"],
    )
    turn = complete(model_for(server, model_max_retries=1), [Message.user("hi")])
    assert turn.text == "Paris." and len(server.requests) == 2


def test_a_server_that_does_not_answer_in_time(server: WireServer) -> None:
    server.reply({**fixture("anthropic", "text_answer")["response"], "delay_s": 2})
    with pytest.raises(ModelError, match=r"did not answer within 0.3 s"):
        complete(model_for(server, model_timeout_s=0.3), [Message.user("hi")])


def test_the_key_comes_from_model_api_key_env(
    server: WireServer, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("MY_CLAUDE_KEY", "sk-ant-other")
    server.reply(fixture("anthropic", "text_answer")["response"])
    complete(model_for(server, model_api_key_env="MY_CLAUDE_KEY"), [Message.user("hi")])
    assert sent_key(server.requests[0].headers) == "sk-ant-other"


def test_settings_errors() -> None:
    with pytest.raises(UsageError, match="model_max_tokens > 0"):
        load_model("anthropic:claude-haiku-4-5", Settings(model_max_tokens=0))
    with pytest.raises(UsageError, match="needs a model name"):
        AnthropicModel("", api_key="k")


def test_a_tool_message_needs_its_call_id(server: WireServer) -> None:
    with pytest.raises(UsageError, match="tool_call_id"):
        complete(model_for(server), [Message(role="tool", content="x")])
    assert server.requests == []


def test_an_answer_of_the_wrong_shape_is_a_model_error(server: WireServer) -> None:
    body = fixture("anthropic", "single_tool_call")["response"]["body"]
    del body["content"][1]["name"]
    server.reply({"status": 200, "body": body})
    with pytest.raises(ModelError, match=r"'anthropic' .* sent an answer of an unexpected shape"):
        complete(model_for(server), [Message.user("weather?")], [WEATHER])
