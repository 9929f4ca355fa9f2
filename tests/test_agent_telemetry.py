"""`tooldb run` exports its spans by the standard OpenTelemetry environment variables:
chat spans are of kind CLIENT with GenAI finish reasons; an OTLP endpoint without the
exporter installed is said plainly and the run goes on. A process-wide provider, hence
a subprocess per case."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

SCRIPT = """
import sys
import tooldb
import tests.sample_tools as st
from tooldb.cli import app
from tooldb.models import ScriptedModel, call, register_model

url = sys.argv[1]
reg = tooldb.open(url)
reg.add(st.add)
reg.close()
register_model("test:otel", ScriptedModel([call("add", {"a": 1}), "done"]))
try:
    app(["--db", url, "run", "add one", "--model", "test:otel", "--max-iterations", "4"])
except SystemExit as exit:
    sys.stderr.write(f"exit {exit.code}\\n")
"""


def _run(
    sqlite_url: str, *, first_on_path: Path | None = None, **env: str
) -> subprocess.CompletedProcess[str]:
    root = Path(__file__).resolve().parents[1]
    environment = {k: v for k, v in os.environ.items() if not k.startswith("OTEL_")}
    path = [str(first_on_path)] if first_on_path is not None else []
    environment["PYTHONPATH"] = os.pathsep.join([*path, str(root / "src"), str(root)])
    return subprocess.run(
        [sys.executable, "-c", SCRIPT, sqlite_url],
        capture_output=True,
        text=True,
        timeout=120,
        env={**environment, **env},
        cwd=root,
        check=False,
    )


def _spans(text: str) -> list[dict[str, Any]]:
    decoder, found, index = json.JSONDecoder(), [], 0
    while (start := text.find("{", index)) != -1:
        try:
            value, index = decoder.raw_decode(text, start)
        except ValueError:
            index = start + 1
            continue
        if isinstance(value, dict) and "kind" in value:
            found.append(value)
    return found


def test_console_export_has_client_chat_spans_with_genai_finish_reasons(
    sqlite_url: str,
) -> None:
    done = _run(sqlite_url, OTEL_TRACES_EXPORTER="console")
    assert "exit 0" in done.stderr, done.stderr
    spans = {span["name"]: span for span in _spans(done.stderr)}
    chats = [span for name, span in spans.items() if name.startswith("chat ")]
    assert chats and all(span["kind"] == "SpanKind.CLIENT" for span in chats)
    reasons = sorted(
        reason for span in _spans(done.stderr) if span["name"].startswith("chat ")
        for reason in span["attributes"]["gen_ai.response.finish_reasons"]
    )  # fmt: skip
    assert reasons == ["stop", "tool_calls"]
    assert spans["execute_tool add"]["kind"] == "SpanKind.INTERNAL"
    assert spans["invoke_agent tooldb"]["resource"]["attributes"]["service.name"] == "tooldb"


def test_an_otlp_endpoint_without_the_exporter_is_said_and_the_run_goes_on(
    sqlite_url: str, tmp_path: Path
) -> None:
    """Runs whether or not the exporter is installed: the child process's
    sitecustomize makes both exporters unimportable, as on an install without them."""
    (tmp_path / "sitecustomize.py").write_text(
        "import sys\n"
        "for name in ('opentelemetry.exporter.otlp.proto.http.trace_exporter',\n"
        "             'opentelemetry.exporter.otlp.proto.grpc.trace_exporter'):\n"
        "    sys.modules[name] = None\n"
    )
    done = _run(sqlite_url, first_on_path=tmp_path,
                OTEL_EXPORTER_OTLP_ENDPOINT="http://127.0.0.1:4318")  # fmt: skip
    assert "exit 0" in done.stderr, done.stderr
    assert "the OTLP exporter is not installed, so no spans are sent" in done.stderr
    assert "pip install 'tooldb[otel]'" in done.stderr
