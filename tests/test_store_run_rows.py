"""The store's run, decision and act rows read back in their tenant only, in a stable
order even when rows share a timestamp, and written whole or not at all (issue 30:
the survivors of the tenant_filters mutation group). Both stores."""

from __future__ import annotations

import uuid
from typing import Any

import pytest

import tests.sample_tools as st
from tooldb import Registry, StoreError
from tooldb.stores import Store
from tooldb.types import RunStatus

WHEN = 1_750_000_000.0  # one clock tick shared by every row below


def new_run(
    store: Store,
    tenant: str,
    *,
    parent: str | None = None,
    run_id: str = "",
    status: RunStatus = RunStatus.RUNNING,
    mode: str = "llm",
    started: float = WHEN,
    lease: float | None = None,
) -> str:
    run_id = run_id or uuid.uuid4().hex
    store.create_run(
        {
            "id": run_id, "tenant": tenant, "parent_run_id": parent, "agent": "a",
            "mode": mode, "model": None, "task": "t", "status": status.value,
            "metadata": {"note": "café ☕"}, "started_at": started, "owner": None,
            "lease_expires_at": lease,
        }
    )  # fmt: skip
    return run_id


def test_ancestors_stop_at_the_tenant_boundary(registry: Registry) -> None:
    store, mine = registry.store, registry.tenant
    root = new_run(store, mine)
    child = new_run(store, mine, parent=root)
    grandchild = new_run(store, mine, parent=child)
    assert [r["id"] for r in store.run_ancestors(mine, grandchild)] == [child, root]
    assert store.run_ancestors(mine, root) == []
    # A row of another tenant naming this tenant's run as its parent (the API cannot
    # make one; the store must still not follow it across).
    stranger = new_run(store, "other", parent=child)
    assert store.run_ancestors("other", stranger) == []
    assert store.run_ancestors(mine, stranger) == []  # not my run: no chain from it
    assert store.run_ancestors("other", grandchild) == []
    assert [r["id"] for r in store.run_tree(mine, root)] == [root, child, grandchild]
    assert store.run_tree("other", root) == []
    assert [r["id"] for r in store.run_tree("other", stranger)] == [stranger]


def test_rows_of_one_clock_tick_come_back_in_id_order(registry: Registry) -> None:
    store, tenant = registry.store, registry.tenant
    root = new_run(store, tenant, run_id="m-root")
    for name in ("c-3", "c-1", "c-2"):
        new_run(store, tenant, parent=root, run_id=name)
    tree = [r["id"] for r in store.run_tree(tenant, root)]
    assert tree == ["m-root", "c-1", "c-2", "c-3"]
    listed = [r.id for r in store.list_runs(tenant, parent_run_id=root)]
    assert listed == ["c-1", "c-2", "c-3"]
    assert [r.id for r in store.list_runs(tenant, parent_run_id=root, limit=2)] == ["c-1", "c-2"]
    assert store.list_runs(tenant, status="success") == []
    assert len(store.list_runs(tenant)) == 4

    decided = [_decision(store, tenant, run_id) for run_id in ("c-2", "c-1", "c-2")]
    found = store.decisions_of_runs(tenant, ["c-1", "c-2", "c-1"])
    assert [d["id"] for d in found] == sorted(decided)
    assert store.decisions_of_runs("other", ["c-1", "c-2"]) == []


def _decision(store: Store, tenant: str, run_id: str) -> int:
    return store.record_decision(
        {
            "tenant": tenant, "run_id": run_id, "task": "t", "k": 1, "filters": {},
            "candidates": [], "chosen": None, "embedder": None, "duration_ms": 1.0,
            "created_at": WHEN,
        }
    )  # fmt: skip


def test_acts_of_one_tick_in_id_order_and_only_the_tenants(registry: Registry) -> None:
    registry.add_function(st.add)
    registry.add_function(st.echo)
    store, tenant = registry.store, registry.tenant
    ids = [_act(registry, "echo"), _act(registry, "add"), _act(registry, "echo")]
    acts = store.acts_on_tools(tenant, ["echo", "add"])
    assert [a["id"] for a in acts] == sorted(ids)
    assert [a["id"] for a in store.acts_on_tools(tenant, ["echo"])] == [ids[0], ids[2]]
    assert store.acts_on_tools("other", ["echo", "add"]) == []


def _act(registry: Registry, tool: str) -> int:
    row: dict[str, Any] = {
        "tenant": registry.tenant, "cycle_id": None, "tool_id": registry.get(tool).id,
        "tool_name": tool, "action": "note", "policy": "test", "actor": "test",
        "reason": "r", "evidence": {}, "created_at": WHEN, "reverses": None,
    }  # fmt: skip
    act_id = registry.store.apply_act(row, set_enabled=None, only_if_enabled=None)
    assert act_id is not None
    return act_id


def test_a_failed_run_write_leaves_nothing_and_says_why(registry: Registry) -> None:
    store, tenant = registry.store, registry.tenant
    run_id = new_run(store, tenant)
    with pytest.raises(StoreError, match="rejected a write"):
        new_run(store, tenant, run_id=run_id)  # the same id again
    with pytest.raises(StoreError, match="rejected a write"):
        store.append_run_messages(run_id, [(0, 0, "user", "{}"), (0, 0, "user", "{}")])
    assert store.run_messages(run_id) == []  # the pair was one transaction: neither landed
    store.append_run_messages(run_id, [(0, 0, "user", '{"content": "hi"}')])
    assert store.run_messages(run_id) == [{"seq": 0, "iteration": 0, "content": "hi"}]
    details = store.get_run_details(tenant, run_id)
    assert details is not None
    assert details["metadata"] == {"note": "café ☕"}
    record = store.get_run(tenant, run_id)
    assert record is not None and record.status is RunStatus.RUNNING and record.agent == "a"
    assert store.get_run("other", run_id) is None
    assert store.get_run_details("other", run_id) is None


def test_run_messages_come_in_order_and_runs_twenty_at_a_time(registry: Registry) -> None:
    store, tenant = registry.store, registry.tenant
    run_id = new_run(store, tenant)
    store.append_run_messages(
        run_id, [(2, 1, "tool", '{"content": "c"}'), (0, 0, "user", '{"content": "a"}')]
    )
    store.append_run_messages(run_id, [(1, 1, "assistant", '{"content": "b"}')])
    assert store.run_messages(run_id) == [
        {"seq": 0, "iteration": 0, "content": "a"},
        {"seq": 1, "iteration": 1, "content": "b"},
        {"seq": 2, "iteration": 1, "content": "c"},
    ]
    for _ in range(21):
        new_run(store, tenant)
    assert len(store.list_runs(tenant)) == 20


def test_runs_are_listed_newest_first_and_definitions_by_name(registry: Registry) -> None:
    store, tenant = registry.store, registry.tenant
    for run_id, started in (("r1", WHEN), ("r3", WHEN + 10), ("r2", WHEN + 10)):
        new_run(store, tenant, run_id=run_id)
        with store.engine.begin() as conn:
            from tooldb.stores.schema import runs

            conn.execute(runs.update().where(runs.c.id == run_id).values(started_at=started))
    assert [r.id for r in store.list_runs(tenant)] == ["r2", "r3", "r1"]
    for name in ("b", "a"):
        store.put_agent(tenant, {"name": name, "definition": {"name": name}, "content_hash": name})
    assert [a["name"] for a in store.list_agents(tenant)] == ["a", "b"]


def test_a_run_write_the_store_refuses_says_what_failed(registry: Registry) -> None:
    """A write refused for another reason than a constraint names what was written
    ("failed to write an agent run"), leaves nothing, and the store writes on after."""
    store, tenant = registry.store, registry.tenant
    run_id = new_run(store, tenant)
    if store.dialect == "sqlite":  # this test's own file: take the table away
        with store.engine.begin() as conn:
            conn.exec_driver_sql("DROP TABLE run_messages")
        bad = [(0, 0, "user", '{"content": "hi"}')]
    else:  # not JSON: jsonb refuses it (a data error, not a constraint)
        bad = [(0, 0, "user", '{"content": "hi"}'), (1, 0, "user", "{not json")]
    with pytest.raises(StoreError, match="failed to write an agent run: "):
        store.append_run_messages(run_id, bad)
    if store.dialect != "sqlite":
        assert store.run_messages(run_id) == []  # one transaction: neither landed
    second = new_run(store, tenant)
    assert {r.id for r in store.list_runs(tenant)} == {run_id, second}


def _lease(store: Store, tenant: str, run_id: str) -> Any:
    details = store.get_run_details(tenant, run_id)
    assert details is not None
    return details["lease_expires_at"]


def test_leases_are_renewed_only_for_the_named_runs_still_running(registry: Registry) -> None:
    store, tenant = registry.store, registry.tenant
    running = [new_run(store, tenant), new_run(store, tenant)]
    ended = new_run(store, tenant, status=RunStatus.SUCCESS)
    untouched = new_run(store, tenant)
    assert store.renew_run_leases([], WHEN + 60) == 0
    assert store.renew_run_leases([ended], WHEN + 60) == 0
    assert store.renew_run_leases([*running, ended, "missing"], WHEN + 60) == 2
    assert [_lease(store, tenant, run_id) for run_id in running] == [WHEN + 60] * 2
    assert _lease(store, tenant, ended) is None
    assert _lease(store, tenant, untouched) is None


def _call(registry: Registry, tool: str, at: float, ms: float, **extra: Any) -> dict[str, Any]:
    """A row of the call log, as ``record_calls`` takes it."""
    found = registry.get(tool)
    values = {
        "tenant": registry.tenant, "tool_id": found.id, "tool_name": tool, "tool_version": 1,
        "run_id": None, "session_id": "t", "arguments": {}, "success": True,
        "error_kind": None, "error": None, "output_size": 0, "output_preview": None,
        "duration_ms": ms, "started_at": at,
    }  # fmt: skip
    return {**values, **extra}


def test_recent_durations_are_the_tools_last_successes_before_a_time(registry: Registry) -> None:
    """Per tool, newest first: successful calls of this tenant started before ``before``,
    at most ``limit`` of them; a tool with none gets []."""
    registry.add(st.add, st.echo)
    other = registry.for_tenant("other")
    other.add(st.add)
    store, tenant = registry.store, registry.tenant
    store.record_calls(
        [
            _call(registry, "add", WHEN - 3, 3.0),
            _call(registry, "add", WHEN - 2, 2.0),
            _call(registry, "add", WHEN - 1.5, 99.0, success=False, error_kind="execution"),
            _call(registry, "add", WHEN - 1, 1.0),
            _call(registry, "add", WHEN, 50.0),  # not before
            _call(registry, "echo", WHEN - 1, 7.0),
            _call(other, "add", WHEN - 0.5, 77.0),
        ]
    )
    names = ["add", "echo", "missing"]
    found = store.recent_durations(tenant, names, before=WHEN, limit=2)
    assert found == {"add": [1.0, 2.0], "echo": [7.0], "missing": []}
    assert store.recent_durations(tenant, ["add"], before=WHEN, limit=10) == {
        "add": [1.0, 2.0, 3.0]
    }
    assert store.recent_durations("other", ["add"], before=WHEN, limit=10) == {"add": [77.0]}


def test_runs_whose_lease_expired_are_interrupted_with_what_they_recorded(
    registry: Registry,
) -> None:
    """Only this tenant's running runs whose lease ended before ``now``: each gets the
    calls and turns it recorded, the reason, a review flag and its lease's end."""
    registry.add(st.add)
    store, tenant = registry.store, registry.tenant
    now = WHEN + 100
    busy = new_run(store, tenant, lease=WHEN + 50)
    quiet = new_run(store, tenant, lease=WHEN + 60)
    alive = [new_run(store, tenant, lease=now), new_run(store, tenant, lease=now + 1)]
    unleased = new_run(store, tenant)
    ended = new_run(store, tenant, status=RunStatus.SUCCESS, lease=WHEN)
    theirs = new_run(store, "other", lease=WHEN)
    store.record_calls([_call(registry, "add", WHEN, 1.0, run_id=busy)] * 2)
    store.record_calls([_call(registry, "add", WHEN, 1.0, run_id=quiet + "x")])
    turns = [(0, 0, "user", "{}"), (1, 0, "assistant", "{}"), (2, 2, "tool", "{}")]
    store.append_run_messages(busy, turns)

    assert sorted(store.interrupt_expired_runs(tenant, now)) == sorted([busy, quiet])
    rows = {run_id: store.get_run_details(tenant, run_id) for run_id in (busy, quiet)}
    for run_id, calls, iterations, until in ((busy, 2, 3, WHEN + 50), (quiet, 0, 0, WHEN + 60)):
        row = rows[run_id]
        assert row is not None
        assert (row["status"], row["tool_calls"], row["iterations"], row["ended_at"]) == (
            "interrupted", calls, iterations, until,
        )  # fmt: skip
        assert row["requires_review"] and row["error"] == row["review_reason"]
        assert row["error"] == (
            "the process running it stopped before it ended (its lease expired): "
            "killed, crashed or cut off"
        )
    for run_id in (*alive, unleased):
        record = store.get_run(tenant, run_id)
        assert record is not None and record.status is RunStatus.RUNNING
    finished = store.get_run(tenant, ended)
    assert finished is not None and finished.status is RunStatus.SUCCESS
    assert store.interrupt_expired_runs(tenant, now) == []
    assert store.interrupt_expired_runs("other") == [theirs]  # now: the clock's


def test_more_expired_runs_than_one_chunk_are_all_interrupted(registry: Registry) -> None:
    """The sweep updates in chunks of 500: no run past the first chunks is left behind."""
    from tooldb.stores.schema import runs

    store, tenant = registry.store, registry.tenant
    ids = [f"r{i:04d}" for i in range(1001)]
    row = {"tenant": tenant, "agent": "a", "mode": "llm", "task": "t", "status": "running",
           "metadata": {}, "started_at": WHEN, "lease_expires_at": WHEN}  # fmt: skip
    with store.engine.begin() as conn:
        conn.execute(runs.insert(), [{**row, "id": run_id} for run_id in ids])
    assert sorted(store.interrupt_expired_runs(tenant, WHEN + 1)) == ids
    assert store.list_runs(tenant, status="running") == []


def test_run_ids_by_prefix_are_the_tenants_hex_ids_in_order(registry: Registry) -> None:
    """Two by default, in id order, of this tenant only; a prefix that is not lowercase
    hex (LIKE's wildcards, other letters) matches nothing, even an id that is not hex."""
    store, tenant = registry.store, registry.tenant
    for run_id in ("ab56", "ab34", "ab12", "cd00", "xa1"):
        new_run(store, tenant, run_id=run_id)
    new_run(store, "other", run_id="ab00")
    assert store.run_ids_with_prefix(tenant, "ab") == ["ab12", "ab34"]
    assert store.run_ids_with_prefix(tenant, "ab", limit=10) == ["ab12", "ab34", "ab56"]
    assert store.run_ids_with_prefix(tenant, "cd") == ["cd00"]
    assert store.run_ids_with_prefix("other", "ab") == ["ab00"]
    for prefix in ("", "a%", "a_", "_", "X", "x", "AB"):
        assert store.run_ids_with_prefix(tenant, prefix) == [], prefix


def test_a_finished_run_keeps_every_outcome_column_and_its_metadata(registry: Registry) -> None:
    """finish_run writes every outcome column of its run only; ``metadata`` replaces the
    run's when given and is kept when not."""
    store, tenant = registry.store, registry.tenant
    first, second, bystander = (
        new_run(store, tenant),
        new_run(store, tenant),
        new_run(store, tenant),
    )
    outcome = {
        "status": "partial", "output": "half", "data": '{"rows": [1, "é"]}', "error": "e",
        "requires_review": True, "review_reason": "limit", "iterations": 3, "tool_calls": 4,
        "input_tokens": 5, "output_tokens": 6, "ended_at": WHEN + 9,
    }  # fmt: skip
    store.finish_run(first, outcome)
    store.finish_run(second, {**outcome, "status": "success", "metadata": {"n": "ü"}})
    row = store.get_run_details(tenant, first)
    assert row is not None
    assert {k: row[k] for k in outcome} == {**outcome, "data": {"rows": [1, "é"]}}
    assert row["metadata"] == {"note": "café ☕"}
    other = store.get_run_details(tenant, second)
    assert other is not None and (other["status"], other["metadata"]) == ("success", {"n": "ü"})
    untouched = store.get_run(tenant, bystander)
    assert untouched is not None and untouched.status is RunStatus.RUNNING
    assert untouched.ended_at is None and untouched.iterations == 0


def test_run_metadata_is_stored_as_readable_json_text(registry: Registry) -> None:
    """Metadata is stored unescaped (``café``, not ``caf\\u00e9``): the text a SQL tool
    over the registry reads from ``runs``, at its start and when the run ends."""
    store, tenant = registry.store, registry.tenant
    first, second = new_run(store, tenant), new_run(store, tenant)
    outcome = {column: None for column in ("output", "data", "error", "review_reason")}
    store.finish_run(
        second,
        {**outcome, "status": "success", "requires_review": False, "iterations": 0,
         "tool_calls": 0, "input_tokens": 0, "output_tokens": 0, "ended_at": WHEN,
         "metadata": {"n": "ü"}},
    )  # fmt: skip
    cast = "metadata" if store.dialect == "sqlite" else "metadata::text"
    with store.engine.connect() as conn:
        texts = {
            run_id: conn.exec_driver_sql(
                f"SELECT {cast} FROM runs WHERE id = '{run_id}'"
            ).scalar_one()
            for run_id in (first, second)
        }
    assert "café ☕" in texts[first] and "ü" in texts[second]
