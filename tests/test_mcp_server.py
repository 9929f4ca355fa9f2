"""`tooldb mcp`: the registry as an MCP server, driven by the MCP SDK's own client
against the real server process (stdio and streamable HTTP)."""

from __future__ import annotations

import json
import os
import socket
import subprocess
import sys
from collections.abc import AsyncIterator, Iterator
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

import anyio
import pytest
from mcp import Client, MCPError, StdioServerParameters
from mcp.client.stdio import stdio_client

from tooldb import ErrorKind, ToolSpec

from .mcp_support import ROOT, open_with, wait_until

EXTRA = ToolSpec(
    name="shout",
    description="Upper-case a text.",
    target="tests.sample_tools:echo",
    parameters={"type": "object", "properties": {"text": {"type": "string"}}, "required": ["text"]},
)


@pytest.fixture
def url(store_url: str) -> Iterator[str]:
    with open_with(store_url) as registry:
        registry.add_module("tests.sample_tools")
        registry.disable("noop")
    yield store_url


@asynccontextmanager
async def stdio_session(url: str, *args: str, log: Path) -> AsyncIterator[Client]:
    # The whole environment, so the server uses the tests' model-free embedder and home.
    params = StdioServerParameters(
        command=sys.executable,
        args=["-m", "tooldb", "--db", url, "mcp", *args],
        cwd=str(ROOT),
        env=dict(os.environ),
    )
    with log.open("w") as errlog:
        async with Client(stdio_client(params, errlog=errlog)) as client:
            yield client


def text_of(result: Any) -> str:
    return "".join(block.text for block in result.content)


def test_stdio_serves_enabled_tools_binds_runs_and_records(url: str, tmp_path: Path) -> None:
    registry = open_with(url)

    async def scenario() -> None:
        async with stdio_session(url, log=tmp_path / "server.log") as client:
            listed = {t.name: t for t in (await client.list_tools()).tools}
            enabled = {t.name for t in registry.list()}
            assert set(listed) == enabled and "noop" not in listed
            assert listed["add"].input_schema == registry.get("add").spec.parameters
            assert listed["add"].description == registry.get("add").spec.description

            added = await client.call_tool("add", {"a": 2, "b": 40})
            assert not added.is_error and text_of(added) == "42"
            call_id = added.meta["tooldb/call_id"]
            (record,) = registry.calls(tool="add")
            assert record.id == call_id and record.success and record.arguments == {"a": 2, "b": 40}

            wrong = await client.call_tool("add", {"a": "two"})
            assert wrong.is_error and "parameter 'a'" in text_of(wrong)
            assert registry.calls(tool="add")[0].error_kind is ErrorKind.ARGUMENTS

            failed = await client.call_tool("fail", {"message": "kaput"})
            assert failed.is_error and "kaput" in text_of(failed)

            with pytest.raises(MCPError, match="disabled"):
                await client.call_tool("noop", {})
            with pytest.raises(MCPError, match="no tool named 'nope'"):
                await client.call_tool("nope", {})

            registry.add(EXTRA)
            assert "shout" in {t.name for t in (await client.list_tools()).tools}
            shouted = await client.call_tool("shout", {"text": "hey"})
            assert text_of(shouted) == "hey"

    try:
        anyio.run(scenario)
    finally:
        registry.close()


def test_category_and_tenant_limit_what_is_served(sqlite_url: str, tmp_path: Path) -> None:
    with open_with(sqlite_url) as registry:
        registry.add_module("tests.sample_tools")

    async def scenario() -> None:
        async with stdio_session(sqlite_url, "--category", "math", log=tmp_path / "a.log") as c:
            assert [t.name for t in (await c.list_tools()).tools] == ["add"]
            with pytest.raises(MCPError, match="category 'math'"):
                await c.call_tool("echo", {"text": "x"})
        async with stdio_session(sqlite_url, "--tenant", "other", log=tmp_path / "b.log") as c:
            assert (await c.list_tools()).tools == []

    anyio.run(scenario)


def _add_examples(url: str) -> None:
    """``tooldb init`` then ``add python``, as the README does."""
    for command in (["init"], ["add", "python", "tooldb.examples.basic"]):
        process = subprocess.run(
            [sys.executable, "-m", "tooldb", "--db", url, *command],
            cwd=ROOT, capture_output=True, text=True, timeout=120,
        )  # fmt: skip
        assert process.returncode == 0, process.stderr


def test_select_mode_searches_then_calls(store_url: str, tmp_path: Path) -> None:
    _add_examples(store_url)
    registry = open_with(store_url)
    registry.disable("slugify")

    async def scenario() -> None:
        async with stdio_session(store_url, "--select", "-k", "3", log=tmp_path / "s.log") as c:
            listed = {t.name: t for t in (await c.list_tools()).tools}
            assert set(listed) == {"search_tools", "call_tool"}
            assert listed["search_tools"].input_schema["properties"]["k"]["default"] == 3

            query = "convert a temperature from Celsius to Fahrenheit"
            found = await c.call_tool("search_tools", {"query": query})
            assert not found.is_error
            document = found.structured_content
            assert document == json.loads(text_of(found))
            assert len(document["tools"]) == 3
            best = document["tools"][0]
            assert best["name"] == "convert_temperature" and best["category"] == "units"
            assert best["parameters"] == registry.get("convert_temperature").spec.parameters
            assert best["description"].startswith("Convert a temperature")
            decision = registry.store.get_decision(registry.tenant, document["decision_id"])
            assert decision is not None and decision["task"] == query and decision["k"] == 3
            assert decision["chosen"] == "convert_temperature"

            called = await c.call_tool(
                "call_tool",
                {"name": "convert_temperature",
                 "arguments": {"value": 100, "from_unit": "C", "to_unit": "F"}},
            )  # fmt: skip
            assert not called.is_error and text_of(called) == "212.0"
            (record,) = registry.calls(tool="convert_temperature")
            assert record.success and record.id == called.meta["tooldb/call_id"]

            wrong = await c.call_tool(
                "call_tool", {"name": "convert_temperature", "arguments": {"value": "hot"}}
            )
            assert wrong.is_error and "'value'" in text_of(wrong)
            assert registry.calls(tool="convert_temperature")[0].error_kind is ErrorKind.ARGUMENTS

            slugs = await c.call_tool("search_tools", {"query": "slugify a text", "k": 10})
            assert "slugify" not in {t["name"] for t in slugs.structured_content["tools"]}
            disabled = await c.call_tool("call_tool", {"name": "slugify", "arguments": {}})
            assert disabled.is_error and "disabled" in text_of(disabled)
            unknown = await c.call_tool("call_tool", {"name": "nope"})
            assert unknown.is_error and "no tool named 'nope'" in text_of(unknown)
            empty = await c.call_tool("search_tools", {"query": " "})
            assert empty.is_error and "query" in text_of(empty)
            with pytest.raises(MCPError, match="search_tools"):
                await c.call_tool("add", {"a": 1, "b": 2})

    try:
        anyio.run(scenario)
    finally:
        registry.close()


def test_select_mode_category_and_tenant(sqlite_url: str, tmp_path: Path) -> None:
    _add_examples(sqlite_url)

    async def scenario() -> None:
        args = ("--select", "--category", "math")
        async with stdio_session(sqlite_url, *args, log=tmp_path / "a.log") as c:
            found = await c.call_tool("search_tools", {"query": "convert a temperature", "k": 10})
            assert {t["category"] for t in found.structured_content["tools"]} == {"math"}
            outside = await c.call_tool(
                "call_tool",
                {"name": "convert_temperature",
                 "arguments": {"value": 1, "from_unit": "C", "to_unit": "K"}},
            )  # fmt: skip
            assert outside.is_error and "category 'math'" in text_of(outside)
            other = await c.call_tool("search_tools", {"query": "add", "category": "text"})
            assert other.is_error and "only category 'math'" in text_of(other)
            added = await c.call_tool("call_tool", {"name": "add", "arguments": {"a": 1, "b": 2}})
            assert not added.is_error and text_of(added) == "3"
        async with stdio_session(
            sqlite_url, "--select", "--tenant", "other", log=tmp_path / "b.log"
        ) as c:
            found = await c.call_tool("search_tools", {"query": "add two numbers"})
            assert found.structured_content["tools"] == []
            missing = await c.call_tool("call_tool", {"name": "add", "arguments": {"a": 1}})
            assert missing.is_error and "no tool named 'add'" in text_of(missing)

    anyio.run(scenario)
    with open_with(sqlite_url) as registry:
        assert registry.calls(tool="convert_temperature") == []


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port: int = sock.getsockname()[1]
        return port


def _listening(port: int) -> bool:
    with socket.socket() as sock:
        return sock.connect_ex(("127.0.0.1", port)) == 0


@pytest.fixture
def http_server(sqlite_url: str, tmp_path: Path) -> Iterator[tuple[str, str]]:
    with open_with(sqlite_url) as registry:
        registry.add_module("tests.sample_tools")
    port = _free_port()
    log = (tmp_path / "http.log").open("w")
    process = subprocess.Popen(
        [sys.executable, "-m", "tooldb", "--db", sqlite_url, "mcp", "--transport", "http",
         "--port", str(port)],
        cwd=ROOT, stdout=subprocess.DEVNULL, stderr=log,
    )  # fmt: skip
    try:
        assert wait_until(lambda: _listening(port) or process.poll() is not None, 30)
        assert process.poll() is None, (tmp_path / "http.log").read_text()
        yield sqlite_url, f"http://127.0.0.1:{port}/mcp"
    finally:
        process.terminate()
        process.wait(10)
        log.close()


def test_streamable_http_with_the_sdk_client(http_server: tuple[str, str]) -> None:
    served, endpoint = http_server

    async def scenario() -> None:
        async with Client(endpoint) as client:
            assert "add" in {t.name for t in (await client.list_tools()).tools}
            result = await client.call_tool("add", {"a": 1})
            assert text_of(result) == "2"

    anyio.run(scenario)
    with open_with(served) as registry:
        assert registry.calls(tool="add")[0].success


def test_a_tooldb_server_imported_as_an_mcp_kind_over_http(
    http_server: tuple[str, str], tmp_path: Path
) -> None:
    served, endpoint = http_server
    client_url = f"sqlite:///{tmp_path / 'client.db'}"
    with open_with(client_url, allowed_hosts=("127.0.0.1",)) as client:  # a local server
        names = {o.record.name for o in client.add_mcp("remote", url=endpoint)}
        assert {"remote__add", "remote__echo", "remote__fail"} <= names
        assert client.get("remote__add").spec.metadata["server"] == {
            "transport": "http", "url": endpoint,
        }  # fmt: skip
        result = client.call("remote__add", {"a": 20, "b": 22})
        assert result.success and result.output == "42" and result.data == 42
        failed = client.call("remote__fail", {"message": "far away"})
        assert not failed.success and "far away" in (failed.error or "")
        assert client.calls(tool="remote__add")[0].success
    with open_with(served) as registry:
        assert [c.success for c in registry.calls(tool="add")] == [True]
