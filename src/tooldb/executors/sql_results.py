"""From JSON arguments to driver parameters, and from database rows to a capped result.

Values JSON cannot hold are converted by one documented rule (docs/sql.md):
``Decimal`` → int when written without fractional digits, else float;
``datetime``/``date``/``time`` → ISO 8601 text; ``timedelta`` → seconds;
bytes → lowercase hex; ``UUID`` and anything else unknown → ``str``;
non-finite numbers → ``"NaN"``, ``"Infinity"``, ``"-Infinity"``.
"""

from __future__ import annotations

import datetime as dt
import json
import math
import uuid
from collections.abc import Iterable, Sequence
from decimal import Decimal
from typing import Any

import sqlalchemy as sa

from ..types import Returns
from . import Rendered
from .sql_plan import SQLPlan

_FETCH_BATCH = 256
_SCALARS = (str, int, float, bool, type(None))


def driver_parameters(plan: SQLPlan, arguments: dict[str, Any], dialect: str) -> dict[str, Any]:
    """One value per placeholder; an omitted optional argument binds as NULL.

    Objects and lists have no SQL literal in common: on PostgreSQL a list of scalars
    binds as an array and anything else as ``json``; on SQLite both bind as JSON text.
    """
    return {name: _parameter(arguments.get(name), dialect) for name in plan.placeholders}


def _parameter(value: Any, dialect: str) -> Any:
    if not isinstance(value, dict | list):
        return value
    if dialect == "postgresql":
        if isinstance(value, list) and all(isinstance(item, _SCALARS) for item in value):
            return value
        from psycopg.types.json import Json

        return Json(value)
    return json.dumps(value, ensure_ascii=False)


def jsonable(value: Any) -> Any:
    """A database value as JSON data (see the module docstring for the rule)."""
    if value is None or isinstance(value, bool | int | str):
        return value
    if isinstance(value, float):
        return value if math.isfinite(value) else _non_finite(value)
    if isinstance(value, Decimal):
        if not value.is_finite():
            return _non_finite(float(value))
        exponent = value.as_tuple().exponent
        return int(value) if isinstance(exponent, int) and exponent >= 0 else float(value)
    if isinstance(value, dt.datetime | dt.date | dt.time):
        return value.isoformat()
    if isinstance(value, dt.timedelta):
        return value.total_seconds()
    if isinstance(value, bytes | bytearray | memoryview):
        return bytes(value).hex()
    if isinstance(value, uuid.UUID):
        return str(value)
    if isinstance(value, dict):
        return {str(key): jsonable(item) for key, item in value.items()}
    if isinstance(value, list | tuple):
        return [jsonable(item) for item in value]
    return str(value)


def _non_finite(value: float) -> str:
    return "NaN" if math.isnan(value) else ("Infinity" if value > 0 else "-Infinity")


def shape(result: sa.CursorResult[Any], plan: SQLPlan) -> Any:
    """The tool's value for its ``returns``: table, scalar or none (the row count)."""
    if plan.returns is Returns.NONE:
        count = result.rowcount
        return Rendered(
            output=f"{count} row{'' if count == 1 else 's'} affected" if count >= 0 else "done",
            data=count if count >= 0 else None,
        )
    if not result.returns_rows:
        return table([], [], plan) if plan.returns is Returns.TABLE else None
    if plan.returns is Returns.SCALAR:
        row = result.first()
        return jsonable(row[0]) if row is not None else None
    return table(list(result.keys()), _batches(result), plan)


def _batches(result: sa.CursorResult[Any]) -> Iterable[Sequence[Any]]:
    while batch := result.fetchmany(_FETCH_BATCH):
        yield from batch


def table(keys: list[str], rows: Iterable[Sequence[Any]], plan: SQLPlan) -> Rendered:
    """Rows as objects, at most ``max_rows`` of them and ``max_bytes`` of JSON.

    ``data`` is ``{columns, rows, row_count, truncated, truncated_by, max_rows,
    max_bytes}``; ``output`` is the rows as compact JSON, plus a last line saying
    so when they were cut.
    """
    columns = unique_columns(keys)
    kept: list[dict[str, Any]] = []
    size = 2  # the enclosing brackets
    truncated_by: str | None = None
    for raw in rows:
        if len(kept) >= plan.max_rows:
            truncated_by = "max_rows"
            break
        row = {column: jsonable(value) for column, value in zip(columns, raw, strict=True)}
        encoded = json.dumps(row, ensure_ascii=False, separators=(",", ":"))
        added = len(encoded.encode("utf-8", "surrogatepass")) + (1 if kept else 0)
        if size + added > plan.max_bytes:
            truncated_by = "max_bytes"
            break
        kept.append(row)
        size += added
    data = {
        "columns": columns,
        "rows": kept,
        "row_count": len(kept),
        "truncated": truncated_by is not None,
        "truncated_by": truncated_by,
        "max_rows": plan.max_rows,
        "max_bytes": plan.max_bytes,
    }
    output = json.dumps(kept, ensure_ascii=False, separators=(",", ":"))
    if truncated_by is not None:
        cap = getattr(plan, truncated_by)
        output += (
            f"\n-- truncated: {len(kept)} rows shown, more were available ({truncated_by}={cap})"
        )
    return Rendered(output=output, data=data)


def unique_columns(keys: Iterable[str]) -> list[str]:
    """Column names as row keys: a repeated name gets ``_2``, ``_3``... appended."""
    seen: set[str] = set()
    columns: list[str] = []
    for key in keys:
        name, n = str(key), 1
        while name in seen:
            n += 1
            name = f"{key}_{n}"
        seen.add(name)
        columns.append(name)
    return columns
