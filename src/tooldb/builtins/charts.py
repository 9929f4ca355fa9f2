"""Charts group: ``render_chart`` renders a Vega-Lite spec with data rows to PNG or SVG
(vl-convert-python: no browser, no network), saves it in the workspace and returns its
path and a data URI."""

from __future__ import annotations

import base64
import time
from typing import Any, Literal

from ..decorators import tool
from ..errors import ExecutionError, UsageError
from .common import confined, current_workspace, relative

GROUP = {"builtin": "charts"}
MAX_ROWS = 100_000


@tool(category="charts", metadata=GROUP, timeout_s=120)
def render_chart(
    spec: dict[str, Any],
    rows: list[dict[str, Any]],
    format: Literal["png", "svg"] = "png",
    path: str = "",
) -> dict[str, Any]:
    """Draw a chart from data: a Vega-Lite spec (mark and encoding) plus the data rows,
    rendered to a PNG or SVG image saved in the workspace. Use it to show numbers as a
    bar, line or point chart. Returns the file's path and a data: URI of the image.

    Args:
        spec: A Vega-Lite spec without data, e.g. {"mark": "bar", "encoding": {"x":
            {"field": "city", "type": "nominal"}, "y": {"field": "sales", "type":
            "quantitative"}}}.
        rows: The data, one object per row, e.g. [{"city": "Oslo", "sales": 3}].
        format: png or svg.
        path: Where to save it, relative to the workspace root (default charts/chart-TIME).
    """
    try:
        import vl_convert
    except ImportError as exc:
        raise ExecutionError(
            f"render_chart needs tooldb[builtins] (vl-convert-python): {exc}"
        ) from None
    if not isinstance(spec, dict) or not spec:
        raise UsageError("'spec' must be a Vega-Lite spec object (mark, encoding ...)")
    if not isinstance(rows, list) or not all(isinstance(r, dict) for r in rows):
        raise UsageError("'rows' must be a list of objects (one per data row)")
    if len(rows) > MAX_ROWS:
        raise UsageError(f"'rows' may hold at most {MAX_ROWS} rows, got {len(rows)}")
    if any(key in spec for key in ("data", "datasets")) or "url" in str(spec.get("data", "")):
        raise UsageError("'spec' must not carry its own data or data URLs: give it as 'rows'")
    full = {"$schema": "https://vega.github.io/schema/vega-lite/v5.json", **spec}
    full["data"] = {"values": rows}
    try:
        if format == "svg":
            svg = vl_convert.vegalite_to_svg(full, allowed_base_urls=[])
            image = svg.encode("utf-8")
            mime = "image/svg+xml"
        else:
            image = bytes(vl_convert.vegalite_to_png(full, allowed_base_urls=[]))
            mime = "image/png"
    except ValueError as exc:
        raise UsageError(f"'spec' could not be rendered: {exc}") from None
    except Exception as exc:
        raise ExecutionError(f"rendering failed: {type(exc).__name__}: {exc}") from None
    root = current_workspace()
    chosen = path or f"charts/chart-{time.strftime('%Y%m%d-%H%M%S')}-{time.time_ns() % 10**6}"
    if not chosen.endswith(f".{format}"):
        chosen += f".{format}"
    target = confined(root, chosen)
    target.parent.mkdir(parents=True, exist_ok=True)
    target.write_bytes(image)
    return {
        "path": relative(root, target),
        "bytes": len(image),
        "data_uri": f"data:{mime};base64,{base64.b64encode(image).decode()}",
    }
