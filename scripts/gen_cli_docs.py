"""Write docs/cli.md from the CLI's own --help (a test keeps the two in sync).

Run: .venv/bin/python scripts/gen_cli_docs.py
"""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Any

import typer
from typer.testing import CliRunner

from tooldb.cli import app

TARGET = Path(__file__).resolve().parent.parent / "docs" / "cli.md"
HEADER = """# CLI reference

Generated from `tooldb --help` by `scripts/gen_cli_docs.py`; a test fails when it
is out of date. Conventions: `--json` prints exactly one JSON document on stdout;
`--db URL` (or `TOOLDB_URL`) picks the store; exit code 0 on success, 1 when a
tool failed, 2 on bad usage or input (unknown or disabled tool, bad arguments).
"""


def command_paths(command: Any, path: tuple[str, ...] = ()) -> list[tuple[str, ...]]:
    """Every command path, depth first, in name order."""
    found = [path]
    for name in sorted(getattr(command, "commands", {}) or {}):
        found.extend(command_paths(command.commands[name], (*path, name)))
    return found


def render() -> str:
    runner = CliRunner()
    parts = [HEADER]
    for path in command_paths(typer.main.get_command(app)):
        result = runner.invoke(app, [*path, "--help"], prog_name="tooldb", env={"COLUMNS": "100"})
        if result.exit_code != 0:
            raise RuntimeError(f"tooldb {' '.join(path)} --help failed: {result.output}")
        title = " ".join(("tooldb", *path))
        parts.append(f"\n## `{title}`\n\n```text\n{result.stdout.rstrip()}\n```\n")
    return "".join(parts)


if __name__ == "__main__":
    TARGET.write_text(render())
    sys.stdout.write(f"wrote {TARGET}\n")
