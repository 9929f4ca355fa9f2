"""The nl2sql pack: questions in plain language answered over a SQL database with a
table, the SQL and a chart (DESIGN's worked example), built from tooldb's own parts.

``tooldb add pack nl2sql [--database URL]`` registers

- the root orchestrator ``nl2sql`` (agent YAML, ``model: inherit``: it runs on the
  caller's model and says so when there is none; ``retries: {nl2sql_writer: 2}``);
- five agent tools with state contracts: ``nl2sql_schema`` (relevant tables found by
  selection over schema elements and sample values), ``nl2sql_writer`` (the model
  writes the SQL), ``nl2sql_validator`` (sqlglot: one read-only SELECT, names checked
  against the schema, EXPLAIN), ``nl2sql_runner`` (read-only, row cap) and
  ``nl2sql_chart`` (Vega-Lite to PNG). A wrong column or an empty result answers
  ``needs_retry`` with the SQL writer as target: tooldb re-runs it with the refinement;
- their five tools and the ``nl2sql`` skill (for agents of your own).

The database: any SQLite or PostgreSQL URL; by default a copy of Chinook shipped in
the package (data/, MIT licence), made in tooldb's data directory.
"""

from __future__ import annotations

import shutil
from importlib.util import find_spec
from pathlib import Path
from typing import TYPE_CHECKING

from ...errors import UsageError
from ...settings import default_data_dir
from .. import PackReport, register_contents
from .schema import read_schema

if TYPE_CHECKING:
    from ...registry import Registry

DESCRIPTION = "Questions in plain language over a SQL database: a table, the SQL and a chart"
HERE = Path(__file__).parent
CHINOOK = HERE / "data" / "chinook.sqlite"


def install(registry: Registry, database_url: str | None) -> PackReport:
    missing = [name for name in ("sqlglot", "vl_convert") if find_spec(name) is None]
    if missing:
        raise UsageError(
            f"the nl2sql pack needs {', '.join(missing)}: pip install 'tooldb[nl2sql]'"
        )
    url = database_url or default_database()
    read_schema(url)  # a database that cannot be read is refused before anything registers
    return register_contents(
        registry,
        "nl2sql",
        url,
        tool_modules=[f"{__name__}.tools"],
        skills=HERE / "skills",
        agents=HERE / "agents",
    )


def default_database() -> str:
    """A copy of the shipped Chinook in the data directory (made once)."""
    folder = default_data_dir() / "packs"
    folder.mkdir(parents=True, exist_ok=True)
    copy = folder / "nl2sql-chinook.sqlite"
    if not copy.exists():
        partial = copy.with_suffix(".partial")
        shutil.copyfile(CHINOOK, partial)
        partial.replace(copy)
    return f"sqlite:///{copy}"
