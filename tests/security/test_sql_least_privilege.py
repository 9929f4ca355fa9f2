"""Issue 20, item 10: a read-only SQL tool got only a read-only transaction.

Before the fix, on PostgreSQL ``COPY ... TO PROGRAM`` ran as the server's OS user
when the connection's role allowed it (the registry's own, often a superuser), and a
``pg_advisory_lock`` taken by a read tool stayed held on the pooled session, blocking
``tooldb init``; a statement ran without ``statement_timeout`` when no timeout was
passed. On SQLite, ``ATTACH`` and ``VACUUM INTO`` ran (and created files).
"""

from __future__ import annotations

import threading
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import psycopg
import pytest
import sqlalchemy as sa

import tooldb
from tooldb import Registry, Settings
from tooldb.types import ToolKind

from ..conftest import scratch_database

LOCK_KEY = 73112024  # the key `tooldb init` serialises migrations with


def sql(name: str, target: str, returns: str = "table", **extra: Any) -> dict[str, Any]:
    parameters = extra.pop("parameters", {})
    return {"name": name, "kind": "sql", "target": target, "returns": returns,
            "parameters": parameters, **extra}  # fmt: skip


@pytest.fixture
def pg_data_url() -> Iterator[str]:
    """A PostgreSQL database used as a named connection (not the registry)."""
    with scratch_database("tooldb_sec") as url:
        yield url


@pytest.fixture
def pg(postgres_url: str, pg_data_url: str) -> Iterator[Registry]:
    from ..conftest import _truncate_postgres

    _truncate_postgres(postgres_url)
    settings = Settings(url=postgres_url, embedder="hash", connections={"data": pg_data_url})
    with tooldb.open(postgres_url, settings=settings) as registry:
        yield registry


def advisory_locks_held(url: str) -> int:
    with psycopg.connect(url, autocommit=True) as conn:
        row = conn.execute(
            "SELECT count(*) FROM pg_locks WHERE locktype = 'advisory' AND granted"
            " AND objid = %s AND database = (SELECT oid FROM pg_database"
            " WHERE datname = current_database())",
            (LOCK_KEY,),
        ).fetchone()
    return int(row[0]) if row else 0


# -- PostgreSQL ---------------------------------------------------------------------------
def test_registry_sql_tools_run_as_a_least_privileged_role(pg: Registry) -> None:
    pg.add(sql("whoami", "SELECT current_user AS who, r.rolsuper, r.rolbypassrls FROM pg_roles r"
               " WHERE r.rolname = current_user"))  # fmt: skip
    result = pg.call("whoami")
    assert result.success, result.error
    assert result.data["rows"] == [{"who": "tooldb_sql", "rolsuper": False, "rolbypassrls": False}]


def test_copy_to_program_is_refused(pg: Registry, tmp_path: Path) -> None:
    marker = Path("/tmp") / f"tooldb-copy-{uuid.uuid4().hex}"
    pg.add(sql("exfil", f"COPY (SELECT 1) TO PROGRAM 'touch {marker}'", "none"))
    result = pg.call("exfil")
    try:
        assert not result.success
        assert "permission denied" in (result.error or "") or "privilege" in (result.error or "")
        assert not marker.exists()
    finally:
        marker.unlink(missing_ok=True)


@pytest.mark.parametrize("connection", ["registry", "data"])
def test_a_read_tool_leaves_no_session_state_behind(
    pg: Registry, postgres_url: str, pg_data_url: str, connection: str
) -> None:
    """An advisory lock (and any session setting) is released when the call ends."""
    pg.add(sql("grab", f"SELECT pg_advisory_lock({LOCK_KEY})", "scalar",
               metadata={"connection": connection}))  # fmt: skip
    pg.add(sql("set_guc", "SELECT set_config('work_mem', '77MB', false)", "scalar",
               metadata={"connection": connection}))  # fmt: skip
    pg.add(sql("read_guc", "SELECT current_setting('work_mem')", "scalar",
               metadata={"connection": connection}))  # fmt: skip
    assert pg.call("grab").success
    assert advisory_locks_held(postgres_url if connection == "registry" else pg_data_url) == 0
    assert pg.call("set_guc").success
    assert pg.call("read_guc").data != "77MB"
    if connection == "registry":  # `tooldb init` is not blocked by the lock
        done = threading.Event()
        threading.Thread(target=lambda: (pg.init(), done.set()), daemon=True).start()
        assert done.wait(20), "tooldb init is blocked by an advisory lock a SQL tool left"


@pytest.mark.parametrize("connection", ["registry", "data"])
def test_every_statement_has_a_statement_timeout(pg: Registry, connection: str) -> None:
    pg.add(sql("timeout", "SELECT current_setting('statement_timeout')", "scalar",
               metadata={"connection": connection}))  # fmt: skip
    executor = pg.executors[ToolKind.SQL]
    tool = pg.get("timeout")
    assert executor.run(tool, {}, None) not in ("0", None)  # no timeout passed: still bounded
    assert pg.call("timeout", timeout_s=2.5).data == "2500ms"


# -- SQLite ---------------------------------------------------------------------------------
@pytest.fixture
def lite(sqlite_url: str, tmp_path: Path) -> Iterator[Registry]:
    data = tmp_path / "data.db"
    engine = sa.create_engine(f"sqlite:///{data}")
    with engine.begin() as conn:
        conn.exec_driver_sql("CREATE TABLE items (id INTEGER PRIMARY KEY)")
    engine.dispose()
    settings = Settings(url=sqlite_url, embedder="hash", connections={"data": f"sqlite:///{data}"})
    with tooldb.open(sqlite_url, settings=settings) as registry:
        yield registry


@pytest.mark.parametrize(
    ("connection", "access"), [("registry", "read"), ("data", "read"), ("data", "write")]
)
def test_attach_and_vacuum_into_are_refused(
    lite: Registry, tmp_path: Path, connection: str, access: str
) -> None:
    attached, copied = tmp_path / "attached.db", tmp_path / "copy.db"
    metadata = {"connection": connection, "access": access}
    lite.add(sql("attach", "ATTACH DATABASE :path AS other", "none",
                 parameters={"path": "string"}, metadata=metadata))  # fmt: skip
    lite.add(sql("vacuum_into", "VACUUM INTO :path", "none",
                 parameters={"path": "string"}, metadata=metadata))  # fmt: skip
    attach = lite.call("attach", {"path": str(attached)})
    vacuum = lite.call("vacuum_into", {"path": str(copied)})
    assert not attach.success and not vacuum.success
    assert "not authorized" in (attach.error or "")
    assert not attached.exists() and not copied.exists()


def test_a_role_that_bypasses_rls_is_refused(postgres_url: str) -> None:
    """Pointed at a superuser (``registry_sql_url``), SQL tools over the registry fail
    closed instead of reading every tenant."""
    settings = Settings(url=postgres_url, embedder="hash", registry_sql_url=postgres_url)
    with tooldb.open(postgres_url, settings=settings) as registry:
        registry.add(sql("n", "SELECT count(*) FROM calls", "scalar"))
        result = registry.call("n")
    assert not result.success
    assert "refuse to run as role 'postgres'" in (result.error or "")


def test_repeated_calls_survive_the_session_reset(pg: Registry) -> None:
    """DISCARD ALL drops the driver's prepared statements: psycopg must notice."""
    pg.add(sql("one", "SELECT count(*) FROM tools WHERE name = :n", "scalar",
               parameters={"n": "string"}))  # fmt: skip
    assert [pg.call("one", {"n": "one"}).data for _ in range(12)] == [1] * 12


def test_a_sqlite_data_connection_reads_but_never_attaches(lite: Registry, tmp_path: Path) -> None:
    """Promise (executors/sql_tenancy.py): every other SQLite connection refuses ATTACH
    and DETACH only; its ordinary statements run."""
    lite.add(sql("items", "SELECT count(*) FROM items", "scalar", metadata={"connection": "data"}))
    assert lite.call("items").data == 0
    lite.add(sql("detach", "DETACH DATABASE main", "none", metadata={"connection": "data"}))
    assert "not authorized" in (lite.call("detach").error or "")


@pytest.mark.parametrize(
    ("statement", "allowed"),
    [
        ("SELECT count(*) FROM json_each('[1, 2, 3]')", True),
        ("SELECT count(*) FROM json_tree('{\"a\": [1]}')", True),
        ("PRAGMA query_only = ON", True),
        ("PRAGMA query_only = OFF", False),
        ("PRAGMA cache_size = 1", False),
        ("PRAGMA foreign_keys = 1", False),
    ],
)
def test_the_registry_connection_allows_table_functions_and_query_only_alone(
    lite: Registry, statement: str, allowed: bool
) -> None:
    """Promise: a statement over the registry may read the tenant views, json_each and
    json_tree, and set ``query_only=ON``; any other pragma is refused."""
    returns = "scalar" if statement.startswith("SELECT") else "none"
    lite.add(sql("probe", statement, returns))
    result = lite.call("probe")
    assert result.success is allowed, result.error
    if not allowed:
        assert "not authorized" in (result.error or "")


def test_the_sql_role_url_drops_the_owners_name_and_password() -> None:
    """Promise: SQL tools over a PostgreSQL registry connect as ``tooldb_sql`` with no
    password (trust or a client certificate), unless ``registry_sql_url`` says where."""
    from tooldb.executors.sql_tenancy import role_url

    owner = "postgresql+psycopg://owner:s3cret@db.example:5433/reg?sslmode=require"
    assert (
        role_url(owner, None)
        == "postgresql+psycopg://tooldb_sql@db.example:5433/reg?sslmode=require"
    )
    assert role_url(owner, "postgresql://elsewhere/db") == "postgresql://elsewhere/db"


def test_an_empty_secret_table_says_to_run_init(sqlite_url: str) -> None:
    from tooldb.stores.tenant_scope import read_secret

    engine = sa.create_engine(sqlite_url)
    try:
        tooldb.open(sqlite_url, settings=Settings(url=sqlite_url, embedder="hash")).close()
        with engine.connect() as conn, pytest.raises(LookupError) as missing:
            read_secret(conn)
    finally:
        engine.dispose()
    assert str(missing.value) == "the registry has no sql_tenant_key secret: run `tooldb init`"


@pytest.fixture
def login_role(postgres_url: str) -> Iterator[Any]:
    """Makes LOGIN roles for one test (cluster-wide objects: dropped afterwards)."""
    made: list[str] = []
    admin = psycopg.connect(postgres_url, autocommit=True)

    def make(options: str, *member_of: str) -> str:
        name = f"tooldb_mut_{uuid.uuid4().hex[:10]}"
        admin.execute(f"CREATE ROLE {name} LOGIN {options}")
        made.append(name)
        for role in member_of:
            admin.execute(f"GRANT {role} TO {name}")
        return (
            sa.make_url(postgres_url)
            .set(username=name, password=None)
            .render_as_string(hide_password=False)
        )

    yield make
    for name in made:
        admin.execute(f"DROP OWNED BY {name}")
        admin.execute(f"DROP ROLE {name}")
    admin.close()


@pytest.mark.parametrize(
    ("options", "member_of", "why"),
    [
        ("BYPASSRLS", (), "it can read past row-level security (a superuser, BYPASSRLS, "
                          "the tables' owner, or a registry not upgraded by `tooldb init`)"),
        ("", ("pg_read_server_files",), "it may run programs or read or write the server's files"),
        ("", ("pg_execute_server_program",),
         "it may run programs or read or write the server's files"),
    ],
)  # fmt: skip
def test_a_role_that_bypasses_rls_or_reaches_files_is_refused_with_why(
    postgres_url: str, login_role: Any, options: str, member_of: tuple[str, ...], why: str
) -> None:
    """Promise: SQL tools over a PostgreSQL registry fail closed, saying why, on a role
    that is not subject to row-level security or that holds a server-file role, even
    when it is not a superuser (the existing test covers the superuser)."""
    role = login_role(options, *member_of)
    name = sa.make_url(role).username
    settings = Settings(url=postgres_url, embedder="hash", registry_sql_url=role)
    with tooldb.open(postgres_url, settings=settings) as registry:
        registry.add(sql("n", "SELECT count(*) FROM calls", "scalar"))
        result = registry.call("n")
    assert not result.success
    assert f"refuse to run as role {name!r}: {why}; they run as tooldb_sql" in (
        result.error or ""
    ), result.error


def test_grant_creates_a_least_privileged_role_or_says_why_it_cannot(
    postgres_url: str, caplog: pytest.LogCaptureFixture
) -> None:
    """Promise (stores/tenant_scope.py): ``tooldb init`` creates the SQL tools' role
    without superuser, BYPASSRLS or CREATEROLE and grants it SELECT on the tenant tables;
    an owner without CREATEROLE keeps a working registry and is told why (a warning and
    the reason returned). Both run in a transaction rolled back at the end."""
    from tooldb.stores.tenant_scope import SCOPES, grant_sql_role

    fresh = f"tooldb_mut_{uuid.uuid4().hex[:10]}"
    engine = sa.create_engine(postgres_url.replace("postgresql://", "postgresql+psycopg://", 1))
    try:
        with engine.connect() as conn:
            with conn.begin() as outer:
                assert grant_sql_role(conn, fresh) is None
                row = conn.execute(
                    sa.text(
                        "SELECT rolcanlogin, rolsuper, rolbypassrls, rolcreaterole, rolinherit"
                        " FROM pg_roles WHERE rolname = :r"
                    ),
                    {"r": fresh},
                ).one()
                assert tuple(row) == (True, False, False, False, False)
                granted = conn.execute(
                    sa.text(
                        "SELECT count(DISTINCT table_name)"
                        " FROM information_schema.role_table_grants"
                        " WHERE grantee = :r AND privilege_type = 'SELECT'"
                    ),
                    {"r": fresh},
                ).scalar()
                assert granted == len(SCOPES)
                assert grant_sql_role(conn, fresh) is None  # again: the role exists
                outer.rollback()
            with conn.begin() as outer:
                conn.exec_driver_sql(f"CREATE ROLE {fresh} NOLOGIN")
                conn.exec_driver_sql(f"SET LOCAL ROLE {fresh}")
                with caplog.at_level("WARNING", logger="tooldb.stores.tenant_scope"):
                    reason = grant_sql_role(conn, f"{fresh}_x")
                outer.rollback()
    finally:
        engine.dispose()
    assert reason == "permission denied to create role"
    assert caplog.messages == [
        f"could not create the role {fresh}_x for SQL tools: permission denied to create role"
    ]
