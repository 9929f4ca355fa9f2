"""A provenance graph out to Neo4j: as a Cypher script, or through the official driver.

The script is plain text anyone can load (``cypher-shell < trace.cypher``): a
uniqueness constraint per label, then ``MERGE`` on node ids and relationships, so
loading the same trace twice changes nothing. Labels and relationship types come from
tooldb's fixed vocabulary, never from data; every value is a literal escaped for
Cypher's string syntax. The driver path sends the same graph as parameters
(``UNWIND $rows``), so no data is ever spliced into a statement there at all.
"""

from __future__ import annotations

import json
import math
import os
import re
from collections import defaultdict
from typing import TYPE_CHECKING, Any

from ..errors import ExecutionError, UsageError
from .graph import ProvenanceGraph

if TYPE_CHECKING:
    from ..settings import Settings

LABELS = ("Run", "AgentDecision", "AgentTool", "ToolCall", "ToolResult", "Skill", "OodaAct")
RELATIONSHIPS = (
    "MADE_DECISION", "CONSIDERED", "SELECTED_TOOL", "LED_TO", "MADE_CALL", "CALLED_TOOL",
    "RESULTED_IN", "LOADED_SKILL", "CHILD_OF", "ACTED_ON",
)  # fmt: skip
_IDENTIFIER = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")
_ESCAPES = {"\\": "\\\\", "'": "\\'", "\n": "\\n", "\r": "\\r", "\t": "\\t"}


def to_cypher(graph: ProvenanceGraph) -> str:
    """The graph as a Cypher script of idempotent statements, one per line."""
    labels = {node.id: _checked(node.label, LABELS, "label") for node in graph.nodes}
    lines = [
        f"CREATE CONSTRAINT tooldb_{label.lower()}_id IF NOT EXISTS"
        f" FOR (n:{label}) REQUIRE n.id IS UNIQUE;"
        for label in sorted(set(labels.values()))
    ]
    for node in graph.nodes:
        props = _map(node.props)
        lines.append(
            f"MERGE (n:{labels[node.id]} {{id: {quote(node.id)}}})"
            + (f" SET n += {props}" if props != "{}" else "")
            + ";"
        )
    for edge in graph.edges:
        kind = _checked(edge.type, RELATIONSHIPS, "relationship type")
        if edge.source not in labels or edge.target not in labels:
            continue  # an end outside this trace (a parent run above it): no dangling MERGE
        props = _map(edge.props)
        lines.append(
            f"MATCH (a:{labels[edge.source]} {{id: {quote(edge.source)}}}),"
            f" (b:{labels[edge.target]} {{id: {quote(edge.target)}}})"
            f" MERGE (a)-[r:{kind}]->(b)" + (f" SET r += {props}" if props != "{}" else "") + ";"
        )
    return "\n".join(lines) + "\n"


def quote(text: str) -> str:
    """A Cypher string literal: quotes, backslashes and every control character
    escaped; a lone surrogate (not valid UTF-8) as its ``\\u`` escape."""
    out = []
    for char in text:
        if char in _ESCAPES:
            out.append(_ESCAPES[char])
        elif _needs_escape(ord(char)):
            out.append(f"\\u{ord(char):04x}")
        else:
            out.append(char)
    return "'" + "".join(out) + "'"


def _needs_escape(code: int) -> bool:
    """Control characters, DEL, line/paragraph separators, and lone surrogates."""
    return code < 0x20 or code == 0x7F or 0xD800 <= code <= 0xDFFF or code in (0x2028, 0x2029)


def property_value(value: Any) -> Any:
    """What Neo4j can store as a property: primitives as they are, non-finite floats
    as null, and any list or object as its JSON text (properties cannot be maps)."""
    if value is None or isinstance(value, bool | int | str):
        return value
    if isinstance(value, float):
        return value if math.isfinite(value) else None
    return json.dumps(value, ensure_ascii=False, default=str, sort_keys=True)


def _literal(value: Any) -> str:
    value = property_value(value)
    if value is None:
        return "null"
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, int | float):
        return repr(value)
    return quote(value)


def _map(props: dict[str, Any]) -> str:
    items = [f"{_key(k)}: {_literal(v)}" for k, v in props.items() if property_value(v) is not None]
    return "{" + ", ".join(items) + "}"


def _key(name: str) -> str:
    if _IDENTIFIER.fullmatch(name):
        return name
    return "`" + name.replace("`", "``") + "`"


def _checked(name: str, allowed: tuple[str, ...], what: str) -> str:
    if name not in allowed:
        raise UsageError(f"provenance {what} {name!r} is not one of {', '.join(allowed)}")
    return name


# -- the driver --------------------------------------------------------------------------
def push(graph: ProvenanceGraph, settings: Settings, driver_factory: Any = None) -> dict[str, int]:
    """Write the graph to the Neo4j server of ``settings`` in one transaction; returns
    how many nodes and relationships were sent. ``driver_factory`` stands in for
    ``neo4j.GraphDatabase.driver`` (tests; other drivers with the same API)."""
    if not settings.neo4j_url:
        raise UsageError(
            "no Neo4j server configured: set neo4j_url in the config file or TOOLDB_NEO4J_URL"
        )
    if driver_factory is None:
        try:
            from neo4j import GraphDatabase
        except ImportError:
            raise UsageError(
                "pushing to Neo4j needs the official driver: pip install 'tooldb[neo4j]'"
            ) from None
        driver_factory = GraphDatabase.driver
    password = os.environ.get(settings.neo4j_password_env, "")
    auth = (settings.neo4j_user, password) if password else None
    nodes, edges = _batches(graph)
    try:
        with driver_factory(settings.neo4j_url, auth=auth) as driver:
            # fail at once on a server that is down, rather than after the driver's
            # 30 s of transaction retries
            driver.verify_connectivity()
            session_args = {"database": settings.neo4j_database} if settings.neo4j_database else {}
            with driver.session(**session_args) as session:
                session.execute_write(_write, nodes, edges)
    except Exception as exc:
        if type(exc).__module__.split(".")[0] != "neo4j":
            raise
        raise ExecutionError(
            f"Neo4j at {settings.neo4j_url} refused the trace: {type(exc).__name__}: {exc}"
        ) from None
    return {"nodes": len(graph.nodes), "relationships": sum(len(rows) for rows in edges.values())}


def _batches(
    graph: ProvenanceGraph,
) -> tuple[dict[str, list[dict[str, Any]]], dict[tuple[str, str, str], list[dict[str, Any]]]]:
    labels = {node.id: _checked(node.label, LABELS, "label") for node in graph.nodes}
    nodes: dict[str, list[dict[str, Any]]] = defaultdict(list)
    for node in graph.nodes:
        nodes[labels[node.id]].append({"id": node.id, "props": _props(node.props)})
    edges: dict[tuple[str, str, str], list[dict[str, Any]]] = defaultdict(list)
    for edge in graph.edges:
        if edge.source in labels and edge.target in labels:
            key = (
                _checked(edge.type, RELATIONSHIPS, "relationship type"),
                labels[edge.source],
                labels[edge.target],
            )
            edges[key].append(
                {"source": edge.source, "target": edge.target, "props": _props(edge.props)}
            )
    return nodes, edges


def _props(props: dict[str, Any]) -> dict[str, Any]:
    return {k: v for k, v in ((k, property_value(v)) for k, v in props.items()) if v is not None}


def _write(
    tx: Any,
    nodes: dict[str, list[dict[str, Any]]],
    edges: dict[tuple[str, str, str], list[dict[str, Any]]],
) -> None:
    for label, rows in nodes.items():  # labels and types from the fixed vocabulary only
        statement = f"UNWIND $rows AS row MERGE (n:{label} {{id: row.id}}) SET n += row.props"
        tx.run(statement, rows=rows)
    for (kind, source, target), rows in edges.items():
        tx.run(
            f"UNWIND $rows AS row MATCH (a:{source} {{id: row.source}})"
            f" MATCH (b:{target} {{id: row.target}})"
            f" MERGE (a)-[r:{kind}]->(b) SET r += row.props",
            rows=rows,
        )
