"""Issue 20, item 2: the registry file is its owner's alone.

It holds every tenant's call arguments: ``TOOLDB_HOME`` was created 0755 and
``registry.db`` 0644, so any local user (a script tool's uid among them) could copy it.
"""

from __future__ import annotations

import stat
import subprocess
import tempfile
from collections.abc import Iterator
from pathlib import Path

import pytest

import tooldb


@pytest.fixture
def shared_parent() -> Iterator[Path]:
    """A world-traversable directory to put a TOOLDB_HOME in (a user's is anywhere)."""
    path = Path(tempfile.mkdtemp(prefix="tooldb-sec-"))
    path.chmod(0o755)
    yield path
    subprocess.run(["rm", "-rf", str(path)], check=False)


SQL_TOOL = {"name": "x", "kind": "sql", "target": "SELECT 1 AS one", "returns": "scalar"}


def test_the_registry_home_is_0700_and_its_files_0600(
    shared_parent: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    home = shared_parent / "home"
    monkeypatch.setenv("TOOLDB_HOME", str(home))
    with tooldb.open() as registry:
        registry.add(SQL_TOOL)
        assert registry.call("x").success
        assert stat.S_IMODE(home.stat().st_mode) == 0o700
        files = list(home.iterdir())
        assert {p.name for p in files} >= {"registry.db", "registry.db-wal"}
        for path in files:
            assert stat.S_IMODE(path.stat().st_mode) & 0o077 == 0, path


def test_an_older_readable_registry_is_tightened(
    shared_parent: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    home = shared_parent / "home"
    monkeypatch.setenv("TOOLDB_HOME", str(home))
    with tooldb.open() as registry:
        registry.add(SQL_TOOL)
    home.chmod(0o755)
    for path in home.iterdir():
        path.chmod(0o644)  # as versions before this fix left them
    with tooldb.open() as registry:
        assert registry.call("x").success
    assert stat.S_IMODE(home.stat().st_mode) == 0o700
    for path in home.iterdir():
        assert stat.S_IMODE(path.stat().st_mode) & 0o077 == 0, path
