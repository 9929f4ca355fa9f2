"""HTTP tools against a real server on 127.0.0.1, on both stores: mapping of arguments,
responses, auth, and the hostile cases (SSRF, path and header injection, redirects,
slow and huge answers)."""

from __future__ import annotations

import asyncio
import ipaddress
import json
import socket
import time
import urllib.parse
from pathlib import Path
from typing import Any

import pytest
import sqlalchemy as sa
from hypothesis import given, settings
from hypothesis import strategies as st

import tooldb
from tooldb import DefinitionError, ErrorKind, Registry, Settings, ToolSpec
from tooldb.examples.pets_server import PetsServer
from tooldb.executors.http_guard import is_public
from tooldb.executors.http_plan import build_request, parse_plan
from tooldb.stores.schema import metadata as schema_metadata


def http_tool(name: str, target: str, parameters: Any = None, **metadata: Any) -> dict[str, Any]:
    return {
        "name": name,
        "kind": "http",
        "target": target,
        "parameters": parameters or {},
        "metadata": metadata,
    }


def all_rows_text(registry: Registry) -> str:
    """Every row of every registry table, as text: what a leak would look like."""
    engine: sa.Engine = registry.store.engine  # type: ignore[attr-defined]
    with engine.connect() as conn:
        return "\n".join(
            repr(row)
            for table in schema_metadata.sorted_tables
            for row in conn.execute(table.select())
        )


# -- calls and mapping -------------------------------------------------------------------


def test_get_with_path_parameter(http_registry: Registry, pets: PetsServer) -> None:
    http_registry.add(
        http_tool(
            "get_pet",
            f"GET {pets.url}/pets/{{pet_id}}",
            {"pet_id": {"type": "int", "required": True}},
        )
    )
    result = http_registry.call("get_pet", {"pet_id": 1})
    assert result.success, result.error
    assert result.data == {"id": 1, "name": "Rex", "tag": "dog"}
    assert json.loads(result.output) == result.data
    [record] = http_registry.calls()
    assert record.success and record.arguments == {"pet_id": 1}
    assert http_registry.get("get_pet").stats.usage_count == 1


def test_leftover_arguments_go_to_query_for_get_and_body_for_post(
    http_registry: Registry, pets: PetsServer
) -> None:
    params = {"tag": {"type": "string"}, "limit": {"type": "int"}}
    http_registry.add(http_tool("list_pets", f"GET {pets.url}/pets", params))
    http_registry.add(
        http_tool("add_pet", f"POST {pets.url}/pets", {"name": "string", "tag": "string"})
    )
    listed = http_registry.call("list_pets", {"tag": "cat", "limit": 5})
    assert listed.success and listed.data == [{"id": 2, "name": "Tom", "tag": "cat"}]
    assert pets.seen[-1].query == {"tag": ["cat"], "limit": ["5"]}
    created = http_registry.call("add_pet", {"name": "Fido", "tag": "dog"})
    assert created.success and created.data == {"id": 3, "name": "Fido", "tag": "dog"}
    assert pets.seen[-1].json() == {"name": "Fido", "tag": "dog"}
    assert pets.seen[-1].headers["Content-Type"] == "application/json"


def test_explicit_query_headers_body_and_fixed_parts(
    http_registry: Registry, pets: PetsServer
) -> None:
    params = {
        "v": {"type": "string", "required": True},
        "q": "string",
        "trace": "string",
        "name": "string",
        "extra": "int",
        "flags": {"type": "array", "items": {"type": "boolean"}},
    }
    http_registry.add(
        http_tool(
            "mapped",
            f"PUT {pets.url}/echo/{{v}}?fixed=1",
            params,
            query={"q": "search", "flags": "flag"},
            headers={"trace": "X-Trace"},
            body={"name": "pet_name"},
            fixed_headers={"X-Client": "tooldb-tests"},
        )
    )
    args = {
        "v": "a",
        "q": "x&y=z",
        "trace": "t-1",
        "name": "Rex",
        "extra": 7,
        "flags": [True, False],
    }
    result = http_registry.call("mapped", args)
    assert result.success, result.error
    seen = pets.seen[-1]
    assert seen.method == "PUT" and seen.path == "/echo/a"
    assert seen.query == {"fixed": ["1"], "search": ["x&y=z"], "flag": ["true", "false"]}
    assert seen.headers["X-Trace"] == "t-1" and seen.headers["X-Client"] == "tooldb-tests"
    assert seen.json() == {"pet_name": "Rex", "extra": 7}  # extra: a leftover, PUT -> body


def test_single_argument_body_and_form_body(http_registry: Registry, pets: PetsServer) -> None:
    http_registry.add(
        http_tool(
            "raw",
            f"POST {pets.url}/echo/raw",
            {"items": {"type": "array", "required": True}, "page": "int"},
            body="items",
        )
    )
    http_registry.add(
        http_tool(
            "form",
            f"POST {pets.url}/echo/form",
            {"a": "string", "b": "int"},
            body="*",
            body_format="form",
        )
    )
    assert http_registry.call("raw", {"items": [1, "two"], "page": 2}).success
    assert pets.seen[-1].json() == [1, "two"] and pets.seen[-1].query == {"page": ["2"]}
    assert http_registry.call("form", {"a": "x y", "b": 3}).success
    assert pets.seen[-1].body == b"a=x+y&b=3"


def test_responses_text_binary_empty_and_errors(http_registry: Registry, pets: PetsServer) -> None:
    http_registry.add(http_tool("text", f"GET {pets.url}/text"))
    http_registry.add(http_tool("binary", f"GET {pets.url}/binary"))
    http_registry.add(
        http_tool(
            "remove", f"DELETE {pets.url}/pets/{{id}}", {"id": {"type": "int", "required": True}}
        )
    )
    http_registry.add(http_tool("fail", f"GET {pets.url}/fail"))
    text = http_registry.call("text")
    assert text.success and text.output == "plain words, ünï" and text.data == text.output
    binary = http_registry.call("binary")
    assert binary.data == {
        "content_type": "application/octet-stream",
        "size": 8,
        "base64": "AAECAwQFBgc=",
    }
    removed = http_registry.call("remove", {"id": 2})
    assert removed.success and removed.output == "" and removed.data is None
    failed = http_registry.call("fail")
    assert not failed.success
    assert failed.error is not None
    assert failed.error.startswith(f"tool 'fail': GET {pets.url}/fail returned 500")
    assert "database on fire" in failed.error
    missing = http_registry.call("remove", {"id": 2})
    assert not missing.success and "returned 404 Not Found" in (missing.error or "")
    [record, *_] = http_registry.calls(tool="remove")
    assert record.error_kind is ErrorKind.EXECUTION


def test_async_calls_share_one_pooled_connection(http_registry: Registry, pets: PetsServer) -> None:
    http_registry.add(
        http_tool(
            "get_pet",
            f"GET {pets.url}/pets/{{pet_id}}",
            {"pet_id": {"type": "int", "required": True}},
        )
    )
    for _ in range(5):
        assert http_registry.call("get_pet", {"pet_id": 1}).success
    assert pets.state.connections == 1  # keep-alive through the executor's one client

    async def many() -> list[Any]:
        calls = [http_registry.acall("get_pet", {"pet_id": 1 + i % 2}) for i in range(20)]
        return await asyncio.gather(*calls)

    results = asyncio.run(many())
    assert all(r.success for r in results)
    assert {r.data["name"] for r in results} == {"Rex", "Tom"}
    assert len(http_registry.calls(limit=100)) == 25


# -- auth ------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("auth", "via"),
    [
        ({"scheme": "bearer", "secret": "PETS_TOKEN"}, "bearer"),
        (
            {"scheme": "api_key", "in": "header", "name": "X-API-Key", "secret": "PETS_KEY"},
            "header key",
        ),
        (
            {"scheme": "api_key", "in": "query", "name": "api_key", "secret": "PETS_KEY"},
            "query key",
        ),
    ],
)
def test_auth_arrives_and_is_never_stored(
    http_registry: Registry,
    pets: PetsServer,
    monkeypatch: pytest.MonkeyPatch,
    auth: dict[str, str],
    via: str,
) -> None:
    monkeypatch.setenv("PETS_KEY", "k3y-value")  # env; PETS_TOKEN comes from settings.secrets
    http_registry.add(http_tool("private", f"GET {pets.url}/private", auth=auth))
    result = http_registry.call("private")
    assert result.success, result.error
    assert result.data == {"ok": True, "via": via}
    rows = all_rows_text(http_registry)
    assert auth["secret"] in rows  # the name is stored...
    assert "s3cret-token" not in rows and "k3y-value" not in rows  # ...the value never


def test_missing_or_wrong_secret(
    http_registry: Registry, pets: PetsServer, monkeypatch: pytest.MonkeyPatch
) -> None:
    http_registry.add(
        http_tool(
            "private",
            f"GET {pets.url}/private",
            auth={"scheme": "bearer", "secret": "NOT_SET_ANYWHERE"},
        )
    )
    monkeypatch.delenv("NOT_SET_ANYWHERE", raising=False)
    result = http_registry.call("private")
    assert not result.success and "'NOT_SET_ANYWHERE' is not set" in (result.error or "")
    assert pets.seen == []  # refused before sending anything
    monkeypatch.setenv("NOT_SET_ANYWHERE", "wrong-token")
    result = http_registry.call("private")
    assert "returned 401" in (result.error or "")
    assert "wrong-token" not in all_rows_text(http_registry)
    monkeypatch.setenv("NOT_SET_ANYWHERE", "line\r\nX-Evil: 1")
    result = http_registry.call("private")
    assert "line break" in (result.error or "") and len(pets.seen) == 1


def test_auth_refuses_stored_values(registry: Registry) -> None:
    for auth in (
        {"scheme": "bearer", "secret": "T", "value": "abc"},
        {"scheme": "bearer", "secret": "has space"},
        {"scheme": "api_key", "secret": "T"},
    ):
        with pytest.raises(DefinitionError):
            registry.add(http_tool("t", "GET https://example.com/x", auth=auth))
    with pytest.raises(DefinitionError, match="credential in clear"):
        registry.add(
            http_tool(
                "t", "GET https://example.com/x", fixed_headers={"Authorization": "Bearer abc"}
            )
        )
    with pytest.raises(DefinitionError, match="carries credentials"):
        registry.add(http_tool("t", "GET https://user:pw@example.com/x"))


# -- hostile: hosts ----------------------------------------------------------------------


@pytest.fixture
def guarded(store_url: str) -> Any:
    """A registry with the default policy: public hosts only."""
    registry = tooldb.open(store_url, settings=Settings(embedder="hash", url=store_url))
    yield registry
    registry.close()


@pytest.mark.parametrize(
    "host",
    [
        "127.0.0.1",
        "localhost",
        "[::1]",
        "169.254.169.254",
        "10.1.2.3",
        "0.0.0.0",
        "2130706433",
        "127.1",
        "[::ffff:127.0.0.1]",
        "192.168.0.1",
    ],
)
def test_private_hosts_are_refused_by_default(guarded: Registry, host: str) -> None:
    guarded.add(http_tool("ssrf", f"GET http://{host}:9/latest/meta-data"))
    started = time.perf_counter()
    result = guarded.call("ssrf", timeout_s=5)
    assert not result.success
    assert result.error is not None and result.error.startswith("tool 'ssrf': ")
    assert "is not allowed: it is not a public address" in result.error
    assert time.perf_counter() - started < 3


def _teredo(v4: str) -> str:
    """The Teredo address (2001::/32) of a client behind ``v4`` (stored inverted)."""
    server = int(ipaddress.IPv4Address("65.54.227.120"))
    client = int(ipaddress.IPv4Address(v4)) ^ 0xFFFFFFFF
    return str(ipaddress.IPv6Address((0x20010000 << 96) | (server << 64) | client))


def _sixtofour(v4: str) -> str:
    """The 6to4 address (2002::/16) of a site at ``v4``."""
    return str(ipaddress.IPv6Address((0x2002 << 112) | (int(ipaddress.IPv4Address(v4)) << 80) | 1))


EMBEDDING_FORMS = {
    "mapped": lambda v4: f"::ffff:{v4}",
    "nat64": lambda v4: f"64:ff9b::{v4}",
    "6to4": _sixtofour,
    "teredo": _teredo,
}


@pytest.mark.parametrize("form", sorted(EMBEDDING_FORMS))
@pytest.mark.parametrize("v4", ["127.0.0.1", "10.0.0.1", "169.254.169.254"])
def test_ipv6_forms_that_carry_a_private_ipv4_are_refused(
    guarded: Registry, form: str, v4: str
) -> None:
    address = EMBEDDING_FORMS[form](v4)
    assert ipaddress.IPv6Address(address)  # a well-formed IPv6 literal
    assert not is_public(ipaddress.ip_address(address))
    guarded.add(http_tool("ssrf", f"GET http://[{address}]:9/latest/meta-data"))
    result = guarded.call("ssrf", timeout_s=5)
    assert not result.success
    assert "is not allowed: it is not a public address" in (result.error or ""), result.error


def test_the_nat64_form_of_169_254_169_254_is_refused(guarded: Registry) -> None:
    guarded.add(http_tool("ssrf", "GET http://[64:ff9b::a9fe:a9fe]/latest/meta-data"))
    assert "not allowed" in (guarded.call("ssrf", timeout_s=5).error or "")
    # the same forms of a public address stay public (NAT64 and 6to4 route to it)
    for public in ("64:ff9b::8.8.8.8", _sixtofour("8.8.8.8")):
        assert is_public(ipaddress.ip_address(public)), public


def test_a_name_resolving_to_a_private_address_is_refused_by_the_policy(
    guarded: Registry, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Not through a DNS failure: the name resolves (here, to cloud metadata) and the
    policy refuses every address it resolves to."""
    real = socket.getaddrinfo

    def fake(host: Any, port: Any, *args: Any, **kwargs: Any) -> Any:
        if str(host).rstrip(".") == "metadata.google.internal":
            return real("169.254.169.254", port, *args, **kwargs)
        return real(host, port, *args, **kwargs)

    monkeypatch.setattr(socket, "getaddrinfo", fake)
    guarded.add(http_tool("ssrf", "GET http://metadata.google.internal.:9/latest/meta-data"))
    result = guarded.call("ssrf", timeout_s=5)
    assert not result.success and "cannot resolve" not in (result.error or "")
    assert "host 'metadata.google.internal.' (address 169.254.169.254) is not allowed" in (
        result.error or ""
    ), result.error


def test_refused_before_any_connection(guarded: Registry, pets: PetsServer) -> None:
    guarded.add(http_tool("local", f"GET {pets.url}/pets"))
    guarded.add(http_tool("by_name", f"GET http://localhost:{pets.port}/pets"))
    for name, shown in (("local", "'127.0.0.1'"), ("by_name", "'localhost' (address ")):
        result = guarded.call(name)
        assert not result.success
        assert f"tool {name!r}: host {shown}" in (result.error or "")
        assert "http_allowed_hosts" in (result.error or "")
    assert pets.state.connections == 0 and pets.seen == []


def test_allow_list_names_and_addresses(store_url: str, pets: PetsServer) -> None:
    by_name = Settings(embedder="hash", url=store_url, http_allowed_hosts=("localhost",))
    with tooldb.open(store_url, settings=by_name) as registry:
        registry.add(http_tool("name", f"GET http://localhost:{pets.port}/pets"))
        registry.add(http_tool("address", f"GET {pets.url}/pets"))
        assert registry.call("name").success
        assert "not allowed" in (registry.call("address").error or "")
    by_network = Settings(embedder="hash", url=store_url, http_allowed_hosts=("127.0.0.0/8",))
    with tooldb.open(store_url, settings=by_network) as registry:
        assert registry.call("address").success and registry.call("name").success


def test_redirects_are_checked_hop_by_hop(http_registry: Registry, pets: PetsServer) -> None:
    to = urllib.parse.quote
    http_registry.add(http_tool("hop", f"GET {pets.url}/redirect", {"to": "string"}))
    ok = http_registry.call("hop", {"to": "/pets/1"})
    assert ok.success and ok.data["name"] == "Rex"
    for target in ("http://169.254.169.254/latest", f"http://[::1]:{pets.port}/pets/1"):
        refused = http_registry.call("hop", {"to": target})
        assert not refused.success
        assert f"tool 'hop': redirect to {target}: host " in (refused.error or "")
        assert "not allowed" in (refused.error or "")
    hops = f"/redirect?to={to('/redirect')}"
    for _ in range(6):
        hops = f"/redirect?to={to(hops)}"
    assert "more than 5 redirects" in (http_registry.call("hop", {"to": hops}).error or "")


def test_cross_origin_redirect_drops_credentials(store_url: str, pets: PetsServer) -> None:
    settings = Settings(
        embedder="hash",
        url=store_url,
        http_allowed_hosts=("127.0.0.1", "localhost"),
        secrets={"KEY": "k3y-value", "TOKEN": "s3cret-token"},
    )
    with tooldb.open(store_url, settings=settings) as registry:
        for scheme, auth in (
            ("key", {"scheme": "api_key", "name": "X-API-Key", "secret": "KEY"}),
            ("bearer", {"scheme": "bearer", "secret": "TOKEN"}),
        ):
            registry.add(http_tool(scheme, f"GET {pets.url}/redirect", {"to": "string"}, auth=auth))
            same = registry.call(scheme, {"to": "/echo/same"})
            assert same.success
            assert {"X-API-Key", "Authorization"} & set(same.data["headers"])
            other = registry.call(scheme, {"to": f"http://localhost:{pets.port}/echo/other"})
            assert other.success and other.data["raw_path"] == "/echo/other"
            assert not {"X-API-Key", "Authorization"} & set(other.data["headers"])


# -- hostile: path and headers ------------------------------------------------------------


@pytest.mark.parametrize(
    "value",
    [
        "../admin",
        "../../etc/passwd",
        "a/b",
        "a?b=c",
        "x#y",
        "..",
        ".",
        "%2e%2e",
        "%2F",
        "a b",
        "ünï/🙂",
        "..;/admin",
        "\\..\\x",
        "@evil.com",
        "//evil.com/x",
    ],
)
def test_path_parameters_cannot_change_the_path(
    http_registry: Registry, pets: PetsServer, value: str
) -> None:
    http_registry.add(
        http_tool("echo", f"GET {pets.url}/echo/{{v}}", {"v": {"type": "string", "required": True}})
    )
    result = http_registry.call("echo", {"v": value})
    assert result.success, result.error
    [seen] = pets.seen
    assert seen.query == {} and "#" not in seen.raw_path
    prefix, segment = seen.raw_path.rsplit("/", 1)
    assert prefix == "/echo" and "/" not in segment and "?" not in segment
    assert urllib.parse.unquote(segment) == value
    assert seen.headers["Host"] == f"127.0.0.1:{pets.port}"


@settings(max_examples=300, deadline=None)
@given(st.text(min_size=1))
def test_path_encoding_property(value: str) -> None:
    spec = ToolSpec(
        name="t",
        kind="http",
        target="GET https://api.example.com/v1/items/{id}/x",
        parameters={"type": "object", "properties": {"id": {"type": "string"}}, "required": ["id"]},
    )
    out = build_request(parse_plan(spec), {"id": value}, lambda _: None)
    parts = urllib.parse.urlsplit(out.url)
    assert parts.netloc == "api.example.com" and not parts.query and not parts.fragment
    head, segment, tail = parts.path.rsplit("/", 2)
    assert head == "/v1/items" and tail == "x" and segment not in (".", "..")
    assert urllib.parse.unquote(segment) == value


def test_empty_path_parameter_is_refused(http_registry: Registry, pets: PetsServer) -> None:
    http_registry.add(
        http_tool(
            "echo", f"GET {pets.url}/echo/{{v}}/tail", {"v": {"type": "string", "required": True}}
        )
    )
    result = http_registry.call("echo", {"v": ""})
    assert not result.success and "path parameter 'v' is empty" in (result.error or "")
    assert pets.seen == []


@pytest.mark.parametrize("value", ["a\r\nX-Evil: 1", "a\nb", "a\rb", "nul\x00", "bell\x07"])
def test_header_injection_is_refused(http_registry: Registry, pets: PetsServer, value: str) -> None:
    http_registry.add(
        http_tool(
            "echo", f"GET {pets.url}/echo/x", {"trace": "string"}, headers={"trace": "X-Trace"}
        )
    )
    result = http_registry.call("echo", {"trace": value})
    assert not result.success
    assert "header 'X-Trace'" in (result.error or "") and "injection" in (result.error or "")
    assert pets.seen == []
    assert http_registry.call("echo", {"trace": "tab\tis fine"}).success


def test_definition_errors_at_registration(registry: Registry) -> None:
    bad = [
        ("FETCH https://example.com/x", {}, "METHOD URL"),
        ("GET /relative/path", {}, "absolute"),
        ("GET ftp://example.com/x", {}, "absolute"),
        (
            "GET https://{host}.example.com/x",
            {"host": {"type": "string", "required": True}},
            "path only",
        ),
        (
            "GET https://example.com/x?a={a}",
            {"a": {"type": "string", "required": True}},
            "path only",
        ),
        ("GET https://example.com/x/{id}", {}, "not a declared parameter"),
        ("GET https://example.com/x/{id}", {"id": "string"}, "required or have a default"),
        ("GET https://example.com/x#frag", {}, "fragment"),
        ("GET https://example.com/x/{id", {}, "unbalanced"),
        ("GET https://example.com:99999/x", {}, "(?i)port"),
    ]
    for target, params, message in bad:
        with pytest.raises(DefinitionError, match=message):
            registry.add(http_tool("t", target, params))
    for metadata, message in (
        ({"unknown": 1}, "unknown metadata key"),
        ({"headers": {"a": "Bad Header"}}, "not a valid HTTP header name"),
        ({"fixed_headers": {"X-A": "1\r\nX-B: 2"}}, "line break"),
        ({"query": "a"}, "list of argument names"),
        ({"query": ["a"]}, "not a parameter"),
        ({"body_format": "xml"}, "body_format"),
    ):
        with pytest.raises(DefinitionError, match=message):
            registry.add(http_tool("t", "POST https://example.com/x", **metadata))
    assert registry.list() == []


# -- hostile: slow and huge ---------------------------------------------------------------


def test_timeout_stops_a_slow_server(http_registry: Registry, pets: PetsServer) -> None:
    http_registry.add(http_tool("slow", f"GET {pets.url}/slow", {"seconds": "number"}))
    # The server would answer after 30 s; returning within 10 s (a wide margin for a
    # loaded machine) can only be the 0.5 s timeout.
    started = time.perf_counter()
    result = http_registry.call("slow", {"seconds": 30}, timeout_s=0.5)
    assert time.perf_counter() - started < 10
    assert not result.success and "timed out after 0.5 s" in (result.error or "")
    assert http_registry.calls(limit=1)[0].error_kind is ErrorKind.TIMEOUT
    started = time.perf_counter()
    result = asyncio.run(http_registry.acall("slow", {"seconds": 30}, timeout_s=0.5))
    assert time.perf_counter() - started < 10 and "timed out" in (result.error or "")


def test_a_cancelled_request_is_recorded_once_as_cancelled(
    http_registry: Registry, pets: PetsServer
) -> None:
    """In a batch a request runs in a worker thread (one hop: bind, send, record): giving
    up records it as cancelled at once, and the request finishing later adds nothing."""
    http_registry.add(http_tool("slow", f"GET {pets.url}/slow", {"seconds": "number"}))

    async def give_up() -> None:
        batch = http_registry.acall_many([("slow", {"seconds": 1.0})] * 2)
        await asyncio.wait_for(batch, timeout=0.3)

    with pytest.raises(TimeoutError):
        asyncio.run(give_up())
    records = http_registry.calls(tool="slow")
    assert [(r.error_kind, r.success) for r in records] == [(ErrorKind.CANCELLED, False)] * 2
    time.sleep(1.5)  # both requests have been answered by now
    assert len(http_registry.calls(tool="slow")) == 2
    assert http_registry.get("slow").stats.usage_count == 2


def test_response_size_cap(store_url: str, pets: PetsServer) -> None:
    settings = Settings(
        embedder="hash",
        url=store_url,
        http_allowed_hosts=("127.0.0.1",),
        http_max_response_bytes=100_000,
    )
    with tooldb.open(store_url, settings=settings) as registry:
        registry.add(http_tool("big", f"GET {pets.url}/big", {"size": "int", "declared": "int"}))
        assert registry.call("big", {"size": 100_000}).success
        streamed = registry.call("big", {"size": 50_000_000})
        assert "larger than 100000 bytes" in (streamed.error or "")
        declared = registry.call("big", {"size": 50_000_000, "declared": 1})
        assert "larger than 100000 bytes (read 50000000" in (declared.error or "")
        assert asyncio.run(registry.acall("big", {"size": 50_000_000})).success is False


def test_cli_call_with_allowed_hosts_from_env(store_url: str, pets: PetsServer) -> None:
    from typer.testing import CliRunner

    from tooldb.cli import app

    with tooldb.open(store_url, settings=Settings(embedder="hash", url=store_url)) as registry:
        registry.add(
            http_tool(
                "get_pet",
                f"GET {pets.url}/pets/{{pet_id}}",
                {"pet_id": {"type": "int", "required": True}},
            )
        )
    runner = CliRunner()
    args = ["--db", store_url, "call", "get_pet", "--args", '{"pet_id": 2}', "--json"]
    refused = runner.invoke(app, args)
    assert refused.exit_code == 1 and "not allowed" in json.loads(refused.stdout)["error"]
    allowed = runner.invoke(app, args, env={"TOOLDB_HTTP_ALLOWED_HOSTS": "example.com, 127.0.0.1"})
    assert allowed.exit_code == 0, allowed.output
    assert json.loads(allowed.stdout)["data"] == {"id": 2, "name": "Tom", "tag": "cat"}


def test_settings_for_http(tmp_path: Any, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("TOOLDB_HTTP_ALLOWED_HOSTS", " 127.0.0.1 ,*.example.com,")
    monkeypatch.setenv("TOOLDB_HTTP_TIMEOUT", "2.5")
    config = tmp_path / "config.toml"
    config.write_text('http_max_response_bytes = 5\n[secrets]\nPETS_TOKEN = "abc"\n')
    monkeypatch.setenv("TOOLDB_CONFIG", str(config))
    loaded = Settings.load()
    assert loaded.http_allowed_hosts == ("127.0.0.1", "*.example.com")
    assert loaded.http_timeout_s == 2.5 and loaded.http_max_response_bytes == 5
    assert loaded.secrets == {"PETS_TOKEN": "abc"} and "abc" not in repr(loaded)
    config.write_text('secrets = "abc"\n')
    with pytest.raises(tooldb.UsageError, match="table of strings"):
        Settings.load()
    with pytest.raises(tooldb.UsageError, match="must be positive"):
        Settings(http_timeout_s=0)


def test_example_manifest_registers(registry: Registry) -> None:
    outcomes = registry.add_manifest(Path(__file__).parent.parent / "examples" / "http_tools.yaml")
    assert {o.record.spec.kind for o in outcomes} == {"http"}
    traced = registry.get("add_pet_traced").spec
    assert traced.metadata["body"] == {"pet_name": "name", "tag": "tag"}
    assert registry.get("private_ping").spec.metadata["auth"]["secret"] == "PETS_TOKEN"


def test_secrets_echoed_by_the_server_are_redacted(
    http_registry: Registry, pets: PetsServer, monkeypatch: pytest.MonkeyPatch
) -> None:
    """/echo returns the request's headers, credential included: neither the result
    nor the call log may carry it."""
    monkeypatch.setenv("PETS_KEY", "k3y-value")
    auth = {"scheme": "api_key", "in": "header", "name": "X-API-Key", "secret": "PETS_KEY"}
    http_registry.add(http_tool("echo_key", f"GET {pets.url}/echo", auth=auth))
    bearer = {"scheme": "bearer", "secret": "PETS_TOKEN"}
    http_registry.add(http_tool("echo_bearer", f"GET {pets.url}/echo", auth=bearer))
    key = http_registry.call("echo_key")
    assert key.success and key.data["headers"]["X-API-Key"] == "***"
    token = http_registry.call("echo_bearer")
    assert token.success and token.data["headers"]["Authorization"] == "Bearer ***"
    for result in (key, token):
        assert "k3y-value" not in result.output and "s3cret-token" not in result.output
    rows = all_rows_text(http_registry)
    assert "k3y-value" not in rows and "s3cret-token" not in rows


# -- cookies and multipart ------------------------------------------------------------------


def test_cookie_auth_arrives_and_is_dropped_cross_origin(
    http_registry: Registry, pets: PetsServer, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("SESSION", "k3y-value")
    auth = {"scheme": "api_key", "in": "cookie", "name": "session", "secret": "SESSION"}
    http_registry.add(http_tool("by_cookie", f"GET {pets.url}/private", auth=auth))
    result = http_registry.call("by_cookie")
    assert result.success and result.data == {"ok": True, "via": "cookie"}
    http_registry.add(
        http_tool("echo_cookie", f"GET {pets.url}/echo", auth=auth,
                  fixed_headers={"Cookie": "theme=dark"})
    )  # fmt: skip
    echoed = http_registry.call("echo_cookie")
    assert echoed.data["headers"]["Cookie"] == "theme=dark; session=***"  # merged, redacted
    assert "k3y-value" not in all_rows_text(http_registry)
    for bad in ({"name": "se ssion"}, {"in": "cookie", "scheme": "bearer"}):
        with pytest.raises(DefinitionError):
            http_registry.add(http_tool("bad", f"GET {pets.url}/x", auth={**auth, **bad}))


def test_multipart_bodies_carry_fields_and_files(http_registry: Registry, pets: PetsServer) -> None:
    params = {"type": "object", "properties": {"note": {"type": "string"},
              "report": {"type": "object"}, "image": {"type": "object"}}}  # fmt: skip
    http_registry.add(http_tool("upload", f"POST {pets.url}/echo", params, body_format="multipart"))
    result = http_registry.call(
        "upload",
        {
            "note": "two files",
            "report": {"filename": "r.txt", "content": "hello ünï", "content_type": "text/plain"},
            "image": {"filename": "i.bin", "content_base64": "AAEC/w=="},
        },
    )
    assert result.success, result.error
    echoed = result.data
    assert echoed["headers"]["Content-Type"].startswith("multipart/form-data; boundary=")
    body = echoed["body"]
    assert 'name="note"' in body and "two files" in body
    assert 'name="report"; filename="r.txt"' in body and "hello ünï" in body
    assert 'filename="i.bin"' in body and "Content-Type: application/octet-stream" in body
    bad = http_registry.call("upload", {"image": {"filename": 'x"y', "content": "z"}})
    assert not bad.success and "filename" in (bad.error or "")
    garbage = http_registry.call("upload", {"image": {"content_base64": "not base64!"}})
    assert not garbage.success and "not base64" in (garbage.error or "")
