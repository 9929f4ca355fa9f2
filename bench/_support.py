"""What several benchmarks share: a throwaway registry database on either backend."""

from __future__ import annotations

import tempfile
import uuid
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

DEFAULT_PG_URL = "postgresql://postgres@127.0.0.1:5432/postgres"


@contextmanager
def temporary_database(backend: str, pg_url: str = DEFAULT_PG_URL) -> Iterator[str]:
    """A fresh registry URL on the backend (``sqlite`` or ``postgresql``), removed afterwards.

    PostgreSQL: a database created next to ``pg_url`` (an admin URL) and dropped at the end.
    """
    if backend == "sqlite":
        with tempfile.TemporaryDirectory(prefix="tooldb-bench-") as directory:
            yield f"sqlite:///{Path(directory) / 'registry.db'}"
        return
    import psycopg

    name = f"tooldb_bench_{uuid.uuid4().hex[:12]}"
    with psycopg.connect(pg_url, autocommit=True) as admin:
        admin.execute(f'CREATE DATABASE "{name}"')
    try:
        yield f"{pg_url.rsplit('/', 1)[0]}/{name}"
    finally:
        with psycopg.connect(pg_url, autocommit=True) as admin:
            admin.execute(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')
