"""Helpers for the MCP tests: server commands, registries sharing sessions, child processes."""

from __future__ import annotations

import os
import sys
import time
from dataclasses import replace
from pathlib import Path

import tooldb
from tooldb import Registry, Settings, ToolKind
from tooldb.executors.mcp import McpExecutor
from tooldb.mcp.sessions import SessionManager

ROOT = Path(__file__).resolve().parent.parent
TIME_SERVER = [sys.executable, "-m", "mcp_server_time", "--local-timezone", "UTC"]
GIT_SERVER = [sys.executable, "-m", "mcp_server_git"]
HOSTILE_SERVER = [sys.executable, str(ROOT / "tests" / "mcp_hostile_server.py")]


def open_with(
    url: str, sessions: SessionManager | None = None, *, allowed_hosts: tuple[str, ...] = ()
) -> Registry:
    """A registry whose mcp tools use ``sessions`` (shared by a test module) if given;
    ``allowed_hosts``: its ``http_allowed_hosts`` (default: the setting's)."""
    settings = Settings(url=url)
    if allowed_hosts:
        settings = replace(settings, http_allowed_hosts=allowed_hosts)
    registry = tooldb.open(url, settings=settings)
    if sessions is not None:
        registry.executors[ToolKind.MCP] = McpExecutor(sessions)
    return registry


def children(marker: str) -> list[int]:
    """Live (not zombie) child processes of this process whose command line has ``marker``."""
    found = []
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            # Another process's name or command line may not be UTF-8: never fail on it.
            stat = (entry / "stat").read_bytes().decode(errors="replace")
            cmdline = (entry / "cmdline").read_bytes().replace(b"\0", b" ").decode(errors="replace")
        except OSError:
            continue
        fields = stat[stat.rindex(")") + 2 :].split()
        if fields[0] != "Z" and int(fields[1]) == os.getpid() and marker in cmdline:
            found.append(int(entry.name))
    return found


def wait_until(predicate: object, timeout_s: float = 10.0) -> bool:
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        if callable(predicate) and predicate():
            return True
        time.sleep(0.02)
    return False


def gone(pid: int) -> bool:
    try:
        state = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return True
    return state[state.rindex(")") + 2] == "Z"
