"""The OpenAI-compatible provider against a real HTTP server playing recorded traffic.

Each case checks the exact body the openai SDK sent for neutral messages, tools and
tool choice, and the ModelTurn parsed from the documented response shape.
"""

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
from tooldb.models.openai import OpenAIModel

from .wire_server import TOOLS, WEATHER, WireServer, fixture, wire_server

KEY = "sk-test-0123456789abcdef"


@pytest.fixture(autouse=True)
def _no_provider_env(monkeypatch: pytest.MonkeyPatch) -> None:
    for name in ("OPENAI_API_KEY", "OPENAI_BASE_URL", "TOOLDB_MODEL", "TOOLDB_MODEL_BASE_URL"):
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setenv("TEST_OPENAI_KEY", KEY)


@pytest.fixture
def server() -> Iterator[WireServer]:
    with wire_server() as running:
        yield running


def model_for(server: WireServer, spec: str = "openai:gpt-4o-mini", **settings: Any) -> Any:
    values: dict[str, Any] = {
        "model_base_url": f"{server.url}/v1",
        "model_api_key_env": "TEST_OPENAI_KEY",
        "model_max_tokens": 256,
        "model_max_retries": 0,
        **settings,
    }
    return load_model(spec, Settings(**values))


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


GET_WEATHER = ToolCall(
    id="call_Yq1GkHfZpV7lWb3mN0sR2dTe", name="get_weather", arguments='{"city": "Tokyo"}'
)
GET_TIME = ToolCall(
    id="call_Q8cJ4uX2nP5vK9aL3hB6wZ1m", name="get_time", arguments='{"city": "Tokyo"}'
)

CASES: dict[str, tuple[list[Message], list[ToolSchema], str, ModelTurn]] = {
    "text_answer": (
        [
            Message.system("You are a terse assistant."),
            Message.user("What is the capital of France?"),
        ],
        [],
        "auto",
        ModelTurn(text="Paris.", usage=Usage(input_tokens=24, output_tokens=3)),
    ),
    "single_tool_call": (
        [Message.user("What's the weather like in Paris today?")],
        TOOLS,
        "auto",
        ModelTurn(
            tool_calls=[
                ToolCall(
                    id="call_9pw1qnYScqvGrCH58HWCvFH6",
                    name="get_weather",
                    arguments='{"city":"Paris","unit":"celsius"}',
                )
            ],
            stop_reason=StopReason.TOOL_CALLS,
            usage=Usage(input_tokens=92, output_tokens=18),
        ),
    ),
    "parallel_tool_calls": (
        [Message.user("Weather and local time in Tokyo?")],
        TOOLS,
        "required",
        ModelTurn(
            tool_calls=[GET_WEATHER, GET_TIME],
            stop_reason=StopReason.TOOL_CALLS,
            usage=Usage(input_tokens=95, output_tokens=49),
        ),
    ),
    "tool_result_round_trip": (
        [
            Message.system("Answer with the tools."),
            Message.user("Weather and local time in Tokyo?"),
            Message(role="assistant", tool_calls=[GET_WEATHER, GET_TIME]),
            Message.tool_result(GET_WEATHER, '{"temperature": 18, "sky": "clear"}'),
            Message.tool_result(GET_TIME, "error: time service unavailable", is_error=True),
        ],
        TOOLS,
        "required:get_time",
        ModelTurn(
            text="Tokyo is clear at 18 °C; I could not get the local time.",
            usage=Usage(input_tokens=161, output_tokens=17),
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
        ModelTurn(
            text="I'm sorry, I can't help with that.",
            stop_reason=StopReason.REFUSAL,
            usage=Usage(input_tokens=13, output_tokens=9),
        ),
    ),
}


@pytest.mark.parametrize("case", list(CASES))
def test_recorded_exchange(server: WireServer, case: str) -> None:
    recorded = fixture("openai", case)
    messages, tools, choice, expected = CASES[case]
    server.reply(recorded["response"])
    max_tokens = recorded["request"]["max_completion_tokens"]
    turn = complete(model_for(server, model_max_tokens=max_tokens), messages, tools, choice)

    (request,) = server.requests
    assert (request.method, request.path) == ("POST", "/v1/chat/completions")
    assert request.body == recorded["request"]
    assert request.headers["authorization"] == f"Bearer {KEY}"
    assert turn == expected.model_copy(update={"model": recorded["response"]["body"]["model"]})


@pytest.mark.parametrize(
    ("choice", "wire"),
    [
        ("auto", "auto"),
        ("required", "required"),
        ("none", "none"),
        ("required:get_weather", {"type": "function", "function": {"name": "get_weather"}}),
    ],
)
def test_tool_choice_on_the_wire(server: WireServer, choice: str, wire: Any) -> None:
    server.reply(fixture("openai", "text_answer")["response"])
    complete(model_for(server), [Message.user("hi")], [WEATHER], choice)
    assert server.requests[0].body["tool_choice"] == wire


def test_without_tools_no_tools_and_no_tool_choice_are_sent(server: WireServer) -> None:
    server.reply(fixture("openai", "text_answer")["response"])
    complete(model_for(server), [Message.user("hi")], [], "required")
    assert "tools" not in server.requests[0].body
    assert "tool_choice" not in server.requests[0].body


def test_a_multi_turn_conversation_keeps_assistant_text(server: WireServer) -> None:
    server.reply(fixture("openai", "text_answer")["response"])
    history = [
        Message.user("hi"),
        Message(role="assistant", content="Hello! Which city?"),
        Message.user("Paris"),
        Message(role="assistant", content="Let me look.", tool_calls=[GET_WEATHER]),
        Message.tool_result(GET_WEATHER, "18 C"),
    ]
    complete(model_for(server), history, [WEATHER])
    sent = server.requests[0].body["messages"]
    assert sent[1] == {"role": "assistant", "content": "Hello! Which city?"}
    assert sent[3]["content"] == "Let me look." and sent[3]["tool_calls"][0]["id"] == GET_WEATHER.id
    assert sent[4] == {"role": "tool", "tool_call_id": GET_WEATHER.id, "content": "18 C"}


def test_ollama_server_shape(server: WireServer) -> None:
    recorded = fixture("openai", "ollama_tool_call")
    server.reply(recorded["response"])
    model = model_for(server, "ollama:qwen3", model_api_key_env="")
    assert model.id == "ollama:qwen3"
    turn = complete(model, [Message.user("What's the weather like in Paris today?")], [WEATHER])

    (request,) = server.requests
    assert request.body == recorded["request"]
    # A local server needs no key; the SDK insists on one, so a placeholder goes.
    assert request.headers["authorization"] == "Bearer no-key"
    assert turn.stop_reason is StopReason.TOOL_CALLS  # the server said "stop"
    assert turn.tool_calls == [
        ToolCall(id="call_v2hhf7ag", name="get_weather", arguments='{"city":"Paris"}')
    ]
    assert turn.usage == Usage(input_tokens=147, output_tokens=21) and turn.model == "qwen3"


def test_malformed_arguments_reach_the_caller_verbatim(server: WireServer) -> None:
    response = fixture("openai", "single_tool_call")["response"]
    response["body"]["choices"][0]["message"]["tool_calls"][0]["function"]["arguments"] = (
        '{"city": "Par'
    )
    server.reply(response)
    turn = complete(model_for(server), [Message.user("weather?")], [WEATHER])
    assert turn.tool_calls[0].arguments == '{"city": "Par'


def test_a_tool_call_without_an_id_gets_one(server: WireServer) -> None:
    response = fixture("openai", "ollama_tool_call")["response"]
    response["body"]["choices"][0]["message"]["tool_calls"][0]["id"] = ""
    server.reply(response)
    turn = complete(model_for(server, "vllm:qwen3"), [Message.user("weather?")], [WEATHER])
    assert turn.tool_calls[0].id.startswith("call_0_")


def test_an_answer_without_choices_is_a_model_error(server: WireServer) -> None:
    body = fixture("openai", "text_answer")["response"]["body"]
    server.reply({"status": 200, "body": {**body, "choices": []}})
    with pytest.raises(ModelError, match="answered no choices"):
        complete(model_for(server), [Message.user("hi")])


@pytest.mark.parametrize(
    ("case", "status", "text"),
    [
        ("error_401", 401, "Incorrect API key provided: sk-proj-****"),
        ("error_429", 429, "Rate limit reached for gpt-4o-mini"),
        ("error_500", 500, "The server had an error while processing your request"),
    ],
)
def test_error_bodies_become_model_errors(
    server: WireServer, case: str, status: int, text: str
) -> None:
    server.reply(fixture("openai", case)["response"])
    with pytest.raises(ModelError) as caught:
        complete(model_for(server), [Message.user("hi")])
    message = str(caught.value)
    assert f"model provider 'openai' (model 'gpt-4o-mini' at {server.url}/v1)" in message
    assert f"HTTP {status}: {text}" in message
    assert KEY not in message
    assert caught.value.status == status and caught.value.provider == "openai"
    assert len(server.requests) == 1  # model_max_retries=0
    if status == 401:
        assert "[the key sent was from $TEST_OPENAI_KEY]" in message


def test_the_key_is_redacted_when_a_server_echoes_it(server: WireServer) -> None:
    server.reply({"status": 401, "body": {"error": {"message": f"key {KEY} is revoked"}}})
    with pytest.raises(ModelError) as caught:
        complete(model_for(server), [Message.user("hi")])
    assert KEY not in str(caught.value) and "key [redacted] is revoked" in str(caught.value)


def test_a_plain_text_error_body_is_reported(server: WireServer) -> None:
    server.reply(
        {"status": 404, "body": {"error": "model 'qwen9' not found, try pulling it first"}}
    )
    with pytest.raises(ModelError, match=r"HTTP 404: model 'qwen9' not found"):
        complete(model_for(server, "ollama:qwen9"), [Message.user("hi")])


def test_retries_follow_the_setting(server: WireServer) -> None:
    error, ok = fixture("openai", "error_500")["response"], fixture("openai", "text_answer")
    server.reply(error, ok["response"])
    turn = complete(model_for(server, model_max_retries=2), [Message.user("hi")])
    assert turn.text == "Paris." and len(server.requests) == 2

    server.requests.clear()
    server.reply(fixture("openai", "error_429")["response"])
    with pytest.raises(ModelError, match="HTTP 429"):
        complete(model_for(server, model_max_retries=2), [Message.user("hi")])
    assert len(server.requests) == 3  # the first try and two retries


def test_a_server_that_does_not_answer_in_time(server: WireServer) -> None:
    server.reply({**fixture("openai", "text_answer")["response"], "delay_s": 2})
    with pytest.raises(ModelError, match=r"did not answer within 0.3 s") as caught:
        complete(model_for(server, model_timeout_s=0.3), [Message.user("hi")])
    assert caught.value.status is None


def test_an_unreachable_server() -> None:
    with wire_server() as gone:
        url = gone.url
    model = load_model(
        "vllm:m", Settings(model_base_url=f"{url}/v1", model_max_retries=0, model_timeout_s=5)
    )
    with pytest.raises(ModelError, match=r"model provider 'vllm' .* could not be reached"):
        complete(model, [Message.user("hi")])


def test_the_model_works_across_event_loops_and_concurrently(server: WireServer) -> None:
    server.reply(fixture("openai", "text_answer")["response"])
    model = model_for(server)
    # The first loop ends with its client open; the second loop must not reuse it.
    assert complete(model, [Message.user("one")], close=False).text == "Paris."
    assert complete(model, [Message.user("two")]).text == "Paris."

    async def many() -> list[ModelTurn]:
        turns = await asyncio.gather(
            *(model.complete([Message.user(f"q{i}")], [], ToolChoice()) for i in range(8))
        )
        await model.aclose()
        return list(turns)

    assert [turn.text for turn in asyncio.run(many())] == ["Paris."] * 8
    assert len(server.requests) == 10


def test_a_tool_message_needs_its_call_id(server: WireServer) -> None:
    with pytest.raises(UsageError, match="tool_call_id"):
        complete(model_for(server), [Message(role="tool", content="x")])
    assert server.requests == []


def test_request_body_without_a_token_limit(server: WireServer) -> None:
    model = model_for(server, model_max_tokens=0)
    assert isinstance(model, OpenAIModel)
    body = model.request([Message.user("hi")], [], ToolChoice())
    assert body == {"model": "gpt-4o-mini", "messages": [{"role": "user", "content": "hi"}]}


def test_an_answer_of_the_wrong_shape_is_a_model_error(server: WireServer) -> None:
    response = fixture("openai", "single_tool_call")["response"]
    response["body"]["choices"][0]["message"]["tool_calls"][0]["function"]["name"] = None
    server.reply(response)
    with pytest.raises(ModelError, match="sent an answer of an unexpected shape"):
        complete(model_for(server), [Message.user("weather?")], [WEATHER])

    server.reply({"status": 200, "body": {"choices": [{"index": 0, "finish_reason": "stop"}]}})
    with pytest.raises(ModelError, match="unexpected shape: AttributeError"):
        complete(model_for(server), [Message.user("hi")])
