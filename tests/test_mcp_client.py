"""The mcp tool kind against real MCP servers nobody here wrote (mcp-server-time,
mcp-server-git), run as subprocesses; one session per server is shared by the module."""

from __future__ import annotations

import asyncio
import json
import os
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from pathlib import Path

import pytest
from typer.testing import CliRunner

import tooldb
from tooldb import (
    ArgumentError,
    DefinitionError,
    ErrorKind,
    ExecutionError,
    Registry,
    ToolKind,
    ToolSpec,
    UsageError,
)
from tooldb.cli import app
from tooldb.mcp.sessions import SessionManager

from .mcp_support import (
    GIT_SERVER,
    HOSTILE_SERVER,
    ROOT,
    TIME_SERVER,
    children,
    gone,
    open_with,
    wait_until,
)

runner = CliRunner()


@pytest.fixture(scope="module")
def sessions() -> Iterator[SessionManager]:
    manager = SessionManager()
    yield manager
    manager.close()


@pytest.fixture
def reg(store_url: str, sessions: SessionManager) -> Iterator[Registry]:
    registry = open_with(store_url, sessions)
    registry.add_mcp("time", command=TIME_SERVER)
    yield registry
    registry.close()


def test_import_registers_each_tool_with_the_server_schema(reg: Registry) -> None:
    tools = {t.name: t for t in reg.list(kind="mcp")}
    assert set(tools) == {"time__get_current_time", "time__convert_time"}
    spec = tools["time__convert_time"].spec
    assert spec.kind is ToolKind.MCP and spec.target == "time/convert_time"
    assert spec.category == "time" and spec.description == "Convert time between timezones"
    assert spec.parameters["required"] == ["source_timezone", "time", "target_timezone"]
    assert spec.metadata["server"] == {
        "transport": "stdio", "command": TIME_SERVER[0], "args": TIME_SERVER[1:],
    }  # fmt: skip
    assert spec.metadata["annotations"]["readOnlyHint"] is True
    again = reg.add_mcp("time", command=TIME_SERVER)
    assert {o.status for o in again} == {"unchanged"}


def test_call_returns_text_output_and_structured_data(reg: Registry) -> None:
    result = reg.call("time__convert_time", {
        "source_timezone": "UTC", "time": "12:00", "target_timezone": "Asia/Tokyo",
    })  # fmt: skip
    assert result.success, result.error
    assert result.data["time_difference"] == "+9.0h"
    assert json.loads(result.output)["target"]["datetime"].endswith("T21:00:00+09:00")
    (record,) = reg.calls(tool="time__convert_time")
    assert record.success and record.id == result.call_id
    assert reg.get("time__convert_time").stats.usage_count == 1


def test_server_error_result_is_a_failed_call_and_the_session_survives(reg: Registry) -> None:
    failed = reg.call("time__get_current_time", {"timezone": "Mars/Olympus_Mons"})
    assert not failed.success and "Mars/Olympus_Mons" in (failed.error or "")
    assert reg.calls(tool="time__get_current_time")[0].error_kind is ErrorKind.EXECUTION
    assert reg.call("time__get_current_time", {"timezone": "UTC"}).data["timezone"] == "UTC"


def test_arguments_are_bound_before_the_server_sees_them(reg: Registry) -> None:
    with pytest.raises(ArgumentError, match="timezone"):
        reg.call("time__get_current_time", {})
    with pytest.raises(ArgumentError, match="unknown parameter 'extra'"):
        reg.call("time__get_current_time", {"timezone": "UTC", "extra": 1})


def test_one_session_serves_threads_and_event_loops(
    reg: Registry, sessions: SessionManager
) -> None:
    results: list[bool] = []

    def work() -> None:
        for _ in range(5):
            results.append(reg.call("time__get_current_time", {"timezone": "UTC"}).success)

    pool = [threading.Thread(target=work) for _ in range(4)]
    for thread in pool:
        thread.start()
    for thread in pool:
        thread.join()

    async def gathered() -> list[bool]:
        calls = [reg.acall("time__get_current_time", {"timezone": "Asia/Tokyo"}) for _ in range(5)]
        return [r.success for r in await asyncio.gather(*calls)]

    assert results == [True] * 20 and asyncio.run(gathered()) == [True] * 5
    assert len(children("mcp_server_time")) == 1


def test_mcp_server_git_on_a_real_repository(tmp_path: Path, sqlite_url: str) -> None:
    repo = tmp_path / "repo"
    repo.mkdir()
    for args in (["init", "-q", "-b", "main"], ["config", "user.email", "t@example.org"],
                 ["config", "user.name", "T"]):  # fmt: skip
        subprocess.run(["git", *args], cwd=repo, check=True)
    (repo / "notes.txt").write_text("one\n")
    subprocess.run(["git", "add", "notes.txt"], cwd=repo, check=True)
    subprocess.run(["git", "commit", "-q", "-m", "first note"], cwd=repo, check=True)
    (repo / "notes.txt").write_text("one\ntwo\n")
    with open_with(sqlite_url) as registry:
        names = {o.record.name for o in registry.add_mcp("git", command=GIT_SERVER)}
        assert {"git__git_status", "git__git_log", "git__git_diff_unstaged"} <= names
        status = registry.call("git__git_status", {"repo_path": str(repo)})
        assert status.success and "modified:   notes.txt" in status.output
        diff = registry.call("git__git_diff_unstaged", {"repo_path": str(repo)})
        assert "+two" in diff.output
        log = registry.call("git__git_log", {"repo_path": str(repo), "max_count": 1})
        assert "first note" in log.output
        outside = registry.call("git__git_status", {"repo_path": str(tmp_path / "nowhere")})
        assert not outside.success


def test_cli_add_mcp_then_call(sqlite_url: str) -> None:
    added = runner.invoke(app, ["--db", sqlite_url, "add", "mcp", "--name", "clock",
                                "--category", "time", "--json", "--", *TIME_SERVER])  # fmt: skip
    assert added.exit_code == 0, added.output
    assert {t["name"] for t in json.loads(added.stdout)["tools"]} == {
        "clock__get_current_time", "clock__convert_time",
    }  # fmt: skip
    called = runner.invoke(app, ["--db", sqlite_url, "call", "clock__get_current_time",
                                 "--args", '{"timezone": "UTC"}', "--json"])  # fmt: skip
    assert called.exit_code == 0 and json.loads(called.stdout)["data"]["timezone"] == "UTC"
    failed = runner.invoke(app, ["--db", sqlite_url, "call", "clock__get_current_time",
                                 "--args", '{"timezone": "Nowhere"}'])  # fmt: skip
    assert failed.exit_code == 1
    neither = runner.invoke(app, ["--db", sqlite_url, "add", "mcp", "--name", "x", "--json"])
    assert (
        neither.exit_code == 2
        and "command or a url" in json.loads(neither.stdout)["error"]["message"]
    )


def test_definitions_are_checked_at_registration(sqlite_url: str) -> None:
    with open_with(sqlite_url) as registry:

        def mcp_spec(**metadata: object) -> ToolSpec:
            return ToolSpec(name="t", kind="mcp", target="s/t", metadata=metadata)

        with pytest.raises(DefinitionError, match=r"metadata\.server"):
            registry.add(mcp_spec())
        with pytest.raises(DefinitionError, match="'stdio' or 'http'"):
            registry.add(mcp_spec(server={"transport": "pigeon"}))
        with pytest.raises(DefinitionError, match="unknown keys"):
            registry.add(mcp_spec(server={"transport": "http", "url": "http://h/", "x": 1}))
        with pytest.raises(DefinitionError, match="not found on PATH"):
            registry.add(mcp_spec(server={"transport": "stdio", "command": "no-such-cmd-7"}))
        with pytest.raises(DefinitionError, match="names of environment variables"):
            registry.add_mcp("s", command=TIME_SERVER, env=["NOT A NAME"])
        with pytest.raises(DefinitionError, match="SERVER/TOOL"):
            http = {"server": {"transport": "http", "url": "http://h/"}}
            registry.add(ToolSpec(name="t", kind="mcp", target="no-slash", metadata=http))
        with pytest.raises(DefinitionError, match="server name"):
            registry.add_mcp("a.b", command=TIME_SERVER)
        with pytest.raises(DefinitionError, match="http:// or https://"):
            registry.add_mcp("s", url="file:///etc/passwd")
        with pytest.raises(UsageError, match="not both"):
            registry.add_mcp("s", command=TIME_SERVER, url="http://127.0.0.1:1/mcp")
        assert registry.list() == []


def test_a_server_that_cannot_start_is_reported_with_its_stderr(sqlite_url: str) -> None:
    dying = [sys.executable, "-c", "import sys; sys.stderr.write('no config found'); sys.exit(4)"]
    with open_with(sqlite_url) as registry, pytest.raises(ExecutionError) as caught:
        registry.add_mcp("dying", command=dying)
    assert "cannot start MCP server" in str(caught.value)
    assert "no config found" in str(caught.value)


def test_env_passes_only_the_named_variables(
    sqlite_url: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("TOOLDB_TEST_TOKEN", "s3cret")
    monkeypatch.setenv("TOOLDB_TEST_OTHER", "hidden")
    with open_with(sqlite_url) as registry:
        registry.add_mcp("h", command=HOSTILE_SERVER, env=["TOOLDB_TEST_TOKEN"])
        assert registry.get("h__echo").spec.metadata["server"]["env"] == ["TOOLDB_TEST_TOKEN"]
        assert registry.call("h__getenv", {"name": "TOOLDB_TEST_TOKEN"}).output == "s3cret"
        assert registry.call("h__getenv", {"name": "TOOLDB_TEST_OTHER"}).data == {"result": None}


def test_a_new_process_starts_the_server_from_the_row_alone(sqlite_url: str) -> None:
    with open_with(sqlite_url) as registry:
        registry.add_mcp("time", command=TIME_SERVER)
    script = (
        "import sys, tooldb\n"
        f"r = tooldb.open({sqlite_url!r})\n"
        "print(r.call('time__get_current_time', {'timezone': 'UTC'}).data['timezone'])\n"
        "r.close()\n"
    )
    out = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, timeout=60)
    assert out.returncode == 0 and out.stdout.strip() == "UTC", out.stderr


def test_closing_the_registry_stops_its_servers(sqlite_url: str) -> None:
    registry = open_with(sqlite_url)
    registry.add_mcp("h", command=HOSTILE_SERVER)
    pid = registry.call("h__pid").data["result"]
    registry.close()
    assert gone(pid)


# -- hostile servers: crashes, kills, hangs ----------------------------------------------
@pytest.fixture
def hostile(sqlite_url: str) -> Iterator[Registry]:
    registry = open_with(sqlite_url)
    registry.add_mcp("h", command=HOSTILE_SERVER)
    yield registry
    registry.close()


def test_a_server_crashing_mid_call_fails_that_call_and_the_next_restarts_it(
    hostile: Registry,
) -> None:
    first = hostile.call("h__pid").data["result"]
    crashed = hostile.call("h__crash")
    assert not crashed.success
    assert "exited or crashed" in (crashed.error or "")
    assert "crashing on purpose" in (crashed.error or "")
    assert hostile.calls(tool="h__crash")[0].error_kind is ErrorKind.EXECUTION
    second = hostile.call("h__pid").data["result"]
    assert second != first and gone(first)
    assert hostile.call("h__echo", {"text": "still here"}).output == "still here"


def test_a_server_killed_between_calls_is_restarted(hostile: Registry) -> None:
    pid = hostile.call("h__pid").data["result"]
    os.kill(pid, signal.SIGKILL)
    assert wait_until(lambda: gone(pid))
    again = hostile.call("h__pid")
    assert again.success, again.error
    assert again.data["result"] != pid


def test_a_hanging_call_times_out_and_the_server_is_replaced(hostile: Registry) -> None:
    pid = hostile.call("h__pid").data["result"]
    started = time.monotonic()
    hung = hostile.call("h__hang", {"seconds": 60}, timeout_s=0.5)
    assert time.monotonic() - started < 3
    assert not hung.success and "timed out after 0.5 s" in (hung.error or "")
    assert hostile.calls(tool="h__hang")[0].error_kind is ErrorKind.TIMEOUT
    after = hostile.call("h__pid").data["result"]
    assert after != pid
    assert wait_until(lambda: gone(pid)), "the hung server was not stopped"


def test_a_hanging_async_call_times_out_too(hostile: Registry) -> None:
    async def scenario() -> tuple[tooldb.ToolResult, tooldb.ToolResult]:
        hung = await hostile.acall("h__hang", {"seconds": 60}, timeout_s=0.3)
        return hung, await hostile.acall("h__echo", {"text": "next"})

    hung, following = asyncio.run(scenario())
    assert not hung.success and "timed out" in (hung.error or "")
    assert following.output == "next"


def test_unknown_remote_tool_is_a_failed_call_not_a_broken_session(hostile: Registry) -> None:
    pid = hostile.call("h__pid").data["result"]
    spec = hostile.get("h__echo").spec.model_copy(update={"name": "h__gone", "target": "h/gone"})
    hostile.add(spec)
    missing = hostile.call("h__gone", {"text": "x"})
    assert not missing.success and "gone" in (missing.error or "")
    assert hostile.call("h__pid").data["result"] == pid


def test_the_sdk_is_imported_only_when_an_mcp_tool_is_used(sqlite_url: str) -> None:
    script = (
        "import sys, tooldb\n"
        f"r = tooldb.open({sqlite_url!r}); r.add_module('tests.sample_tools')\n"
        "r.call('add', {'a': 1}); r.close()\n"
        "assert 'mcp' not in sys.modules, 'mcp imported eagerly'\n"
    )
    out = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, cwd=ROOT)
    assert out.returncode == 0, out.stderr


def test_without_the_sdk_the_error_names_the_extra(
    sqlite_url: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setitem(sys.modules, "mcp", None)  # what an install without the extra sees
    spec = ToolSpec(name="t", kind="mcp", target="s/t", metadata={"server": {
        "transport": "http", "url": "http://127.0.0.1:9/mcp"}})  # fmt: skip
    with open_with(sqlite_url) as registry, pytest.raises(DefinitionError, match=r"tooldb\[mcp\]"):
        registry.add(spec)
