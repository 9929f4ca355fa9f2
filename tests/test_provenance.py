"""Provenance: `trace` of runs (decisions, calls, results, skills, sub-runs, OODA acts),
`explain` of calls, the Cypher text and the Neo4j driver path, on both stores."""

from __future__ import annotations

import json
import re
from typing import Any

import pytest

import tests.sample_tools as st
from tests.test_cli import as_json, tooldb
from tooldb import Registry, Settings
from tooldb.agents import AgentLoop, run_task
from tooldb.errors import ExecutionError, NotFound, UsageError
from tooldb.models import FunctionModel, Message, ScriptedModel, ToolSchema, call
from tooldb.models.base import ToolChoice
from tooldb.provenance.export import push, quote, to_cypher


@pytest.fixture
def reg(registry: Registry) -> Registry:
    registry.add(st.add, st.echo, st.fail, st.whoami)
    registry.add_skill({"name": "text", "description": "Work with text.", "tools": ["echo"]})
    return registry


def _agent_run(reg: Registry) -> str:
    """A parent run that searches for tools (a selection decision), calls one, loads a
    skill, calls a tool the skill unlocked, and delegates to a sub-agent that calls a
    tool of its own."""

    def decide(messages: list[Message], tools: list[ToolSchema], _: ToolChoice) -> object:
        first = next(m for m in messages if m.role == "user").content
        done = [m for m in messages if m.role == "tool"]
        if first.startswith("sub:"):
            return call("add", {"a": 40, "b": 2}) if not done else "child: 42"
        steps = [
            call("search_tools", {"query": "add two integers", "k": 1}),
            call("add", {"a": 2, "b": 3}),
            call("load_skill", {"name": "text"}),
            call("echo", {"text": 'it\'s "quoted"\nand newline'}),
            call("subagent", {"task": "sub: the answer", "tools": ["add"]}),
        ]
        return steps[len(done)] if len(done) < len(steps) else "all done"

    loop = AgentLoop(reg, FunctionModel(decide), skills=["text"], search_tools=True,
                     subagents=True)  # fmt: skip
    result = loop.run("add 2 and 3, then echo a line")
    assert result.status.value == "success", result.review_reason
    return result.run_id


def test_trace_shows_decisions_calls_results_skills_and_child_runs(reg: Registry) -> None:
    reg.select("add two numbers", 3, run_id=None)  # a decision outside any run: not in it
    run_id = _agent_run(reg)
    found = reg.trace(run_id)
    tree = found.tree
    assert tree["run_id"] == run_id and tree["status"] == "success"
    assert tree["skills_loaded"] == ["text"]
    kinds = [e["type"] for e in tree["events"]]
    assert kinds == ["decision", "call", "call", "run"]  # search, add, echo, the child run
    decision, add, echo, child = tree["events"]
    assert decision["task"] == "add two integers" and decision["candidates"][0]["name"] == "add"
    assert add["tool"] == "add" and add["success"] and add["output"] == "5"
    assert add["iteration"] == 1 and echo["iteration"] == 3
    assert add["decision_id"] == decision["decision_id"] and echo["decision_id"] is None
    assert child["parent_run_id"] == run_id and child["task"] == "sub: the answer"
    assert [e["tool"] for e in child["events"]] == ["add"]
    labels = {n.label for n in found.graph.nodes}
    assert {"Run", "AgentDecision", "ToolCall", "ToolResult", "AgentTool", "Skill"} <= labels
    edges = {(e.source, e.type, e.target) for e in found.graph.edges}
    assert (f"run:{child['run_id']}", "CHILD_OF", f"run:{run_id}") in edges
    assert (f"run:{run_id}", "LOADED_SKILL", "skill:text") in edges
    assert (f"call:{add['call_id']}", "RESULTED_IN", f"result:{add['call_id']}") in edges
    assert (f"call:{add['call_id']}", "CALLED_TOOL", "tool:add") in edges


def test_router_runs_link_the_decision_to_the_call_and_explain_walks_back(
    reg: Registry,
) -> None:
    result = run_task(reg, "add 2 and 3")
    assert result.status.value == "success", result.error
    found = reg.trace(result.run_id)
    decision, made = found.tree["events"]
    assert decision["type"] == "decision" and made["type"] == "call"
    assert made["decision_id"] == decision["decision_id"] and decision["chosen"] == "add"
    assert decision["candidates"][0]["name"] == "add"
    assert {"final", "dense", "lexical", "success", "latency"} <= set(decision["candidates"][0])
    edges = {(e.source, e.type, e.target) for e in found.graph.edges}
    assert (f"decision:{decision['decision_id']}", "LED_TO", f"call:{made['call_id']}") in edges
    assert (f"decision:{decision['decision_id']}", "SELECTED_TOOL", "tool:add") in edges

    why = reg.explain(made["call_id"])
    assert why.task == "add 2 and 3" and why.rank == 1
    assert why.decision is not None and why.decision["decision_id"] == decision["decision_id"]
    assert why.run is not None and why.run["id"] == result.run_id
    assert "ranked it 1" in why.summary and "add 2 and 3" in why.summary


def test_explain_a_sub_agent_call_names_its_ancestors(reg: Registry) -> None:
    run_id = _agent_run(reg)
    child = reg.trace(run_id).tree["events"][-1]
    call_id = child["events"][0]["call_id"]
    why = reg.explain(call_id)
    assert why.run is not None and why.run["id"] == child["run_id"]
    assert [a["id"] for a in why.ancestors] == [run_id]
    assert "no selection offered it" in why.summary  # an explicit tool list


def test_a_direct_call_and_ooda_acts_on_its_tool(reg: Registry) -> None:
    called = reg.call("fail", {"message": "boom"})
    assert called.call_id is not None
    model = ScriptedModel([call("fail", {"message": "in a run"}), "it failed"])
    run = AgentLoop(reg, model, tools=["fail"]).run("try the failing tool")
    reg.call_many([("fail", {"message": "again"})] * 210)  # enough failures for OODA to act
    report = reg.ooda(dry_run=False)
    assert [(a.tool, a.action) for a in report.acts] == [("fail", "disable")]
    why = reg.explain(called.call_id)
    assert why.run is None and "made directly" in why.summary
    assert why.call["success"] is False and "boom" in why.call["error"]
    assert [a["action"] for a in why.acts] == ["disable"] and why.acts[0]["policy"]
    # in the run's trace, the act hangs off the tool the run called
    graph = reg.trace(run.run_id).graph
    acts = [n for n in graph.nodes if n.label == "OodaAct"]
    assert len(acts) == 1 and acts[0].props["action"] == "disable"
    assert any(e.source == acts[0].id and e.type == "ACTED_ON" and e.target == "tool:fail"
               for e in graph.edges)  # fmt: skip


def test_unknown_ids_and_bad_input(reg: Registry) -> None:
    with pytest.raises(NotFound, match="no run 'nope'"):
        reg.trace("nope")
    with pytest.raises(NotFound, match="no call 999999"):
        reg.explain(999_999)
    with pytest.raises(UsageError, match="number"):
        reg.explain("abc")
    with pytest.raises(UsageError):
        reg.trace("")


def test_a_trace_survives_a_removed_tool(reg: Registry) -> None:
    result = run_task(reg, "add 2 and 3")
    reg.remove("add")
    found = reg.trace(result.run_id)
    assert any(e["type"] == "call" and e["tool"] == "add" for e in found.tree["events"])


HOSTILE = "'}) DETACH DELETE n //\\' \" \n\r\t\x00 \u2028 é 🙂 \ud800"


def test_cypher_escapes_every_hostile_string(reg: Registry) -> None:
    model = ScriptedModel([call("echo", {"text": HOSTILE}), HOSTILE])
    result = AgentLoop(reg, model, tools=["echo"]).run(HOSTILE)
    text = to_cypher(reg.trace(result.run_id).graph)
    lines = text.strip().split("\n")  # one statement per line: no raw newline got through
    assert all(line.endswith(";") for line in lines)
    for line in lines:
        _assert_balanced(line)
    assert "\\'}) DETACH DELETE n //\\\\\\' " in text  # inside a literal, escaped
    assert "é 🙂" in text and "\\u0000" in text and "\\u2028" in text and "\\ud800" in text
    assert quote("a'b\\c") == "'a\\'b\\\\c'"


def _assert_balanced(line: str) -> None:
    """Outside string literals only Cypher syntax remains: no stray quote, and the
    words of the hostile text never appear as code."""
    code, inside, escaped = [], False, False
    for char in line:
        if inside:
            if escaped:
                escaped = False
            elif char == "\\":
                escaped = True
            elif char == "'":
                inside = False
        elif char == "'":
            inside = True
        else:
            code.append(char)
    assert not inside, line
    outside = "".join(code)
    assert "DETACH" not in outside and "//" not in outside, outside
    assert re.fullmatch(r"[A-Za-z0-9_:{}(),.\[\]\-<>=+ `]*;", outside), outside


class _FakeTx:
    def __init__(self) -> None:
        self.runs: list[tuple[str, dict[str, Any]]] = []

    def run(self, statement: str, **params: Any) -> None:
        self.runs.append((statement, params))


class _FakeDriver:
    """The neo4j driver's API surface that push uses (no server here)."""

    def __init__(self, url: str, auth: Any) -> None:
        self.url, self.auth, self.tx = url, auth, _FakeTx()
        self.sessions: list[dict[str, Any]] = []

    def __enter__(self) -> _FakeDriver:
        return self

    def verify_connectivity(self) -> None:
        return None

    def __exit__(self, *_: object) -> None:
        return None

    def session(self, **kwargs: Any) -> _FakeDriver:
        self.sessions.append(kwargs)
        return self

    def execute_write(self, work: Any, *args: Any) -> None:
        work(self.tx, *args)


def test_push_sends_parameters_not_spliced_text(
    reg: Registry, monkeypatch: pytest.MonkeyPatch
) -> None:
    result = AgentLoop(reg, ScriptedModel([call("echo", {"text": HOSTILE}), "x"]), tools=["echo"])
    run = result.run(HOSTILE)
    graph = reg.trace(run.run_id).graph
    with pytest.raises(UsageError, match="no Neo4j server"):
        push(graph, Settings())
    monkeypatch.setenv("NEO4J_PASSWORD", "s3cret")
    drivers: list[_FakeDriver] = []

    def factory(url: str, auth: Any) -> _FakeDriver:
        drivers.append(_FakeDriver(url, auth))
        return drivers[-1]

    sent = push(graph, Settings(neo4j_url="bolt://127.0.0.1:7687", neo4j_database="g"), factory)
    driver = drivers[0]
    assert driver.auth == ("neo4j", "s3cret") and driver.sessions == [{"database": "g"}]
    statements = [s for s, _ in driver.tx.runs]
    assert all("DETACH" not in s and HOSTILE not in s for s in statements)
    sent_ids = {row["id"] for _, p in driver.tx.runs for row in p["rows"] if "id" in row}
    assert sent_ids == {n.id for n in graph.nodes} and sent["nodes"] == len(graph.nodes)
    values = json.dumps([p for _, p in driver.tx.runs], ensure_ascii=False)
    assert "DETACH DELETE" in values  # the hostile text travels as a parameter value


def test_push_to_an_unreachable_server_fails_fast_and_clearly(reg: Registry) -> None:
    pytest.importorskip("neo4j")  # the real driver (the `neo4j` extra; in dev)
    run = run_task(reg, "add 2 and 3")
    settings = Settings(neo4j_url="bolt://127.0.0.1:9")  # nothing listens on port 9
    with pytest.raises(ExecutionError, match=r"Neo4j at bolt://127\.0\.0\.1:9 refused"):
        push(reg.trace(run.run_id).graph, settings)


def test_explain_inference_is_a_builtin_agents_can_call(reg: Registry) -> None:
    reg.add_builtin_tools()
    assert reg.get("explain_inference").spec.category == "diagnostics"
    result = run_task(reg, "add 2 and 3")
    traced = reg.call("explain_inference", {"run_id": result.run_id})
    assert traced.success and traced.data["trace"]["run_id"] == result.run_id
    call_id = traced.data["trace"]["events"][-1]["call_id"]
    explained = reg.call("explain_inference", {"call_id": call_id})
    assert explained.success and explained.data["explanation"]["task"] == "add 2 and 3"
    both = reg.call("explain_inference", {"run_id": result.run_id, "call_id": call_id})
    assert not both.success and "exactly one" in (both.error or "")


def test_cli_trace_explain_cypher(store_url: str) -> None:
    as_json(store_url, "add", "python", "tooldb.examples.basic")
    ran = as_json(store_url, "run", "convert 100 C to F")
    traced = as_json(store_url, "trace", ran["run_id"])
    assert traced["tree"]["run_id"] == ran["run_id"] and traced["graph"]["nodes"]
    plain = tooldb(store_url, "trace", ran["run_id"])
    assert plain.exit_code == 0 and "convert_temperature" in plain.output
    assert "decision" in plain.output
    cypher = tooldb(store_url, "trace", "--cypher", ran["run_id"])
    assert cypher.exit_code == 0 and "MERGE (n:Run {id: 'run:" in cypher.output
    call_id = ran["tool_calls"][0]["call_id"]
    why = as_json(store_url, "explain", str(call_id))
    assert why["task"] == "convert 100 C to F" and why["rank"] == 1
    assert "ranked it 1" in tooldb(store_url, "explain", str(call_id)).output
    assert as_json(store_url, "trace", "ghost", code=2)["error"]["type"] == "NotFound"
    assert as_json(store_url, "explain", "12345678", code=2)["error"]["type"] == "NotFound"
    push = as_json(store_url, "trace", "--push", ran["run_id"], code=2)
    assert "no Neo4j server" in push["error"]["message"]


def test_another_tenant_reads_nothing_of_a_run_its_calls_decisions_skills_or_agents(
    reg: Registry,
) -> None:
    """Tenant B asking for tenant A's ids gets NotFound (or nothing), through the Python
    API, the store and the CLI: runs, explain, trace, decisions, skills and agents."""
    run_id = _agent_run(reg)
    direct = reg.call("add", {"a": 1, "b": 2}).call_id
    reg.add_agent({"name": "helper", "instructions": "Help."})
    found = reg.trace(run_id)
    call_ids = [e["call_id"] for e in found.tree["events"] if e["type"] == "call"]
    child_id = found.tree["events"][-1]["run_id"]
    child_call = found.tree["events"][-1]["events"][0]["call_id"]
    decision_id = found.tree["events"][0]["decision_id"]
    assert reg.explain(call_ids[0]).run is not None and direct is not None  # A sees them

    other = reg.for_tenant("other")
    other.add(st.add)  # B has a tool of the same name: names are no way in either
    for key in [direct, child_call, *call_ids]:
        with pytest.raises(NotFound, match=f"no call {key} in tenant 'other'"):
            other.explain(key)
        assert other.store.get_call("other", key) is None
    for run in (run_id, child_id):
        with pytest.raises(NotFound, match="tenant 'other'"):
            other.trace(run)
        assert other.store.get_run("other", run) is None
        assert other.store.get_run_details("other", run) is None
        assert other.store.run_tree("other", run) == []
        assert other.store.run_ancestors("other", run) == []
    assert other.store.list_runs("other") == []
    assert other.store.list_runs("other", parent_run_id=run_id) == []
    assert other.store.decisions_of_runs("other", [run_id, child_id]) == []
    assert other.store.calls_of_runs("other", [run_id, child_id]) == []
    assert other.store.get_decision("other", decision_id) is None
    assert other.store.list_decisions("other") == []
    assert other.store.list_decisions("other", run_id=run_id) == []
    assert other.store.acts_on_tools("other", ["add", "echo"]) == []
    assert other.calls() == [] and other.calls(run_id=run_id) == []
    with pytest.raises(NotFound, match="no skill named 'text' in tenant 'other'"):
        other.skill("text")
    with pytest.raises(NotFound, match="no agent named 'helper' in tenant 'other'"):
        other.agent("helper")
    assert other.skills() == [] and other.agents() == []
    # the CLI's read paths say the same
    url = str(reg.settings.url)
    for command in (
        ["explain", str(direct)],
        ["explain", str(call_ids[0])],
        ["trace", run_id],
        ["runs", "show", run_id],
        ["run", "show", child_id],
    ):
        refused = as_json(url, *command, code=2, tenant="other")
        assert refused["error"]["type"] == "NotFound", command
    assert as_json(url, "runs", tenant="other")["runs"] == []
    assert as_json(url, "skills", tenant="other")["skills"] == []
    assert as_json(url, "agents", tenant="other")["agents"] == []
    # and tenant A still sees all of it
    assert reg.trace(run_id).tree["run_id"] == run_id and reg.skill("text").name == "text"


def test_the_owning_tenant_reads_each_row_back_and_removes_only_its_own(reg: Registry) -> None:
    """The positive side of the tenant filters: every read path returns the tenant's own
    rows, exactly (a filter that matched nothing would pass the cross-tenant test)."""
    run_id = _agent_run(reg)
    store, tenant = reg.store, reg.tenant
    found = reg.trace(run_id)
    child_id = found.tree["events"][-1]["run_id"]
    call_ids = sorted(e["call_id"] for e in found.tree["events"] if e["type"] == "call")
    run = store.get_run(tenant, run_id)
    assert run is not None and run.id == run_id and run.status.value == "success"
    child = store.get_run(tenant, child_id)
    assert child is not None and child.parent_run_id == run_id
    details = store.get_run_details(tenant, run_id)
    assert details is not None and details["id"] == run_id
    assert [r["id"] for r in store.run_tree(tenant, run_id)] == [run_id, child_id]
    assert [r["id"] for r in store.run_ancestors(tenant, child_id)] == [run_id]
    assert [r.id for r in store.list_runs(tenant, parent_run_id=run_id)] == [child_id]
    assert {r.id for r in store.list_runs(tenant)} == {run_id, child_id}
    assert {r.id for r in store.list_runs(tenant, status="success")} == {run_id, child_id}
    assert store.list_runs(tenant, status="error") == []
    assert len(store.list_runs(tenant, limit=1)) == 1
    assert [c["id"] for c in store.calls_of_runs(tenant, [run_id])] == call_ids
    decisions = store.decisions_of_runs(tenant, [run_id, child_id])
    assert len(decisions) == 1 and decisions[0]["run_id"] == run_id
    assert store.get_decision(tenant, decisions[0]["id"]) is not None
    for call_id in call_ids:
        row = store.get_call(tenant, call_id)
        assert row is not None and row["id"] == call_id and row["run_id"] == run_id
    messages = store.run_messages(run_id)
    assert [m["seq"] for m in messages] == sorted(m["seq"] for m in messages)
    assert [m["role"] for m in messages[:2]] == ["system", "user"] and messages[0]["iteration"] == 0
    store.set_decision_choice(decisions[0]["id"], "echo")
    assert store.get_decision(tenant, decisions[0]["id"])["chosen"] == "echo"  # type: ignore[index]
    # removal is per tenant too
    reg.add_agent({"name": "helper", "instructions": "Help."})
    other = reg.for_tenant("other")
    other.add(st.echo)
    other.add_skill({"name": "text", "description": "Theirs.", "tools": ["echo"]})
    assert not store.remove_skill("nobody", "text") and not store.remove_agent("nobody", "helper")
    assert store.remove_skill(tenant, "text") and store.remove_agent(tenant, "helper")
    assert store.get_skill(tenant, "text") is None and store.get_agent(tenant, "helper") is None
    assert other.skill("text").description == "Theirs."  # the other tenant's is untouched
    assert not store.remove_skill(tenant, "text")


def test_traces_follow_at_most_max_depth_levels_and_survive_a_cycle(reg: Registry) -> None:
    """A chain deeper than MAX_DEPTH (50) is followed 50 levels, up and down; a cycle
    in corrupt data lists each run of the tree once; many run ids are read in chunks,
    each row once however often its id is named."""
    from tests.test_store_run_rows import _decision, new_run
    from tooldb.stores.provenance_rows import MAX_DEPTH
    from tooldb.stores.schema import runs

    store, tenant = reg.store, reg.tenant
    chain = [new_run(store, tenant, run_id="d00")]
    for level in range(1, MAX_DEPTH + 2):
        chain.append(new_run(store, tenant, parent=chain[-1], run_id=f"d{level:02d}"))
    assert [r["id"] for r in store.run_tree(tenant, "d00")] == chain[:MAX_DEPTH]
    up = [r["id"] for r in store.run_ancestors(tenant, chain[-1])]
    assert up == chain[-2 : -2 - MAX_DEPTH : -1] and len(up) == MAX_DEPTH
    first, second = new_run(store, tenant, run_id="x1"), new_run(store, tenant, run_id="x2")
    with store.engine.begin() as conn:  # x1 -> x2 -> x1: no API makes this
        conn.execute(runs.update().where(runs.c.id == first).values(parent_run_id=second))
        conn.execute(runs.update().where(runs.c.id == second).values(parent_run_id=first))
    assert [r["id"] for r in store.run_tree(tenant, first)] == [first, second]
    decided = [_decision(store, tenant, "d01"), _decision(store, tenant, "d02")]
    named = ["d01", *(f"none{i}" for i in range(600)), "d01", "d02"]  # d01 in two chunks
    assert [d["id"] for d in store.decisions_of_runs(tenant, named)] == decided
