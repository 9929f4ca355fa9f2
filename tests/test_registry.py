"""Registry behaviour on both stores: registration, versions, tenants, management, calls."""

from __future__ import annotations

import pytest

import tooldb
from tests import sample_tools
from tooldb import (
    ArgumentError,
    DefinitionError,
    ErrorKind,
    NotFound,
    Registry,
    Settings,
    ToolDisabled,
    ToolSpec,
)

HOSTILE = "'; DROP TABLE tools; -- \" ` $(rm -rf /) 🙂 ünï"


def test_add_module_registers_every_decorated_tool(registry: Registry) -> None:
    outcomes = registry.add_module("tests.sample_tools")
    names = {o.record.name for o in outcomes}
    assert {"add", "echo", "fail", "noop", "sleep_async", "sleep_sync"} <= names
    assert all(o.status == "created" for o in outcomes)
    add = registry.get("add")
    assert add.spec.target == "tests.sample_tools:add"
    assert add.spec.parameters["required"] == ["a"]
    assert add.spec.parameters["properties"]["b"]["default"] == 1
    assert add.spec.category == "math"


def test_call_binds_defaults_coerces_and_records(registry: Registry) -> None:
    registry.add(sample_tools.add)
    result = registry.call("add", {"a": "41"})
    assert result.success and result.data == 42 and result.output == "42"
    assert result.error is None and result.duration_ms >= 0 and result.call_id is not None
    [record] = registry.calls()
    assert record.id == result.call_id
    assert record.arguments == {"a": 41, "b": 1}
    assert record.success and record.tool_version == 1 and record.tenant == "default"
    assert record.output_size == 2 and record.session_id == registry.recorder.session_id
    stats = registry.get("add").stats
    assert stats.usage_count == 1 and stats.success_count == 1 and stats.last_used is not None


def test_failing_tool_returns_failed_result_and_counts(registry: Registry) -> None:
    registry.add(sample_tools.fail)
    result = registry.call("fail", {"message": "disk on fire"})
    assert not result.success
    assert result.error == "RuntimeError: disk on fire"
    [record] = registry.calls(tool="fail")
    assert record.error_kind is ErrorKind.EXECUTION
    stats = registry.get("fail").stats
    assert stats.usage_count == 1 and stats.success_count == 0 and stats.success_rate == 0.0


def test_argument_errors_raise_are_logged_but_not_counted(registry: Registry) -> None:
    registry.add(sample_tools.add)
    with pytest.raises(ArgumentError) as caught:
        registry.call("add", {"a": "many"})
    message = str(caught.value)
    assert "'add'" in message and "'a'" in message and "integer" in message and "many" in message
    assert caught.value.parameter == "a"
    [record] = registry.calls()
    assert record.error_kind is ErrorKind.ARGUMENTS and not record.success
    assert registry.get("add").stats.usage_count == 0


def test_unknown_extra_arguments_are_rejected(registry: Registry) -> None:
    registry.add(sample_tools.add)
    with pytest.raises(ArgumentError, match="unknown parameter 'c'"):
        registry.call("add", {"a": 1, "c": 2})


def test_malformed_json_arguments(registry: Registry) -> None:
    registry.add(sample_tools.add)
    with pytest.raises(ArgumentError, match="not valid JSON"):
        registry.call("add", '{"a": 1')
    with pytest.raises(ArgumentError, match="must be a JSON object"):
        registry.call("add", "[1, 2]")


def test_unknown_and_disabled_tools(registry: Registry) -> None:
    with pytest.raises(NotFound, match="no tool named 'ghost'"):
        registry.call("ghost")
    registry.add(sample_tools.add)
    registry.disable("add")
    with pytest.raises(ToolDisabled, match="disabled"):
        registry.call("add", {"a": 1})
    assert registry.list() == []
    assert [t.name for t in registry.list(include_disabled=True)] == ["add"]
    registry.enable("add")
    assert registry.call("add", {"a": 1}).success
    for action in (registry.enable, registry.disable, registry.remove, registry.get):
        with pytest.raises(NotFound):
            action("ghost")


def test_changed_definition_creates_version_and_old_stays_queryable(registry: Registry) -> None:
    first = registry.add(sample_tools.add)[0]
    again = registry.add(sample_tools.add)[0]
    assert (first.status, again.status) == ("created", "unchanged")
    assert again.record.version == 1
    changed = ToolSpec(**{**first.record.spec.model_dump(), "description": "Add, better."})
    updated = registry.add(changed)[0]
    assert updated.status == "updated" and updated.record.version == 2
    versions = registry.versions("add")
    assert [v.version for v in versions] == [1, 2]
    assert versions[0].spec.description == "Add two integers."
    assert versions[0].content_hash == first.record.content_hash
    assert versions[1].content_hash != versions[0].content_hash
    assert registry.version("add", 1).spec == first.record.spec
    with pytest.raises(NotFound):
        registry.version("add", 9)
    # statistics belong to the tool and survive new versions; calls say which version ran
    registry.call("add", {"a": 1})
    assert registry.calls()[0].tool_version == 2


def test_remove_keeps_call_log(registry: Registry) -> None:
    registry.add(sample_tools.add)
    registry.call("add", {"a": 1})
    registry.remove("add")
    with pytest.raises(NotFound):
        registry.get("add")
    assert [c.tool_name for c in registry.calls()] == ["add"]
    # re-adding starts a fresh tool
    assert registry.add(sample_tools.add)[0].record.version == 1


def test_tenants_see_nothing_of_each_other(store_url: str) -> None:
    settings = Settings(embedder="hash", url=store_url)
    with (
        tooldb.open(store_url, "acme", settings=settings) as acme,
        tooldb.open(store_url, "globex", settings=settings) as globex,
    ):
        acme.add(sample_tools.add)
        assert acme.call("add", {"a": 1}).success
        assert globex.list(include_disabled=True) == []
        assert globex.calls() == []
        for attempt in (
            lambda: globex.call("add", {"a": 1}),
            lambda: globex.get("add"),
            lambda: globex.disable("add"),
            lambda: globex.remove("add"),
            lambda: globex.versions("add"),
        ):
            with pytest.raises(NotFound, match="tenant 'globex'"):
                attempt()
        # the same name in another tenant is a different tool
        globex.add(
            {"name": "add", "target": "tests.sample_tools:echo", "parameters": {"text": "string"}}
        )
        assert globex.call("add", {"text": "hi"}).output == "hi"
        assert acme.call("add", {"a": 1}).data == 2
        assert acme.get("add").stats.usage_count == 2
        assert globex.get("add").stats.usage_count == 1


def test_hostile_text_is_stored_and_returned_verbatim(registry: Registry) -> None:
    spec = ToolSpec(
        name=f"odd {HOSTILE}",
        description=HOSTILE,
        category=f"cat {HOSTILE}",
        target="tests.sample_tools:echo",
        parameters={"text": {"type": "string", "required": True, "description": HOSTILE}},
        metadata={"note": HOSTILE},
    )
    registry.add(spec)
    stored = registry.get(spec.name)
    assert stored.spec.description == HOSTILE and stored.spec.category == f"cat {HOSTILE}"
    assert stored.spec.metadata == {"note": HOSTILE}
    result = registry.call(spec.name, {"text": HOSTILE})
    assert result.output == HOSTILE
    assert registry.calls()[0].arguments == {"text": HOSTILE}
    assert [t.name for t in registry.list(category=f"cat {HOSTILE}")] == [spec.name]
    assert registry.get(spec.name).stats.usage_count == 1  # the tools table is still there


def test_huge_and_odd_strings_are_recorded(registry: Registry) -> None:
    registry.add(sample_tools.echo)
    big = "x" * 1_000_000
    result = registry.call("echo", {"text": big})
    assert result.success and len(result.output) == 1_000_000
    record = registry.calls()[0]
    assert record.output_size == 1_000_000
    assert record.arguments == {"text": big}
    assert record.output_preview is not None and len(record.output_preview) == 4096
    odd = "nul\x00 and lone \ud800 surrogate"
    result = registry.call("echo", {"text": odd})
    assert result.success and result.output == odd
    assert registry.calls()[0].arguments == {"text": odd}


def test_invalid_names_are_rejected(registry: Registry) -> None:
    for bad in ("", "  padded ", "tab\tname", "x" * 300):
        with pytest.raises((DefinitionError, ValueError)):
            registry.add({"name": bad, "target": "tests.sample_tools:noop"})


def test_registration_checks_target_and_kind(registry: Registry) -> None:
    with pytest.raises(DefinitionError, match="cannot import"):
        registry.add({"name": "x", "target": "no.such.module:f"})
    with pytest.raises(DefinitionError, match="no attribute"):
        registry.add({"name": "x", "target": "tests.sample_tools:missing"})
    with pytest.raises(DefinitionError, match="target must be an agent's name"):
        registry.add({"name": "x", "kind": "agent", "target": "help\x07er"})
    assert registry.list(include_disabled=True) == []


def test_registration_is_all_or_nothing(registry: Registry) -> None:
    good = {"name": "good", "target": "tests.sample_tools:noop"}
    bad = {"name": "bad", "target": "tests.sample_tools:nothing_here"}
    with pytest.raises(DefinitionError):
        registry.add(good, bad)
    assert registry.list(include_disabled=True) == []


def test_local_function_is_callable_in_process(registry: Registry) -> None:
    def shout(text: str) -> str:
        """Upper-case a text."""
        return text.upper()

    record = registry.add_function(shout, category="text")
    assert record.spec.category == "text"
    assert registry.call("shout", {"text": "hi"}).output == "HI"


def test_manifest_parameters_are_authoritative(registry: Registry) -> None:
    registry.add(
        {
            "name": "plus_ten",
            "target": "tests.sample_tools:add",
            "parameters": {
                "a": {"type": "int", "required": True},
                "b": {"type": "int", "default": 10},
            },
        }
    )
    assert registry.call("plus_ten", {"a": 5}).data == 15


def test_calls_filters_and_limit(registry: Registry) -> None:
    registry.add(sample_tools.add, sample_tools.echo)
    for i in range(5):
        registry.call("add", {"a": i}, run_id="run-1" if i < 2 else None)
    registry.call("echo", {"text": "hi"})
    assert len(registry.calls(limit=3)) == 3
    assert [c.tool_name for c in registry.calls(limit=1)] == ["echo"]
    assert len(registry.calls(tool="add", limit=100)) == 5
    assert {c.arguments["a"] for c in registry.calls(run_id="run-1")} == {0, 1}
    with pytest.raises(tooldb.UsageError):
        registry.calls(limit=-1)


def test_reopen_sees_everything(store_url: str) -> None:
    settings = Settings(embedder="hash", url=store_url)
    with tooldb.open(store_url, settings=settings) as first:
        first.add(sample_tools.add)
        first.call("add", {"a": 1})
    with tooldb.open(store_url, settings=settings) as second:
        assert second.get("add").stats.usage_count == 1
        assert len(second.calls()) == 1


def test_get_many_reads_tools_in_one_go_and_skips_unknown_names(registry: Registry) -> None:
    registry.add(*[
        {"name": f"t{i}", "description": f"tool {i}", "target": "tests.sample_tools:echo"}
        for i in range(600)
    ])  # fmt: skip
    registry.disable("t3")
    names = [f"t{i}" for i in range(600)] + ["ghost", "t1"]  # more than one chunk; a repeat
    found = registry.get_many(names)
    assert len(found) == 600 and "ghost" not in found
    assert found["t3"].enabled is False and found["t599"].spec.description == "tool 599"
    assert registry.get_many([]) == {}
    # the same records as one-by-one reads: spec (JSON columns decoded), state, stats
    registry.add({
        "name": "t7", "description": "tool 7 ü", "target": "tests.sample_tools:echo",
        "parameters": {"text": {"type": "string"}}, "metadata": {"owner": "ops"},
        "timeout_s": 2.5,
    })  # fmt: skip
    registry.call("t7", {"text": "hi"})
    fresh = registry.get_many(["t7", "t3"])
    assert fresh["t7"] == registry.get("t7") and fresh["t7"].stats.usage_count == 1
    assert fresh["t3"] == registry.get("t3")
    assert fresh["t7"].spec.parameters["properties"]["text"]["type"] == "string"
    assert fresh["t7"].spec.metadata == {"owner": "ops"} and fresh["t7"].version == 2


def test_tools_read_for_a_toolbox_are_bound_at_their_first_call(
    registry: Registry, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A run reads the offered tools' records in one go and may call one of them: each
    binder is made at the tool's first call, from the kept record (no second read)."""
    import tooldb.registry.calls

    registry.add(*[
        {"name": f"t{i}", "description": f"tool {i}", "target": "tests.sample_tools:echo",
         "parameters": {"text": {"type": "string"}}}
        for i in range(8)
    ])  # fmt: skip
    made: list[str] = []
    real = tooldb.registry.calls.Binder
    monkeypatch.setattr(
        tooldb.registry.calls,
        "Binder",
        lambda name, schema: made.append(name) or real(name, schema),
    )
    assert len(registry.current_tools([f"t{i}" for i in range(8)])) == 8
    assert made == []
    reads: list[str] = []
    monkeypatch.setattr(registry.store, "get_tool", lambda *args: reads.append(args[1]) or None)
    assert registry.call("t5", {"text": "hi"}).output == "hi"
    assert registry.call("t5", {"text": "again"}).output == "again"
    assert made == ["t5"] and reads == []
    with pytest.raises(ArgumentError, match="'text' expected string"):
        registry.call("t5", {"text": 3})  # the binder made at the first call checks


def test_a_mixed_batch_keeps_order_and_statuses(registry: Registry) -> None:
    """New tools go in as one multi-row insert; existing ones the careful way: the
    outcomes still come back in the batch's order, and everything is searchable."""
    registry.add({"name": "old", "description": "old tool", "target": "tests.sample_tools:echo"})
    registry.add({"name": "same", "description": "same tool", "target": "tests.sample_tools:echo"})
    batch = [
        {"name": "new1", "description": "first new tool", "target": "tests.sample_tools:echo"},
        {"name": "old", "description": "old tool, changed", "target": "tests.sample_tools:echo"},
        {"name": "same", "description": "same tool", "target": "tests.sample_tools:echo"},
        {"name": "new2", "description": "second new tool", "target": "tests.sample_tools:echo"},
    ]
    outcomes = registry.add(*batch)
    assert [(o.record.name, o.status) for o in outcomes] == [
        ("new1", "created"), ("old", "updated"), ("same", "unchanged"), ("new2", "created"),
    ]  # fmt: skip
    assert outcomes[0].record.version == 1 and outcomes[1].record.version == 2
    assert [v.version for v in registry.versions("new2")] == [1]
    assert registry.select("second new tool", 1).names == ["new2"]
    assert registry.get("new1").spec.description == "first new tool"
    twice = registry.add(
        {"name": "dup", "description": "a", "target": "tests.sample_tools:echo"},
        {"name": "dup", "description": "b", "target": "tests.sample_tools:echo"},
    )
    assert [(o.status, o.record.version) for o in twice] == [("created", 1), ("updated", 2)]
