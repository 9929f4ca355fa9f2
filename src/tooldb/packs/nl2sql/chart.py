"""A chart for a query result: its type chosen from the result's shape, a Vega-Lite spec,
rendered to PNG with vl-convert (no browser, no server).

- one row of one value: no chart (the answer is the value);
- a column of dates or years and a numeric one: a line;
- a column of labels and a numeric one: a bar chart, in the result's order;
- two numeric columns: a scatter plot;
- anything else (no numeric column): no chart, the table says it all.
"""

from __future__ import annotations

import hashlib
import json
import re
from pathlib import Path
from typing import Any

_DATE = re.compile(r"^\d{4}(-\d{2}(-\d{2})?)?([ T]\d{2}:\d{2}(:\d{2})?)?$")
_TIME_NAMES = re.compile(r"(date|year|month|day|time|period)", re.IGNORECASE)


def chart_type(columns: list[str], rows: list[list[Any]]) -> str | None:
    """``line``, ``bar``, ``point`` or None (see the module)."""
    if not rows or not columns or (len(rows) == 1 and len(columns) == 1):
        return None
    numeric = [i for i in range(len(columns)) if _all(rows, i, _is_number)]
    if not numeric:
        return None
    others = [i for i in range(len(columns)) if i not in numeric]
    if others:
        first = others[0]
        if _TIME_NAMES.search(columns[first]) or _all(rows, first, _is_date):
            return "line"
        return "bar"
    if len(numeric) >= 2:
        if _TIME_NAMES.search(columns[numeric[0]]):
            return "line"
        return "point"
    return "bar" if len(rows) > 1 else None


def spec_for(kind: str, columns: list[str], rows: list[list[Any]], title: str) -> dict[str, Any]:
    """The Vega-Lite spec of a ``kind`` chart of the result."""
    numeric = [i for i in range(len(columns)) if _all(rows, i, _is_number)]
    others = [i for i in range(len(columns)) if i not in numeric]
    if others:
        x, y = others[0], numeric[0]
    elif len(numeric) >= 2:
        x, y = numeric[0], numeric[1]
    else:  # one numeric column: plotted against the row number
        columns = ["row", *columns]
        rows = [[n + 1, *row] for n, row in enumerate(rows)]
        x, y = 0, 1
    values = [{columns[x]: row[x], columns[y]: row[y]} for row in rows]
    x_type = {"line": "temporal" if _all(rows, x, _is_date) else "ordinal", "bar": "nominal"}.get(
        kind, "quantitative"
    )
    x_encoding: dict[str, Any] = {"field": columns[x], "type": x_type}
    if kind == "bar":
        x_encoding["sort"] = None  # the query's order (ORDER BY) is the chart's
        x_encoding["axis"] = {"labelAngle": -40}
    return {
        "$schema": "https://vega.github.io/schema/vega-lite/v5.json",
        "title": title[:80],
        "width": 480,
        "height": 300,
        "data": {"values": values},
        "mark": {"type": kind, "tooltip": True},
        "encoding": {"x": x_encoding, "y": {"field": columns[y], "type": "quantitative"}},
    }


def render_png(spec: dict[str, Any], folder: Path) -> Path:
    """The spec rendered to ``folder/<hash of the spec>.png`` (the same chart, the same
    file)."""
    import vl_convert

    folder.mkdir(parents=True, exist_ok=True)
    digest = hashlib.sha256(json.dumps(spec, sort_keys=True, default=str).encode()).hexdigest()
    path = folder / f"{digest[:16]}.png"
    if not path.exists():
        path.write_bytes(vl_convert.vegalite_to_png(spec, scale=2))
    return path


def _all(rows: list[list[Any]], index: int, test: Any) -> bool:
    values = [row[index] for row in rows if row[index] is not None]
    return bool(values) and all(test(v) for v in values)


def _is_number(value: Any) -> bool:
    return isinstance(value, int | float) and not isinstance(value, bool)


def _is_date(value: Any) -> bool:
    return isinstance(value, str) and bool(_DATE.match(value.strip()))
