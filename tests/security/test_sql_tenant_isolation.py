"""Issue 20, item 1: a SQL tool over the registry sees only its caller's tenant.

Before the fix, a tool on the ``registry`` connection read every tenant's rows: in
tenant ``a`` the shipped ``recent_failures`` returned tenant ``b``'s errors with their
arguments, ``SELECT ... FROM tools WHERE tenant = 'b'`` listed ``b``'s tools, and any
``SELECT ... FROM calls`` dumped all tenants. Every test runs on SQLite and PostgreSQL.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import sqlalchemy as sa

import tooldb
from tooldb import Registry, Settings
from tooldb.stores.tenant_scope import SCOPES

ROOT = Path(__file__).resolve().parents[2]
SECRET = "b-only-password-1234"


def sql(name: str, target: str, returns: str = "table", **parameters: Any) -> dict[str, Any]:
    return {"name": name, "kind": "sql", "target": target, "returns": returns,
            "parameters": parameters}  # fmt: skip


@pytest.fixture
def tenants(store_url: str) -> Iterator[tuple[Registry, Registry]]:
    """Tenant ``b`` with tools, versions, searches, failed calls (a secret in their
    arguments) and a selection decision; tenant ``a`` with the shipped examples."""
    settings = Settings(url=store_url, embedder="hash")
    with tooldb.open(store_url, settings=settings, tenant="b") as b:
        b.add(sql("b_lookup", "SELECT * FROM no_such_table WHERE x = :password",
                  password={"type": "string"}))  # fmt: skip
        b.add(
            sql(
                "b_lookup",
                "SELECT * FROM no_such_table_2 WHERE x = :password",
                password={"type": "string"},
            )
        )  # fmt: skip  (a second version)
        for _ in range(3):
            assert not b.call("b_lookup", {"password": SECRET}).success
        b.select("look something up", k=2)
        a = b.for_tenant("a")
        a.add_manifest(ROOT / "examples" / "sql_tools.yaml")
        try:
            yield a, b
        finally:
            a.close()


def rows(result: Any) -> list[dict[str, Any]]:
    assert result.success, result.error
    return list(result.data["rows"])


def test_shipped_examples_see_only_the_callers_tenant(tenants: tuple[Registry, Registry]) -> None:
    a, _b = tenants
    # recent_failures in tenant a, asked about tenant b's tool: nothing, not b's errors.
    assert rows(a.call("recent_failures", {"tool": "b_lookup"})) == []
    busiest = rows(a.call("busiest_tools", {"top": 50}))
    assert {row["name"] for row in busiest} == {"busiest_tools", "recent_failures", "call_count"}
    assert a.call("call_count").data == 2  # a's two calls above, none of b's three


def test_any_statement_sees_only_the_callers_tenant(tenants: tuple[Registry, Registry]) -> None:
    a, _b = tenants
    a.add(sql("tools_of", "SELECT name FROM tools WHERE tenant = :t", t={"type": "string"}))
    assert rows(a.call("tools_of", {"t": "b"})) == []
    a.add(sql("all_calls", "SELECT tenant, arguments, error FROM calls"))
    dumped = rows(a.call("all_calls"))
    assert all(row["tenant"] == "a" for row in dumped)
    assert SECRET not in str(dumped)


def test_every_tenant_owned_table_is_scoped(
    tenants: tuple[Registry, Registry], store_url: str
) -> None:
    """Each table, read by a tool in ``a``, holds exactly what the owner sees of ``a``."""
    a, _b = tenants
    engine = a.store.engine  # type: ignore[attr-defined]
    a.add(*(sql(f"count_{table}", f"SELECT count(*) FROM {table}", "scalar") for table in SCOPES))
    for table, condition in SCOPES.items():
        where = condition.format(tenant="'a'", schema="")
        with engine.connect() as conn:  # before the call, which adds a row to calls
            own = conn.execute(sa.text(f"SELECT count(*) FROM {table} WHERE {where}")).scalar()
            total = conn.execute(sa.text(f"SELECT count(*) FROM {table}")).scalar()
        seen = a.call(f"count_{table}")
        assert seen.success, (table, seen.error)
        assert seen.data == own, (table, seen.data, own, total)
    with engine.connect() as conn:  # b's rows are there: the counts above mean something
        assert conn.execute(sa.text("SELECT count(*) FROM calls WHERE tenant = 'b'")).scalar()
        assert conn.execute(sa.text("SELECT count(*) FROM decisions WHERE tenant = 'b'")).scalar()


BYPASSES = {
    # Qualified names, a CTE shadowing the tenant view, the schema catalog.
    "sqlite": [
        "SELECT tenant, error FROM main.calls",
        "WITH calls AS (SELECT * FROM main.calls) SELECT tenant, error FROM calls",
        "SELECT tenant, error FROM (SELECT * FROM main.calls) AS calls",
        "SELECT name, sql FROM sqlite_master",
        "SELECT name, sql FROM sqlite_temp_master",
        "SELECT * FROM pragma_table_info('calls')",
    ],
    # Setting the tenant from the statement, dynamic SQL after doing so, the key.
    "postgresql": [
        "WITH s AS MATERIALIZED (SELECT set_config('tooldb.tenant', 'b', true)) "
        "SELECT c.tenant, c.error FROM s, calls c",
        "SELECT set_config('tooldb.tenant', 'b', true), "
        "query_to_xml('SELECT tenant, error FROM calls', true, false, '')::text",
        "SELECT secret FROM sql_tenant_key",
        "SELECT tenant, error FROM public.calls",
    ],
}


#: What any of b's rows, or the schema, would show.
LEAKS = ("b_lookup", SECRET, "no_such_table", "'tenant': 'b'", "<tenant>b</tenant>", "secret")


def test_a_statement_cannot_reach_other_tenants(tenants: tuple[Registry, Registry]) -> None:
    a, _b = tenants
    for i, statement in enumerate(BYPASSES[a.store.dialect]):
        a.add(sql(f"bypass_{i}", statement))
        result = a.call(f"bypass_{i}")
        text = str(result.data)
        leaked = [marker for marker in LEAKS if marker in text] if result.success else []
        assert not leaked, (statement, leaked, result.data)
