"""Provenance: why a result exists, read back from what the store already records.

Runs, their selection decisions (candidates with every score), the calls they made and
what those returned, the skills they loaded, their sub-runs, and the OODA acts on the
tools involved form one graph. ``trace`` walks it down from a run; ``explain`` walks
it up from a call to the task and the selection that chose the tool.

Nothing extra is written on the hot path: a call belongs to a run by its ``run_id``;
it came from the latest decision of that run, made before it, that offered its tool;
its iteration is in the run's own record of its tool calls.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import TYPE_CHECKING, Any

from pydantic import BaseModel, Field

from ..errors import NotFound, UsageError

if TYPE_CHECKING:
    from ..registry import Registry

#: Characters of a call's output or a run's output kept in the graph.
PREVIEW_CHARS = 500
#: Candidates of a decision shown in trees (the graph keeps all of them).
TREE_CANDIDATES = 5


class GraphNode(BaseModel):
    """A node: ``label`` is its kind (Run, AgentDecision, AgentTool, ToolCall,
    ToolResult, Skill, OodaAct), ``id`` unique in the graph (``kind:key``)."""

    id: str
    label: str
    props: dict[str, Any] = Field(default_factory=dict)


class GraphEdge(BaseModel):
    """A relationship: MADE_DECISION, CONSIDERED, SELECTED_TOOL, LED_TO, MADE_CALL,
    CALLED_TOOL, RESULTED_IN, LOADED_SKILL, CHILD_OF, ACTED_ON."""

    source: str
    target: str
    type: str
    props: dict[str, Any] = Field(default_factory=dict)


class ProvenanceGraph(BaseModel):
    nodes: list[GraphNode] = Field(default_factory=list)
    edges: list[GraphEdge] = Field(default_factory=list)

    def node(self, node_id: str) -> GraphNode | None:
        return next((n for n in self.nodes if n.id == node_id), None)


class Trace(BaseModel):
    """A run's provenance: the graph, and the same as a time-ordered tree of events."""

    run_id: str
    tree: dict[str, Any]
    graph: ProvenanceGraph


class Explanation(BaseModel):
    """A call walked back: the call and its result, the run and task it served, the
    decision that offered its tool (with the tool's rank and scores among the
    candidates), the runs above it up to the root, and OODA's acts on the tool."""

    call: dict[str, Any]
    run: dict[str, Any] | None = None
    task: str | None = None
    decision: dict[str, Any] | None = None
    rank: int | None = None
    scores: dict[str, Any] | None = None
    ancestors: list[dict[str, Any]] = Field(default_factory=list)
    acts: list[dict[str, Any]] = Field(default_factory=list)
    summary: str = ""


# -- trace -------------------------------------------------------------------------------
def trace(registry: Registry, run_id: str) -> Trace:
    """The provenance of a run and everything under it; NotFound for an unknown id."""
    if not isinstance(run_id, str) or not run_id.strip():
        raise UsageError("a run id is required")
    store, tenant = registry.store, registry.tenant
    runs = store.run_tree(tenant, run_id)
    if not runs:
        raise NotFound(f"no run {run_id!r} in tenant {tenant!r}")
    run_ids = [r["id"] for r in runs]
    decisions = store.decisions_of_runs(tenant, run_ids)
    calls = store.calls_of_runs(tenant, run_ids)
    tool_names = sorted({c["tool_name"] for c in calls} | _decided_tools(decisions))
    acts = store.acts_on_tools(tenant, tool_names) if tool_names else []
    graph = _Builder()
    for run in runs:
        graph.run(run)
    for decision in decisions:
        graph.decision(decision)
    iterations = _iterations(runs)
    for call in calls:
        graph.call(call, iterations.get(call["id"]), _source(call, decisions))
    for act in acts:
        graph.act(act)
    tree = _tree(runs[0], runs, decisions, calls)
    return Trace(run_id=run_id, tree=tree, graph=graph.graph)


def _decided_tools(decisions: Iterable[dict[str, Any]]) -> set[str]:
    return {c["name"] for d in decisions for c in d["candidates"] or []}


def _iterations(runs: list[dict[str, Any]]) -> dict[int, int]:
    """call id -> the iteration of the run that made it (the LLM loop records it)."""
    out: dict[int, int] = {}
    for run in runs:
        data = run.get("data")
        uses = data.get("tool_calls") if isinstance(data, dict) else None
        for use in uses or []:
            if isinstance(use, dict) and use.get("call_id") is not None:
                out[int(use["call_id"])] = int(use.get("iteration") or 0)
    return out


def _source(call: dict[str, Any], decisions: list[dict[str, Any]]) -> dict[str, Any] | None:
    """The latest decision of the call's run, made before it, that offered its tool."""
    found = None
    for decision in decisions:
        if decision["run_id"] != call["run_id"] or decision["created_at"] > call["started_at"]:
            continue
        if any(c["name"] == call["tool_name"] for c in decision["candidates"] or []):
            found = decision
    return found


class _Builder:
    def __init__(self) -> None:
        self.graph = ProvenanceGraph()
        self._ids: set[str] = set()

    def _node(self, node_id: str, label: str, **props: Any) -> str:
        if node_id not in self._ids:
            self._ids.add(node_id)
            clean = {k: v for k, v in props.items() if v is not None}
            self.graph.nodes.append(GraphNode(id=node_id, label=label, props=clean))
        return node_id

    def _edge(self, source: str, target: str, kind: str, **props: Any) -> None:
        clean = {k: v for k, v in props.items() if v is not None}
        self.graph.edges.append(GraphEdge(source=source, target=target, type=kind, props=clean))

    def tool(self, name: str) -> str:
        return self._node(f"tool:{name}", "AgentTool", name=name)

    def run(self, run: dict[str, Any]) -> None:
        node = self._node(
            f"run:{run['id']}", "Run", run_id=run["id"], task=run["task"],
            status=run["status"], mode=run["mode"], model=run["model"], agent=run["agent"],
            started_at=run["started_at"], ended_at=run["ended_at"],
            duration_ms=_duration(run), output=_preview(run["output"]), error=run["error"],
            requires_review=run["requires_review"], review_reason=run["review_reason"],
        )  # fmt: skip
        if run["parent_run_id"]:
            self._edge(node, f"run:{run['parent_run_id']}", "CHILD_OF")
        data = run.get("data") if isinstance(run.get("data"), dict) else {}
        for skill in (data or {}).get("skills_loaded") or []:
            self._edge(node, self._node(f"skill:{skill}", "Skill", name=skill), "LOADED_SKILL")

    def decision(self, decision: dict[str, Any]) -> None:
        node = self._node(
            f"decision:{decision['id']}", "AgentDecision", decision_id=decision["id"],
            task=decision["task"], k=decision["k"], chosen=decision["chosen"],
            embedder=decision["embedder"], duration_ms=decision["duration_ms"],
            created_at=decision["created_at"],
        )  # fmt: skip
        if decision["run_id"]:
            self._edge(f"run:{decision['run_id']}", node, "MADE_DECISION")
        for candidate in decision["candidates"] or []:
            self._edge(
                node, self.tool(candidate["name"]), "CONSIDERED", rank=candidate.get("rank"),
                final=candidate.get("final"), relevance=candidate.get("relevance"),
                dense=candidate.get("dense"), lexical=candidate.get("lexical"),
                success=candidate.get("success"), latency=candidate.get("latency"),
            )  # fmt: skip
        if decision["chosen"]:
            self._edge(node, self.tool(decision["chosen"]), "SELECTED_TOOL")

    def call(
        self, call: dict[str, Any], iteration: int | None, source: dict[str, Any] | None
    ) -> None:
        node = self._node(
            f"call:{call['id']}", "ToolCall", call_id=call["id"], tool=call["tool_name"],
            tool_version=call["tool_version"], arguments=call["arguments"],
            iteration=iteration, started_at=call["started_at"], duration_ms=call["duration_ms"],
        )  # fmt: skip
        result = self._node(
            f"result:{call['id']}", "ToolResult", success=call["success"],
            error_kind=call["error_kind"], error=call["error"],
            output=call["output_preview"], output_size=call["output_size"],
        )  # fmt: skip
        if call["run_id"]:
            self._edge(f"run:{call['run_id']}", node, "MADE_CALL", iteration=iteration)
        self._edge(node, self.tool(call["tool_name"]), "CALLED_TOOL", version=call["tool_version"])
        self._edge(node, result, "RESULTED_IN")
        if source is not None:
            self._edge(f"decision:{source['id']}", node, "LED_TO")

    def act(self, act: dict[str, Any]) -> None:
        node = self._node(
            f"act:{act['id']}", "OodaAct", act_id=act["id"], action=act["action"],
            policy=act["policy"], actor=act["actor"], reason=act["reason"],
            created_at=act["created_at"], undone_at=act["undone_at"],
        )  # fmt: skip
        self._edge(node, self.tool(act["tool_name"]), "ACTED_ON")


def _tree(
    run: dict[str, Any],
    runs: list[dict[str, Any]],
    decisions: list[dict[str, Any]],
    calls: list[dict[str, Any]],
) -> dict[str, Any]:
    """One run as a tree node; its decisions, calls and child runs in time order."""
    iterations = _iterations([run])
    events: list[tuple[float, dict[str, Any]]] = []
    for decision in decisions:
        if decision["run_id"] == run["id"]:
            events.append((decision["created_at"], _decision_event(decision)))
    for call in calls:
        if call["run_id"] == run["id"]:
            source = _source(call, decisions)
            events.append((call["started_at"], _call_event(call, iterations, source)))
    for child in runs:
        if child["parent_run_id"] == run["id"] and child["id"] != run["id"]:
            events.append((child["started_at"], _tree(child, runs, decisions, calls)))
    events.sort(key=lambda e: e[0])
    data = run.get("data") if isinstance(run.get("data"), dict) else {}
    return {
        "type": "run",
        "run_id": run["id"],
        "parent_run_id": run["parent_run_id"],
        "task": run["task"],
        "status": run["status"],
        "mode": run["mode"],
        "model": run["model"],
        "agent": run["agent"],
        "started_at": run["started_at"],
        "duration_ms": _duration(run),
        "output": _preview(run["output"]),
        "error": run["error"],
        "review_reason": run["review_reason"],
        "skills_loaded": list((data or {}).get("skills_loaded") or []),
        "retries": list((data or {}).get("retries") or []),
        "state": _short_state((data or {}).get("state")),
        "events": [event for _, event in events],
    }


def _short_state(state: Any) -> dict[str, Any]:
    """The run's shared state as it ended, its short plain values only (a chart's path,
    statuses; not result rows)."""
    if not isinstance(state, dict):
        return {}
    plain = (str, int, float, bool)
    return {k: v for k, v in state.items() if isinstance(v, plain) and len(str(v)) <= 200}


def _decision_event(decision: dict[str, Any]) -> dict[str, Any]:
    return {
        "type": "decision",
        "decision_id": decision["id"],
        "task": decision["task"],
        "k": decision["k"],
        "chosen": decision["chosen"],
        "duration_ms": decision["duration_ms"],
        "candidates": [_scores(c) for c in decision["candidates"] or []],
    }


def _call_event(
    call: dict[str, Any], iterations: dict[int, int], source: dict[str, Any] | None
) -> dict[str, Any]:
    return {
        "type": "call",
        "call_id": call["id"],
        "tool": call["tool_name"],
        "tool_version": call["tool_version"],
        "iteration": iterations.get(call["id"]),
        "arguments": call["arguments"],
        "success": call["success"],
        "error": call["error"],
        "output": call["output_preview"],
        "duration_ms": call["duration_ms"],
        "started_at": call["started_at"],
        "decision_id": source["id"] if source else None,
    }


def _scores(candidate: dict[str, Any]) -> dict[str, Any]:
    keys = ("name", "rank", "final", "relevance", "dense", "lexical", "success", "latency")
    scores = {k: candidate.get(k) for k in keys}
    if candidate.get("evidence"):  # learning from use moved it (selection/evidence.py)
        scores.update(learned=candidate.get("learned"), evidence=candidate["evidence"])
    return scores


def _duration(run: dict[str, Any]) -> float | None:
    if run["ended_at"] is None:
        return None
    return round((run["ended_at"] - run["started_at"]) * 1000, 3)


def _preview(text: str | None) -> str | None:
    return text[:PREVIEW_CHARS] if text else text


# -- explain -----------------------------------------------------------------------------
def explain(registry: Registry, call_id: int | str) -> Explanation:
    """Walk back from a recorded call to the task and selection behind it."""
    try:
        key = int(call_id)
    except (TypeError, ValueError):
        raise UsageError(f"a call id is a number, got {call_id!r}") from None
    store, tenant = registry.store, registry.tenant
    call = store.get_call(tenant, key)
    if call is None:
        raise NotFound(f"no call {key} in tenant {tenant!r}")
    acts = [_act(a) for a in store.acts_on_tools(tenant, [call["tool_name"]])]
    call_view = _call_event(call, {}, None)
    if not call["run_id"]:
        return Explanation(
            call=call_view,
            acts=acts,
            summary=f"call {key} of {call['tool_name']!r} was made directly (session "
            f"{call['session_id'][:12]}), not by an agent run",
        )
    run = store.get_run_details(tenant, call["run_id"])
    decisions = store.decisions_of_runs(tenant, [call["run_id"]])
    source = _source(call, decisions)
    if run is not None:
        call_view["iteration"] = _iterations([run]).get(key)
    call_view["decision_id"] = source["id"] if source else None
    candidate = None
    if source is not None:
        candidate = next(c for c in source["candidates"] if c["name"] == call["tool_name"])
    ancestors = store.run_ancestors(tenant, call["run_id"]) if run is not None else []
    explanation = Explanation(
        call=call_view,
        run=_run_summary(run) if run is not None else {"run_id": call["run_id"], "missing": True},
        task=run["task"] if run is not None else (source["task"] if source else None),
        decision=_decision_event(source) if source else None,
        rank=candidate.get("rank") if candidate else None,
        scores=_scores(candidate) if candidate else None,
        ancestors=[_run_summary(a) for a in ancestors],
        acts=acts,
    )
    explanation.summary = _summary(explanation)
    return explanation


def _run_summary(run: dict[str, Any]) -> dict[str, Any]:
    keys = ("id", "task", "status", "mode", "model", "agent", "parent_run_id", "started_at")
    return {k: run.get(k) for k in keys} | {"duration_ms": _duration(run)}


def _act(act: dict[str, Any]) -> dict[str, Any]:
    keys = ("id", "action", "policy", "actor", "reason", "created_at", "undone_at")
    return {k: act.get(k) for k in keys}


def _summary(e: Explanation) -> str:
    call = e.call
    outcome = "succeeded" if call["success"] else f"failed ({call['error']})"
    parts = [f"call {call['call_id']} of {call['tool']!r} {outcome}"]
    run = e.run or {}
    if run.get("missing"):
        parts.append(f"in run {run['run_id']} (no longer in the store)")
    else:
        where = f" at iteration {call['iteration']}" if call.get("iteration") is not None else ""
        parts.append(f"in {run.get('mode')} run {run.get('id')}{where} for the task {e.task!r}")
    if e.decision is not None and e.scores is not None:
        parts.append(
            f"selection decision {e.decision['decision_id']} ranked it {e.rank} of "
            f"{len(e.decision['candidates'])} (final {e.scores['final']:.3f})"
        )
    elif not run.get("missing"):
        parts.append("no selection offered it (an explicit tool list or a loaded skill)")
    if e.ancestors:
        parts.append("under " + " <- ".join(f"run {a['id']}" for a in e.ancestors))
    return "; ".join(parts)
