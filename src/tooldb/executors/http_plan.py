"""HTTP tools' definitions: parse ``target`` and ``metadata`` once, then map arguments
onto a request (path, query, headers, body, auth) without ever changing the host.

Target: ``"METHOD URL-template"``, e.g. ``GET https://api.example.com/pets/{pet_id}``;
placeholders may appear in the path only. Metadata keys (all optional):

* ``query`` / ``headers``: arguments sent as query parameters / headers, as a list of
  names or a mapping ``{argument: wire name}``;
* ``body``: arguments sent as JSON body properties (list or mapping), ``"*"`` for all
  remaining arguments, or one argument name whose value *is* the body;
* ``body_format``: ``"json"`` (default), ``"form"`` (url-encoded) or ``"multipart"``
  (multipart/form-data: a field whose value is ``{"filename", "content" |
  "content_base64", "content_type"}`` is sent as a file part);
* ``fixed_headers``: ``{header: value}`` sent on every call;
* ``auth``: ``{"scheme": "bearer"|"api_key"|"basic", "in": "header"|"query"|"cookie", "name": ...,
  "secret": "ENV_VAR_NAME"}``: only the secret's *name* is stored.

Arguments not mapped anywhere fill the path placeholders of the same name; the rest go
to the query string for GET, DELETE, HEAD and OPTIONS (and when the body is a single
argument), to the body otherwise.
"""

from __future__ import annotations

import base64
import json
import re
import urllib.parse
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any, Literal

from ..errors import DefinitionError, ExecutionError
from ..types import ToolSpec

METHODS = ("GET", "POST", "PUT", "PATCH", "DELETE", "HEAD", "OPTIONS")
QUERY_METHODS = frozenset({"GET", "DELETE", "HEAD", "OPTIONS"})
METADATA_KEYS = {"query", "headers", "body", "body_format", "fixed_headers", "auth"}
AUTH_KEYS = {"scheme", "in", "name", "secret"}
_PLACEHOLDER = re.compile(r"\{([^{}/]+)\}")
_TOKEN = re.compile(r"[!#$%&'*+.^_`|~0-9A-Za-z-]+")  # RFC 9110 header field name
_ENV_NAME = re.compile(r"[A-Za-z_][A-Za-z0-9_.-]*")
_UNSAFE_HEADER_VALUE = re.compile(r"[\x00-\x08\x0a-\x1f\x7f]")
_COOKIE_NAME = re.compile(r"[!#$%&'*+\-.^_`|~0-9A-Za-z]+")

SecretLookup = Callable[[str], str | None]


@dataclass(frozen=True)
class Auth:
    scheme: Literal["bearer", "api_key", "basic"]
    location: Literal["header", "query"]
    name: str
    secret: str


@dataclass(frozen=True)
class HttpPlan:
    """Everything a call needs from the definition, checked at registration."""

    method: str
    origin: str  # scheme://host[:port], never touched by arguments
    host: str
    path: str  # template, already URL-encoded outside placeholders
    fixed_query: str
    path_params: tuple[str, ...]
    query: dict[str, str] = field(default_factory=dict)
    headers: dict[str, str] = field(default_factory=dict)
    body: dict[str, str] | str | None = None  # mapping, "*", or one argument name
    body_format: Literal["json", "form", "multipart"] = "json"
    fixed_headers: dict[str, str] = field(default_factory=dict)
    auth: Auth | None = None


@dataclass
class Outgoing:
    """A request ready to send, plus what must never appear in an error message."""

    method: str
    url: str
    query: list[tuple[str, str]]
    headers: list[tuple[str, str]]
    json_body: Any = None
    form_body: dict[str, str] | None = None
    #: multipart file parts: (field, (filename, content, content type))
    files: list[tuple[str, tuple[str, bytes, str]]] | None = None
    has_body: bool = False
    secrets: list[str] = field(default_factory=list)
    auth_header: str | None = None  # dropped when a redirect leaves the origin

    def redact(self, text: str) -> str:
        for secret in self.secrets:
            if secret:
                text = text.replace(secret, "***")
        return text


# -- definition (registration time) ----------------------------------------------------


def parse_plan(spec: ToolSpec) -> HttpPlan:
    """Parse and check an http tool's target and metadata; raise DefinitionError."""
    try:
        return _parse(spec)
    except DefinitionError as exc:
        raise DefinitionError(f"http tool {spec.name!r}: {exc}") from None


def _parse(spec: ToolSpec) -> HttpPlan:
    method, origin, host, path, query = _parse_target(spec.target)
    meta = spec.metadata
    unknown = sorted(set(meta) - METADATA_KEYS)
    if unknown:
        raise DefinitionError(
            f"unknown metadata key {unknown[0]!r} (known: {', '.join(sorted(METADATA_KEYS))})"
        )
    path_params = tuple(dict.fromkeys(_PLACEHOLDER.findall(path)))
    properties = spec.parameters.get("properties", {})
    required = set(spec.parameters.get("required", []))
    for name in path_params:
        prop = properties.get(name)
        if prop is None:
            raise DefinitionError(f"path placeholder {{{name}}} is not a declared parameter")
        if name not in required and not (isinstance(prop, dict) and "default" in prop):
            raise DefinitionError(f"path parameter {name!r} must be required or have a default")
    body_format = meta.get("body_format", "json")
    if body_format not in ("json", "form", "multipart"):
        raise DefinitionError(
            f"body_format must be 'json', 'form' or 'multipart', got {body_format!r}"
        )
    plan = HttpPlan(
        method=method,
        origin=origin,
        host=host,
        path=path,
        fixed_query=query,
        path_params=path_params,
        query=_mapping(meta.get("query"), "query"),
        headers=_header_mapping(meta.get("headers")),
        body=_body(meta.get("body")),
        body_format=body_format,
        fixed_headers=_fixed_headers(meta.get("fixed_headers")),
        auth=_auth(meta.get("auth")),
    )
    _check_names(plan, properties, spec.parameters.get("additionalProperties", False))
    return plan


def _parse_target(target: str) -> tuple[str, str, str, str, str]:
    method, _, url = target.strip().partition(" ")
    url = url.strip()
    if method.upper() not in METHODS or not url:
        raise DefinitionError(
            f"target {target!r} must look like 'METHOD URL' with METHOD one of {', '.join(METHODS)}"
        )
    parts = urllib.parse.urlsplit(url)
    if parts.scheme.lower() not in ("http", "https") or not parts.hostname:
        raise DefinitionError(f"target URL {url!r} must be an absolute http:// or https:// URL")
    if "@" in parts.netloc:
        raise DefinitionError(
            f"target URL {url!r} carries credentials: use metadata 'auth' with a secret name"
        )
    if parts.fragment or url.endswith("#"):
        raise DefinitionError(f"target URL {url!r} must not have a #fragment")
    if _UNSAFE_HEADER_VALUE.search(url) or " " in url:
        raise DefinitionError(f"target URL {url!r} contains spaces or control characters")
    for what, text in (("host", parts.netloc), ("query", parts.query)):
        if "{" in text or "}" in text:
            raise DefinitionError(
                f"target URL {url!r}: placeholders are allowed in the path only, not the {what}"
            )
    try:
        _ = parts.port
    except ValueError as exc:
        raise DefinitionError(f"target URL {url!r}: {exc}") from None
    if "{" in _PLACEHOLDER.sub("", parts.path) or "}" in _PLACEHOLDER.sub("", parts.path):
        raise DefinitionError(f"target URL {url!r} has an unbalanced '{{' or '}}' in its path")
    origin = f"{parts.scheme.lower()}://{parts.netloc}"
    return method.upper(), origin, parts.hostname, parts.path or "/", parts.query


def _mapping(value: Any, key: str) -> dict[str, str]:
    if value is None:
        return {}
    if isinstance(value, list) and all(isinstance(n, str) and n for n in value):
        return {n: n for n in value}
    if isinstance(value, Mapping) and all(
        isinstance(k, str) and k and isinstance(v, str) and v for k, v in value.items()
    ):
        return dict(value)
    raise DefinitionError(
        f"metadata {key!r} must be a list of argument names or a mapping "
        f"{{argument: name}}, got {value!r}"
    )


def _header_mapping(value: Any) -> dict[str, str]:
    mapping = _mapping(value, "headers")
    for wire in mapping.values():
        _check_header_name(wire)
    return mapping


def _check_header_name(name: str) -> None:
    if not _TOKEN.fullmatch(name):
        raise DefinitionError(f"{name!r} is not a valid HTTP header name")


def _body(value: Any) -> dict[str, str] | str | None:
    if value is None or isinstance(value, str):
        if isinstance(value, str) and not value:
            raise DefinitionError("metadata 'body' must not be an empty string")
        return value
    return _mapping(value, "body")


def _fixed_headers(value: Any) -> dict[str, str]:
    if value is None:
        return {}
    if not isinstance(value, Mapping) or not all(
        isinstance(k, str) and isinstance(v, str) for k, v in value.items()
    ):
        raise DefinitionError(f"metadata 'fixed_headers' must map names to strings, got {value!r}")
    for name, text in value.items():
        _check_header_name(name)
        if _UNSAFE_HEADER_VALUE.search(text):
            raise DefinitionError(f"fixed header {name!r} contains a line break or control char")
        if name.lower() == "authorization":
            raise DefinitionError(
                "fixed header 'Authorization' would store a credential in clear: "
                "use metadata 'auth' with a secret name"
            )
    return dict(value)


def _auth(value: Any) -> Auth | None:
    if value is None:
        return None
    if not isinstance(value, Mapping):
        raise DefinitionError(f"metadata 'auth' must be an object, got {value!r}")
    unknown = sorted(set(value) - AUTH_KEYS)
    if unknown:
        raise DefinitionError(
            f"auth key {unknown[0]!r} is not allowed (known: {', '.join(sorted(AUTH_KEYS))}); "
            "auth stores the secret's name only, never its value"
        )
    scheme = value.get("scheme")
    if scheme not in ("bearer", "api_key", "basic"):
        raise DefinitionError(f"auth scheme must be bearer, api_key or basic, got {scheme!r}")
    location = value.get("in", "header")
    if location not in ("header", "query", "cookie") or (
        scheme != "api_key" and location != "header"
    ):
        raise DefinitionError(
            f"auth 'in' must be 'header' (or 'query' or 'cookie' for api_key): {location!r}"
        )
    name = value.get("name", "Authorization" if scheme != "api_key" else None)
    if not isinstance(name, str) or not name:
        raise DefinitionError("auth scheme api_key needs a 'name' (the header or query name)")
    if location == "header":
        _check_header_name(name)
    if location == "cookie" and not _COOKIE_NAME.fullmatch(name):
        raise DefinitionError(f"auth cookie name {name!r} is not a valid cookie name")
    secret = value.get("secret")
    if not isinstance(secret, str) or not _ENV_NAME.fullmatch(secret):
        raise DefinitionError(
            f"auth 'secret' must name an environment variable or settings secret, got {secret!r}"
        )
    return Auth(scheme, location, name, secret)


def _check_names(plan: HttpPlan, properties: Mapping[str, Any], open_schema: Any) -> None:
    mapped = list(plan.query) + list(plan.headers)
    if isinstance(plan.body, dict):
        mapped += list(plan.body)
    elif plan.body not in (None, "*"):
        mapped.append(str(plan.body))
    seen = set(plan.path_params)
    for name in mapped:
        if name in seen:
            raise DefinitionError(f"argument {name!r} is mapped to two places")
        seen.add(name)
        if name not in properties and open_schema is False:
            raise DefinitionError(f"metadata maps argument {name!r}, which is not a parameter")


# -- call time -------------------------------------------------------------------------


def build_request(plan: HttpPlan, arguments: Mapping[str, Any], secret: SecretLookup) -> Outgoing:
    """Map bound arguments onto a request; raise ExecutionError for values that cannot be
    sent safely (empty path segment, header with a line break, missing secret)."""
    args = dict(arguments)
    path = _fill_path(plan.path, {name: args.pop(name, None) for name in plan.path_params})
    url = plan.origin + path + (f"?{plan.fixed_query}" if plan.fixed_query else "")
    headers = [(wire, _header_value(wire, value)) for wire, value in _take(args, plan.headers)]
    out = Outgoing(plan.method, url, _pairs(args, plan.query), headers)
    out.headers += plan.fixed_headers.items()
    if isinstance(plan.body, str) and plan.body != "*":  # one argument is the whole body
        value = args.pop(plan.body, None)
        if value is not None:
            _set_body(out, plan, value)
        out.query += _pairs(args, {name: name for name in args})  # the rest: query
    else:
        body = dict(_take(args, plan.body)) if isinstance(plan.body, dict) else {}
        if plan.method in QUERY_METHODS and plan.body != "*":
            out.query += _pairs(args, {name: name for name in args})
        else:
            body.update(args)
        if body or (plan.body is not None and plan.method not in QUERY_METHODS):
            _set_body(out, plan, body)
    if plan.auth is not None:
        _apply_auth(out, plan.auth, secret)
    return out


def _fill_path(template: str, values: Mapping[str, Any]) -> str:
    segments = []
    for segment in template.split("/"):
        filled = _PLACEHOLDER.sub(lambda m: _path_value(m.group(1), values[m.group(1)]), segment)
        if filled != segment and filled.strip(".") == "":
            filled = filled.replace(".", "%2E")  # "." or ".." would climb out of the path
        segments.append(filled)
    return "/".join(segments)


def _path_value(name: str, value: Any) -> str:
    if isinstance(value, list):
        text = ",".join(_scalar_text(name, item) for item in value)
    else:
        text = _scalar_text(name, value)
    if text == "":
        raise ExecutionError(f"path parameter {name!r} is empty: it would change the URL path")
    return urllib.parse.quote(text, safe="")


def _scalar_text(name: str, value: Any) -> str:
    if value is None:
        raise ExecutionError(f"path parameter {name!r} has no value")
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, str | int | float):
        return str(value)
    raise ExecutionError(f"path parameter {name!r} must be a string or number, got {value!r}")


def _take(args: dict[str, Any], mapping: Mapping[str, str]) -> list[tuple[str, Any]]:
    return [(wire, args.pop(name)) for name, wire in mapping.items() if name in args]


def _pairs(args: dict[str, Any], mapping: Mapping[str, str]) -> list[tuple[str, str]]:
    pairs: list[tuple[str, str]] = []
    for wire, value in _take(args, mapping):
        items = value if isinstance(value, list) else [value]
        pairs += [(wire, _query_text(item)) for item in items if item is not None]
    return pairs


def _query_text(value: Any) -> str:
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, str | int | float):
        return str(value)
    return json.dumps(value, ensure_ascii=False, separators=(",", ":"))


def _header_value(name: str, value: Any) -> str:
    text = _query_text(value) if value is not None else ""
    if _UNSAFE_HEADER_VALUE.search(text):
        raise ExecutionError(
            f"header {name!r}: the value contains a line break or control character "
            "(header injection refused)"
        )
    return text


def _set_body(out: Outgoing, plan: HttpPlan, value: Any) -> None:
    out.has_body = True
    if plan.body_format in ("form", "multipart"):
        if not isinstance(value, dict):
            raise ExecutionError(f"a {plan.body_format} body must be an object of fields")
        fields = {k: v for k, v in value.items() if v is not None}
        if plan.body_format == "multipart":
            out.files = [(k, _file_part(k, v)) for k, v in fields.items() if _is_file(v)]
            fields = {k: v for k, v in fields.items() if not _is_file(v)}
        out.form_body = {k: _query_text(v) for k, v in fields.items()}
    else:
        out.json_body = value


def _is_file(value: Any) -> bool:
    return isinstance(value, dict) and ("content" in value or "content_base64" in value)


def _file_part(field: str, value: dict[str, Any]) -> tuple[str, bytes, str]:
    """A multipart file part from its JSON form (text ``content`` or ``content_base64``)."""
    filename = value.get("filename") or field
    kind = value.get("content_type") or "application/octet-stream"
    for label, text in (("filename", filename), ("content_type", kind)):
        if not isinstance(text, str) or _UNSAFE_HEADER_VALUE.search(text) or '"' in text:
            raise ExecutionError(f"file part {field!r}: {label} {text!r} is not allowed")
    if "content_base64" in value:
        try:
            content = base64.b64decode(str(value["content_base64"]), validate=True)
        except ValueError:
            raise ExecutionError(f"file part {field!r}: content_base64 is not base64") from None
    else:
        raw = value["content"]
        content = raw.encode("utf-8") if isinstance(raw, str) else _query_text(raw).encode()
    return filename, content, kind


def _apply_auth(out: Outgoing, auth: Auth, lookup: SecretLookup) -> None:
    value = lookup(auth.secret)
    if not value:
        raise ExecutionError(
            f"the secret {auth.secret!r} is not set: export it as an environment variable or "
            f"add it under [secrets] in the tooldb config"
        )
    if _UNSAFE_HEADER_VALUE.search(value):
        raise ExecutionError(f"the secret {auth.secret!r} contains a line break or control char")
    out.secrets.append(value)
    if auth.scheme == "api_key" and auth.location == "query":
        out.query.append((auth.name, value))
        out.secrets.append(urllib.parse.quote_plus(value))
        out.secrets.append(urllib.parse.quote(value, safe=""))
        return
    if auth.scheme == "api_key" and auth.location == "cookie":
        if ";" in value or "," in value or " " in value:
            raise ExecutionError(f"the secret {auth.secret!r} cannot be a cookie value")
        others = [v for k, v in out.headers if k.lower() == "cookie"]
        out.headers = [(k, v) for k, v in out.headers if k.lower() != "cookie"]
        out.headers.append(("Cookie", "; ".join([*others, f"{auth.name}={value}"])))
        out.auth_header = "Cookie"
        return
    if auth.scheme == "bearer":
        header = f"Bearer {value}"
    elif auth.scheme == "basic":
        header = "Basic " + base64.b64encode(value.encode()).decode("ascii")
        out.secrets.append(header[6:])
    else:
        header = value
    out.headers.append((auth.name, header))
    out.auth_header = auth.name
