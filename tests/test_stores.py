"""Stores and migrations: the migrated schema is the declared schema, on both backends."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
import sqlalchemy as sa
from alembic.autogenerate import compare_metadata
from alembic.runtime.migration import MigrationContext

import tooldb
from tooldb import Settings, StoreError, UsageError
from tooldb.stores import open_store
from tooldb.stores.migrate import HEAD
from tooldb.stores.schema import metadata


def test_migrated_schema_matches_declared_metadata(store_url: str) -> None:
    store = open_store(store_url)
    try:
        store.migrate()
        assert store.revision() == HEAD
        with store.engine.connect() as conn:  # type: ignore[attr-defined]
            diff = compare_metadata(MigrationContext.configure(conn), metadata)
        assert diff == []
    finally:
        store.close()


def test_head_is_the_alembic_head() -> None:
    from alembic.config import Config
    from alembic.script import ScriptDirectory

    config = Config()
    config.set_main_option("script_location", "tooldb.stores:migrations")
    assert ScriptDirectory.from_config(config).get_heads() == [HEAD]


def test_migrate_is_idempotent_and_keeps_data(store_url: str) -> None:
    settings = Settings(embedder="hash", url=store_url)
    with tooldb.open(store_url, settings=settings) as registry:
        registry.add({"name": "n", "target": "tests.sample_tools:noop"})
        assert registry.init() == (HEAD, HEAD)
        assert registry.get("n").version == 1


def test_upgrade_from_0001_keeps_tools_and_makes_them_selectable(store_url: str) -> None:
    from alembic import command
    from alembic.config import Config
    from typer.testing import CliRunner

    from tooldb.cli import app

    store = open_store(store_url)
    try:
        with store.engine.begin() as conn:  # type: ignore[attr-defined]
            config = Config()
            config.set_main_option("script_location", "tooldb.stores:migrations")
            config.attributes["connection"] = conn
            command.upgrade(config, "0001_initial")  # an empty SQLite file
            command.downgrade(config, "0001_initial")  # the session's PostgreSQL database
            for tenant in ("default", "acme"):
                conn.execute(
                    sa.text(
                        "INSERT INTO tools (tenant, name, description, category, kind, target,"
                        " parameters, returns, metadata, version, content_hash, enabled,"
                        " created_at, updated_at) VALUES (:t, 'old_weather', 'Weather forecast',"
                        " 'general', 'python', 'tests.sample_tools:noop',"
                        " '{\"type\": \"object\", \"properties\": {}}', 'json', '{}', 1,"
                        " 'h', true, 0, 0)"
                    ),
                    {"t": tenant},
                )
    finally:
        store.close()
    result = CliRunner().invoke(app, ["--db", store_url, "init", "--json"])
    assert result.exit_code == 0, result.output
    for tenant in ("default", "acme"):
        settings = Settings(embedder="hash", url=store_url)
        with tooldb.open(store_url, tenant, settings=settings) as registry:
            assert registry.get("old_weather").version == 1
            assert registry.embed() == 1
            selection = registry.select("weather forecast", k=1)
            assert selection.names == ["old_weather"] and selection.notes == []


def test_registry_with_unknown_revision_is_refused(sqlite_url: str) -> None:
    tooldb.open(sqlite_url).close()
    engine = sa.create_engine(sqlite_url)
    with engine.begin() as conn:
        conn.execute(sa.text("UPDATE alembic_version SET version_num = '9999_future'"))
    engine.dispose()
    with pytest.raises(StoreError, match="tooldb init"):
        tooldb.open(sqlite_url)


def test_open_without_create_refuses_empty_store(tmp_path: Path) -> None:
    with pytest.raises(UsageError, match=r"no registry at .*tooldb init"):
        tooldb.open(f"sqlite:///{tmp_path / 'registry.db'}", create=False)


def test_bad_urls() -> None:
    with pytest.raises(UsageError, match="unsupported store URL"):
        tooldb.open("mysql://root@localhost/x")
    with pytest.raises(StoreError, match="failed"):
        tooldb.open("postgresql://nobody@127.0.0.1:1/none")


def test_default_store_is_sqlite_in_user_data_dir(tmp_path: object) -> None:
    with tooldb.open() as registry:
        assert registry.store.url.startswith("sqlite:///")
        assert registry.store.url.endswith("home/registry.db")


def test_settings_precedence(monkeypatch: pytest.MonkeyPatch, tmp_path: object) -> None:
    from pathlib import Path

    config = Path(str(tmp_path)) / "config.toml"
    config.write_text('default_timeout_s = 7\ntenant = "from-file"\n')
    monkeypatch.setenv("TOOLDB_CONFIG", str(config))
    monkeypatch.setenv("TOOLDB_TENANT", "from-env")
    settings = Settings.load()
    assert settings.default_timeout_s == 7.0 and settings.tenant == "from-env"
    assert Settings.load(tenant="explicit").tenant == "explicit"
    monkeypatch.setenv("TOOLDB_AGENT_HELD_CALLS", "1")
    assert Settings.load().agent_held_calls == 1
    monkeypatch.setenv("TOOLDB_AGENT_HELD_CALLS", "0")
    with pytest.raises(UsageError, match="agent_held_calls"):
        Settings.load()
    monkeypatch.delenv("TOOLDB_AGENT_HELD_CALLS")
    monkeypatch.setenv("TOOLDB_RECORD_CALLS", "maybe")
    with pytest.raises(UsageError, match="record_calls"):
        Settings.load()


def test_pool_stats_look_candidates_up_by_primary_key_on_postgresql(postgres_url: str) -> None:
    """Right after a bulk load, before any ANALYZE, PostgreSQL guesses a tenant's tools
    are few and read the pool's statistics through the tenant's index, over every tool
    of the tenant (100,000 tools: 4 ms instead of 0.2). The ids must go by an index of
    ids: the primary key, or the called tools' partial index."""
    import psycopg

    from tests.conftest import _truncate_postgres

    _truncate_postgres(postgres_url)
    reg = tooldb.open(postgres_url, settings=Settings(url=postgres_url, embedder="hash"))
    try:
        reg.add({"name": "t0", "description": "tool 0", "target": "tests.sample_tools:echo",
                 "parameters": {"text": {"type": "string"}}})  # fmt: skip
        reg.call("t0", {"text": "hi"})
        plain = postgres_url.replace("postgresql+psycopg", "postgresql")
        with psycopg.connect(plain, autocommit=True) as conn:
            conn.execute(
                "INSERT INTO tools (tenant, name, description, category, kind, target,"
                " parameters, returns, metadata, version, content_hash, enabled, created_at,"
                " updated_at, change_seq) SELECT %s, 'bulk_' || g, 'd', 'c', 'python', 'x',"
                " '{}'::jsonb, 'text', '{}'::jsonb, 1, 'h', true, 0, 0, 0"
                " FROM generate_series(1, 20000) g",
                (reg.tenant,),
            )
            query = reg.store._search_sql["pool_stats"]
            params = query.params({"tenant": reg.tenant, "ids": list(range(1, 51))})
            plan = "\n".join(row[0] for row in conn.execute("EXPLAIN " + query.sql, params))
        by_id = "tools_pkey" in plan or "ix_tools_called" in plan
        assert by_id and "ix_tools_tenant" not in plan, plan
        stats, state = reg.store.pool_stats(reg.tenant, list(range(1, 51)))
        assert set(stats) == {reg.get("t0").id} and state == reg.store.tenant_state(reg.tenant)
    finally:
        reg.close()


def _sqlite_plan(reg: tooldb.Registry, statement: str) -> list[Any]:
    """SQLite's plan of one of selection's prebuilt statements, for ids 1-3."""
    import json

    query = reg.store._search_sql[statement]
    params = query.params({"tenant": reg.tenant, "ids": json.dumps([1, 2, 3])})
    with reg.store.engine.connect() as conn:
        return list(conn.exec_driver_sql("EXPLAIN QUERY PLAN " + query.sql, params).all())


def test_pool_stats_read_only_the_called_tools_index_on_sqlite(sqlite_url: str) -> None:
    """Most of a pool was never called: its ids are probed in the small index of called
    tools (migration 0005), not each looked up in the wide tools table."""

    reg = tooldb.open(sqlite_url, settings=Settings(url=sqlite_url, embedder="hash"))
    try:
        reg.add(*[
            {"name": f"t{i}", "description": f"tool {i}", "target": "tests.sample_tools:echo",
             "parameters": {"text": {"type": "string"}}}
            for i in range(30)
        ])  # fmt: skip
        for name, text in (("t3", "a"), ("t3", "b"), ("t7", "c")):
            reg.call(name, {"text": text})
        store = reg.store
        plan = _sqlite_plan(reg, "pool_stats")
        assert any("ix_tools_called" in row[-1] for row in plan), plan
        ids = [reg.get(name).id for name in ("t1", "t3", "t7", "t9")]
        stats, _ = store.pool_stats(reg.tenant, ids)
        assert {tool_id: live.usage_count for tool_id, live in stats.items()} == {
            ids[1]: 2,
            ids[2]: 1,
        }
        assert store.pool_stats("another tenant", ids)[0] == {}
    finally:
        reg.close()


def test_live_stats_looks_candidates_up_by_rowid_on_sqlite(sqlite_url: str) -> None:
    """Selection reads the pool's statistics by id; SQLite must not walk the tenant's
    index over all of its tools to do so (the unary plus in search_rows.py)."""

    reg = tooldb.open(sqlite_url, settings=Settings(url=sqlite_url, embedder="hash"))
    try:
        reg.add(*[
            {"name": f"t{i}", "description": f"tool {i}", "target": "tests.sample_tools:echo"}
            for i in range(30)
        ])  # fmt: skip
        store = reg.store
        plan = _sqlite_plan(reg, "live_stats")
        assert any("INTEGER PRIMARY KEY" in row[-1] for row in plan), plan
        assert set(store.live_stats(reg.tenant, [1, 2, 3])) == {1, 2, 3}
        assert store.live_stats("another tenant", [1, 2, 3]) == {}
    finally:
        reg.close()


def test_a_pooled_postgresql_connection_whose_server_went_away_is_replaced(
    postgres_url: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Pooled connections are pinged only after sitting idle (stores/postgres.py): one
    whose backend was ended while it sat in the pool is replaced unseen, and one given
    back a moment ago is handed out again without a ping."""
    import psycopg

    from tooldb.stores import postgres

    store = open_store(postgres_url)
    engine = store.engine  # type: ignore[attr-defined]
    pings = 0
    real_ping = engine.dialect.do_ping

    def counted(connection: Any) -> bool:
        nonlocal pings
        pings += 1
        return bool(real_ping(connection))

    monkeypatch.setattr(engine.dialect, "do_ping", counted)
    try:
        with engine.connect() as conn:
            backend = conn.execute(sa.text("SELECT pg_backend_pid()")).scalar_one()
        with engine.connect() as conn:  # back a moment ago: no ping
            assert conn.execute(sa.text("SELECT pg_backend_pid()")).scalar_one() == backend
        assert pings == 0
        plain = postgres_url.replace("postgresql+psycopg", "postgresql")
        with psycopg.connect(plain, autocommit=True) as admin:
            admin.execute("SELECT pg_terminate_backend(%s)", (backend,))
        monkeypatch.setattr(postgres, "PING_IDLE_S", 0.0)  # it has sat idle long enough
        with engine.connect() as conn:
            fresh = conn.execute(sa.text("SELECT pg_backend_pid()")).scalar_one()
        assert fresh != backend and pings == 1  # its ping failed; the new one is not pinged
    finally:
        store.close()
