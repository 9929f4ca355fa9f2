"""Issue 20, items 7 and 12 (MCP): one misfit tool no longer fails a whole server's
import (each skipped or repaired tool is reported, ``strict`` keeps all or nothing);
an MCP result past ``mcp_max_result_bytes`` is cut, saying so; a stored error is
capped at ``record_output_chars``, saying so."""

from __future__ import annotations

import json
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest
from typer.testing import CliRunner

import tooldb
from tooldb import DefinitionError, Registry
from tooldb.cli import app
from tooldb.settings import Settings

SERVER = [sys.executable, str(Path(__file__).with_name("mcp_misfit_server.py"))]


@pytest.fixture
def registry(sqlite_url: str) -> Iterator[Registry]:
    settings = Settings(url=sqlite_url, mcp_max_result_bytes=1_000_000, record_output_chars=1000)
    with tooldb.open(sqlite_url, settings=settings) as reg:
        yield reg


def test_misfit_tools_are_skipped_not_the_whole_server(registry: Registry) -> None:
    with pytest.raises(DefinitionError):
        registry.add_mcp("misfit", command=SERVER, strict=True)
    assert registry.list() == []
    imported = registry.add_mcp("misfit", command=SERVER)
    names = [o.record.name for o in imported]
    assert names == ["misfit__big", "misfit__big_error", "misfit__a_b", "misfit__paged"]
    skipped = {s.tool.split("…")[0][:5]: s.reason for s in imported.skipped}
    assert set(skipped) == {"xxxxx", "remot", "a_b"}
    assert "only local references" in skipped["remot"]
    assert "both become 'misfit__a_b'" in skipped["a_b"]
    assert len(skipped["xxxxx"]) < 400  # the reason, not pydantic's whole report
    assert imported.repaired == [
        ("misfit__paged", "parameter 'limit': default \"250\" coerced to 250")
    ]


def test_cli_reports_skipped_mcp_tools(sqlite_url: str) -> None:
    result = CliRunner().invoke(
        app, ["--db", sqlite_url, "add", "mcp", "--name", "misfit", "--json", "--", *SERVER]
    )
    assert result.exit_code == 0, result.output
    report = json.loads(result.stdout)
    assert len(report["tools"]) == 4 and len(report["skipped"]) == 3
    assert len(report["repaired"]) == 1


def test_an_mcp_result_past_the_cap_is_cut_and_says_so(registry: Registry) -> None:
    registry.add_mcp("misfit", command=SERVER)
    small = registry.call("misfit__big", {"n": 1000})
    assert small.success and small.output == "x" * 1000
    big = registry.call("misfit__big", {"n": 3_000_000})
    assert big.success and len(big.output) < 1_000_200
    assert big.output.endswith(
        "[cut: the MCP result was 3000000 bytes, more than mcp_max_result_bytes (1000000)]"
    )


def test_a_huge_error_is_cut_for_the_caller_and_capped_in_the_log(registry: Registry) -> None:
    registry.add_mcp("misfit", command=SERVER)
    failed = registry.call("misfit__big_error", {"n": 5_000_000})
    assert not failed.success and failed.error is not None
    assert (
        len(failed.error) < 1_000_200 and "[cut: the MCP result was 5000000 bytes" in failed.error
    )
    [record] = registry.calls()
    assert record.error is not None and len(record.error) < 1100
    assert record.error.endswith("characters in all]")
