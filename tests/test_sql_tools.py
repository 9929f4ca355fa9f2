"""SQL tools on both backends: the registry's own database and a named connection.

Every test runs twice: with a SQLite registry and a separate SQLite data file, and
with a PostgreSQL registry and a separate PostgreSQL data database.
"""

from __future__ import annotations

import json
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import sqlalchemy as sa

import tooldb
from tooldb import DefinitionError, ErrorKind, Registry, Settings, UsageError
from tooldb.executors.sql_results import jsonable

from .conftest import scratch_database

ITEMS = [(i, f"item{i}", i * 1.25) for i in range(1, 11)]

HOSTILE = [
    "' OR '1'='1",
    "'; DROP TABLE items; --",
    "item1'; DELETE FROM items WHERE '1'='1",
    "Robert'); DROP TABLE items;--",
    "\\'; DELETE FROM items; --",
    "1; SELECT 1",
    ":name",
    "%s %(name)s $1 ? ?1",
    '" OR ""="',
    "item1' --",
    "é' UNION SELECT name, name, name FROM items --",
]


@pytest.fixture(scope="session")
def pg_data_url() -> Iterator[str]:
    """A second PostgreSQL database, used as a named connection (not the registry)."""
    with scratch_database("tooldb_data") as url:
        yield url


@pytest.fixture
def data_url(store_url: str, tmp_path: Path, request: pytest.FixtureRequest) -> str:
    """A data database on the registry's backend, holding ``items`` (10 rows)."""
    if store_url.startswith("sqlite"):
        url = f"sqlite:///{tmp_path / 'data.db'}"
    else:
        url = request.getfixturevalue("pg_data_url")
    engine = sa.create_engine(url.replace("postgresql://", "postgresql+psycopg://"))
    with engine.begin() as conn:
        conn.exec_driver_sql("DROP TABLE IF EXISTS items")
        conn.exec_driver_sql(
            "CREATE TABLE items (id INTEGER PRIMARY KEY, name TEXT NOT NULL, price NUMERIC(10,2))"
        )
        conn.execute(
            sa.text("INSERT INTO items VALUES (:id, :name, :price)"),
            [{"id": i, "name": n, "price": p} for i, n, p in ITEMS],
        )
    engine.dispose()
    return url


@pytest.fixture
def reg(store_url: str, data_url: str) -> Iterator[Registry]:
    settings = Settings(url=store_url, connections={"data": data_url})
    with tooldb.open(store_url, settings=settings) as registry:
        yield registry


def sql_tool(name: str, target: str, returns: str = "table", **extra: Any) -> dict[str, Any]:
    parameters = extra.pop("parameters", {})
    metadata = {"connection": "data", **extra.pop("metadata", {})}
    return {
        "name": name, "kind": "sql", "target": target, "returns": returns,
        "parameters": parameters, "metadata": metadata, **extra,
    }  # fmt: skip


def count_items(reg: Registry) -> int:
    reg.add(sql_tool("count_items", "SELECT count(*) FROM items", "scalar"))
    result = reg.call("count_items")
    assert result.success, result.error
    return int(result.data)


def is_pg(reg: Registry) -> bool:
    return reg.store.dialect == "postgresql"


# -- returns ---------------------------------------------------------------------------
def test_table_on_a_named_connection(reg: Registry) -> None:
    reg.add(
        sql_tool(
            "cheap_items",
            "SELECT id, name, price FROM items WHERE price <= :max_price ORDER BY id",
            parameters={"max_price": {"type": "number", "required": True}},
        )
    )
    result = reg.call("cheap_items", {"max_price": 3})
    assert result.success, result.error
    assert result.data == {
        "columns": ["id", "name", "price"],
        "rows": [
            {"id": 1, "name": "item1", "price": 1.25},
            {"id": 2, "name": "item2", "price": 2.5},
        ],
        "row_count": 2,
        "truncated": False,
        "truncated_by": None,
        "max_rows": 1000,
        "max_bytes": 1_048_576,
    }
    assert json.loads(result.output) == result.data["rows"]
    record = reg.calls(tool="cheap_items")[0]
    assert record.success and record.arguments == {"max_price": 3}


def test_registry_connection_is_the_default(reg: Registry) -> None:
    reg.add(
        {
            "name": "tools_of_kind",
            "kind": "sql",
            "target": "SELECT name FROM tools WHERE kind = :kind AND tenant = :t ORDER BY name",
            "parameters": {"kind": {"type": "string"}, "t": {"type": "string"}},
            "returns": "table",
        }
    )
    result = reg.call("tools_of_kind", {"kind": "sql", "t": "default"})
    assert result.success, result.error
    assert result.data["rows"] == [{"name": "tools_of_kind"}]


def test_example_manifest_over_the_registry(reg: Registry) -> None:
    root = Path(__file__).resolve().parents[1]
    reg.add_manifest(root / "examples" / "sql_tools.yaml")
    with pytest.raises(tooldb.ArgumentError):
        reg.call("recent_failures", {})
    assert reg.call("call_count").data == 1  # the rejected call above is in the log
    failures = reg.call("recent_failures", {"tool": "recent_failures"})
    assert failures.success, failures.error
    assert failures.data["rows"][0]["error_kind"] == "arguments"
    busiest = reg.call("busiest_tools", {"top": 2})
    assert busiest.success and busiest.data["row_count"] == 2
    assert busiest.data["rows"][0]["name"] == "call_count"


def test_scalar_none_and_a_committed_write(reg: Registry) -> None:
    reg.add(
        sql_tool("max_price", "SELECT max(price) FROM items", "scalar"),
        sql_tool("no_match", "SELECT id FROM items WHERE id < 0", "scalar"),
        sql_tool(
            "rename",
            "UPDATE items SET name = :name WHERE id <= :upto",
            "none",
            parameters={"name": {"type": "string"}, "upto": {"type": "integer"}},
            metadata={"access": "write"},
        ),
    )
    assert (reg.call("max_price").data, reg.call("max_price").output) == (12.5, "12.5")
    empty = reg.call("no_match")
    assert empty.success and empty.data is None and empty.output == ""
    renamed = reg.call("rename", {"name": "renamed", "upto": 3})
    assert (renamed.success, renamed.data, renamed.output) == (True, 3, "3 rows affected")
    reg.add(sql_tool("renamed", "SELECT count(*) FROM items WHERE name = 'renamed'", "scalar"))
    assert reg.call("renamed").data == 3


def test_write_with_returning_rows(reg: Registry) -> None:
    reg.add(
        sql_tool(
            "add_item",
            "INSERT INTO items (id, name, price) VALUES (:id, :name, :price) RETURNING id, name",
            parameters={"id": "int", "name": "string", "price": "float"},
            metadata={"access": "write"},
        )
    )
    result = reg.call("add_item", {"id": 99, "name": "new", "price": 9.99})
    assert result.success, result.error
    assert result.data["rows"] == [{"id": 99, "name": "new"}]
    assert count_items(reg) == 11


def test_duplicate_column_names_stay_distinct(reg: Registry) -> None:
    reg.add(sql_tool("pairs", "SELECT a.id, b.id FROM items a JOIN items b ON a.id = b.id - 1"))
    result = reg.call("pairs")
    assert result.data["columns"] == ["id", "id_2"]
    assert result.data["rows"][0] == {"id": 1, "id_2": 2}


# -- hostile input -----------------------------------------------------------------------
@pytest.mark.parametrize("hostile", HOSTILE)
def test_injection_strings_come_back_as_data(reg: Registry, hostile: str) -> None:
    reg.add(
        sql_tool(
            "echo_args",
            "SELECT :a AS a, :b AS b, CAST(:c AS TEXT) AS c",
            parameters={"a": "string", "b": "string", "c": "string"},
        ),
        sql_tool(
            "by_name",
            "SELECT id FROM items WHERE name = :name OR name LIKE :pattern",
            parameters={"name": "string", "pattern": "string"},
        ),
        sql_tool(
            "insert_named",
            "INSERT INTO items (id, name) VALUES (:id, :name) RETURNING name",
            parameters={"id": "int", "name": "string"},
            metadata={"access": "write"},
        ),
    )
    echoed = reg.call("echo_args", {"a": hostile, "b": hostile, "c": hostile})
    assert echoed.success, echoed.error
    assert echoed.data["rows"] == [{"a": hostile, "b": hostile, "c": hostile}]
    matched = reg.call("by_name", {"name": hostile, "pattern": hostile})
    assert matched.success and matched.data["rows"] == []
    inserted = reg.call("insert_named", {"id": 500, "name": hostile})
    assert inserted.success and inserted.data["rows"] == [{"name": hostile}]
    assert count_items(reg) == 11  # nothing dropped or deleted, exactly one row added
    recorded = reg.calls(tool="echo_args")[0]
    assert recorded.arguments == {"a": hostile, "b": hostile, "c": hostile}


def test_a_hostile_argument_cannot_reach_an_integer_placeholder(reg: Registry) -> None:
    reg.add(sql_tool("by_id", "SELECT name FROM items WHERE id = :id", parameters={"id": "int"}))
    with pytest.raises(tooldb.ArgumentError, match="'id'"):
        reg.call("by_id", {"id": "1 OR 1=1"})
    assert reg.call("by_id", {"id": "3"}).data["rows"] == [{"name": "item3"}]


def test_read_only_tool_cannot_write(reg: Registry) -> None:
    reg.add(
        sql_tool("wipe", "DELETE FROM items WHERE id > :n", "none", parameters={"n": "int"}),
        sql_tool(
            "sneaky",
            "INSERT INTO items (id, name) VALUES (:id, 'x') RETURNING id",
            parameters={"id": "int"},
        ),
    )
    for name, arguments in (("wipe", {"n": 0}), ("sneaky", {"id": 77})):
        result = reg.call(name, arguments)
        assert not result.success
        assert f"sql tool {name!r} is read-only" in (result.error or "")
        assert "metadata.access = 'write'" in (result.error or "")
        assert reg.calls(tool=name)[0].error_kind is ErrorKind.EXECUTION
    assert count_items(reg) == 10


def test_read_only_survives_a_statement_that_tries_to_lift_it(reg: Registry) -> None:
    unlock = (
        "SET SESSION CHARACTERISTICS AS TRANSACTION READ WRITE"
        if is_pg(reg)
        else "PRAGMA query_only = OFF"
    )
    reg.add(
        sql_tool("unlock", unlock, "none"),
        sql_tool("wipe", "DELETE FROM items", "none"),
    )
    reg.call("unlock")
    for _ in range(3):  # whichever pooled connection the next calls get
        assert "read-only" in (reg.call("wipe").error or "")
    assert count_items(reg) == 10


def test_failed_write_leaves_nothing(reg: Registry) -> None:
    """A write statement that fails part-way (the second copy collides) is rolled back."""
    reg.add(
        sql_tool(
            "copy_twice",
            "INSERT INTO items (id, name) SELECT id + :offset, name FROM items "
            "UNION ALL SELECT id + :offset, name FROM items",
            "none",
            parameters={"offset": "int"},
            metadata={"access": "write"},
        )
    )
    result = reg.call("copy_twice", {"offset": 100})
    assert not result.success and "failed on connection 'data'" in (result.error or "")
    assert count_items(reg) == 10


# -- registration checks -------------------------------------------------------------------
@pytest.mark.parametrize(
    ("tool", "message"),
    [
        (sql_tool("t", "SELECT :a, :b", parameters={"a": "string"}), "uses :b but"),
        (sql_tool("t", "SELECT :a", parameters={"a": "int", "b": "int"}), ":b is declared but"),
        (sql_tool("t", "SELECT 1", metadata={"connection": "nope"}), "'nope' is not a configured"),
        (sql_tool("t", "SELECT 1", metadata={"access": "admin"}), "'read' or 'write'"),
        (sql_tool("t", "SELECT 1", metadata={"max_rows": 0}), "max_rows must be a positive"),
        (sql_tool("t", "SELECT 1", metadata={"max_bytes": "1kb"}), "max_bytes must be"),
        (sql_tool("t", "SELECT 1", "json"), "returns must be one of table, scalar, none"),
    ],
)
def test_definitions_are_checked_at_registration(
    reg: Registry, tool: dict[str, Any], message: str
) -> None:
    with pytest.raises(DefinitionError, match="sql tool 't'") as caught:
        reg.add(tool)
    assert message in str(caught.value)
    assert reg.list() == []


def test_escaped_colon_is_not_a_placeholder(reg: Registry) -> None:
    reg.add(sql_tool("clock", "SELECT '12\\:30' AS t, :x AS x", parameters={"x": "string"}))
    assert reg.call("clock", {"x": "y"}).data["rows"] == [{"t": "12:30", "x": "y"}]


@pytest.mark.parametrize(
    ("url", "message"),
    [
        ("mysql://localhost/db", "sqlite or postgresql"),
        ("sqlite://", "in-memory"),
        ("sqlite:///:memory:", "in-memory"),
    ],
)
def test_unsupported_connections_are_refused(sqlite_url: str, url: str, message: str) -> None:
    settings = Settings(url=sqlite_url, connections={"other": url})
    with (
        tooldb.open(sqlite_url, settings=settings) as registry,
        pytest.raises(DefinitionError, match=message),
    ):
        registry.add(sql_tool("t", "SELECT 1", metadata={"connection": "other"}))


def test_a_connection_missing_at_call_time_fails_the_call(store_url: str, data_url: str) -> None:
    settings = Settings(url=store_url, connections={"data": data_url})
    with tooldb.open(store_url, settings=settings) as registry:
        registry.add(sql_tool("count", "SELECT count(*) FROM items", "scalar"))
    with tooldb.open(store_url, settings=Settings(url=store_url)) as registry:
        result = registry.call("count")
    assert not result.success and "'data' is not a configured connection" in (result.error or "")


# -- caps, values, arguments -----------------------------------------------------------------
def test_row_cap_is_reported(reg: Registry) -> None:
    reg.add(sql_tool("all_items", "SELECT id FROM items ORDER BY id", metadata={"max_rows": 3}))
    result = reg.call("all_items")
    assert result.success
    assert [r["id"] for r in result.data["rows"]] == [1, 2, 3]
    assert result.data["truncated"] and result.data["truncated_by"] == "max_rows"
    assert result.data["row_count"] == 3 and result.data["max_rows"] == 3
    rows_json, note = result.output.split("\n")
    assert json.loads(rows_json) == result.data["rows"]
    assert note == "-- truncated: 3 rows shown, more were available (max_rows=3)"


def test_endless_result_stops_at_the_cap(reg: Registry) -> None:
    """Only the kept rows are fetched (PostgreSQL: a server-side cursor), so a query
    with no end still answers at once."""
    endless = "WITH RECURSIVE c(x) AS (SELECT 1 UNION ALL SELECT x + 1 FROM c) SELECT x FROM c"
    reg.add(sql_tool("endless", endless, metadata={"max_rows": 5}, timeout_s=10))
    started = time.perf_counter()
    result = reg.call("endless")
    assert result.success, result.error
    assert [row["x"] for row in result.data["rows"]] == [1, 2, 3, 4, 5]
    assert result.data["truncated_by"] == "max_rows"
    assert time.perf_counter() - started < 5


def test_byte_cap_is_reported(reg: Registry) -> None:
    reg.add(sql_tool("names", "SELECT name FROM items ORDER BY id", metadata={"max_bytes": 60}))
    result = reg.call("names")
    rows = result.data["rows"]
    assert result.data["truncated_by"] == "max_bytes" and 0 < len(rows) < 10
    assert len(json.dumps(rows, separators=(",", ":")).encode()) <= 60
    assert "(max_bytes=60)" in result.output


def test_exact_fit_is_not_truncated(reg: Registry) -> None:
    reg.add(sql_tool("ten", "SELECT id FROM items", metadata={"max_rows": 10}))
    assert reg.call("ten").data["truncated"] is False


def test_omitted_optional_argument_binds_null(reg: Registry) -> None:
    reg.add(
        sql_tool(
            "filter",
            "SELECT id FROM items WHERE (CAST(:name AS TEXT) IS NULL OR name = :name) ORDER BY id",
            parameters={"name": {"type": "string"}},
        )
    )
    assert reg.call("filter").data["row_count"] == 10
    assert reg.call("filter", {"name": "item4"}).data["rows"] == [{"id": 4}]


def test_list_arguments(reg: Registry) -> None:
    target = (
        "SELECT id FROM items WHERE id = ANY(:ids) ORDER BY id"
        if is_pg(reg)
        else "SELECT id FROM items WHERE id IN (SELECT value FROM json_each(:ids)) ORDER BY id"
    )
    reg.add(sql_tool("some", target, parameters={"ids": {"type": "array"}}))
    result = reg.call("some", {"ids": [2, 5, 400]})
    assert result.success, result.error
    assert result.data["rows"] == [{"id": 2}, {"id": 5}]


def test_database_values_become_json(reg: Registry) -> None:
    if is_pg(reg):
        target = (
            "SELECT 12.50::numeric AS dec, 7::numeric AS whole, DATE '2024-02-03' AS d,"
            " TIMESTAMP '2024-02-03 04:05:06' AS ts, '\\xdead'::bytea AS b,"
            " '6f1c1e0e-0000-4000-8000-000000000000'::uuid AS u, INTERVAL '90 seconds' AS i,"
            " 'NaN'::float8 AS nan, ARRAY[1, 2] AS arr, '{\"k\": [1]}'::json AS j"
        )
        expected = {
            "dec": 12.5, "whole": 7, "d": "2024-02-03", "ts": "2024-02-03T04:05:06",
            "b": "dead", "u": "6f1c1e0e-0000-4000-8000-000000000000", "i": 90.0,
            "nan": "NaN", "arr": [1, 2], "j": {"k": [1]},
        }  # fmt: skip
    else:
        target = "SELECT x'dead' AS b, 1.5 AS r, 3 AS n, NULL AS z, 'é' AS t"
        expected = {"b": "dead", "r": 1.5, "n": 3, "z": None, "t": "é"}
    reg.add(sql_tool("values", target))
    result = reg.call("values")
    assert result.success, result.error
    assert result.data["rows"] == [expected]
    assert json.loads(result.output) == [expected]


def test_jsonable_rule() -> None:
    import datetime as dt
    from decimal import Decimal

    assert jsonable(Decimal("10")) == 10 and isinstance(jsonable(Decimal("10")), int)
    assert jsonable(Decimal("10.00")) == 10.0 and isinstance(jsonable(Decimal("10.00")), float)
    assert jsonable(Decimal("Infinity")) == "Infinity" and jsonable(float("-inf")) == "-Infinity"
    assert jsonable(dt.time(1, 2)) == "01:02:00" and jsonable(memoryview(b"\x01")) == "01"
    assert jsonable({"a": (Decimal("1.5"), b"\xff")}) == {"a": [1.5, "ff"]}
    assert jsonable(Path("/x")) == "/x"


# -- timeouts, failures, concurrency --------------------------------------------------------
def _slow_target(reg: Registry) -> str:
    if is_pg(reg):
        return "SELECT pg_sleep(:seconds)"
    # No sleep in SQLite: an endless recursive query, stopped by sqlite3 interrupt().
    return "WITH RECURSIVE c(x) AS (SELECT 1 UNION ALL SELECT x + 1 FROM c) SELECT count(*) " \
        "FROM c WHERE x > :seconds * 0"  # fmt: skip


def test_timeout_stops_the_statement(reg: Registry) -> None:
    reg.add(sql_tool("slow", _slow_target(reg), "scalar", parameters={"seconds": "float"}))
    started = time.perf_counter()
    result = reg.call("slow", {"seconds": 30}, timeout_s=0.3)
    elapsed = time.perf_counter() - started
    assert result.error == "tool 'slow' timed out after 0.3 s and was stopped"
    assert elapsed < 3
    assert reg.calls(tool="slow")[0].error_kind is ErrorKind.TIMEOUT
    assert count_items(reg) == 10  # the connection pool still works afterwards


def test_sql_errors_name_the_tool_and_connection(reg: Registry) -> None:
    reg.add(sql_tool("broken", "SELECT nope FROM items"))
    result = reg.call("broken")
    assert not result.success
    assert (result.error or "").startswith("sql tool 'broken' failed on connection 'data': ")
    assert "nope" in (result.error or "")


def test_many_threads_share_the_engines(reg: Registry) -> None:
    reg.add(sql_tool("by_id", "SELECT name FROM items WHERE id = :id", parameters={"id": "int"}))
    requests = [("by_id", {"id": i % 10 + 1}) for i in range(40)]
    results = reg.call_many(requests, max_parallel=8)
    assert [r.data["rows"][0]["name"] for r in results] == [f"item{i % 10 + 1}" for i in range(40)]


def test_async_call(reg: Registry) -> None:
    import asyncio

    reg.add(sql_tool("count", "SELECT count(*) FROM items", "scalar"))
    assert asyncio.run(reg.acall("count")).data == 10


# -- configuration and CLI ----------------------------------------------------------------------
def test_connections_from_file_and_environment(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    config = tmp_path / "config.toml"
    config.write_text('[connections]\nwarehouse = "sqlite:///w.db"\nlogs = "sqlite:///l.db"\n')
    monkeypatch.setenv("TOOLDB_CONFIG", str(config))
    monkeypatch.setenv("TOOLDB_CONNECTION_LOGS", "postgresql://postgres@127.0.0.1/logs")
    monkeypatch.setenv("TOOLDB_CONNECTION_CRM", "sqlite:///crm.db")
    settings = Settings.load()
    assert settings.connections == {
        "warehouse": "sqlite:///w.db",
        "logs": "postgresql://postgres@127.0.0.1/logs",
        "crm": "sqlite:///crm.db",
    }
    monkeypatch.setenv("TOOLDB_CONNECTION_REGISTRY", "sqlite:///x.db")
    with pytest.raises(UsageError, match="reserved"):
        Settings.load()
    monkeypatch.delenv("TOOLDB_CONNECTION_REGISTRY")
    config.write_text("connections = 5\n")
    with pytest.raises(UsageError, match="table of name = URL"):
        Settings.load()


def test_cli_calls_a_sql_tool(
    store_url: str, data_url: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from typer.testing import CliRunner

    from tooldb.cli import app

    monkeypatch.setenv("TOOLDB_CONNECTION_DATA", data_url)
    manifest = tmp_path / "sql.yaml"
    manifest.write_text(
        json.dumps(
            [
                sql_tool("item", "SELECT name FROM items WHERE id = :id", parameters={"id": "int"}),
                sql_tool("wipe", "DELETE FROM items", "none"),
            ]
        )
    )
    runner = CliRunner()
    added = runner.invoke(app, ["--db", store_url, "add", "manifest", str(manifest)])
    assert added.exit_code == 0, added.output
    arguments = ["--db", store_url, "call", "item", "--args", '{"id": 2}', "--json"]
    called = runner.invoke(app, arguments)
    assert called.exit_code == 0, called.output
    assert json.loads(called.stdout)["data"]["rows"] == [{"name": "item2"}]
    refused = runner.invoke(app, ["--db", store_url, "call", "wipe"])
    assert refused.exit_code == 1 and "read-only" in refused.stderr
