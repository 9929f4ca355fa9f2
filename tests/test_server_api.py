"""The REST API over a real uvicorn server on 127.0.0.1, with httpx, on both stores:
keys and scopes, tenant isolation, the call contract's status codes, problem details,
selection, runs, OODA, the run event stream and the request size limit."""

from __future__ import annotations

import json
import time
from collections.abc import Iterator

import httpx
import pytest

from tests.server_support import XSS_NAME, Seeded, seed, serving
from tooldb import Registry
from tooldb.server import Scope, ServerConfig, create_key


@pytest.fixture
def served(registry: Registry) -> Iterator[tuple[str, Registry, Seeded]]:
    seeded = seed(registry)
    with serving(registry) as url:
        yield url, registry, seeded


def client(url: str, key: str | None) -> httpx.Client:
    headers = {"Authorization": f"Bearer {key}"} if key else {}
    return httpx.Client(base_url=url, headers=headers, timeout=30)


def test_no_key_no_access_and_problem_details(served: tuple[str, Registry, Seeded]) -> None:
    url, _, _ = served
    with client(url, None) as anonymous:
        answer = anonymous.get("/api/tools")
    assert answer.status_code == 401
    assert answer.headers["content-type"] == "application/problem+json"
    body = answer.json()
    assert body["status"] == 401 and body["title"] == "Unauthorized" and "API key" in body["detail"]
    with client(url, "tdb_00000000_not-a-real-key") as forged:
        assert forged.get("/api/tools").status_code == 401


def test_scopes_and_revocation(served: tuple[str, Registry, Seeded]) -> None:
    url, registry, _ = served
    reader = create_key(registry.store, registry.tenant, Scope.READ)
    caller = create_key(registry.store, registry.tenant, Scope.CALL)
    with client(url, reader) as read, client(url, caller) as call:
        assert read.get("/api/tools").status_code == 200
        refused = read.post("/api/tools/add/call", json={"arguments": {"a": 1}})
        assert refused.status_code == 403 and "'read'" in refused.json()["detail"]
        assert read.post("/api/tools/add/disable").status_code == 403
        assert call.post("/api/tools/add/call", json={"arguments": {"a": 1}}).status_code == 200
        assert call.post("/api/tools/add/disable").status_code == 403
    assert registry.get("add").enabled
    prefix = reader.split("_")[1]
    assert registry.store.revoke_api_key(registry.tenant, prefix, 1.0)
    time.sleep(2.1)  # the server trusts a looked-up key for 2 s
    with client(url, reader) as read:
        assert read.get("/api/tools").status_code == 401


def test_every_request_is_scoped_to_the_keys_tenant(served: tuple[str, Registry, Seeded]) -> None:
    url, registry, _ = served
    other = registry.for_tenant("other")
    other.add({"name": "theirs", "target": "tests.sample_tools:noop"})
    mine = create_key(registry.store, registry.tenant, Scope.ADMIN)
    theirs = create_key(registry.store, "other", Scope.ADMIN)
    with client(url, mine) as me, client(url, theirs) as them:
        names = {t["name"] for t in me.get("/api/tools").json()["tools"]}
        assert "add" in names and "theirs" not in names
        assert [t["name"] for t in them.get("/api/tools").json()["tools"]] == ["theirs"]
        assert them.get("/api/tools/add").status_code == 404
        assert them.post("/api/tools/add/disable").status_code == 404
        assert them.get("/api/runs").json()["runs"] == []
    assert registry.get("add").enabled


def test_call_contract_maps_to_status_codes(served: tuple[str, Registry, Seeded]) -> None:
    url, registry, _ = served
    key = create_key(registry.store, registry.tenant, Scope.ADMIN)
    with client(url, key) as api:
        ok = api.post("/api/tools/add/call", json={"arguments": {"a": 2, "b": 40}})
        assert ok.status_code == 200 and ok.json()["success"] is True
        assert ok.json()["data"] == 42 and ok.json()["call_id"] > 0
        failed = api.post("/api/tools/fail/call", json={"arguments": {"message": "kaput"}})
        assert failed.status_code == 200
        assert failed.json()["success"] is False and "kaput" in failed.json()["error"]
        bad = api.post("/api/tools/add/call", json={"arguments": {"a": "x"}})
        assert bad.status_code == 422
        assert bad.headers["content-type"] == "application/problem+json"
        assert bad.json()["parameter"] == "a" and bad.json()["type"].endswith("argument-error")
        missing = api.post("/api/tools/nope/call", json={})
        assert missing.status_code == 404 and "nope" in missing.json()["detail"]
        api.post("/api/tools/echo/disable").raise_for_status()
        disabled = api.post("/api/tools/echo/call", json={"arguments": {"text": "hi"}})
        assert disabled.status_code == 400 and disabled.json()["title"] == "Tool disabled"
        malformed = api.post("/api/tools/add/call", content=b"{not json",
                             headers={"content-type": "application/json"})  # fmt: skip
        assert malformed.status_code == 422
    logged = [(c.tool_name, c.success) for c in registry.calls(limit=5)]
    assert ("add", True) in logged and ("fail", False) in logged


def test_tools_add_show_enable_remove(served: tuple[str, Registry, Seeded]) -> None:
    url, registry, _ = served
    key = create_key(registry.store, registry.tenant, Scope.ADMIN)
    city = {"name": "lookup_city", "kind": "sql", "target": "SELECT 1 AS one", "returns": "scalar"}
    manifest = {"tools": [{**city, "description": "Look up a city."}]}
    with client(url, key) as api:
        python = api.post("/api/tools", json={"name": "x", "target": "os:system"})
        assert python.status_code == 400 and "tooldb add" in python.json()["detail"]
        invalid = api.post("/api/tools", json={"tools": [{"name": "no target", "kind": "sql"}]})
        assert invalid.status_code == 422
        added = api.post("/api/tools", json=manifest)
        assert added.status_code == 201, added.text
        assert added.json()["tools"][0]["status"] == "created"
        shown = api.get("/api/tools/lookup_city").json()
        assert shown["tool"]["version"] == 1 and len(shown["versions"]) == 1
        assert api.post("/api/tools/lookup_city/disable").json() == {
            "name": "lookup_city", "enabled": False,
        }  # fmt: skip
        listed = {t["name"] for t in api.get("/api/tools").json()["tools"]}
        assert "lookup_city" not in listed
        everything = api.get("/api/tools", params={"include_disabled": True}).json()["tools"]
        assert "lookup_city" in {t["name"] for t in everything}
        api.post("/api/tools/lookup_city/enable").raise_for_status()
        assert api.delete("/api/tools/lookup_city").status_code == 200
        assert api.get("/api/tools/lookup_city").status_code == 404
        stats = {t["name"]: t for t in api.get("/api/stats").json()["tools"]}
        assert stats["flaky"]["usage_count"] == 300 and stats["flaky"]["enabled"] is False
        assert XSS_NAME in stats


def test_select_runs_trace_calls_and_ooda(served: tuple[str, Registry, Seeded]) -> None:
    url, registry, seeded = served
    key = create_key(registry.store, registry.tenant, Scope.ADMIN)
    with client(url, key) as api:
        chosen = api.post("/api/select", json={"task": "add two numbers", "k": 3}).json()
        top = chosen["candidates"][0]
        assert top["name"] == "add"
        assert {"dense", "lexical", "relevance", "success", "latency", "final"} <= set(top)
        assert chosen["decision_id"] is not None
        assert api.post("/api/select", json={"task": "", "k": 3}).status_code == 400
        partial = api.get("/api/runs", params={"status": "partial"}).json()["runs"]
        assert [r["id"] for r in partial] == [seeded.partial_run]
        review = api.get("/api/runs", params={"review": True}).json()["runs"]
        assert seeded.partial_run in {r["id"] for r in review}
        assert seeded.success_run not in {r["id"] for r in review}
        assert api.get("/api/runs", params={"status": "nonsense"}).status_code == 422
        run = api.get(f"/api/runs/{seeded.success_run}").json()
        assert [m["role"] for m in run["messages"]] == ["user", "assistant", "tool", "assistant"]
        assert [c["tool_name"] for c in run["calls"]] == ["add"]
        trace = api.get(f"/api/runs/{seeded.success_run}/trace").json()
        assert {n["label"] for n in trace["graph"]["nodes"]} >= {"Run", "ToolCall", "ToolResult"}
        call_id = run["calls"][0]["id"]
        assert api.get(f"/api/calls/{call_id}/explain").json()["call"]["tool"] == "add"
        assert api.get("/api/calls", params={"tool": "add"}).json()["calls"]
        acts = api.get("/api/ooda/history").json()["acts"]
        assert [(a["tool"], a["action"]) for a in acts] == [("flaky", "disable")]
        assert "findings" in api.get("/api/ooda/findings").json()
        dry = api.post("/api/ooda/cycle", params={"dry_run": True}).json()
        assert dry["dry_run"] is True
        undone = api.post(f"/api/ooda/acts/{seeded.act_id}/undo").json()
        assert undone["action"] == "enable" and undone["reverses"] == seeded.act_id
        assert api.post(f"/api/ooda/acts/{seeded.act_id}/undo").status_code == 400
    assert registry.get("flaky").enabled


def test_run_events_stream_replays_and_ends(served: tuple[str, Registry, Seeded]) -> None:
    url, registry, seeded = served
    key = create_key(registry.store, registry.tenant, Scope.READ)
    events: list[tuple[str, dict[str, object]]] = []
    with client(url, key) as api:
        with api.stream("GET", f"/api/runs/{seeded.success_run}/events") as stream:
            assert stream.headers["content-type"].startswith("text/event-stream")
            kind = ""
            for line in stream.iter_lines():
                if line.startswith("event: "):
                    kind = line[7:]
                elif line.startswith("data: "):
                    events.append((kind, json.loads(line[6:])))
        assert api.get("/api/runs/nope/events").status_code == 404
    kinds = [k for k, _ in events]
    assert kinds.count("message") == 4 and kinds.count("call") == 1
    assert events[-1] == ("end", {"run_id": seeded.success_run, "status": "success"})


def test_request_size_limit_and_closed_cors(registry: Registry) -> None:
    key = create_key(registry.store, registry.tenant, Scope.ADMIN)
    registry.add({"name": "noop", "target": "tests.sample_tools:noop"})
    with serving(registry, ServerConfig(max_body_bytes=2048)) as url, client(url, key) as api:
        big = api.post("/api/tools", json={"tools": [{"name": "x" * 4000}]})
        assert big.status_code == 413 and big.json()["title"] == "Request too large"

        def chunks() -> Iterator[bytes]:
            yield b'{"arguments": {"text": "'
            for _ in range(10):
                yield b"y" * 1000
            yield b'"}}'

        streamed = api.post("/api/tools/noop/call", content=chunks(),
                            headers={"content-type": "application/json"})  # fmt: skip
        assert streamed.status_code == 413
        preflight = api.options("/api/tools", headers={
            "Origin": "http://elsewhere.test", "Access-Control-Request-Method": "GET"})  # fmt: skip
        assert "access-control-allow-origin" not in preflight.headers
    config = ServerConfig(cors_origins=["http://ui.test"])
    with serving(registry, config) as url, client(url, key) as api:
        allowed = api.get("/api/tools", headers={"Origin": "http://ui.test"})
        assert allowed.headers["access-control-allow-origin"] == "http://ui.test"
        other = api.get("/api/tools", headers={"Origin": "http://elsewhere.test"})
        assert "access-control-allow-origin" not in other.headers


def test_no_auth_only_on_loopback(registry: Registry) -> None:
    from tooldb.errors import UsageError

    with pytest.raises(UsageError, match="loopback"):
        create_app_for(registry, ServerConfig(host="0.0.0.0", no_auth=True))
    with serving(registry, ServerConfig(no_auth=True)) as url, client(url, None) as api:
        assert api.get("/api/tools").status_code == 200
        assert api.get("/api/openapi.json").json()["info"]["title"] == "tooldb"
        docs = api.get("/docs")
        assert docs.status_code == 200 and "/static/swagger-ui/swagger-ui-bundle.js" in docs.text
        assert "cdn" not in docs.text and api.get("/static/swagger-ui/swagger-ui.css").is_success


def create_app_for(registry: Registry, config: ServerConfig) -> object:
    from tooldb.server import create_app

    return create_app(registry, config)


def test_run_events_stream_live(served: tuple[str, Registry, Seeded]) -> None:
    """A subscriber to a running run gets each message and call as it is written, then
    the end, without waiting for the run to finish first."""
    url, registry, _ = served
    key = create_key(registry.store, registry.tenant, Scope.READ)
    run_id = "live-run"
    registry.store.create_run(
        {"id": run_id, "tenant": registry.tenant, "parent_run_id": None, "agent": None,
         "mode": "router", "model": None, "task": "live", "status": "running", "metadata": {},
         "started_at": time.time(), "owner": "test", "lease_expires_at": time.time() + 600}
    )  # fmt: skip
    registry.store.append_run_messages(
        run_id, [(0, 0, "user", json.dumps({"role": "user", "content": "live"}))]
    )
    seen: list[tuple[str, float]] = []
    with client(url, key) as api, api.stream("GET", f"/api/runs/{run_id}/events") as stream:
        kind = ""
        for line in stream.iter_lines():
            if line.startswith("event: "):
                kind = line[7:]
                seen.append((kind, time.monotonic()))
                if kind == "message" and len(seen) == 1:  # the run goes on meanwhile
                    registry.call("add", {"a": 1}, run_id=run_id)
                elif kind == "call":
                    registry.store.finish_run(
                        run_id,
                        {"status": "success", "output": "2", "data": None, "error": None,
                         "requires_review": False, "review_reason": None, "iterations": 1,
                         "tool_calls": 1, "input_tokens": 0, "output_tokens": 0,
                         "ended_at": time.time()},
                    )  # fmt: skip
            elif line.startswith("data: ") and kind == "end":
                assert json.loads(line[6:])["status"] == "success"
    assert [kind for kind, _ in seen] == ["message", "call", "end"]


def test_sql_tools_cannot_read_the_key_hashes(registry: Registry) -> None:
    """api_keys is no tenant's data: SQL tools over the registry cannot read it at all."""
    create_key(registry.store, registry.tenant, Scope.ADMIN)
    registry.add({"name": "peek", "kind": "sql", "returns": "table",
                  "target": "SELECT key_hash FROM api_keys"})  # fmt: skip
    result = registry.call("peek", {})
    assert not result.success and result.data is None and result.error


def test_dashboard_aggregates_on_the_store(registry: Registry) -> None:
    """The store's reads behind the tools table: calls per day and the recent median,
    for the named tools of the tenant only."""
    from tests.ooda_support import DAY, log_calls, tool_spec
    from tooldb.server.views import week_start

    registry.add(tool_spec("a"), tool_spec("b"))
    since = week_start()
    log_calls(registry, "a", [True] * 3, start=since + 0.1 * DAY, end=since + 0.9 * DAY,
              durations=[5.0, 1.0, 9.0])  # fmt: skip
    log_calls(registry, "a", [False] * 2, start=since + 6.1 * DAY, end=since + 6.2 * DAY,
              durations=[100.0, 200.0])  # fmt: skip
    log_calls(registry, "a", [True], start=since - 3 * DAY, end=since - 2 * DAY)  # before
    other = registry.for_tenant("other")
    other.add(tool_spec("a"))
    log_calls(other, "a", [True] * 4, start=since + DAY, end=since + 1.5 * DAY)
    days = registry.store.calls_per_day(registry.tenant, ["a", "b"], since, 7)
    assert days == {"a": [3, 0, 0, 0, 0, 0, 2], "b": [0] * 7}
    medians = registry.store.recent_p50_ms(registry.tenant, ["a", "b"], last=3)
    assert medians == {"a": 100.0, "b": None}  # the last three: 9, 100, 200
    assert registry.store.recent_p50_ms(registry.tenant, [], last=3) == {}
