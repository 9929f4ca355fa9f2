"""OpenTelemetry spans for runs, model turns and tool calls (GenAI semantic conventions).

Spans go through the OpenTelemetry API, which is a no-op until the application
installs a TracerProvider; without the ``otel`` extra a null tracer stands in.
Attribute names follow the GenAI conventions: ``gen_ai.operation.name``
(invoke_agent | chat | execute_tool), ``gen_ai.request.model``,
``gen_ai.usage.input_tokens``/``output_tokens``, ``gen_ai.tool.name``,
``gen_ai.tool.call.id``, ``gen_ai.conversation.id`` (the run id).
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from ..models.base import ModelTurn
    from ..settings import Settings
    from ..types import RunResult, ToolResult


#: StopReason values as the GenAI convention's finish reasons (OpenAI's vocabulary).
FINISH_REASONS = {
    "end": "stop",
    "tool_calls": "tool_calls",
    "max_tokens": "length",
    "refusal": "content_filter",
}


class SpanHandle:
    """What the loop may add to a span it opened (no-op without a real span)."""

    def __init__(self, span: Any = None) -> None:
        self.span = span

    def set(self, key: str, value: Any) -> None:
        if self.span is not None and value is not None:
            self.span.set_attribute(key, value)

    def set_usage(self, turn: ModelTurn) -> None:
        if self.span is None:
            return
        self.set("gen_ai.response.model", turn.model)
        self.set("gen_ai.usage.input_tokens", turn.usage.input_tokens)
        self.set("gen_ai.usage.output_tokens", turn.usage.output_tokens)
        reason = FINISH_REASONS.get(turn.stop_reason.value, turn.stop_reason.value)
        self.set("gen_ai.response.finish_reasons", [reason])

    def set_result(self, result: RunResult | ToolResult) -> None:
        if self.span is None:
            return
        from ..types import RunResult

        if isinstance(result, RunResult):
            self.set("tooldb.run.status", result.status.value)
            self.set("gen_ai.usage.input_tokens", result.input_tokens)
            self.set("gen_ai.usage.output_tokens", result.output_tokens)
            failed = result.status.value != "success"
            error = result.review_reason or result.error
        else:
            failed = not result.success
            error = result.error
            self.set("tooldb.call.id", result.call_id)
        if failed:
            from opentelemetry.trace import Status, StatusCode

            self.set("error.type", "tool_error" if not isinstance(result, RunResult) else "run")
            self.span.set_status(Status(StatusCode.ERROR, (error or "")[:500]))


class Tracer:
    """Opens the three kinds of span; a Tracer without an OTel tracer does nothing."""

    def __init__(self, otel_tracer: Any = None, *, global_provider: bool = False) -> None:
        self._tracer = otel_tracer
        self._global_provider = global_provider

    def for_run(self) -> Tracer:
        """The tracer one run uses: this one, or the null tracer while no provider is
        installed (decided once per run, not once per span)."""
        if self._tracer is None or (self._global_provider and not _provider_installed()):
            return NULL_TRACER
        return self

    @contextmanager
    def _span(
        self, name: str, attributes: dict[str, Any], client: bool = False
    ) -> Iterator[SpanHandle]:
        if self._tracer is None or (self._global_provider and not _provider_installed()):
            yield SpanHandle()
            return
        from opentelemetry.trace import SpanKind

        clean = {k: v for k, v in attributes.items() if v is not None}
        kind = SpanKind.CLIENT if client else SpanKind.INTERNAL  # a model is a remote call
        with self._tracer.start_as_current_span(name, kind=kind, attributes=clean) as span:
            yield SpanHandle(span)

    def run_span(self, run_id: str, agent: str | None, model: str | None) -> Any:
        return self._span(
            f"invoke_agent {agent or 'tooldb'}",
            {
                "gen_ai.operation.name": "invoke_agent",
                "gen_ai.agent.name": agent,
                "gen_ai.conversation.id": run_id,
                "gen_ai.request.model": model,
                "tooldb.run.id": run_id,
            },
        )

    def model_span(self, model: str, iteration: int) -> Any:
        provider, _, name = model.partition(":")
        return self._span(
            f"chat {name or model}",
            {
                "gen_ai.operation.name": "chat",
                "gen_ai.provider.name": provider,
                "gen_ai.request.model": name or model,
                "tooldb.iteration": iteration,
            },
            client=True,
        )

    def tool_span(self, tool: str, call_id: str) -> Any:
        return self._span(
            f"execute_tool {tool}",
            {
                "gen_ai.operation.name": "execute_tool",
                "gen_ai.tool.name": tool,
                "gen_ai.tool.call.id": call_id,
                "gen_ai.tool.type": "function",
            },
        )


class _NullSpan:
    """The span context of the null tracer: one shared object, nothing to build."""

    __slots__ = ()

    def __enter__(self) -> SpanHandle:
        return _NULL_HANDLE

    def __exit__(self, *_: object) -> None:
        return None


_NULL_HANDLE = SpanHandle()
_NULL_SPAN = _NullSpan()


class _NullTracer(Tracer):
    """No OpenTelemetry: every span is the shared no-op (three per agent turn, so not
    even an attribute dict is built)."""

    def for_run(self) -> Tracer:
        return self

    def run_span(self, run_id: str, agent: str | None, model: str | None) -> Any:
        return _NULL_SPAN

    def model_span(self, model: str, iteration: int) -> Any:
        return _NULL_SPAN

    def tool_span(self, tool: str, call_id: str) -> Any:
        return _NULL_SPAN


NULL_TRACER: Tracer = _NullTracer()


def _provider_installed() -> bool:
    """Whether the application installed a TracerProvider (now: it may do so after the
    loop was built). Until then the API's spans are no-ops that still cost ~10 µs each
    to build, three per agent turn."""
    from opentelemetry import trace

    return not isinstance(trace.get_tracer_provider(), trace.ProxyTracerProvider)


def tracer_for(settings: Settings | None = None) -> Tracer:
    """The OpenTelemetry tracer when the API is installed (a no-op until a provider is
    configured), else the null tracer."""
    try:
        from opentelemetry import trace
    except ImportError:
        return NULL_TRACER
    return Tracer(trace.get_tracer("tooldb"), global_provider=True)
