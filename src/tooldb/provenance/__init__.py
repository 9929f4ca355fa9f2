"""Provenance: why a result exists, read back from what the store records.

``graph.py`` walks the decision graph down from a run and up from a call;
``export.py`` writes it out for Neo4j (a Cypher script, or the official driver).
"""

from __future__ import annotations

from .graph import Explanation, GraphEdge, GraphNode, ProvenanceGraph, Trace, explain, trace

__all__ = ["Explanation", "GraphEdge", "GraphNode", "ProvenanceGraph", "Trace", "explain", "trace"]
