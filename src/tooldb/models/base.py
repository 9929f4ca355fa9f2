"""The Model protocol and the provider-neutral message types the agent loop speaks.

A provider adapter (openai.py, anthropic.py) translates these to and from its wire
format; the loop never sees a provider's types. Tool call arguments stay the raw
text the model produced, so malformed JSON reaches the loop (which tells the model)
instead of failing inside an adapter.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from enum import StrEnum
from typing import Any, Literal, Protocol, runtime_checkable

from pydantic import BaseModel, ConfigDict, Field, field_validator

Role = Literal["system", "user", "assistant", "tool"]

#: ``json.dumps(value, ensure_ascii=False)`` without building an encoder per call.
_ARGUMENTS_TEXT = json.JSONEncoder(ensure_ascii=False).encode


class ToolCall(BaseModel):
    """One call a model asked for: ``arguments`` is its JSON text, verbatim."""

    model_config = ConfigDict(frozen=True)

    id: str
    name: str
    arguments: str = "{}"

    @field_validator("arguments", mode="before")
    @classmethod
    def _text(cls, value: Any) -> str:
        if value is None:
            return "{}"
        if isinstance(value, str):
            return value
        return _ARGUMENTS_TEXT(value)


class Message(BaseModel):
    """One message of a conversation in the provider-neutral form.

    ``tool`` messages carry the result of the call ``tool_call_id`` (``name`` is the
    tool's name; ``is_error`` marks a failed call, which some providers transmit).
    """

    role: Role
    content: str = ""
    tool_calls: list[ToolCall] = Field(default_factory=list)
    tool_call_id: str | None = None
    name: str | None = None
    is_error: bool = False

    @classmethod
    def system(cls, content: str) -> Message:
        return cls(role="system", content=content)

    @classmethod
    def user(cls, content: str) -> Message:
        return cls(role="user", content=content)

    @classmethod
    def tool_result(cls, call: ToolCall, content: str, *, is_error: bool = False) -> Message:
        return cls(
            role="tool", content=content, tool_call_id=call.id, name=call.name, is_error=is_error
        )


class ToolSchema(BaseModel):
    """A tool as offered to a model: name, description, JSON Schema of its arguments."""

    model_config = ConfigDict(frozen=True)

    name: str
    description: str = ""
    parameters: dict[str, Any] = Field(default_factory=lambda: {"type": "object", "properties": {}})


class Usage(BaseModel):
    """Token counts of one model turn (or summed over a run)."""

    input_tokens: int = 0
    output_tokens: int = 0

    def __add__(self, other: Usage) -> Usage:
        return Usage(
            input_tokens=self.input_tokens + other.input_tokens,
            output_tokens=self.output_tokens + other.output_tokens,
        )


class StopReason(StrEnum):
    """Why a model turn ended, normalised across providers."""

    END = "end"  # the model finished its answer
    TOOL_CALLS = "tool_calls"  # the model wants tools run
    MAX_TOKENS = "max_tokens"  # cut off by the output token limit
    REFUSAL = "refusal"  # content filter or refusal
    OTHER = "other"


class ModelTurn(BaseModel):
    """What one model call returned: text and/or tool calls, why it stopped, its cost."""

    text: str = ""
    tool_calls: list[ToolCall] = Field(default_factory=list)
    stop_reason: StopReason = StopReason.END
    usage: Usage = Field(default_factory=Usage)
    model: str | None = None

    def message(self) -> Message:
        """The assistant message this turn adds to the conversation."""
        return Message(role="assistant", content=self.text, tool_calls=list(self.tool_calls))


@dataclass(frozen=True)
class ToolChoice:
    """``auto`` (the model decides), ``required`` (must call a tool; ``name`` pins one),
    or ``none`` (must answer in text)."""

    mode: Literal["auto", "required", "none"] = "auto"
    name: str | None = None

    @classmethod
    def parse(cls, value: str | ToolChoice | None) -> ToolChoice:
        """``auto`` | ``required`` | ``none`` | ``required:TOOL`` (or a ToolChoice)."""
        if value is None:
            return cls()
        if isinstance(value, ToolChoice):
            return value
        mode, _, name = str(value).partition(":")
        if mode not in {"auto", "required", "none"}:
            from ..errors import UsageError

            raise UsageError(
                f"tool choice {value!r} is not one of auto, required, required:TOOL, none"
            )
        if name and mode != "required":
            from ..errors import UsageError

            raise UsageError(f"tool choice {value!r}: only 'required' can name a tool")
        return cls(mode, name or None)  # type: ignore[arg-type]


@runtime_checkable
class Model(Protocol):
    """A chat model that can call tools. ``id`` is the ``provider:model`` string."""

    id: str

    async def complete(
        self,
        messages: list[Message],
        tools: list[ToolSchema],
        tool_choice: ToolChoice,
    ) -> ModelTurn: ...
