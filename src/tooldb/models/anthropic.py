"""Anthropic's Messages API, over the official ``anthropic`` SDK.

The Messages API differs from chat completions where it matters here: system text is
a separate field, tool calls are ``tool_use`` content blocks with parsed input, and
tool results are ``tool_result`` blocks inside a user message (all results of one
turn in one message).
"""

from __future__ import annotations

import os
from typing import TYPE_CHECKING, Any

from ..errors import UsageError
from ._sdk import (
    ClientPerLoop,
    api_key,
    import_sdk,
    model_error,
    parse_arguments,
    unexpected_answer,
)
from .base import Message, ModelTurn, StopReason, ToolCall, ToolChoice, ToolSchema, Usage

if TYPE_CHECKING:
    from ..settings import Settings

ANTHROPIC_URL = "https://api.anthropic.com"

STOP_REASONS = {
    "end_turn": StopReason.END,
    "stop_sequence": StopReason.END,
    "tool_use": StopReason.TOOL_CALLS,
    "max_tokens": StopReason.MAX_TOKENS,
    "model_context_window_exceeded": StopReason.MAX_TOKENS,
    "refusal": StopReason.REFUSAL,
}


class AnthropicModel:
    """A Claude model; ``id`` is ``anthropic:NAME``."""

    def __init__(
        self,
        name: str,
        *,
        api_key: str,
        api_key_env: str | None = None,
        base_url: str | None = None,
        max_tokens: int = 4096,
        timeout_s: float = 120.0,
        max_retries: int = 2,
    ) -> None:
        if not name:
            raise UsageError("model provider 'anthropic' needs a model name")
        if max_tokens <= 0:
            raise UsageError(f"the Anthropic API needs model_max_tokens > 0, got {max_tokens}")
        self._sdk = import_sdk("anthropic", "anthropic", "anthropic")
        self.id = f"anthropic:{name}"
        self.name = name
        self.base_url = (base_url or ANTHROPIC_URL).rstrip("/")
        self.max_tokens = max_tokens
        self.timeout_s = timeout_s
        self.max_retries = max_retries
        self._key = api_key
        self._key_env = api_key_env
        self._clients: ClientPerLoop[Any] = ClientPerLoop(self._new_client)

    @classmethod
    def from_settings(cls, name: str, settings: Settings) -> AnthropicModel:
        """Key: ``$model_api_key_env`` else ``$ANTHROPIC_API_KEY`` (required); base URL:
        ``model_base_url`` (a proxy or gateway) else ``$ANTHROPIC_BASE_URL``."""
        key, env = api_key(
            settings.model_api_key_env, "ANTHROPIC_API_KEY", provider="anthropic", required=True
        )
        assert key is not None  # required=True raised otherwise
        return cls(
            name,
            api_key=key,
            api_key_env=env,
            base_url=settings.model_base_url or os.environ.get("ANTHROPIC_BASE_URL") or None,
            max_tokens=settings.model_max_tokens,
            timeout_s=settings.model_timeout_s,
            max_retries=settings.model_max_retries,
        )

    def __repr__(self) -> str:
        return f"AnthropicModel({self.id!r}, base_url={self.base_url!r})"

    def _new_client(self) -> Any:
        return self._sdk.AsyncAnthropic(
            api_key=self._key,
            base_url=self.base_url,
            timeout=self.timeout_s,
            max_retries=self.max_retries,
        )

    def request(
        self, messages: list[Message], tools: list[ToolSchema], tool_choice: ToolChoice
    ) -> dict[str, Any]:
        """The Messages API request body for this conversation."""
        system = "\n\n".join(m.content for m in messages if m.role == "system" and m.content)
        body: dict[str, Any] = {
            "model": self.name,
            "max_tokens": self.max_tokens,
            "messages": wire_messages(messages),
        }
        if system:
            body["system"] = system
        if tools:
            body["tools"] = [wire_tool(tool) for tool in tools]
            body["tool_choice"] = wire_tool_choice(tool_choice)
        return body

    async def complete(
        self, messages: list[Message], tools: list[ToolSchema], tool_choice: ToolChoice
    ) -> ModelTurn:
        body = self.request(messages, tools, tool_choice)
        try:
            response = await self._clients.get().messages.create(**body)
        except self._sdk.AnthropicError as exc:
            raise model_error(
                exc,
                self._sdk,
                provider="anthropic",
                model=self.name,
                base_url=self.base_url,
                timeout_s=self.timeout_s,
                key=self._key,
                key_env=self._key_env,
            ) from exc
        try:
            return self.parse(response)
        except (AttributeError, TypeError, ValueError) as exc:  # ValueError: pydantic's
            raise unexpected_answer(exc, provider="anthropic", model=self.name) from exc

    async def aclose(self) -> None:
        """Close this event loop's client (others close with their loops)."""
        client = self._clients.pop()
        if client is not None:
            await client.close()

    def parse(self, response: Any) -> ModelTurn:
        """A Message as a ModelTurn: text blocks joined, tool_use blocks as calls."""
        texts: list[str] = []
        calls: list[ToolCall] = []
        for block in getattr(response, "content", None) or []:
            kind = getattr(block, "type", None)
            if kind == "text":
                texts.append(block.text)
            elif kind == "tool_use":
                calls.append(ToolCall(id=block.id, name=block.name, arguments=block.input))
        usage = getattr(response, "usage", None)
        input_tokens = sum(
            getattr(usage, field, 0) or 0
            for field in ("input_tokens", "cache_creation_input_tokens", "cache_read_input_tokens")
        )
        return ModelTurn(
            text="".join(texts),
            tool_calls=calls,
            stop_reason=STOP_REASONS.get(
                getattr(response, "stop_reason", None) or "", StopReason.OTHER
            ),
            usage=Usage(
                input_tokens=input_tokens, output_tokens=getattr(usage, "output_tokens", 0) or 0
            ),
            model=getattr(response, "model", None) or self.name,
        )


def wire_messages(messages: list[Message]) -> list[dict[str, Any]]:
    """Neutral messages as Messages API turns (system messages go to ``system``).

    Tool results of one turn become one user message of ``tool_result`` blocks, and a
    user message right after them joins it as a text block (results must come first).
    An empty assistant turn is dropped: the API rejects empty content.
    """
    wire: list[dict[str, Any]] = []
    results: list[dict[str, Any]] | None = None  # the open user message of tool results
    for message in messages:
        if message.role == "system":
            continue
        if message.role == "tool":
            block = tool_result_block(message)
            if results is None:
                results = [block]
                wire.append({"role": "user", "content": results})
            else:
                results.append(block)
            continue
        if message.role == "user" and results is not None:
            if message.content:
                results.append({"type": "text", "text": message.content})
            results = None
            continue
        results = None
        if message.role == "assistant":
            content = assistant_content(message)
            if content:
                wire.append({"role": "assistant", "content": content})
        else:
            wire.append({"role": "user", "content": message.content})
    return wire


def assistant_content(message: Message) -> str | list[dict[str, Any]]:
    if not message.tool_calls:
        return message.content
    blocks: list[dict[str, Any]] = []
    if message.content:
        blocks.append({"type": "text", "text": message.content})
    blocks.extend(
        {
            "type": "tool_use",
            "id": call.id,
            "name": call.name,
            "input": parse_arguments(call.arguments),
        }
        for call in message.tool_calls
    )
    return blocks


def tool_result_block(message: Message) -> dict[str, Any]:
    if not message.tool_call_id:
        raise UsageError("a tool message needs the tool_call_id of the call it answers")
    block: dict[str, Any] = {
        "type": "tool_result",
        "tool_use_id": message.tool_call_id,
        "content": message.content,
    }
    if message.is_error:
        block["is_error"] = True
    return block


def wire_tool(tool: ToolSchema) -> dict[str, Any]:
    wire: dict[str, Any] = {"name": tool.name}
    if tool.description:
        wire["description"] = tool.description
    wire["input_schema"] = tool.parameters
    return wire


def wire_tool_choice(choice: ToolChoice) -> dict[str, Any]:
    if choice.mode == "required":
        return {"type": "tool", "name": choice.name} if choice.name else {"type": "any"}
    return {"type": choice.mode}
