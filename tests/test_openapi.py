"""OpenAPI import: the example pets API end to end on both stores, then hostile documents
(circular references, YAML that contains itself, missing fields) that must give a clear
error or a sane import, never a crash or a hang."""

from __future__ import annotations

import copy
import json
import time
from pathlib import Path
from typing import Any

import pytest
import yaml
from typer.testing import CliRunner

import tooldb
from tooldb import ArgumentError, DefinitionError, Registry, Settings, UsageError
from tooldb.cli import app
from tooldb.examples.pets_server import SPEC, PetsServer
from tooldb.openapi.importer import read_openapi

PETS = yaml.safe_load(SPEC.read_text())
SECRETS = {"BEARER_AUTH": "s3cret-token", "HEADER_KEY": "k3y-value", "QUERY_KEY": "k3y-value"}


def document(paths: dict[str, Any], schemas: dict[str, Any] | None = None, **extra: Any) -> Any:
    return {
        "openapi": "3.1.0",
        "info": {"title": "t", "version": "1"},
        "servers": [{"url": "https://api.example.com/v1"}],
        "paths": paths,
        "components": {"schemas": schemas or {}},
        **extra,
    }


def post_body(schema: Any, required: bool = True) -> dict[str, Any]:
    return {
        "post": {
            "operationId": "send",
            "requestBody": {
                "required": required,
                "content": {"application/json": {"schema": schema}},
            },
        }
    }


@pytest.fixture
def imported(http_registry: Registry, pets: PetsServer) -> Registry:
    found = http_registry.add_openapi(SPEC, base_url=pets.url)
    assert [o.status for o in found.outcomes] == ["created"] * 9
    assert found.skipped == [] and found.secrets == ["BEARER_AUTH", "HEADER_KEY", "QUERY_KEY"]
    return http_registry


# -- the pets API end to end ------------------------------------------------------------


def test_import_shapes_tools(imported: Registry, pets: PetsServer) -> None:
    names = {t.name: t.spec for t in imported.list()}
    assert set(names) == {
        "listPets",
        "createPet",
        "showPetById",
        "deletePet",
        "echo",
        "getText",
        "privateBearer",
        "privateHeaderKey",
        "privateQueryKey",
    }
    show = names["showPetById"]
    assert show.kind == "http" and show.target == f"GET {pets.url}/pets/{{pet_id}}"
    assert show.parameters["required"] == ["pet_id"] and show.category == "pets"
    assert show.description == "One pet by id."
    listing = names["listPets"].parameters["properties"]
    assert listing["limit"] == {
        "type": "integer",
        "minimum": 1,
        "maximum": 100,
        "default": 20,
        "description": "How many pets at most.",
    }
    assert listing["tag"]["type"] == ["string", "null"]  # OpenAPI 3.0 nullable
    create = names["createPet"]
    assert set(create.parameters["properties"]) == {"name", "tag"}  # readOnly id left out
    assert create.parameters["required"] == ["name"]
    assert create.metadata == {"body": {"name": "name", "tag": "tag"}}
    assert names["echo"].metadata == {"query": {"q": "q"}, "headers": {"X-Trace": "X-Trace"}}
    assert names["getText"].returns == "text"
    assert names["privateQueryKey"].metadata["auth"] == {
        "scheme": "api_key",
        "in": "query",
        "name": "api_key",
        "secret": "QUERY_KEY",
    }


def test_imported_tools_call_the_server(
    imported: Registry, pets: PetsServer, monkeypatch: pytest.MonkeyPatch
) -> None:
    assert imported.call("listPets", {"limit": 1}).data == [{"id": 1, "name": "Rex", "tag": "dog"}]
    assert pets.seen[-1].raw_path == "/pets?limit=1"
    created = imported.call("createPet", {"name": "Fido", "tag": "dog"})
    assert created.success and created.data["id"] == 3
    assert imported.call("showPetById", {"pet_id": "3"}).data["name"] == "Fido"
    assert imported.call("deletePet", {"pet_id": "3"}).success
    assert "404" in (imported.call("showPetById", {"pet_id": "3"}).error or "")
    with pytest.raises(ArgumentError, match="'name'"):
        imported.call("createPet", {"name": ""})  # minLength from the document
    echoed = imported.call("echo", {"value": "a/../b", "q": "1 2", "X-Trace": "t"}).data
    assert echoed["raw_path"] == "/echo/a%2F..%2Fb?q=1+2" and echoed["headers"]["X-Trace"] == "t"
    assert imported.call("getText").output == "plain words, ünï"
    for name in ("privateBearer", "privateHeaderKey", "privateQueryKey"):
        assert "not set" in (imported.call(name).error or "")
    for key, value in SECRETS.items():
        monkeypatch.setenv(key, value)
    vias = [
        imported.call(n).data["via"]
        for n in ("privateBearer", "privateHeaderKey", "privateQueryKey")
    ]
    assert vias == ["bearer", "header key", "query key"]
    from tests.test_http_tools import all_rows_text

    rows = all_rows_text(imported)
    assert "BEARER_AUTH" in rows and "s3cret-token" not in rows and "k3y-value" not in rows


def test_reimport_is_unchanged_and_url_import(imported: Registry, pets: PetsServer) -> None:
    again = imported.add_openapi(SPEC, base_url=pets.url)
    assert {o.status for o in again.outcomes} == {"unchanged"}
    by_url = imported.add_openapi(f"{pets.url}/openapi.yaml")  # relative server: the URL's
    assert {o.status for o in by_url.outcomes} == {"unchanged"}


def test_url_import_obeys_the_host_guard(store_url: str, pets: PetsServer) -> None:
    with tooldb.open(store_url, settings=Settings(embedder="hash", url=store_url)) as registry:
        with pytest.raises(UsageError, match=r"host '127\.0\.0\.1' is not allowed"):
            registry.add_openapi(f"{pets.url}/openapi.yaml")
        with pytest.raises(UsageError, match="is not allowed"):
            registry.add_openapi("http://169.254.169.254/openapi.json")
    assert pets.state.connections == 0
    allowed = Settings(embedder="hash", url=store_url, http_allowed_hosts=("127.0.0.1",))
    with (
        tooldb.open(store_url, settings=allowed) as registry,
        pytest.raises(UsageError, match="returned 404"),
    ):
        registry.add_openapi(f"{pets.url}/nothing.yaml")


def test_options_category_auth_secret_and_relative_server(registry: Registry) -> None:
    found = registry.add_openapi(
        PETS,
        base_url="https://pets.example.com/api/",
        category="animals",
        auth_secret="PETS_API_TOKEN",
    )
    tools = {t.name: t.spec for t in registry.list()}
    assert {s.category for s in tools.values()} == {"animals"}
    assert tools["listPets"].target == "GET https://pets.example.com/api/pets"
    assert tools["privateBearer"].metadata["auth"]["secret"] == "PETS_API_TOKEN"
    assert found.secrets == ["PETS_API_TOKEN"]
    with pytest.raises(DefinitionError, match="relative: give a base URL"):
        registry.add_openapi(PETS)  # servers: [{url: /}] in a file or mapping
    with pytest.raises(UsageError, match="absolute http"):
        registry.add_openapi(PETS, base_url="ftp://x")


# -- hostile documents ------------------------------------------------------------------


def test_circular_references_stay_recursive(registry: Registry) -> None:
    schemas = {
        "Node": {
            "type": "object",
            "required": ["name"],
            "properties": {
                "name": {"type": "string"},
                "children": {"type": "array", "items": {"$ref": "#/components/schemas/Node"}},
                "parent": {"$ref": "#/components/schemas/Other"},
            },
        },
        "Other": {"type": "object", "properties": {"node": {"$ref": "#/components/schemas/Node"}}},
    }
    found = registry.add_openapi(
        document({"/tree": post_body({"$ref": "#/components/schemas/Node"})}, schemas)
    )
    params = registry.get("send").spec.parameters
    assert params["properties"]["children"]["items"] == {"$ref": "#/$defs/Node"}
    assert set(params["$defs"]) == {"Node", "Other"} and found.skipped == []
    tree = {"name": "root", "children": [{"name": "a", "children": [{"name": "b"}]}]}
    assert registry.bind("send", tree).arguments == tree
    with pytest.raises(ArgumentError):
        registry.bind("send", {"name": "root", "children": [{"children": []}]})


@pytest.mark.parametrize(
    "schemas",
    [
        {"A": {"$ref": "#/components/schemas/A"}},
        {"A": {"$ref": "#/components/schemas/B"}, "B": {"$ref": "#/components/schemas/A"}},
        {
            "A": {"allOf": [{"$ref": "#/components/schemas/B"}]},
            "B": {"anyOf": [{"$ref": "#/components/schemas/A"}, {"type": "string"}]},
        },
        {"A": {"type": "object", "properties": {"x": {"$ref": "#/components/schemas/Missing"}}}},
        {"A": {"type": "object", "properties": {"x": {"$ref": "other.yaml#/Pet"}}}},
        {"A": {"type": "object", "properties": {"x": {"type": "file"}}}},
    ],
)
def test_broken_references_skip_the_operation(registry: Registry, schemas: Any) -> None:
    paths = {
        "/bad": {
            "get": {
                "operationId": "bad",
                "parameters": [
                    {"name": "p", "in": "query", "schema": {"$ref": "#/components/schemas/A"}}
                ],
            }
        },
        "/good": {"get": {"operationId": "good"}},
    }
    started = time.perf_counter()
    found = registry.add_openapi(document(paths, schemas))
    assert time.perf_counter() - started < 2
    assert [o.record.name for o in found.outcomes] == ["good"]
    [skipped] = found.skipped
    assert skipped.operation == "GET /bad" and skipped.reason


def test_yaml_that_contains_itself(tmp_path: Path, registry: Registry) -> None:
    loop = tmp_path / "loop.yaml"
    loop.write_text("""
openapi: 3.0.0
paths:
  /a:
    get:
      operationId: a
      parameters:
        - name: p
          in: query
          schema: &s {type: object, properties: {child: *s}}
  /b:
    get: {operationId: b}
""")
    found = registry.add_openapi(loop, base_url="https://x.example.com")
    assert [o.record.name for o in found.outcomes] == ["b"]
    assert "cycle" in found.skipped[0].reason


def test_yaml_alias_bomb_is_bounded(tmp_path: Path, registry: Registry) -> None:
    levels = ["a0: &a0 {type: string}"]
    for i in range(1, 30):
        prev = f"*a{i - 1}"
        levels.append(f"a{i}: &a{i} {{type: object, properties: {{x: {prev}, y: {prev}}}}}")
    bomb = tmp_path / "bomb.yaml"
    bomb.write_text(
        "x-anchors:\n"
        + "\n".join("  " + line for line in levels)
        + """
openapi: 3.0.0
paths:
  /bomb:
    get:
      operationId: bomb
      parameters: [{name: p, in: query, schema: *a29}]
  /ok:
    get: {operationId: ok}
"""
    )
    started = time.perf_counter()
    found = registry.add_openapi(bomb, base_url="https://x.example.com")
    assert time.perf_counter() - started < 5
    assert [o.record.name for o in found.outcomes] == ["ok"]
    assert "more than" in found.skipped[0].reason


@pytest.mark.parametrize(
    ("doc", "message"),
    [
        ({"swagger": "2.0", "paths": {}}, "Swagger 2.0"),
        ({"paths": {"/a": {"get": {}}}}, "not an OpenAPI 3 document"),
        ({"openapi": 3.1, "paths": {}}, "not an OpenAPI 3 document"),
        ({"openapi": "3.0.0"}, "no 'paths'"),
        ({"openapi": "3.0.0", "paths": []}, "no 'paths'"),
        ({"openapi": "3.0.0", "paths": {"/a": {"get": "nope"}}}, "no importable operations"),
        (
            {"openapi": "3.0.0", "paths": {"/a": {"get": {"parameters": [{"in": "query"}]}}}},
            "has no name",
        ),
    ],
)
def test_documents_missing_fields(registry: Registry, doc: Any, message: str) -> None:
    with pytest.raises(DefinitionError, match=message):
        registry.add_openapi(doc, base_url="https://x.example.com")
    assert registry.list() == []


def test_not_json_or_yaml(tmp_path: Path, registry: Registry) -> None:
    for text in ("{not json", "a: [unclosed", "- just\n- a list\n", "[" * 5000):
        bad = tmp_path / "bad.yaml"
        bad.write_text(text)
        with pytest.raises(DefinitionError, match="OpenAPI document"):
            registry.add_openapi(bad)
    with pytest.raises(UsageError, match="does not exist"):
        registry.add_openapi(tmp_path / "missing.yaml")


def test_sane_import_of_sparse_operations(registry: Registry) -> None:
    paths = {
        "/items/{item-id}/parts": {"get": {}, "post": {"operationId": "add part!"}},
        "/a": {"get": {"operationId": "dup"}},
        "/b": {
            "get": {
                "operationId": "dup",
                "parameters": [
                    {"name": "id", "in": "query", "required": True},
                    {"name": "session", "in": "cookie"},
                    {"name": "Accept", "in": "header"},
                ],
            }
        },
        "/c/{id}": {
            "put": {
                "operationId": "put_c",
                "parameters": [
                    {"name": "id", "in": "path", "schema": {"type": "integer"}},
                    {"name": "id", "in": "query", "schema": {"type": "string"}},
                ],
                "requestBody": {
                    "content": {
                        "application/json": {
                            "schema": {
                                "type": "object",
                                "properties": {
                                    "id": {"type": "string"},
                                    "body": {"type": "string"},
                                },
                            }
                        }
                    }
                },
            }
        },
        "/list": post_body({"type": "array", "items": {"type": "integer"}}),
        "/upload": {
            "put": {
                "operationId": "upload",
                "requestBody": {"required": True, "content": {"application/octet-stream": {}}},
            }
        },
        "/form": {
            "patch": {
                "operationId": "form",
                "requestBody": {
                    "content": {
                        "application/x-www-form-urlencoded": {
                            "schema": {"type": "object", "properties": {"a": {"type": "string"}}}
                        }
                    }
                },
            }
        },
        "/cookie": {
            "get": {
                "operationId": "needs_cookie",
                "parameters": [{"name": "s", "in": "cookie", "required": True}],
            }
        },
    }
    found = registry.add_openapi(document(paths))
    tools = {t.name: t.spec for t in registry.list()}
    assert set(tools) == {
        "get_items_item-id_parts",
        "add_part",
        "dup",
        "dup_2",
        "put_c",
        "send",
        "form",
    }
    assert {s.operation for s in found.skipped} == {"PUT /upload", "GET /cookie"}
    generated = tools["get_items_item-id_parts"]
    assert generated.parameters["required"] == ["item-id"]
    assert generated.target == "GET https://api.example.com/v1/items/{item-id}/parts"
    assert generated.description == "GET /items/{item-id}/parts"
    assert set(tools["dup_2"].parameters["properties"]) == {"id"}  # cookie, Accept dropped
    put_c = tools["put_c"]
    assert set(put_c.parameters["properties"]) == {"id", "query_id", "body_id", "body"}
    assert put_c.metadata == {
        "query": {"query_id": "id"},
        "body": {"body_id": "id", "body": "body"},
    }
    assert tools["send"].metadata == {"body": "body"}
    assert tools["send"].parameters["properties"]["body"]["type"] == "array"
    assert tools["form"].metadata["body_format"] == "form"


def test_json_document_and_unsupported_security(tmp_path: Path, registry: Registry) -> None:
    doc = copy.deepcopy(PETS)
    doc["components"]["securitySchemes"]["bearerAuth"] = {"type": "mutualTLS"}
    path = tmp_path / "pets.json"
    path.write_text(json.dumps(doc))
    found = registry.add_openapi(path, base_url="http://127.0.0.1:1")
    assert len(found.outcomes) == 9
    assert any("'bearerAuth' is not supported" in w for w in found.warnings)
    assert "auth" not in registry.get("privateBearer").spec.metadata


def test_cli_add_openapi(store_url: str, pets: PetsServer) -> None:
    runner = CliRunner()
    env = {"TOOLDB_HTTP_ALLOWED_HOSTS": "127.0.0.1"}
    result = runner.invoke(
        app,
        ["--db", store_url, "add", "openapi", str(SPEC), "--base-url", pets.url, "--json"],
        env=env,
    )
    assert result.exit_code == 0, result.output
    summary = json.loads(result.stdout)
    assert summary["title"] == "Pets API" and len(summary["tools"]) == 9
    assert summary["secrets"] == ["BEARER_AUTH", "HEADER_KEY", "QUERY_KEY"]
    text = runner.invoke(
        app, ["--db", store_url, "add", "openapi", f"{pets.url}/openapi.yaml"], env=env
    )
    assert (
        text.exit_code == 0
        and "9 unchanged" in text.stdout
        and "[secrets] in config): BEARER_AUTH" in text.stdout
    )
    called = runner.invoke(
        app,
        ["--db", store_url, "call", "showPetById", "--args", '{"pet_id": "2"}', "--json"],
        env=env,
    )
    assert called.exit_code == 0 and json.loads(called.stdout)["data"]["name"] == "Tom"
    swagger = runner.invoke(app, ["--db", store_url, "add", "openapi", str(SPEC), "--json"])
    assert swagger.exit_code == 2  # relative server and no --base-url
    assert "relative" in json.loads(swagger.stdout)["error"]["message"]
    refused = runner.invoke(
        app, ["--db", store_url, "add", "openapi", f"{pets.url}/openapi.yaml", "--json"]
    )
    assert refused.exit_code == 2 and "not allowed" in refused.stdout


def test_read_openapi_without_registry() -> None:
    found = read_openapi(PETS, base_url="https://pets.example.com")
    assert len(found.specs) == 9 and found.outcomes == []
    with pytest.raises(UsageError, match="needs a registry"):
        read_openapi("https://pets.example.com/openapi.yaml")


def test_multipart_bodies_and_cookie_keys_are_imported(
    http_registry: Registry, pets: PetsServer, monkeypatch: pytest.MonkeyPatch
) -> None:
    registry = http_registry
    paths = {
        "/echo": {
            "post": {
                "operationId": "uploadReport",
                "security": [{"sessionCookie": []}],
                "requestBody": {
                    "required": True,
                    "content": {
                        "multipart/form-data": {
                            "schema": {
                                "type": "object",
                                "required": ["file"],
                                "properties": {
                                    "title": {"type": "string"},
                                    "file": {"type": "string", "format": "binary"},
                                },
                            }
                        }
                    },
                },
            }
        }
    }
    schemes = {"sessionCookie": {"type": "apiKey", "in": "cookie", "name": "session"}}
    doc = document(paths, servers=[{"url": pets.url}])
    doc["components"]["securitySchemes"] = schemes
    found = registry.add_openapi(doc, base_url=pets.url)
    assert found.secrets == ["SESSION_COOKIE"]
    spec = registry.get("uploadReport").spec
    assert spec.metadata["body_format"] == "multipart"
    assert spec.metadata["auth"] == {"scheme": "api_key", "in": "cookie", "name": "session",
                                     "secret": "SESSION_COOKIE"}  # fmt: skip
    assert set(spec.parameters["properties"]["file"]["properties"]) >= {"filename", "content"}
    monkeypatch.setenv("SESSION_COOKIE", "k3y-value")
    sent = registry.call(
        "uploadReport", {"title": "t", "file": {"filename": "a.csv", "content": "x,y\n1,2"}}
    )
    assert sent.success, sent.error
    assert sent.data["headers"]["Cookie"] == "session=***"
    assert 'name="file"; filename="a.csv"' in sent.data["body"] and "x,y" in sent.data["body"]
