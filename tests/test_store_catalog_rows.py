"""The store's skill and agent rows (issue 30: the tenant_filters mutation group): read,
enabled and removed in their tenant only, each kind with its own versions, assignment rows
written whole with their priority, access and configuration. Both stores."""

from __future__ import annotations

import time

import tests.sample_tools as st
from tooldb import Registry


def test_skills_and_agents_are_read_and_removed_in_their_tenant(registry: Registry) -> None:
    store, tenant = registry.store, registry.tenant
    row = {"name": "helper", "definition": {"name": "helper"}, "content_hash": "h1"}
    assert store.put_agent(tenant, row) == (1, True)
    assert store.put_agent(tenant, row) == (1, False)
    assert store.put_agent(tenant, {**row, "content_hash": "h2"}) == (2, True)
    assert store.put_agent("other", row) == (1, True)  # its own version line
    mine = store.get_agent(tenant, "helper")
    assert mine is not None and mine["version"] == 2 and mine["tenant"] == tenant
    assert store.get_agent(tenant, "nobody") is None
    assert store.remove_agent("third", "helper") is False
    assert store.remove_agent("other", "helper") is True
    assert store.get_agent("other", "helper") is None
    assert store.get_agent(tenant, "helper") is not None
    assert [a["name"] for a in store.list_agents(tenant)] == ["helper"]
    assert store.list_agents("other") == []


def test_removing_a_skill_takes_its_links_and_versions_and_nothing_else(
    registry: Registry,
) -> None:
    store, tenant = registry.store, registry.tenant
    registry.add(st.echo, st.add)
    other = registry.for_tenant("other")
    other.add(st.echo)
    registry.add_skill({"name": "a", "description": "A.", "tools": ["echo"]})
    registry.add_skill({"name": "b", "description": "B.", "tools": ["echo", "add"]})
    other.add_skill({"name": "a", "description": "Theirs.", "tools": ["echo"]})
    assert store.remove_skill(tenant, "a")
    assert store.catalog_links("skill", tenant, "a") == []
    assert store.catalog_versions("skill", tenant, "a") == []
    assert [r["tool"] for r in store.catalog_links("skill", tenant, "b")] == ["echo", "add"]
    assert (
        registry.skill("b").description == "B."
        and len(store.catalog_versions("skill", tenant, "b")) == 1
    )
    assert [r["tool"] for r in store.catalog_links("skill", "other", "a")] == ["echo"]
    assert len(store.catalog_versions("skill", "other", "a")) == 1
    assert other.skill("a").description == "Theirs."


def test_an_agent_row_keeps_its_skills_version_and_flag(registry: Registry) -> None:
    store, tenant = registry.store, registry.tenant
    definition = {"name": "helper", "skills": ["s1", "s2"]}
    row = {"name": "helper", "definition": definition, "content_hash": "h1"}
    assert store.put_agent(tenant, row, (False, "missing: s1")) == (1, True)
    agent = store.get_agent(tenant, "helper")
    assert agent is not None and (agent["enabled"], agent["disabled_reason"]) == (
        False,
        "missing: s1",
    )
    assert [r["skill"] for r in store.catalog_links("agent", tenant, "helper")] == ["s1", "s2"]
    (version,) = store.catalog_versions("agent", tenant, "helper")
    assert version["definition"] == definition


def test_a_skill_missing_a_tool_is_stored_disabled_then_enabled(registry: Registry) -> None:
    store, tenant = registry.store, registry.tenant
    definition = {"name": "s", "description": "S.", "tools": ["echo"]}
    registry.add_skill(definition, allow_missing=True)
    registry.for_tenant("other").add_skill(definition, allow_missing=True)
    row = store.get_skill(tenant, "s")
    assert row is not None and (row["enabled"], row["disabled_reason"]) == (
        False,
        "missing: tool 'echo'",
    )
    (version,) = store.catalog_versions("skill", tenant, "s")
    assert version["definition"]["name"] == "s" and "content_hash" not in version["definition"]
    registry.add(st.echo)
    registry.add_skill(definition)  # the same definition, complete now: enabled again
    row = store.get_skill(tenant, "s")
    assert row is not None and (row["enabled"], row["disabled_reason"]) == (True, None)
    assert len(store.catalog_versions("skill", tenant, "s")) == 1  # unchanged: no new version
    theirs = store.get_skill("other", "s")
    assert theirs is not None and not theirs["enabled"]  # only this tenant's row changed


def test_assignment_rows_keep_priority_access_and_config(registry: Registry) -> None:
    """An agent's skill rows carry each assignment's priority and configuration (an
    unlisted one: 0 and {}); a skill's tool rows carry access, priority and configuration
    (a tool given by name only: execute, 0, {})."""
    store, tenant = registry.store, registry.tenant
    definition = {
        "name": "helper",
        "skills": ["s1", "s2", "s3"],
        "skill_assignments": [
            {"name": "s1", "priority": 5, "config": {"depth": 2}},
            {"name": "s3", "priority": -1},
        ],
    }
    store.put_agent(tenant, {"name": "helper", "definition": definition, "content_hash": "h"})
    links = store.catalog_links("agent", tenant, "helper")
    assert [(r["skill"], r["position"], r["priority"], r["config"]) for r in links] == [
        ("s1", 0, 5, {"depth": 2}),
        ("s2", 1, 0, {}),
        ("s3", 2, -1, {}),
    ]
    plain = {"name": "plain", "skills": ["s1"], "skill_assignments": None}
    store.put_agent(tenant, {"name": "plain", "definition": plain, "content_hash": "p"})
    (link,) = store.catalog_links("agent", tenant, "plain")
    assert (link["skill"], link["priority"], link["config"], link["tenant"]) == (
        "s1",
        0,
        {},
        tenant,
    )
    tools = [
        {"name": "echo", "access": "read", "priority": 7, "config": {"limit": 3}},
        {"name": "add"},
    ]
    skill = {
        "name": "s", "description": "S.", "instructions": "", "parent": None,
        "depends_on": [], "optional_dependencies": [], "tools": tools, "active": True,
        "metadata": {}, "content_hash": "s1",
    }  # fmt: skip
    store.put_skill(tenant, skill)
    rows = store.catalog_links("skill", tenant, "s")
    assert [
        (r["tool"], r["position"], r["access"], r["priority"], r["config"], r["skill"])
        for r in rows
    ] == [("echo", 0, "read", 7, {"limit": 3}, "s"), ("add", 1, "execute", 0, {}, "s")]
    assert store.catalog_links("skill", "other", "s") == []
    assert store.catalog_links("agent", "other", "helper") == []


def test_an_agent_registered_with_prioritised_skills_stores_them(registry: Registry) -> None:
    """``skills: [{name, priority, config}, name]`` through the registry: the rows hold
    the priorities and configuration as written (docs/agents.md)."""
    registry.add(st.echo)
    for name in ("s1", "s2"):
        registry.add_skill({"name": name, "description": f"{name}.", "tools": ["echo"]})
    registry.add_agent(
        {"name": "helper", "skills": ["s2", {"name": "s1", "priority": 4, "config": {"x": 1}}]}
    )
    links = registry.store.catalog_links("agent", registry.tenant, "helper")
    assert [(r["skill"], r["priority"], r["config"]) for r in links] == [
        ("s1", 4, {"x": 1}),
        ("s2", 0, {}),
    ]


def test_enabling_and_disabling_touch_one_definition_of_one_tenant(registry: Registry) -> None:
    """set_catalog_enabled: the named skill or agent of this tenant only; a reason kept
    only while disabled; False when there is no such definition."""
    store, tenant = registry.store, registry.tenant
    for owner in (tenant, "other"):
        for name in ("a", "b"):
            row = {"name": name, "definition": {"name": name}, "content_hash": name}
            store.put_agent(owner, row)

    def flags(owner: str) -> list[tuple[str, bool, str | None]]:
        return [(a["name"], a["enabled"], a["disabled_reason"]) for a in store.list_agents(owner)]

    assert store.set_catalog_enabled("agent", tenant, "a", (False, "by hand")) is True
    assert flags(tenant) == [("a", False, "by hand"), ("b", True, None)]
    assert flags("other") == [("a", True, None), ("b", True, None)]
    assert store.set_catalog_enabled("agent", tenant, "a", (True, "ignored")) is True
    assert flags(tenant) == [("a", True, None), ("b", True, None)]
    assert store.set_catalog_enabled("agent", tenant, "nobody", (False, "x")) is False
    assert store.set_catalog_enabled("agent", "third", "a", (False, "x")) is False
    assert flags("other") == [("a", True, None), ("b", True, None)]
    registry.add(st.echo)
    registry.add_skill({"name": "s", "description": "S.", "tools": ["echo"]})
    assert store.set_catalog_enabled("skill", tenant, "s", (False, "off")) is True
    skill = store.get_skill(tenant, "s")
    assert skill is not None and (skill["enabled"], skill["disabled_reason"]) == (False, "off")


def test_skill_search_rows_are_the_tenants_enabled_active_skills(registry: Registry) -> None:
    """What skill selection reads: name, description, the instructions' first characters
    and the content hash of this tenant's enabled, active skills, by name."""
    store, tenant = registry.store, registry.tenant
    registry.add(st.echo)
    for skill in (
        {"name": "b", "description": "B.", "instructions": "abcdefgh", "tools": ["echo"]},
        {"name": "a", "description": "A.", "instructions": "xyz"},
        {"name": "off", "description": "Off.", "instructions": "o"},
        {"name": "idle", "description": "Idle.", "active": False},
    ):
        registry.add_skill(skill)
    store.set_catalog_enabled("skill", tenant, "off", (False, "by hand"))
    registry.for_tenant("other").add_skill({"name": "c", "description": "C."})
    hashes = {name: registry.skill(name).content_hash() for name in ("a", "b")}
    assert store.skill_search_rows(tenant, 5) == [
        {"name": "a", "description": "A.", "instructions": "xyz", "content_hash": hashes["a"]},
        {"name": "b", "description": "B.", "instructions": "abcde", "content_hash": hashes["b"]},
    ]
    assert [r["name"] for r in store.skill_search_rows("other", 5)] == ["c"]


def test_a_skill_and_an_agent_of_one_name_keep_their_own_versions(registry: Registry) -> None:
    """Versions are per kind: reading or removing the skill ``helper`` leaves the agent
    ``helper``'s versions alone."""
    store, tenant = registry.store, registry.tenant
    registry.add(st.echo)
    registry.add_skill({"name": "helper", "description": "Skill.", "tools": ["echo"]})
    for content in ("h1", "h2"):
        row = {"name": "helper", "definition": {"name": "helper"}, "content_hash": content}
        store.put_agent(tenant, row)
    (skill_version,) = store.catalog_versions("skill", tenant, "helper")
    assert skill_version["kind"] == "skill"
    agent_versions = store.catalog_versions("agent", tenant, "helper")
    assert [(v["kind"], v["version"]) for v in agent_versions] == [("agent", 1), ("agent", 2)]
    assert store.remove_skill(tenant, "helper")
    assert store.catalog_versions("skill", tenant, "helper") == []
    assert len(store.catalog_versions("agent", tenant, "helper")) == 2
    assert store.get_agent(tenant, "helper") is not None


def test_a_changed_definition_gets_its_new_time_and_flag(registry: Registry) -> None:
    """A new version stamps ``updated_at`` (``created_at`` stays) and applies the flag
    given with it."""
    store, tenant = registry.store, registry.tenant
    row = {"name": "helper", "definition": {"name": "helper"}, "content_hash": "h1"}
    store.put_agent(tenant, row)
    before = time.time()
    assert store.put_agent(tenant, {**row, "content_hash": "h2"}, (False, "missing: s")) == (
        2,
        True,
    )
    agent = store.get_agent(tenant, "helper")
    assert agent is not None
    assert agent["created_at"] < before <= agent["updated_at"]
    assert (agent["enabled"], agent["disabled_reason"]) == (False, "missing: s")
