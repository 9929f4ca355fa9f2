"""Figures the dashboard draws, computed here so templates only place numbers and
escaped text: 7-day sparklines and a run's provenance graph laid out as SVG."""

from __future__ import annotations

import math
import time
from dataclasses import dataclass
from typing import Any

from ..provenance.graph import ProvenanceGraph
from ..stores import Store

DAYS = 7
DAY_S = 86_400.0
SPARK_W, SPARK_H = 84.0, 20.0


def week_start(now: float | None = None) -> float:
    """Midnight (UTC) six days ago: the first of the sparkline's seven days."""
    now = time.time() if now is None else now
    return (now // DAY_S - (DAYS - 1)) * DAY_S


@dataclass(frozen=True)
class Sparkline:
    points: str
    total: int
    title: str


def sparkline(days: list[int]) -> Sparkline:
    """A polyline of calls per day, scaled to the busiest day."""
    top = max(days, default=0) or 1
    step = SPARK_W / max(len(days) - 1, 1)
    points = " ".join(
        f"{i * step:.1f},{SPARK_H - 2 - (calls / top) * (SPARK_H - 4):.1f}"
        for i, calls in enumerate(days)
    )
    title = "calls per day, last 7 days: " + ", ".join(str(calls) for calls in days)
    return Sparkline(points, sum(days), title)


class WeekCounts:
    """Calls per day over the last 7 days for a page of tools. The six complete days
    cannot change (calls are recorded as they happen), so their counts are kept for
    ``ttl_s`` and only today's are counted on each view: a sixth of the index range."""

    def __init__(self, ttl_s: float = 600.0, max_entries: int = 100_000) -> None:
        self.ttl_s = ttl_s
        self.max_entries = max_entries
        self._past: dict[tuple[str, str, float], tuple[float, list[int]]] = {}

    def counts(self, store: Store, tenant: str, names: list[str]) -> dict[str, list[int]]:
        since = week_start()
        today = since + (DAYS - 1) * DAY_S
        now = time.monotonic()
        stale = [
            name
            for name in names
            if now - self._past.get((tenant, name, since), (-math.inf, []))[0] > self.ttl_s
        ]
        if stale:
            if len(self._past) > self.max_entries:
                self._past.clear()
            fetched = store.calls_per_day(tenant, stale, since, DAYS - 1)
            for name in stale:
                self._past[(tenant, name, since)] = (now, fetched[name])
        current = store.calls_per_day(tenant, names, today, 1)
        return {name: self._past[(tenant, name, since)][1] + current[name] for name in names}


#: Columns of the provenance drawing, left to right.
_COLUMN = {"Run": 0, "Skill": 1, "AgentDecision": 1, "ToolCall": 2, "ToolResult": 3,
           "AgentTool": 3, "OodaAct": 4}  # fmt: skip
NODE_W, NODE_H, GAP_X, GAP_Y, PAD = 170.0, 30.0, 60.0, 12.0, 10.0
MAX_NODES = 300


@dataclass(frozen=True)
class DrawnNode:
    x: float
    y: float
    text: str
    kind: str
    title: str


@dataclass(frozen=True)
class DrawnEdge:
    x1: float
    y1: float
    x2: float
    y2: float
    kind: str


@dataclass(frozen=True)
class Drawing:
    width: float
    height: float
    nodes: list[DrawnNode]
    edges: list[DrawnEdge]
    truncated: int


def draw_graph(graph: ProvenanceGraph) -> Drawing:
    """Lay the graph out in columns by node type (runs, decisions, calls, results and
    tools, acts), in the order the trace lists them; edges join box sides."""
    nodes = graph.nodes[:MAX_NODES]
    rows: dict[int, int] = {}
    where: dict[str, tuple[float, float]] = {}
    drawn: list[DrawnNode] = []
    for node in nodes:
        column = _COLUMN.get(node.label, 4)
        row = rows.get(column, 0)
        rows[column] = row + 1
        x = PAD + column * (NODE_W + GAP_X)
        y = PAD + row * (NODE_H + GAP_Y)
        where[node.id] = (x, y)
        text, title = _label(node.label, node.props)
        drawn.append(DrawnNode(x, y, text, _css_kind(node.label, node.props), title))
    edges = []
    for edge in graph.edges:
        if edge.source in where and edge.target in where:
            (sx, sy), (tx, ty) = where[edge.source], where[edge.target]
            if sx > tx:
                (sx, sy), (tx, ty) = (tx, ty), (sx, sy)
            x1 = sx + NODE_W if sx < tx else sx + NODE_W / 2
            x2 = tx if sx < tx else tx + NODE_W / 2
            edges.append(DrawnEdge(x1, sy + NODE_H / 2, x2, ty + NODE_H / 2, edge.type.lower()))
    width = PAD * 2 + (max(_COLUMN.values()) + 1) * (NODE_W + GAP_X)
    height = PAD * 2 + max(rows.values(), default=1) * (NODE_H + GAP_Y)
    return Drawing(width, height, drawn, edges, len(graph.nodes) - len(nodes))


def _short(value: Any, n: int = 22) -> str:
    text = str(value) if value is not None else ""
    return text if len(text) <= n else text[: n - 1] + "…"


def _label(label: str, props: dict[str, Any]) -> tuple[str, str]:
    if label == "Run":
        return f"run {_short(props.get('run_id'), 8)} {props.get('status', '')}", str(
            props.get("task", "")
        )
    if label == "AgentDecision":
        return f"decision → {_short(props.get('chosen'), 14)}", str(props.get("task", ""))
    if label == "ToolCall":
        return f"call {props.get('call_id')} {_short(props.get('tool'), 14)}", str(
            props.get("arguments", "")
        )
    if label == "ToolResult":
        ok = props.get("success")
        head = "ok" if ok else f"error {props.get('error_kind') or ''}"
        return head, str(props.get("error") or props.get("output") or "")
    if label == "OodaAct":
        return f"ooda {props.get('action', '')}", str(props.get("reason", ""))
    return _short(props.get("name")), str(props.get("name", ""))


def _css_kind(label: str, props: dict[str, Any]) -> str:
    if label == "ToolResult":
        return "result-ok" if props.get("success") else "result-error"
    return label.lower()
