"""Any OpenAI-compatible chat-completions server, over the official ``openai`` SDK.

OpenAI itself, or a local server by base URL (Ollama, vLLM, llama.cpp, LM Studio):
the wire format is the same, so one adapter serves them all. Messages, tools and
tool choice are translated here; the loop only sees the provider-neutral types.
"""

from __future__ import annotations

import os
import uuid
from typing import TYPE_CHECKING, Any

from ..errors import ModelError, UsageError
from ._sdk import (
    PLACEHOLDER_KEY,
    ClientPerLoop,
    api_key,
    import_sdk,
    model_error,
    unexpected_answer,
)
from .base import Message, ModelTurn, StopReason, ToolCall, ToolChoice, ToolSchema, Usage

if TYPE_CHECKING:
    from ..settings import Settings

OPENAI_URL = "https://api.openai.com/v1"

FINISH_REASONS = {
    "stop": StopReason.END,
    "tool_calls": StopReason.TOOL_CALLS,
    "function_call": StopReason.TOOL_CALLS,
    "length": StopReason.MAX_TOKENS,
    "content_filter": StopReason.REFUSAL,
}


class OpenAIModel:
    """A chat-completions model; ``id`` is ``provider:name`` (``ollama:qwen3`` ...)."""

    def __init__(
        self,
        name: str,
        *,
        provider: str = "openai",
        base_url: str | None = None,
        api_key: str | None = None,
        api_key_env: str | None = None,
        max_tokens: int | None = 4096,
        timeout_s: float = 120.0,
        max_retries: int = 2,
    ) -> None:
        if not name:
            raise UsageError(f"model provider {provider!r} needs a model name")
        self._sdk = import_sdk("openai", provider, "openai")
        self.id = f"{provider}:{name}"
        self.name = name
        self.provider = provider
        self.base_url = (base_url or OPENAI_URL).rstrip("/")
        self.max_tokens = max_tokens
        # OpenAI's newer models reject max_tokens; local servers only know max_tokens.
        self.max_tokens_field = "max_completion_tokens" if provider == "openai" else "max_tokens"
        self.timeout_s = timeout_s
        self.max_retries = max_retries
        self._key = api_key or PLACEHOLDER_KEY
        self._key_env = api_key_env
        self._clients: ClientPerLoop[Any] = ClientPerLoop(self._new_client)

    @classmethod
    def from_settings(
        cls,
        name: str,
        settings: Settings,
        *,
        provider: str = "openai",
        default_base_url: str | None = None,
    ) -> OpenAIModel:
        """Base URL: ``model_base_url``, else the local server's default, else
        ``$OPENAI_BASE_URL``, else OpenAI. Key: ``$model_api_key_env``, else (provider
        ``openai`` only) ``$OPENAI_API_KEY``; only OpenAI itself requires one."""
        base_url = (
            settings.model_base_url or default_base_url or os.environ.get("OPENAI_BASE_URL") or None
        )
        key, env = api_key(
            settings.model_api_key_env,
            "OPENAI_API_KEY" if provider == "openai" else None,
            provider=provider,
            required=provider == "openai" and base_url is None,
        )
        return cls(
            name,
            provider=provider,
            base_url=base_url,
            api_key=key,
            api_key_env=env,
            max_tokens=settings.model_max_tokens,
            timeout_s=settings.model_timeout_s,
            max_retries=settings.model_max_retries,
        )

    def __repr__(self) -> str:
        return f"OpenAIModel({self.id!r}, base_url={self.base_url!r})"

    def _new_client(self) -> Any:
        return self._sdk.AsyncOpenAI(
            api_key=self._key,
            base_url=self.base_url,
            timeout=self.timeout_s,
            max_retries=self.max_retries,
        )

    def request(
        self, messages: list[Message], tools: list[ToolSchema], tool_choice: ToolChoice
    ) -> dict[str, Any]:
        """The chat-completions request body for this conversation."""
        body: dict[str, Any] = {"model": self.name, "messages": wire_messages(messages)}
        if tools:
            body["tools"] = [wire_tool(tool) for tool in tools]
            body["tool_choice"] = wire_tool_choice(tool_choice)
        if self.max_tokens:
            body[self.max_tokens_field] = self.max_tokens
        return body

    async def complete(
        self, messages: list[Message], tools: list[ToolSchema], tool_choice: ToolChoice
    ) -> ModelTurn:
        body = self.request(messages, tools, tool_choice)
        model, rest = body.pop("model"), body
        try:
            # The body goes as extra_body: create() would otherwise walk every message
            # against the SDK's TypedDicts, a cost that grows with the history (about
            # 100 ms a turn at 200 messages, measured in bench/model_adapters.py); the
            # JSON sent is the same, and retries, auth and errors stay the SDK's.
            response = await self._clients.get().chat.completions.create(
                model=model, messages=[], extra_body=rest
            )
        except self._sdk.OpenAIError as exc:
            raise model_error(
                exc,
                self._sdk,
                provider=self.provider,
                model=self.name,
                base_url=self.base_url,
                timeout_s=self.timeout_s,
                key=self._key,
                key_env=self._key_env,
            ) from exc
        try:
            return self.parse(response)
        except (AttributeError, TypeError, ValueError) as exc:  # ValueError: pydantic's
            raise unexpected_answer(exc, provider=self.provider, model=self.name) from exc

    async def aclose(self) -> None:
        """Close this event loop's client (others close with their loops)."""
        client = self._clients.pop()
        if client is not None:
            await client.close()

    def parse(self, response: Any) -> ModelTurn:
        """A ChatCompletion as a ModelTurn."""
        choices = getattr(response, "choices", None)
        if not choices:
            raise ModelError(
                f"model provider {self.provider!r} (model {self.name!r}) answered no choices",
                provider=self.provider,
                model=self.name,
            )
        choice = choices[0]
        message = choice.message
        calls = [
            self._tool_call(call, index) for index, call in enumerate(message.tool_calls or [])
        ]
        text = message.content or ""
        stop = FINISH_REASONS.get(choice.finish_reason or "", StopReason.OTHER)
        refusal = getattr(message, "refusal", None)
        if refusal and not text:
            text, stop = refusal, StopReason.REFUSAL
        if calls and stop is StopReason.END:
            stop = StopReason.TOOL_CALLS  # some local servers say "stop" after tool calls
        usage = getattr(response, "usage", None)
        return ModelTurn(
            text=text,
            tool_calls=calls,
            stop_reason=stop,
            usage=Usage(
                input_tokens=getattr(usage, "prompt_tokens", 0) or 0,
                output_tokens=getattr(usage, "completion_tokens", 0) or 0,
            ),
            model=getattr(response, "model", None) or self.name,
        )

    def _tool_call(self, call: Any, index: int) -> ToolCall:
        function = getattr(call, "function", None)
        if function is None:
            raise ModelError(
                f"model provider {self.provider!r} (model {self.name!r}) sent a tool call of "
                f"type {getattr(call, 'type', None)!r}; only function tools are offered",
                provider=self.provider,
                model=self.name,
            )
        # llama.cpp and others may leave the id empty; the result must still name a call.
        call_id = call.id or f"call_{index}_{uuid.uuid4().hex[:8]}"
        return ToolCall(id=call_id, name=function.name, arguments=function.arguments)


def wire_messages(messages: list[Message]) -> list[dict[str, Any]]:
    return [wire_message(message) for message in messages]


def wire_message(message: Message) -> dict[str, Any]:
    """One neutral message in the chat-completions shape."""
    if message.role == "tool":
        if not message.tool_call_id:
            raise UsageError("a tool message needs the tool_call_id of the call it answers")
        return {"role": "tool", "tool_call_id": message.tool_call_id, "content": message.content}
    if message.role == "assistant" and message.tool_calls:
        return {
            "role": "assistant",
            "content": message.content or None,
            "tool_calls": [
                {
                    "id": call.id,
                    "type": "function",
                    "function": {"name": call.name, "arguments": call.arguments},
                }
                for call in message.tool_calls
            ],
        }
    return {"role": message.role, "content": message.content}


def wire_tool(tool: ToolSchema) -> dict[str, Any]:
    return {
        "type": "function",
        "function": {
            "name": tool.name,
            "description": tool.description,
            "parameters": tool.parameters,
        },
    }


def wire_tool_choice(choice: ToolChoice) -> str | dict[str, Any]:
    if choice.mode == "required" and choice.name:
        return {"type": "function", "function": {"name": choice.name}}
    return choice.mode
