"""`tooldb mcp` serves the memory group like any tool: one MCP session remembers, a
later session (another server process) recalls and forgets."""

from __future__ import annotations

import json
from pathlib import Path

import anyio

from tooldb.builtins import add_builtins

from .mcp_support import open_with
from .test_mcp_server import stdio_session, text_of


def test_any_mcp_client_gets_a_memory_server(sqlite_url: str, tmp_path: Path) -> None:
    with open_with(sqlite_url) as registry:
        add_builtins(registry, ["memory"])

    async def scenario() -> None:
        async with stdio_session(sqlite_url, log=tmp_path / "one.log") as client:
            listed = {t.name for t in (await client.list_tools()).tools}
            assert {"remember", "recall", "forget"} <= listed
            saved = await client.call_tool("remember", {"text": "Backups run at 02:00 UTC"})
            assert not saved.is_error
        async with stdio_session(sqlite_url, log=tmp_path / "two.log") as client:
            found = json.loads(text_of(await client.call_tool("recall", {"query": "backups"})))
            assert found["memories"][0]["text"] == "Backups run at 02:00 UTC"
            bad = await client.call_tool("recall", {"query": "backups", "k": 0})
            assert bad.is_error and "'k'" in text_of(bad)

    anyio.run(scenario)
    with open_with(sqlite_url) as registry:
        assert [c.tool_name for c in registry.calls()][::-1] == ["remember", "recall", "recall"]
