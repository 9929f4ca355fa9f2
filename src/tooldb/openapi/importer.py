"""Import an OpenAPI 3.0/3.1 document (JSON or YAML; a file, a URL or a mapping) as http tools.

Each operation becomes one tool: its ``operationId`` (or method and path), sanitised,
is the name; summary and description the description; the first tag (or the given
category) the category. Path, query and header parameters and the properties of a JSON
(or form) request body are merged into one parameter object; a body that is not an
object with properties becomes a single ``body`` parameter. The base URL is the first
server's (``--base-url`` overrides it). Security schemes become ``metadata.auth``
that names a secret (``--auth-secret`` or the scheme's name, upper-cased): the value
is read at call time, never stored.

Operations that cannot be imported (an external ``$ref``, a required cookie, a request
body that is neither JSON nor a form, a schema that loops on itself) are skipped and
reported with the reason; a document with nothing importable is a DefinitionError.
"""

from __future__ import annotations

import json
import re
import urllib.parse
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import yaml

from ..binding import normalize_parameters
from ..errors import DefinitionError, ExecutionError, UsageError
from ..executors.http_plan import METHODS, parse_plan
from ..stores import PutOutcome
from ..types import Returns, ToolKind, ToolSpec, check_name
from .schema import SchemaConverter, SchemaProblem, deref

Fetch = Callable[[str], bytes]
MAX_NAME = 64  # what model providers accept for a function name
_SKIPPED_HEADERS = {"accept", "content-type", "authorization"}


@dataclass(frozen=True)
class SkippedOperation:
    operation: str  # "GET /pets/{id}"
    reason: str


@dataclass(frozen=True)
class OpenAPIImport:
    """What an import produced: the tools, what was skipped and why, the secrets needed."""

    title: str
    specs: list[ToolSpec]
    skipped: list[SkippedOperation] = field(default_factory=list)
    warnings: list[str] = field(default_factory=list)
    secrets: list[str] = field(default_factory=list)
    outcomes: list[PutOutcome] = field(default_factory=list)  # filled by Registry.add_openapi

    def summary(self) -> dict[str, Any]:
        return {
            "title": self.title,
            "tools": [
                {"name": o.record.name, "version": o.record.version, "status": o.status}
                for o in self.outcomes
            ],
            "skipped": [{"operation": s.operation, "reason": s.reason} for s in self.skipped],
            "warnings": self.warnings,
            "secrets": self.secrets,
        }


def read_openapi(
    source: str | Path | Mapping[str, Any],
    *,
    fetch: Fetch | None = None,
    max_bytes: int = 10_000_000,
    base_url: str | None = None,
    category: str | None = None,
    auth_secret: str | None = None,
) -> OpenAPIImport:
    """Parse a document into tool specs (nothing is registered). ``fetch`` GETs a URL
    (the registry passes its HTTP executor's, with the host guard)."""
    doc, location = _load(source, fetch, max_bytes)
    return _Importer(doc, location, base_url, category, auth_secret).run()


# -- loading ---------------------------------------------------------------------------


def _load(
    source: str | Path | Mapping[str, Any], fetch: Fetch | None, max_bytes: int
) -> tuple[Mapping[str, Any], str | None]:
    if isinstance(source, Mapping):
        return source, None
    text = str(source)
    if re.match(r"(?i)https?://", text):
        if fetch is None:
            raise UsageError("fetching an OpenAPI document from a URL needs a registry")
        try:
            return _parse(fetch(text), text), text
        except ExecutionError as exc:  # the message names the URL and what went wrong
            raise UsageError(str(exc)) from None
    path = Path(text)
    if not path.is_file():
        raise UsageError(f"OpenAPI document {path} does not exist or is not a file")
    if path.stat().st_size > max_bytes:
        raise UsageError(f"OpenAPI document {path} is larger than {max_bytes} bytes")
    return _parse(path.read_bytes(), str(path)), None


def _parse(raw: bytes, where: str) -> Mapping[str, Any]:
    try:
        text = raw.decode("utf-8-sig")
        doc = json.loads(text) if text.lstrip().startswith("{") else yaml.safe_load(text)
    except (ValueError, yaml.YAMLError, RecursionError) as exc:
        reason = str(exc).splitlines()[0] if str(exc) else type(exc).__name__
        raise DefinitionError(
            f"OpenAPI document {where} is not valid JSON or YAML: {reason}"
        ) from None
    if not isinstance(doc, Mapping):
        raise DefinitionError(f"OpenAPI document {where} must be an object at the top level")
    return doc


# -- conversion ------------------------------------------------------------------------


class _Importer:
    def __init__(
        self,
        doc: Mapping[str, Any],
        location: str | None,
        base_url: str | None,
        category: str | None,
        auth_secret: str | None,
    ) -> None:
        self.doc = doc
        self.location = location
        self.base_url = base_url
        self.category = category
        self.auth_secret = auth_secret
        version = doc.get("openapi")
        if not isinstance(version, str) or not version.startswith("3."):
            if "swagger" in doc:
                raise DefinitionError(
                    "this is a Swagger 2.0 document: convert it to OpenAPI 3 first"
                )
            raise DefinitionError(
                f"not an OpenAPI 3 document: 'openapi' is {version!r}, expected '3.0.x' or '3.1.x'"
            )
        self.openapi_30 = version.startswith("3.0")
        if base_url is not None:
            try:
                self.base_url = _check_base(base_url.rstrip("/"))
            except SchemaProblem as exc:
                raise UsageError(str(exc)) from None
        self.specs: list[ToolSpec] = []
        self.skipped: list[SkippedOperation] = []
        self.warnings: list[str] = []
        self.secrets: list[str] = []
        self.names: set[str] = set()

    def run(self) -> OpenAPIImport:
        paths = self.doc.get("paths")
        if not isinstance(paths, Mapping) or not paths:
            raise DefinitionError("the OpenAPI document has no 'paths' with operations")
        for path, item in paths.items():
            try:
                item = deref(self.doc, item)
            except SchemaProblem as exc:
                self.skipped.append(SkippedOperation(f"* {path}", str(exc)))
                continue
            if not isinstance(item, Mapping):
                self.skipped.append(SkippedOperation(f"* {path}", "path item is not an object"))
                continue
            for method in METHODS:
                operation = item.get(method.lower())
                if operation is not None:
                    self._operation(str(path), method, item, operation)
        info = self.doc.get("info")
        title = info.get("title") if isinstance(info, Mapping) else None
        if not self.specs:
            reasons = "; ".join(f"{s.operation}: {s.reason}" for s in self.skipped[:10])
            raise DefinitionError(
                "the OpenAPI document has no importable operations"
                + (f" ({reasons})" if reasons else "")
            )
        return OpenAPIImport(
            str(title) if title else "", self.specs, self.skipped, self.warnings, self.secrets
        )

    def _operation(self, path: str, method: str, item: Mapping[str, Any], op: Any) -> None:
        label = f"{method} {path}"
        try:
            if not isinstance(op, Mapping):
                raise SchemaProblem("the operation is not an object")
            spec = _Operation(self, path, method, item, op).spec()
            parse_plan(spec)  # the same check registration makes, per operation
        except (SchemaProblem, DefinitionError) as exc:
            self.skipped.append(SkippedOperation(label, str(exc)))
            return
        except RecursionError:
            self.skipped.append(SkippedOperation(label, "a schema is nested too deeply"))
            return
        self.specs.append(spec)

    def unique_name(self, wanted: str) -> str:
        name, n = wanted, 1
        while name in self.names:
            n += 1
            suffix = f"_{n}"
            name = wanted[: MAX_NAME - len(suffix)] + suffix
        self.names.add(name)
        return name

    def server(self, *levels: Any) -> str:
        if self.base_url:
            return self.base_url
        for level in levels:
            servers = level.get("servers") if isinstance(level, Mapping) else None
            if isinstance(servers, list) and servers and isinstance(servers[0], Mapping):
                return self._server_url(servers[0])
        return self._server_url({"url": "/"})

    def _server_url(self, server: Mapping[str, Any]) -> str:
        url = str(server.get("url", "/"))
        variables = server.get("variables")
        for name in re.findall(r"\{([^{}]+)\}", url):
            var = variables.get(name) if isinstance(variables, Mapping) else None
            if not isinstance(var, Mapping) or "default" not in var:
                raise SchemaProblem(f"server URL {url!r}: variable {name!r} has no default")
            url = url.replace("{" + name + "}", str(var["default"]))
        if not re.match(r"(?i)https?://", url):
            if self.location is None:
                raise SchemaProblem(
                    f"the server URL {url!r} is relative: give a base URL (--base-url)"
                )
            url = urllib.parse.urljoin(self.location, url)
        return _check_base(url.rstrip("/"))

    def auth(self, op: Mapping[str, Any]) -> dict[str, Any] | None:
        requirements = op.get("security", self.doc.get("security"))
        if not isinstance(requirements, list):
            return None
        components = self.doc.get("components")
        schemes = components.get("securitySchemes") if isinstance(components, Mapping) else None
        for requirement in requirements:
            for name in requirement if isinstance(requirement, Mapping) else ():
                try:
                    scheme = deref(self.doc, (schemes or {}).get(name))
                except SchemaProblem:
                    scheme = None
                auth = _auth(scheme) if isinstance(scheme, Mapping) else None
                if auth is None:
                    self._warn(f"security scheme {name!r} is not supported; calls send no auth")
                    continue
                secret = self.auth_secret or _env_name(str(name))
                if secret not in self.secrets:
                    self.secrets.append(secret)
                return {**auth, "secret": secret}
        return None

    def _warn(self, text: str) -> None:
        if text not in self.warnings:
            self.warnings.append(text)


#: How a multipart file field (``format: binary``) is passed as a JSON argument.
FILE_PART: dict[str, Any] = {
    "type": "object",
    "description": "A file: its name, its content as text or base64, its media type.",
    "properties": {
        "filename": {"type": "string"},
        "content": {"type": "string", "description": "the content, as text"},
        "content_base64": {"type": "string", "description": "the content, base64-encoded"},
        "content_type": {"type": "string", "default": "application/octet-stream"},
    },
    "additionalProperties": False,
}


def _auth(scheme: Mapping[str, Any]) -> dict[str, Any] | None:
    kind = scheme.get("type")
    if kind == "http" and str(scheme.get("scheme", "")).lower() in ("bearer", "basic"):
        return {"scheme": str(scheme["scheme"]).lower()}
    if kind in ("oauth2", "openIdConnect"):
        return {"scheme": "bearer"}
    if (
        kind == "apiKey"
        and scheme.get("in") in ("header", "query", "cookie")
        and scheme.get("name")
    ):
        return {"scheme": "api_key", "in": scheme["in"], "name": str(scheme["name"])}
    return None


def _env_name(scheme: str) -> str:
    """``bearerAuth`` -> ``BEARER_AUTH``: the default name of a scheme's secret."""
    words = re.sub(r"(?<=[a-z0-9])(?=[A-Z])", "_", scheme)
    return re.sub(r"[^A-Za-z0-9]+", "_", words).strip("_").upper() or "API_TOKEN"


def _check_base(url: str) -> str:
    parts = urllib.parse.urlsplit(url)
    if parts.scheme.lower() not in ("http", "https") or not parts.hostname:
        raise SchemaProblem(f"base URL {url!r} must be an absolute http:// or https:// URL")
    if parts.query or parts.fragment or "{" in url or "}" in url:
        raise SchemaProblem(f"base URL {url!r} must not have a query, fragment or braces")
    return url


def _tool_name(op: Mapping[str, Any], method: str, path: str) -> str:
    raw = op.get("operationId")
    generated = f"{method.lower()}_{path.strip('/')}"
    wanted = raw if isinstance(raw, str) and raw.strip() else generated
    name = re.sub(r"[^A-Za-z0-9_-]+", "_", wanted).strip("_-")[:MAX_NAME]
    return name or f"{method.lower()}_root"


class _Operation:
    """One operation to one ToolSpec."""

    def __init__(
        self,
        owner: _Importer,
        path: str,
        method: str,
        item: Mapping[str, Any],
        op: Mapping[str, Any],
    ) -> None:
        self.owner, self.doc, self.path, self.method = owner, owner.doc, path, method
        self.item, self.op = item, op
        self.schemas = SchemaConverter(owner.doc, openapi_30=owner.openapi_30)
        self.properties: dict[str, Any] = {}
        self.required: list[str] = []
        self.maps: dict[str, dict[str, str]] = {"query": {}, "headers": {}, "body": {}}

    def spec(self) -> ToolSpec:
        self._parameters()
        metadata: dict[str, Any] = {k: v for k, v in self.maps.items() if v}
        metadata.update(self._body())
        auth = self.owner.auth(self.op)
        if auth is not None:
            metadata["auth"] = auth
        parameters: dict[str, Any] = {"type": "object", "properties": self.properties}
        if self.required:
            parameters["required"] = self.required
        if self.schemas.defs:
            parameters["$defs"] = self.schemas.defs
        base = self.owner.server(self.op, self.item, self.owner.doc)
        try:
            return ToolSpec(
                name=self.owner.unique_name(_tool_name(self.op, self.method, self.path)),
                description=self._description(),
                category=self._category(),
                kind=ToolKind.HTTP,
                target=f"{self.method} {base}{_encode_path(self.path)}",
                parameters=normalize_parameters(parameters),
                returns=self._returns(),
                metadata=metadata,
            )
        except ValueError as exc:  # pydantic's ValidationError
            raise SchemaProblem(str(exc).splitlines()[-1]) from None

    # -- parameters --------------------------------------------------------------
    def _parameters(self) -> None:
        merged: dict[tuple[str, str], Mapping[str, Any]] = {}
        for level in (self.item, self.op):
            for raw in _list(level.get("parameters")):
                param = deref(self.doc, raw)
                if not isinstance(param, Mapping) or not isinstance(param.get("name"), str):
                    raise SchemaProblem("a parameter has no name")
                merged[(str(param.get("in")), param["name"])] = param
        placeholders = re.findall(r"\{([^{}]*)\}", self.path)
        for name in placeholders:
            if not re.fullmatch(r"[^{}/]+", name):
                raise SchemaProblem(f"path placeholder {{{name}}} is not a usable name")
            merged.setdefault(("path", name), {"name": name, "in": "path"})
        ordered = sorted(merged.values(), key=lambda p: ["path", "query", "header"].index(p["in"])
                         if p.get("in") in ("path", "query", "header") else 3)  # fmt: skip
        for param in ordered:
            self._parameter(param, placeholders)

    def _parameter(self, param: Mapping[str, Any], placeholders: list[str]) -> None:
        where, wire = param.get("in"), str(param["name"])
        if where == "cookie" or where not in ("path", "query", "header"):
            if param.get("required"):
                raise SchemaProblem(f"required {where} parameter {wire!r} is not supported")
            return
        if where == "path" and wire not in placeholders:
            return  # declared but not in the template: nothing to fill
        if where == "header" and wire.lower() in _SKIPPED_HEADERS:
            return  # set by the executor (OpenAPI says to ignore these)
        schema = self.schemas.convert(_param_schema(self.doc, param))
        if isinstance(param.get("description"), str) and isinstance(schema, dict):
            schema.setdefault("description", param["description"])
        name = wire if where == "path" else self._free_name(wire, str(where))
        self.properties[name] = schema
        if where == "path" or param.get("required") is True:
            self.required.append(name)
        if where != "path":
            self.maps["query" if where == "query" else "headers"][name] = wire

    def _free_name(self, wire: str, prefix: str) -> str:
        name, n = wire, 1
        if name in self.properties:
            name = f"{prefix}_{wire}"
        while name in self.properties:
            n += 1
            name = f"{prefix}_{wire}_{n}"
        return name

    # -- request body ------------------------------------------------------------
    def _body(self) -> dict[str, Any]:
        if "requestBody" not in self.op:
            return {}
        body = deref(self.doc, self.op["requestBody"])
        if not isinstance(body, Mapping):
            raise SchemaProblem("requestBody is not an object")
        media, content = _media(body.get("content"))
        if media is None:
            kinds = ", ".join(map(str, body.get("content") or {})) or "none"
            if body.get("required"):
                raise SchemaProblem(f"request body type ({kinds}) is not JSON, a form or multipart")
            self.owner._warn(f"{self.method} {self.path}: optional {kinds} body not imported")
            return {}
        schema = deref(self.doc, content.get("schema", {})) if content else {}
        extra: dict[str, Any] = {"body_format": media} if media in ("form", "multipart") else {}
        fields = _object_fields(self.doc, schema)
        if fields is None:
            name = self._free_name("body", "request")
            self.properties[name] = self.schemas.convert(schema)
            if body.get("required"):
                self.required.append(name)
            return {"body": name, **extra}
        properties, required = fields
        for wire, sub in properties.items():
            resolved = deref(self.doc, sub)
            if isinstance(resolved, Mapping) and resolved.get("readOnly") is True:
                continue  # set by the server, never sent
            name = self._free_name(wire, "body")
            binary = (
                media == "multipart"
                and isinstance(resolved, Mapping)
                and resolved.get("type") == "string"
                and resolved.get("format") in ("binary", "base64", "byte")
            )
            self.properties[name] = FILE_PART if binary else self.schemas.convert(sub)
            if wire in required:
                self.required.append(name)
            self.maps["body"][name] = wire
        return {"body": self.maps.pop("body"), **extra} if self.maps["body"] else {"body": {}}

    # -- the rest ------------------------------------------------------------------
    def _description(self) -> str:
        parts = [self.op.get(k) for k in ("summary", "description")]
        text = "\n\n".join(p.strip() for p in parts if isinstance(p, str) and p.strip())
        return text or f"{self.method} {self.path}"

    def _category(self) -> str:
        tags = self.op.get("tags")
        wanted = self.owner.category or (
            tags[0] if isinstance(tags, list) and tags and isinstance(tags[0], str) else "general"
        )
        try:
            return check_name(wanted.strip(), "category")
        except ValueError:
            return "general"

    def _returns(self) -> Returns:
        responses = self.op.get("responses")
        for code, response in responses.items() if isinstance(responses, Mapping) else ():
            if str(code).startswith("2"):
                resolved = deref(self.doc, response)
                content = resolved.get("content") if isinstance(resolved, Mapping) else None
                kinds = [str(k).lower() for k in content] if isinstance(content, Mapping) else []
                if kinds and all(k.startswith("text/") for k in kinds):
                    return Returns.TEXT
        return Returns.JSON


def _list(value: Any) -> list[Any]:
    return value if isinstance(value, list) else []


def _param_schema(doc: Mapping[str, Any], param: Mapping[str, Any]) -> Any:
    if "schema" in param:
        return param["schema"]
    content = param.get("content")
    if isinstance(content, Mapping) and content:
        first = next(iter(content.values()))
        if isinstance(first, Mapping) and "schema" in first:
            return first["schema"]
    return {"type": "string"}


def _media(content: Any) -> tuple[str | None, Mapping[str, Any] | None]:
    if not isinstance(content, Mapping):
        return None, None
    kinds = {str(k).split(";")[0].strip().lower(): v for k, v in content.items()}
    for kind, value in kinds.items():
        if kind == "application/json" or kind.endswith("+json"):
            return "json", value if isinstance(value, Mapping) else {}
    value = kinds.get("application/x-www-form-urlencoded")
    if value is not None:
        return "form", value if isinstance(value, Mapping) else {}
    value = kinds.get("multipart/form-data")
    if value is not None:
        return "multipart", value if isinstance(value, Mapping) else {}
    return None, None


def _object_fields(
    doc: Mapping[str, Any], schema: Any
) -> tuple[Mapping[str, Any], set[str]] | None:
    """(properties, required) when the body is an object with named properties, merging
    ``allOf`` members; None for anything else (array, scalar, oneOf, free-form map)."""
    if not isinstance(schema, Mapping):
        return None
    properties: dict[str, Any] = {}
    required: set[str] = set()
    members = [schema, *[deref(doc, m) for m in _list(schema.get("allOf"))]]
    for member in members:
        if not isinstance(member, Mapping) or any(k in member for k in ("oneOf", "anyOf")):
            return None
        if member.get("type") not in (None, "object"):
            return None
        if isinstance(member.get("properties"), Mapping):
            properties.update({str(k): v for k, v in member["properties"].items()})
        required |= {str(r) for r in _list(member.get("required"))}
    return (properties, required) if properties else None


def _encode_path(path: str) -> str:
    """Percent-encode what the document wrote literally; placeholders stay as they are."""
    pieces = re.split(r"(\{[^{}/]+\})", path)
    return "".join(
        piece if piece.startswith("{") else urllib.parse.quote(piece, safe="/:@!$&'()*+,;=-._~%")
        for piece in pieces
    )
