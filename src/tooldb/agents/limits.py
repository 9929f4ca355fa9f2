"""The limits of one agent run: every loop ends, and says which limit ended it."""

from __future__ import annotations

from dataclasses import dataclass, fields, replace
from typing import Any

from ..errors import UsageError
from ..settings import Settings


@dataclass(frozen=True)
class Limits:
    """``max_iterations`` model turns, ``max_tool_calls`` tool calls in the whole run,
    ``max_retries_per_tool`` argument errors forgiven per tool, ``timeout_s`` wall clock."""

    max_iterations: int = 10
    max_tool_calls: int = 15
    max_retries_per_tool: int = 2
    timeout_s: float = 300.0

    def __post_init__(self) -> None:
        for item in fields(self):
            value = getattr(self, item.name)
            if isinstance(value, bool) or not isinstance(value, int | float) or value <= 0:
                if item.name == "max_retries_per_tool" and value == 0:
                    continue
                raise UsageError(f"limit {item.name} must be a positive number, got {value!r}")

    @classmethod
    def from_settings(cls, settings: Settings) -> Limits:
        return cls(
            max_iterations=settings.agent_max_iterations,
            max_tool_calls=settings.agent_max_tool_calls,
            max_retries_per_tool=settings.agent_max_retries_per_tool,
            timeout_s=settings.agent_timeout_s,
        )

    def updated(self, values: dict[str, Any] | None) -> Limits:
        """These limits with some replaced (an agent's or a sub-task's own limits)."""
        if not values:
            return self
        known = {item.name for item in fields(self)}
        unknown = sorted(set(values) - known)
        if unknown:
            raise UsageError(f"unknown limit(s) {unknown}: use {sorted(known)}")
        return replace(self, **{k: v for k, v in values.items() if v is not None})

    def as_json(self) -> dict[str, Any]:
        return {item.name: getattr(self, item.name) for item in fields(self)}
