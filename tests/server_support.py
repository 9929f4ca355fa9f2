"""Helpers for the HTTP server tests: a registry seeded with tools, runs (one partial,
flagged for review) and an OODA act, and the app served by uvicorn on 127.0.0.1."""

from __future__ import annotations

import socket
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass

import uvicorn

import tests.sample_tools as st
from tests.ooda_support import DAY, log_calls, pattern, tool_spec
from tooldb import Registry
from tooldb.agents import AgentLoop, Limits
from tooldb.models import ScriptedModel, call
from tooldb.server import ServerConfig, create_app

XSS_NAME = "<img src=x onerror=alert(1)>"


@dataclass
class Seeded:
    success_run: str
    partial_run: str
    act_id: int


def seed(registry: Registry) -> Seeded:
    """Tools (one named like an XSS payload), a successful and a partial run, and a
    tool OODA disabled for failing."""
    registry.add(st.add, st.echo, st.fail)
    registry.add(tool_spec(XSS_NAME, description="<script>alert('d')</script> a tool"))
    registry.add(tool_spec("flaky", description="A flaky lookup that mostly fails."))
    done = AgentLoop(
        registry, ScriptedModel([call("add", {"a": 2, "b": 3}), "2 + 3 = 5"]), tools=["add"]
    ).run("add 2 and 3")
    partial = AgentLoop(
        registry,
        ScriptedModel([call("add", {"a": 1})], repeat_last=True),
        tools=["add"],
        limits=Limits(max_iterations=2),
    ).run("keep adding forever")
    now = time.time()
    log_calls(registry, "flaky", pattern(300, 30), start=now - 5 * DAY, end=now - DAY)
    act = registry.ooda(now=now).acts[0]
    assert act.id is not None and act.tool == "flaky"
    return Seeded(done.run_id, partial.run_id, act.id)


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port: int = sock.getsockname()[1]
        return port


@contextmanager
def serving(registry: Registry, config: ServerConfig | None = None) -> Iterator[str]:
    """The app over ``registry`` served on 127.0.0.1 in a thread; its base URL."""
    port = free_port()
    server = uvicorn.Server(
        uvicorn.Config(
            create_app(registry, config), host="127.0.0.1", port=port, log_level="warning"
        )
    )
    thread = threading.Thread(target=server.run, daemon=True)
    thread.start()
    deadline = time.monotonic() + 20
    while not server.started:
        if time.monotonic() > deadline or not thread.is_alive():
            raise RuntimeError("the server did not start")
        time.sleep(0.02)
    try:
        yield f"http://127.0.0.1:{port}"
    finally:
        server.should_exit = True
        thread.join(10)
