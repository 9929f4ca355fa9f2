"""The ``tooldb`` command's app and what every command group shares: options, the
registry a command opens, output, and errors becoming exit codes (0 ok, 1 tool failure,
2 bad usage or input).

Every command that prints data takes ``--json`` and then prints exactly one JSON
document on stdout; errors then come as ``{"error": {...}}`` on stdout as well as
a line on stderr.
"""

from __future__ import annotations

import json
import os
import sys
from collections.abc import Iterator
from contextlib import contextmanager
from datetime import datetime
from pathlib import Path
from typing import Annotated, Any, NoReturn

import typer
from rich.console import Console
from rich.table import Table
from typer.core import TyperGroup

from .. import __version__
from ..errors import ArgumentError, ToolDBError, UsageError
from ..registry import Registry, open_registry
from ..settings import Settings


class _Commands(TyperGroup):
    """The root command group: refuses arguments that are not valid UTF-8 (on POSIX
    they arrive as lone surrogates, which no store or terminal can take) up front."""

    def parse_args(self, ctx: Any, args: list[str]) -> list[str]:
        for position, arg in enumerate(args, start=1):
            if isinstance(arg, str) and not _utf8(arg):
                shown = arg.encode("utf-8", "surrogateescape").decode("utf-8", "backslashreplace")
                sys.stderr.write(
                    f"error: argument {position} ({shown[:80]}) is not valid UTF-8 text\n"
                )
                raise typer.Exit(2)
        return super().parse_args(ctx, args)


def _utf8(text: str) -> bool:
    try:
        text.encode("utf-8")
    except UnicodeEncodeError:
        return False
    return True


def _print_version(value: bool) -> None:
    if value:
        typer.echo(__version__)
        raise typer.Exit(0)


app = typer.Typer(
    cls=_Commands,
    name="tooldb",
    help="tooldb: the tool layer for AI agents as a database and a runtime.",
    no_args_is_help=True,
    add_completion=False,
    pretty_exceptions_enable=False,
    rich_markup_mode=None,
    context_settings={"terminal_width": 100, "max_content_width": 100},
)
add_app = typer.Typer(
    help="Register tools from Python modules, manifests, MCP servers or OpenAPI documents.",
    no_args_is_help=True,
    rich_markup_mode=None,
)
app.add_typer(add_app, name="add")

JsonOpt = Annotated[bool, typer.Option("--json", help="Print one JSON document on stdout.")]
_out = Console(soft_wrap=True, highlight=False)


class _State:
    db: str | None = None
    tenant: str | None = None
    as_json: bool = False


_state = _State()


@app.callback()
def _global(
    db: Annotated[
        str | None,
        typer.Option(
            "--db", envvar="TOOLDB_URL", help="Store URL: sqlite:///PATH or postgresql://..."
        ),
    ] = None,
    tenant: Annotated[
        str | None,
        typer.Option("--tenant", envvar="TOOLDB_TENANT", help="Tenant (default: default)."),
    ] = None,
    version: Annotated[
        bool,
        typer.Option(
            "--version", help="Print the version and exit.", callback=_print_version, is_eager=True
        ),
    ] = False,
) -> None:
    _state.db, _state.tenant = db, tenant
    # Like `python -m`, let `add python mymodule` and python targets find the current directory.
    if os.getcwd() not in sys.path:
        sys.path.insert(0, os.getcwd())


# -- plumbing -----------------------------------------------------------------
@contextmanager
def _registry(as_json: bool, *, create: bool = False) -> Iterator[Registry]:
    _state.as_json = as_json
    with _errors():
        settings = Settings.load(url=_state.db, tenant=_state.tenant)
        check_store_url(settings.resolved_url, creating=create)
        registry = open_registry(settings.resolved_url, _state.tenant, create=create)
        try:
            yield registry
        finally:
            registry.close()


def check_store_url(url: str, *, creating: bool) -> None:
    """Refuse, before anything is opened or created, a SQLite URL without a file
    (``sqlite:///``, ``:memory:``: a registry that vanishes with the command), a file
    that is not a SQLite database, and, unless ``creating`` (``init``), a database that
    does not exist: only ``init`` creates a registry."""
    from sqlalchemy.engine import make_url
    from sqlalchemy.exc import ArgumentError as UrlError

    if url.split(":", 1)[0].split("+", 1)[0].lower() != "sqlite":
        return
    try:
        database = make_url(url).database
    except UrlError as exc:
        raise UsageError(f"--db {url!r} is not a valid store URL: {exc}") from None
    if not database or database == ":memory:" or database.startswith("file::memory:"):
        raise UsageError(
            f"--db {url!r} names no database file: use sqlite:///PATH (an in-memory registry "
            "would vanish when the command ends)"
        )
    if database.startswith("file:"):
        return
    path = Path(database).expanduser()
    if path.is_dir():
        raise UsageError(f"--db {url!r}: {path} is a directory, not a database file")
    if not path.exists():
        if creating:
            return
        raise UsageError(f"no registry at {path}: run `tooldb init` to create it")
    try:
        with path.open("rb") as handle:
            header = handle.read(16)
    except OSError as exc:
        raise UsageError(f"--db {url!r}: cannot read {path}: {exc.strerror}") from None
    if header and header != b"SQLite format 3\x00":
        raise UsageError(f"--db {url!r}: {path} is not a SQLite database")


@contextmanager
def _errors() -> Iterator[None]:
    from sqlalchemy.exc import DatabaseError

    try:
        yield
    except ToolDBError as exc:
        _fail(exc)
    except DatabaseError as exc:  # a damaged database file, say: not a traceback
        reason = str(exc.orig or exc).splitlines()[0] if str(exc) else type(exc).__name__
        _fail(UsageError(f"the store cannot be used: {reason}"))


def _fail(exc: ToolDBError) -> NoReturn:
    if _state.as_json:
        error: dict[str, Any] = {"type": type(exc).__name__, "message": str(exc)}
        if isinstance(exc, ArgumentError):
            error.update(tool=exc.tool, parameter=exc.parameter, problems=exc.problems)
        _print_json({"error": error})
    sys.stderr.write(f"error: {exc}\n")
    raise typer.Exit(exc.exit_code)


def _print_json(document: Any) -> None:
    sys.stdout.write(json.dumps(document, ensure_ascii=False, indent=2, default=str) + "\n")


def _when(timestamp: float | None) -> str:
    return (
        datetime.fromtimestamp(timestamp).isoformat(sep=" ", timespec="seconds")
        if timestamp
        else "-"
    )


def _pct(rate: float | None) -> str:
    return f"{rate:.0%}" if rate is not None else "-"


def _ms(value: float | None) -> str:
    return f"{value:.2f}" if value is not None else "-"


def _text(value: str) -> str:
    """Render user data literally (rich markup in a description must not be interpreted)."""
    from rich.markup import escape

    return escape(value)


def _table(*columns: str) -> Table:
    """A table whose last column alone wraps when the terminal is narrow.

    Rich shrinks wrappable columns first; with every column wrappable but a long
    no-wrap one, the short columns collapsed to nothing in an 80-column terminal.
    """
    table = Table()
    *fixed, flexible = columns
    for column in fixed:
        table.add_column(column, no_wrap=True)
    table.add_column(flexible, overflow="fold", min_width=24)
    return table


# -- commands -----------------------------------------------------------------


def main() -> None:
    app()
