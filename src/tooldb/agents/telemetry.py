"""Exporting the agent spans from ``tooldb run`` by the standard OpenTelemetry
environment variables, so a user sees runs in their collector without writing code.

- ``OTEL_EXPORTER_OTLP_ENDPOINT`` (or ``OTEL_EXPORTER_OTLP_TRACES_ENDPOINT``) set: spans
  go to it over OTLP (``OTEL_EXPORTER_OTLP_PROTOCOL``: ``http/protobuf``, the default,
  or ``grpc``). The OTLP exporter is not a dependency of tooldb (it brings protobuf and
  gRPC or requests): install ``tooldb[otel]``; without it ``tooldb run`` says so on
  stderr and runs untraced.
- ``OTEL_TRACES_EXPORTER=console``: spans printed to stderr as JSON (the SDK's own
  console exporter), e.g. to check a setup. ``none`` turns exporting off.

An application that installed its own TracerProvider keeps it: nothing is replaced.
"""

from __future__ import annotations

import os
import sys
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

INSTALL_HINT = "pip install 'tooldb[otel]' (opentelemetry-exporter-otlp-proto-http)"


@contextmanager
def exporting_spans() -> Iterator[None]:
    """Install a TracerProvider exporting as the environment asks, for the duration of a
    command (spans are flushed when it ends)."""
    provider = _provider_from_environment()
    try:
        yield
    finally:
        if provider is not None:
            provider.shutdown()  # flushes the batch before the process exits


def _provider_from_environment() -> Any:
    exporter_name = os.environ.get("OTEL_TRACES_EXPORTER", "otlp").strip().lower()
    endpoint = os.environ.get("OTEL_EXPORTER_OTLP_TRACES_ENDPOINT") or os.environ.get(
        "OTEL_EXPORTER_OTLP_ENDPOINT"
    )
    if exporter_name == "none" or (exporter_name == "otlp" and not endpoint):
        return None
    try:
        from opentelemetry import trace
        from opentelemetry.sdk.resources import Resource
        from opentelemetry.sdk.trace import TracerProvider
        from opentelemetry.sdk.trace.export import BatchSpanProcessor, SimpleSpanProcessor
    except ImportError:
        _warn(f"tracing is asked for but opentelemetry-sdk is not installed: {INSTALL_HINT}")
        return None
    if not isinstance(trace.get_tracer_provider(), trace.ProxyTracerProvider):
        return None  # the application installed its own
    if exporter_name == "console":
        from opentelemetry.sdk.trace.export import ConsoleSpanExporter

        processor: Any = SimpleSpanProcessor(ConsoleSpanExporter(out=sys.stderr))
    elif exporter_name == "otlp":
        exporter = _otlp_exporter()
        if exporter is None:
            _warn(
                f"OTEL_EXPORTER_OTLP_ENDPOINT is set ({endpoint}) but the OTLP exporter is not "
                f"installed, so no spans are sent: {INSTALL_HINT}"
            )
            return None
        processor = BatchSpanProcessor(exporter)
    else:
        _warn(f"OTEL_TRACES_EXPORTER={exporter_name!r} is not supported (otlp, console, none)")
        return None
    service = os.environ.get("OTEL_SERVICE_NAME", "tooldb")
    provider = TracerProvider(resource=Resource.create({"service.name": service}))
    provider.add_span_processor(processor)
    trace.set_tracer_provider(provider)
    return provider


def _otlp_exporter() -> Any:
    protocol = os.environ.get("OTEL_EXPORTER_OTLP_PROTOCOL", "http/protobuf").strip().lower()
    try:
        if protocol == "grpc":
            from opentelemetry.exporter.otlp.proto.grpc.trace_exporter import (
                OTLPSpanExporter,
            )
        else:
            from opentelemetry.exporter.otlp.proto.http.trace_exporter import (
                OTLPSpanExporter,
            )
    except ImportError:
        return None
    return OTLPSpanExporter()


def _warn(text: str) -> None:
    sys.stderr.write(f"tooldb: {text}\n")
