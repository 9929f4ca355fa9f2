"""Issue 20, item 13: the CLI's edges give a clear message and exit 2, never a
traceback; a command other than ``init`` creates no directories."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest
from typer.testing import CliRunner

import tooldb
from tooldb import __version__
from tooldb.cli import app

SRC = Path(tooldb.__file__).resolve().parents[1]  # the tooldb under test


def cli(*args: str) -> object:
    return CliRunner().invoke(app, list(args))


def test_version_prints_and_exits_0() -> None:
    result = cli("--version")
    assert result.exit_code == 0 and result.stdout.strip() == __version__  # type: ignore[attr-defined]


@pytest.mark.parametrize("url", ["sqlite:///", "sqlite:///:memory:", "sqlite://"])
def test_a_sqlite_url_without_a_file_is_refused(url: str) -> None:
    for command in (["list"], ["init"]):
        result = cli("--db", url, *command)
        assert result.exit_code == 2, result.output  # type: ignore[attr-defined]
        assert "names no database file" in result.stderr  # type: ignore[attr-defined]
        assert result.exception is None or isinstance(result.exception, SystemExit)  # type: ignore[attr-defined]


def test_a_file_that_is_not_a_database_is_refused(tmp_path: Path) -> None:
    path = tmp_path / "notes.txt"
    path.write_text("not a database\n" * 100)
    for command in (["list"], ["init"], ["call", "x"]):
        result = cli("--db", f"sqlite:///{path}", *command)
        assert result.exit_code == 2, result.output  # type: ignore[attr-defined]
        assert "is not a SQLite database" in result.stderr  # type: ignore[attr-defined]
    assert path.read_text() == "not a database\n" * 100


def test_a_damaged_database_is_an_error_not_a_traceback(tmp_path: Path) -> None:
    path = tmp_path / "bad.db"
    path.write_bytes(b"SQLite format 3\x00" + b"\xff" * 4000)
    result = cli("--db", f"sqlite:///{path}", "list")
    assert result.exit_code == 2, result.output  # type: ignore[attr-defined]
    assert result.stderr.startswith("error: ")  # type: ignore[attr-defined]


def test_only_init_creates_directories(tmp_path: Path) -> None:
    url = f"sqlite:///{tmp_path}/no/such/dir/x.db"
    result = cli("--db", url, "list")
    assert result.exit_code == 2  # type: ignore[attr-defined]
    assert "run `tooldb init` to create it" in result.stderr  # type: ignore[attr-defined]
    assert not (tmp_path / "no").exists()
    assert cli("--db", url, "init").exit_code == 0  # type: ignore[attr-defined]
    assert cli("--db", url, "list").exit_code == 0  # type: ignore[attr-defined]


def test_only_init_creates_a_registry(tmp_path: Path, postgres_url: str) -> None:
    """Not a file in an existing directory either, nor the schema in an empty database."""
    url = f"sqlite:///{tmp_path}/x.db"
    for command in (["list"], ["add", "python", "tooldb.examples.basic"], ["stats"]):
        result = cli("--db", url, *command)
        assert result.exit_code == 2, result.output  # type: ignore[attr-defined]
        assert "no registry at" in result.stderr  # type: ignore[attr-defined]
    assert list(tmp_path.iterdir()) == []
    import psycopg

    admin = postgres_url.rsplit("/", 1)[0] + "/postgres"
    with psycopg.connect(admin, autocommit=True) as conn:
        conn.execute('DROP DATABASE IF EXISTS "tooldb_empty_cli"')
        conn.execute('CREATE DATABASE "tooldb_empty_cli"')
    empty = postgres_url.rsplit("/", 1)[0] + "/tooldb_empty_cli"
    try:
        result = cli("--db", empty, "list")
        assert result.exit_code == 2 and "tooldb init" in result.stderr  # type: ignore[attr-defined]
        with psycopg.connect(empty) as conn:
            assert conn.execute("SELECT to_regclass('tools')").fetchone() == (None,)
    finally:
        with psycopg.connect(admin, autocommit=True) as conn:
            conn.execute('DROP DATABASE IF EXISTS "tooldb_empty_cli" WITH (FORCE)')


@pytest.mark.parametrize(
    "args",
    [["select", b"\xff\xfe task"], ["show", b"\xff"], ["call", b"n\xffme"], ["run", b"\xc3("]],
    ids=["select", "show", "call", "run"],
)
def test_invalid_utf8_arguments_exit_2(tmp_path: Path, args: list[object]) -> None:
    env = {**os.environ, "PYTHONPATH": str(SRC), "TOOLDB_HOME": str(tmp_path)}
    url = f"sqlite:///{tmp_path}/r.db"
    argv = [sys.executable, "-m", "tooldb", "--db", url]
    assert subprocess.run([*argv, "init"], env=env, capture_output=True).returncode == 0
    process = subprocess.run(
        [*argv, *(a if isinstance(a, bytes) else a.encode() for a in args)],  # type: ignore[attr-defined]
        env=env, capture_output=True, timeout=120,
    )  # fmt: skip
    assert process.returncode == 2, process.stderr
    assert b"is not valid UTF-8 text" in process.stderr
    assert b"Traceback" not in process.stderr
