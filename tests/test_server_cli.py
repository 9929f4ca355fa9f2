"""``tooldb keys`` and ``tooldb serve`` from the command line, the server as a real
process on 127.0.0.1."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from pathlib import Path

import httpx
from typer.testing import CliRunner

from tests.server_support import free_port
from tooldb.cli import app

ROOT = Path(__file__).resolve().parent.parent
runner = CliRunner()


def test_keys_create_list_revoke(store_url: str) -> None:
    created = runner.invoke(
        app, ["--db", store_url, "keys", "create", "--tenant", "acme", "--scope", "call", "--json"]
    )
    assert created.exit_code == 0, created.output
    shown = json.loads(created.stdout)
    key = shown["key"]
    assert key.startswith("tdb_") and (shown["tenant"], shown["scope"]) == ("acme", "call")
    listed = runner.invoke(app, ["--db", store_url, "keys", "list", "--tenant", "acme", "--json"])
    rows = json.loads(listed.stdout)["keys"]
    assert [(r["prefix"], r["scope"], r["revoked_at"]) for r in rows] == [
        (key.split("_")[1], "call", None)
    ]
    assert key not in listed.stdout and "key_hash" not in listed.stdout  # shown once only
    other = runner.invoke(app, ["--db", store_url, "keys", "list", "--json"])
    assert json.loads(other.stdout)["keys"] == []  # tenant default has none
    wrong = runner.invoke(app, ["--db", store_url, "keys", "revoke", key.split("_")[1]])
    assert wrong.exit_code == 2 and "no live key" in wrong.output  # another tenant's key
    revoked = runner.invoke(
        app, ["--db", store_url, "keys", "revoke", key.split("_")[1], "--tenant", "acme"]
    )
    assert revoked.exit_code == 0
    bad = runner.invoke(app, ["--db", store_url, "keys", "create", "--scope", "root"])
    assert bad.exit_code == 2 and "unknown scope 'root'" in bad.output


def test_serve_as_a_process(sqlite_url: str, tmp_path: Path) -> None:
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(ROOT / "src"), str(ROOT)])}
    env["TOOLDB_URL"] = sqlite_url

    def tooldb(*args: str) -> subprocess.CompletedProcess[str]:
        return subprocess.run([sys.executable, "-m", "tooldb", *args], env=env,
                              capture_output=True, text=True, timeout=60)  # fmt: skip

    assert tooldb("add", "python", "tests.sample_tools").returncode == 0
    key = json.loads(tooldb("keys", "create", "--scope", "call", "--json").stdout)["key"]
    refused = tooldb("serve", "--no-auth", "--host", "0.0.0.0")
    assert refused.returncode == 2 and "loopback" in refused.stderr
    for no_auth in (False, True):
        port = free_port()
        args = [sys.executable, "-m", "tooldb", "serve", "--port", str(port)]
        server = subprocess.Popen(
            args + (["--no-auth"] if no_auth else []),
            env=env, stderr=subprocess.PIPE, text=True,
        )  # fmt: skip
        try:
            base = f"http://127.0.0.1:{port}"
            deadline = time.monotonic() + 30
            while True:
                try:
                    httpx.get(f"{base}/api/openapi.json", timeout=1)
                    break
                except httpx.TransportError:
                    assert time.monotonic() < deadline and server.poll() is None
                    time.sleep(0.1)
            anonymous = httpx.get(f"{base}/api/tools")
            assert anonymous.status_code == (200 if no_auth else 401)
            answer = httpx.post(
                f"{base}/api/tools/add/call",
                json={"arguments": {"a": 1, "b": 2}},
                headers={"Authorization": f"Bearer {key}"},
            )
            assert answer.status_code == 200 and answer.json()["data"] == 3
        finally:
            server.terminate()
            _, stderr = server.communicate(timeout=20)
        assert "tooldb serve: http://127.0.0.1:" in stderr
        assert ("--no-auth" in stderr) is no_auth
