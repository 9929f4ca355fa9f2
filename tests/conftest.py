"""Shared fixtures: every store test runs on a SQLite file and on the local PostgreSQL.

PostgreSQL is not optional: if it is unreachable the PostgreSQL tests fail and
say how to start it. Each test session creates its own database and drops it.
"""

from __future__ import annotations

import atexit
import os
import shutil
import sqlite3
import tempfile
import uuid
from collections.abc import Callable, Iterator
from contextlib import closing, contextmanager
from pathlib import Path
from typing import Any

import psycopg
import pytest
from hypothesis import Phase, settings

import tooldb
from tooldb import Registry, Settings
from tooldb.examples.pets_server import PetsServer
from tooldb.stores.schema import metadata as schema_metadata

# Under mutation testing (mutmut sets MUTANT_UNDER_TEST in every process that runs tests,
# bench/mutation.py in its explicit runs) property tests draw 25 examples instead of 100
# and skip shrinking: a mutant is killed by its first failing example, and a minimal one
# is only wanted by a person reading a failure (docs/testing.md, "Mutation testing").
settings.register_profile(
    "mutation",
    max_examples=25,
    phases=(Phase.explicit, Phase.reuse, Phase.generate),
    database=None,
    deadline=None,
)
if "MUTANT_UNDER_TEST" in os.environ:
    settings.load_profile("mutation")

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
        "TOOLDB_WORKSPACE",
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


#: Every table of the registry's schema but the tenant MAC's secret (made once by the
#: migration): what a test may have written.
_DATA_TABLES = [
    table.name for table in schema_metadata.sorted_tables if table.name != "sql_tenant_key"
]


def _truncate_postgres(url: str) -> None:
    with psycopg.connect(url.replace("postgresql+psycopg", "postgresql"), autocommit=True) as conn:
        conn.execute(f"TRUNCATE {', '.join(_DATA_TABLES)} RESTART IDENTITY CASCADE")


#: Under mutation testing: the SQLite registry made once whose copies the SQLite fixtures
#: hand out (made by the first test that needs one; mutmut's forked workers inherit it).
_SQLITE_TEMPLATE: list[Path] = []


def _fresh_sqlite(path: Path) -> str:
    """An initialised SQLite registry at ``path``. Running the schema's migrations is most
    of a registry test's setup (0.3 s), so under mutation testing (``MUTANT_UNDER_TEST``
    set; docs/testing.md) they run once and each test gets a copy (SQLite's backup API):
    the same schema, but one tenant-key secret shared by every test."""
    url = f"sqlite:///{path}"
    if "MUTANT_UNDER_TEST" not in os.environ:
        tooldb.open(url, settings=Settings(embedder="hash", url=url)).close()
        return url
    if not _SQLITE_TEMPLATE or not _SQLITE_TEMPLATE[0].is_file():
        home = Path(tempfile.mkdtemp(prefix="tooldb-template-"))
        made = f"sqlite:///{home / 'registry.db'}"
        tooldb.open(made, settings=Settings(embedder="hash", url=made)).close()
        _SQLITE_TEMPLATE[:] = [home / "registry.db"]
        creator = os.getpid()
        atexit.register(lambda: os.getpid() == creator and shutil.rmtree(home, True))
    source = sqlite3.connect(f"file:{_SQLITE_TEMPLATE[0]}?mode=ro", uri=True)
    with closing(source), closing(sqlite3.connect(path)) as copy:
        source.backup(copy)
    return url


@pytest.fixture(params=["sqlite", "postgresql"])
def store_url(request: pytest.FixtureRequest, tmp_path: Path) -> str:
    """A clean, initialised registry URL on each backend."""
    if request.param == "sqlite":
        return _fresh_sqlite(tmp_path / "registry.db")
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
    return _fresh_sqlite(tmp_path / "registry.db")


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


@pytest.fixture
def open_registry(store_url: str) -> Iterator[Callable[..., Registry]]:
    """Registries on the test store with settings overridden per test (the OODA tests);
    each is closed after the test."""
    opened: list[Registry] = []

    def make(tenant: str | None = None, **overrides: Any) -> Registry:
        settings = Settings(embedder="hash", url=store_url, **overrides)
        registry = tooldb.open(store_url, tenant, settings=settings)
        opened.append(registry)
        return registry

    yield make
    for registry in opened:
        registry.close()
