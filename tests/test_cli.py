"""The `tooldb` command: output contracts, exit codes, tenants, --json documents."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
from typer.testing import CliRunner

from tooldb.cli import app
from tooldb.stores.migrate import HEAD

ROOT = Path(__file__).resolve().parent.parent
runner = CliRunner()


def tooldb(url: str, *args: str, tenant: str | None = None) -> Any:
    prefix = ["--db", url] + (["--tenant", tenant] if tenant else [])
    return runner.invoke(app, [*prefix, *args])


def as_json(url: str, *args: str, code: int = 0, tenant: str | None = None) -> Any:
    result = tooldb(url, *args, "--json", tenant=tenant)
    assert result.exit_code == code, result.output
    return json.loads(result.stdout)


@pytest.fixture
def url(store_url: str) -> str:
    assert tooldb(store_url, "add", "python", "tests.sample_tools").exit_code == 0
    return store_url


def test_init_creates_then_reports_up_to_date(tmp_path: Path) -> None:
    fresh = f"sqlite:///{tmp_path / 'new.db'}"
    first = as_json(fresh, "init")
    assert first["revision_before"] is None and first["revision"] == HEAD
    second = tooldb(fresh, "init")
    assert second.exit_code == 0 and "up to date" in second.stdout


def test_init_on_existing_registry_keeps_data(url: str) -> None:
    assert tooldb(url, "call", "add", "--args", '{"a": 1}').exit_code == 0
    assert tooldb(url, "init").exit_code == 0
    assert as_json(url, "show", "add")["stats"]["usage_count"] == 1


def test_list_show_and_versions(url: str) -> None:
    listed = as_json(url, "list")["tools"]
    assert "add" in {t["name"] for t in listed}
    assert {t["category"] for t in as_json(url, "list", "--category", "math")["tools"]} == {"math"}
    assert as_json(url, "list", "--kind", "sql")["tools"] == []
    shown = as_json(url, "show", "add")
    assert shown["parameters"]["required"] == ["a"] and shown["versions"][0]["version"] == 1
    assert tooldb(url, "show", "add").exit_code == 0


def test_call_outputs_and_exit_codes(url: str) -> None:
    ok = tooldb(url, "call", "add", "--args", '{"a": 2, "b": 3}')
    assert (ok.exit_code, ok.stdout) == (0, "5\n")
    doc = as_json(url, "call", "add", "--args", '{"a": "2"}')
    assert doc["success"] is True and doc["data"] == 3 and set(doc) >= {
        "success", "output", "data", "error", "duration_ms"
    }  # fmt: skip
    failed = as_json(url, "call", "fail", code=1)
    assert failed["success"] is False and failed["error"] == "RuntimeError: boom"
    assert tooldb(url, "call", "fail").exit_code == 1


def test_usage_errors_exit_2_with_clear_messages(url: str) -> None:
    unknown = tooldb(url, "call", "ghost")
    assert unknown.exit_code == 2 and "no tool named 'ghost'" in unknown.stderr
    bad = tooldb(url, "call", "add", "--args", '{"a": "lots"}')
    assert bad.exit_code == 2
    assert "parameter 'a' expected integer, got string \"lots\"" in bad.stderr.replace("\n", " ")
    error = as_json(url, "call", "add", "--args", '{"a": "lots"}', code=2)["error"]
    assert error["type"] == "ArgumentError" and error["parameter"] == "a"
    malformed = tooldb(url, "call", "add", "--args", "{a: 1")
    assert malformed.exit_code == 2 and "not valid JSON" in malformed.stderr
    extra = tooldb(url, "call", "add", "--args", '{"a": 1, "z": 0}')
    assert extra.exit_code == 2 and "unknown parameter 'z'" in extra.stderr
    assert tooldb(url, "show", "ghost").exit_code == 2
    assert tooldb(url, "no-such-command").exit_code == 2


def test_enable_disable_remove(url: str) -> None:
    assert as_json(url, "disable", "add") == {"kind": "tool", "name": "add", "action": "disabled"}
    disabled = tooldb(url, "call", "add", "--args", '{"a": 1}')
    assert disabled.exit_code == 2 and "disabled" in disabled.stderr
    assert "add" not in {t["name"] for t in as_json(url, "list")["tools"]}
    assert "add" in {t["name"] for t in as_json(url, "list", "--all")["tools"]}
    assert tooldb(url, "enable", "add").exit_code == 0
    assert tooldb(url, "call", "add", "--args", '{"a": 1}').exit_code == 0
    assert tooldb(url, "remove", "add").exit_code == 0
    assert tooldb(url, "remove", "add").exit_code == 2


def test_tenants_are_isolated(url: str) -> None:
    other = tooldb(url, "call", "add", "--args", '{"a": 1}', tenant="other")
    assert other.exit_code == 2 and "tenant 'other'" in other.stderr
    assert as_json(url, "list", "--all", tenant="other")["tools"] == []


def test_stats_and_calls(url: str) -> None:
    for a in (1, 2):
        tooldb(url, "call", "add", "--args", json.dumps({"a": a}))
    tooldb(url, "call", "fail")
    stats = {t["name"]: t for t in as_json(url, "stats")["tools"]}
    assert stats["add"]["usage_count"] == 2 and stats["add"]["success_rate"] == 1.0
    assert stats["fail"]["success_rate"] == 0.0
    recent = as_json(url, "calls", "--tool", "add", "--limit", "1")["calls"]
    assert len(recent) == 1 and recent[0]["arguments"] == {"a": 2, "b": 1}
    assert len(as_json(url, "calls")["calls"]) == 3
    assert tooldb(url, "stats").exit_code == 0 and tooldb(url, "calls").exit_code == 0


def test_add_manifest_reports_and_rejects(url: str, tmp_path: Path) -> None:
    added = as_json(url, "add", "manifest", str(ROOT / "examples" / "tools.yaml"))["tools"]
    assert {t["status"] for t in added} == {"created"}
    bad = tmp_path / "bad.yaml"
    bad.write_text("tools:\n  - name: x\n    kind: telepathy\n    target: helper\n")
    result = tooldb(url, "add", "manifest", str(bad))
    assert result.exit_code == 2 and "field 'kind'" in result.stderr
    missing = tooldb(url, "add", "manifest", str(tmp_path / "nope.yaml"))
    assert missing.exit_code == 2 and "does not exist" in missing.stderr


def test_cli_reference_is_in_sync() -> None:
    sys.path.insert(0, str(ROOT / "scripts"))
    try:
        from gen_cli_docs import TARGET, render
    finally:
        sys.path.pop(0)
    assert TARGET.read_text() == render(), "docs/cli.md is stale: run scripts/gen_cli_docs.py"


def test_real_process_default_store_and_exit_codes(tmp_path: Path) -> None:
    """The installed entry point, the default SQLite location, and exit codes end to end."""
    env = {**os.environ, "TOOLDB_HOME": str(tmp_path / "home"), "PYTHONPATH": str(ROOT)}
    env.pop("TOOLDB_URL", None)

    def run(*args: str) -> subprocess.CompletedProcess[str]:
        return subprocess.run(
            [sys.executable, "-m", "tooldb", *args], env=env, capture_output=True, text=True,
            timeout=60, cwd=tmp_path,
        )  # fmt: skip

    assert run("init").returncode == 0
    assert (tmp_path / "home" / "registry.db").is_file()
    assert run("add", "python", "tooldb.examples.basic").returncode == 0
    ok = run("call", "slugify", "--args", '{"text": "Hello, Wörld!"}')
    assert (ok.returncode, ok.stdout) == (0, "hello-world\n")
    assert run("call", "slugify", "--args", "{}").returncode == 2
    assert run("call", "describe_numbers", "--args", '{"values": []}').returncode == 1
    listed = run("list", "--json")
    assert json.loads(listed.stdout)["tools"] and listed.stderr == ""
