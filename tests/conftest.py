"""Shared fixtures: every store test runs on a SQLite file and on the local PostgreSQL.

PostgreSQL is not optional: if it is unreachable the PostgreSQL tests fail and
say how to start it. Each test session creates its own database and drops it.
"""

from __future__ import annotations

import os
import uuid
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import psycopg
import pytest

import tooldb
from tooldb import Registry, Settings
from tooldb.examples.pets_server import PetsServer

PG_ADMIN_URL = os.environ.get("TOOLDB_TEST_PG", "postgresql://postgres@127.0.0.1:5432/postgres")
PG_START_HINT = (
    "PostgreSQL is not reachable at {url}: start it with "
    "`pg_ctlcluster --skip-systemctl-redirect $(ls /etc/postgresql) main start` "
    "(or point TOOLDB_TEST_PG at a server with trust auth)."
)


@pytest.fixture(autouse=True)
def _isolated_environment(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """No test reads the developer's registry or config."""
    for name in (
        "TOOLDB_URL",
        "TOOLDB_TENANT",
        "TOOLDB_CONFIG",
        "TOOLDB_DEFAULT_TIMEOUT",
        "TOOLDB_HTTP_ALLOWED_HOSTS",
        "TOOLDB_HTTP_TIMEOUT",
        "TOOLDB_HTTP_MAX_RESPONSE_BYTES",
        "TOOLDB_SCRIPT_FORKSERVER",
    ):
        monkeypatch.delenv(name, raising=False)
    # The bundled MiniLM is exercised by test_embedders; elsewhere a model-free embedder
    # keeps registries fast to open.
    monkeypatch.setenv("TOOLDB_EMBEDDER", "hash")
    for name in list(os.environ):
        if name.startswith(("TOOLDB_CONNECTION_", "TOOLDB_MAX_PARALLEL")):
            monkeypatch.delenv(name)
    monkeypatch.setenv("TOOLDB_HOME", str(tmp_path / "home"))
    monkeypatch.setenv("XDG_CONFIG_HOME", str(tmp_path / "config"))


@pytest.fixture(scope="session")
def postgres_url() -> Iterator[str]:
    """A fresh PostgreSQL database for this test session, dropped at the end."""
    try:
        psycopg.connect(PG_ADMIN_URL, autocommit=True, connect_timeout=5).close()
    except psycopg.OperationalError as exc:
        pytest.fail(PG_START_HINT.format(url=PG_ADMIN_URL) + f"\n{exc}", pytrace=False)
    with scratch_database("tooldb_test") as url:
        tooldb.open(url, settings=Settings(embedder="hash", url=url)).close()
        yield url


def _truncate_postgres(url: str) -> None:
    with psycopg.connect(url.replace("postgresql+psycopg", "postgresql"), autocommit=True) as conn:
        conn.execute(
            "TRUNCATE tools, tool_versions, calls, tool_search, tenant_state, decisions,"
            " runs, run_messages, skills, agents,"
            " tool_stats_history, ooda_cycles, ooda_acts, ooda_locks, task_evidence, evidence_state"
            " RESTART IDENTITY CASCADE"
        )


@pytest.fixture(params=["sqlite", "postgresql"])
def store_url(request: pytest.FixtureRequest, tmp_path: Path) -> str:
    """A clean, initialised registry URL on each backend."""
    if request.param == "sqlite":
        url = f"sqlite:///{tmp_path / 'registry.db'}"
        tooldb.open(url, settings=Settings(embedder="hash", url=url)).close()
        return url
    url: str = request.getfixturevalue("postgres_url")
    _truncate_postgres(url)
    return url


@contextmanager
def scratch_database(prefix: str) -> Iterator[str]:
    """A new, empty PostgreSQL database beside the test server's, dropped afterwards."""
    name = f"{prefix}_{uuid.uuid4().hex[:12]}"
    with psycopg.connect(PG_ADMIN_URL, autocommit=True, connect_timeout=5) as admin:
        admin.execute(f'CREATE DATABASE "{name}"')
    try:
        yield f"{PG_ADMIN_URL.rsplit('/', 1)[0]}/{name}"
    finally:
        with psycopg.connect(PG_ADMIN_URL, autocommit=True) as admin:
            admin.execute(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')


@pytest.fixture
def sqlite_url(tmp_path: Path) -> str:
    """An initialised SQLite registry (only ``tooldb init`` creates one from the CLI)."""
    url = f"sqlite:///{tmp_path / 'registry.db'}"
    tooldb.open(url, settings=Settings(embedder="hash", url=url)).close()
    return url


@pytest.fixture
def registry(store_url: str) -> Iterator[Registry]:
    reg = tooldb.open(store_url, settings=Settings(embedder="hash", url=store_url))
    yield reg
    reg.close()


@pytest.fixture
def pets() -> Iterator[PetsServer]:
    """The example pets API, served for real on 127.0.0.1 from a thread."""
    with PetsServer() as server:
        yield server


@pytest.fixture
def http_registry(store_url: str) -> Iterator[Registry]:
    """A registry on each backend whose HTTP tools may call 127.0.0.1 (and only that)."""
    settings = Settings(
        embedder="hash",
        url=store_url,
        http_allowed_hosts=("127.0.0.1",),
        secrets={"PETS_TOKEN": "s3cret-token"},
    )
    reg = tooldb.open(store_url, settings=settings)
    yield reg
    reg.close()
