"""Helpers for the OODA tests: planted calls written through the store's recording path."""

from __future__ import annotations

from collections.abc import Callable, Sequence

from tooldb import Registry

HOUR = 3600.0
DAY = 86_400.0


Opener = Callable[..., Registry]


def log_calls(
    registry: Registry,
    name: str,
    outcomes: Sequence[bool],
    *,
    start: float,
    end: float,
    durations: Sequence[float] | None = None,
    error_kind: str | None = None,
) -> None:
    """Record one call per outcome, stamped evenly over [start, end), through the store
    (``record_calls``: log rows and counters in one transaction, as ``Registry.call``
    keeps them); ``error_kind='arguments'`` rows are logged but not counted, like a call
    rejected at binding."""
    tool = registry.get(name)
    step = (end - start) / max(len(outcomes), 1)
    failed_kind = error_kind or "execution"
    registry.store.record_calls(
        [
            {
                "tenant": registry.tenant,
                "tool_id": tool.id,
                "tool_name": name,
                "tool_version": tool.version,
                "run_id": None,
                "session_id": "test",
                "arguments": {},
                "success": ok,
                "error_kind": None if ok else failed_kind,
                "error": None if ok else "planted",
                "output_size": 0,
                "output_preview": None,
                "duration_ms": durations[i] if durations is not None else 10.0,
                "started_at": start + (i + 0.5) * step,
            }
            for i, ok in enumerate(outcomes)
        ]
    )


def pattern(calls: int, successes: int) -> list[bool]:
    """``successes`` True spread evenly among ``calls`` outcomes (deterministic)."""
    return [(i * successes) // calls != ((i + 1) * successes) // calls for i in range(calls)]


def tool_spec(name: str, description: str = "", category: str = "general") -> dict[str, str]:
    return {
        "name": name,
        "description": description or f"The {name.replace('_', ' ')} tool.",
        "category": category,
        "target": "tests.sample_tools:noop",
    }
