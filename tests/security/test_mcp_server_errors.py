"""Issue 20, item 5: NaN in a rejected call over ``tooldb mcp`` (raw JSON-RPC, as any
client may send it) was a StoreError on PostgreSQL, answered with JSON-RPC code 0
and the store's URL in the message. Now it is refused at binding, recorded, and
nothing the client sees names the store."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from collections.abc import Iterator
from typing import Any

import anyio
import pytest
from mcp import Client, MCPError

import tooldb
from tooldb.errors import StoreError
from tooldb.mcp.server import INTERNAL_MESSAGE, build_server

from ..mcp_support import ROOT


@pytest.fixture
def url(store_url: str) -> Iterator[str]:
    with tooldb.open(store_url) as registry:
        registry.add_module("tests.sample_tools")
    yield store_url


def rpc(url: str, *requests: str) -> list[dict[str, Any]]:
    """Send raw JSON-RPC lines to a `tooldb mcp` process; its answers, by id."""
    init = {
        "jsonrpc": "2.0", "id": 0, "method": "initialize",
        "params": {"protocolVersion": "2025-06-18", "capabilities": {},
                   "clientInfo": {"name": "raw", "version": "1"}},
    }  # fmt: skip
    process = subprocess.Popen(
        [sys.executable, "-m", "tooldb", "--db", url, "mcp"], stdin=subprocess.PIPE,
        stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True, cwd=str(ROOT),
        env=dict(os.environ),
    )  # fmt: skip
    assert process.stdin is not None and process.stdout is not None
    answers: list[dict[str, Any]] = []
    try:
        for line in [json.dumps(init), '{"jsonrpc": "2.0", "method": "notifications/initialized"}']:
            process.stdin.write(line + "\n")
        for request in requests:
            process.stdin.write(request + "\n")
        process.stdin.flush()
        while len(answers) < len(requests) + 1:  # each request's answer (and initialize's)
            line = process.stdout.readline()
            if not line:
                break
            answer = json.loads(line)
            if "id" in answer:
                answers.append(answer)
    finally:
        process.stdin.close()
        process.wait(timeout=60)
    return [a for a in answers if a["id"] != 0]


def test_nan_in_a_rejected_call_is_an_argument_error_not_a_store_url(url: str) -> None:
    call = (
        '{"jsonrpc": "2.0", "id": 1, "method": "tools/call",'
        ' "params": {"name": "add", "arguments": {"a": NaN, "zzz": 1}}}'
    )
    [answer] = rpc(url, call)
    text = json.dumps(answer)
    assert "postgresql" not in text and "sqlite" not in text
    assert answer["result"]["isError"] is True
    assert "unknown parameter 'zzz'" in answer["result"]["content"][0]["text"]
    with tooldb.open(url) as registry:
        [record] = registry.calls()
    assert record.error_kind == "arguments" and record.arguments == {"a": "nan", "zzz": 1}


class FailingStore:
    def list_tools(self) -> list[Any]:
        return []

    def call_tool(self, name: str, arguments: dict[str, Any]) -> Any:
        raise StoreError("store postgresql://admin:secret@db.internal/tooldb failed: boom")


def test_an_internal_failure_reaches_the_client_without_its_details() -> None:
    async def scenario() -> None:
        async with Client(build_server(FailingStore())) as client:
            with pytest.raises(MCPError) as info:
                await client.call_tool("x", {})
            assert str(info.value) == INTERNAL_MESSAGE
            assert info.value.error.code == -32603

    anyio.run(scenario)
