"""OpenAPI schemas to JSON Schema 2020-12, for tool parameters.

Local ``$ref``s are followed with cycle detection: a referenced component is copied
once into the tool's ``$defs`` and referred to from there, so recursive schemas
(a tree of nodes) stay recursive instead of expanding forever. Documents are
untrusted: a YAML anchor that contains itself, a chain of references that loops,
or a schema that expands past ``MAX_NODES`` raises ``SchemaProblem``, never hangs.
OpenAPI 3.0 dialect (``nullable``, boolean ``exclusiveMinimum``, ``example``) is
translated; vendor extensions and documentation-only keywords are dropped.
"""

from __future__ import annotations

import datetime
import math
import re
import urllib.parse
from collections.abc import Mapping
from typing import Any

MAX_NODES = 50_000
_SCHEMA_LISTS = {"allOf", "anyOf", "oneOf", "prefixItems"}
_SCHEMA_MAPS = {"properties", "patternProperties", "$defs", "definitions", "dependentSchemas"}
_SCHEMA_ONE = {"not", "items", "additionalItems", "contains", "propertyNames", "if", "then",
               "else", "additionalProperties", "unevaluatedItems", "unevaluatedProperties",
               "contentSchema"}  # fmt: skip
_DATA = {"default", "enum", "const", "examples"}
_DROPPED = {"discriminator", "xml", "externalDocs", "example", "nullable", "$id", "$schema",
            "$anchor", "$dynamicAnchor", "$dynamicRef", "$vocabulary"}  # fmt: skip


class SchemaProblem(Exception):
    """The document cannot be turned into a parameter schema (the text says where/why)."""


def resolve(doc: Mapping[str, Any], ref: Any) -> Any:
    """The node a local ``#/a/b`` reference points to."""
    if not isinstance(ref, str) or not ref.startswith("#"):
        raise SchemaProblem(f"$ref {ref!r}: only local references ('#/...') are supported")
    node: Any = doc
    pointer = urllib.parse.unquote(ref[1:])
    for token in pointer.split("/")[1:] if pointer else []:
        key = token.replace("~1", "/").replace("~0", "~")
        if isinstance(node, Mapping) and key in node:
            node = node[key]
        elif isinstance(node, list) and key.isdigit() and int(key) < len(node):
            node = node[int(key)]
        else:
            raise SchemaProblem(f"$ref {ref!r} does not resolve")
    return node


def deref(doc: Mapping[str, Any], node: Any) -> Any:
    """Follow a chain of ``$ref``s to a node that is not one (a loop is an error)."""
    seen: list[str] = []
    while isinstance(node, Mapping) and "$ref" in node:
        ref = node["$ref"]
        if ref in seen:
            raise SchemaProblem(f"$ref {ref!r} refers to itself through {' -> '.join(seen)}")
        seen.append(ref)
        node = resolve(doc, ref)
    return node


def plain(value: Any, *, budget: list[int] | None = None, stack: tuple[int, ...] = ()) -> Any:
    """A JSON-compatible copy of YAML data (string keys, ISO dates, no cycles)."""
    budget = budget if budget is not None else [MAX_NODES]
    _spend(budget)
    if isinstance(value, Mapping | list):
        if id(value) in stack:
            raise SchemaProblem("the document contains a cycle (a YAML anchor inside itself)")
        inner = (*stack, id(value))
        if isinstance(value, list):
            return [plain(item, budget=budget, stack=inner) for item in value]
        return {str(k): plain(v, budget=budget, stack=inner) for k, v in value.items()}
    if isinstance(value, datetime.date | datetime.datetime):
        return value.isoformat()
    if isinstance(value, float) and not math.isfinite(value):
        return str(value)
    if value is None or isinstance(value, str | int | float | bool):
        return value
    return str(value)


def _spend(budget: list[int]) -> None:
    budget[0] -= 1
    if budget[0] < 0:
        raise SchemaProblem(f"the schema expands to more than {MAX_NODES} nodes")


class SchemaConverter:
    """Converts the schemas of one operation; collects the ``$defs`` they refer to."""

    def __init__(self, doc: Mapping[str, Any], *, openapi_30: bool) -> None:
        self.doc = doc
        self.openapi_30 = openapi_30
        self.defs: dict[str, Any] = {}
        self._names: dict[str, str] = {}
        self._budget = [MAX_NODES]

    def convert(self, schema: Any, stack: tuple[int, ...] = ()) -> Any:
        _spend(self._budget)
        if isinstance(schema, bool):
            return schema
        if not isinstance(schema, Mapping):
            raise SchemaProblem(f"a schema must be an object, got {schema!r:.60}")
        if id(schema) in stack:
            raise SchemaProblem("the document contains a cycle (a YAML anchor inside itself)")
        stack = (*stack, id(schema))
        if "$ref" in schema:
            ref = {"$ref": self._ref(schema["$ref"])}
            if self.openapi_30:  # siblings of $ref are ignored in 3.0
                return ref
            rest = self._keywords(schema, stack)
            rest.pop("$ref", None)
            return {**ref, **rest}
        return self._keywords(schema, stack)

    def _ref(self, ref: Any) -> str:
        if not isinstance(ref, str):
            raise SchemaProblem(f"$ref must be a string, got {ref!r:.60}")
        name = self._names.get(ref)
        if name is None:
            target = resolve(self.doc, ref)
            name = self._names[ref] = self._def_name(ref)
            self.defs[name] = {}  # placeholder: a reference back to it ends here
            self.defs[name] = self.convert(target)
            self._check_progress(name)
        return f"#/$defs/{name}"

    def _check_progress(self, name: str) -> None:
        """A definition that reaches itself without describing a nested value (``A: {allOf:
        [{$ref: A}]}``) would make validation recurse forever: refuse it here."""
        pending, seen = [name], set()
        while pending:
            current = pending.pop()
            for ref in _in_place_refs(self.defs.get(current, {})):
                target = ref.removeprefix("#/$defs/")
                if target == name:
                    raise SchemaProblem(
                        f"schema {name!r} refers to itself without describing a nested value"
                    )
                if target not in seen:
                    seen.add(target)
                    pending.append(target)

    def _def_name(self, ref: str) -> str:
        base = re.sub(r"[^A-Za-z0-9_.-]", "_", ref.rsplit("/", 1)[-1]) or "schema"
        name, n = base, 1
        while name in self.defs:
            n += 1
            name = f"{base}_{n}"
        return name

    def _keywords(self, schema: Mapping[str, Any], stack: tuple[int, ...]) -> dict[str, Any]:
        out: dict[str, Any] = {}
        for key, value in schema.items():
            key = str(key)
            if key.startswith("x-") or key in _DROPPED:
                continue
            if key in _DATA:
                out[key] = plain(value, budget=self._budget)
            elif key in _SCHEMA_LISTS and isinstance(value, list):
                out[key] = [self.convert(item, stack) for item in value]
            elif key in _SCHEMA_MAPS and isinstance(value, Mapping):
                out[key] = {str(n): self.convert(s, stack) for n, s in value.items()}
            elif key in _SCHEMA_ONE:
                out[key] = (
                    [self.convert(item, stack) for item in value]
                    if isinstance(value, list)
                    else self.convert(value, stack)
                )
            else:
                out[key] = plain(value, budget=self._budget)
        if "example" in schema and "examples" not in out:
            out["examples"] = [plain(schema["example"], budget=self._budget)]
        if self.openapi_30:
            self._from_30(schema, out)
        return out

    @staticmethod
    def _from_30(schema: Mapping[str, Any], out: dict[str, Any]) -> None:
        if schema.get("nullable") is True:
            if isinstance(out.get("type"), str):
                out["type"] = [out["type"], "null"]
            if isinstance(out.get("enum"), list) and None not in out["enum"]:
                out["enum"].append(None)
        for bound, limit in (("exclusiveMinimum", "minimum"), ("exclusiveMaximum", "maximum")):
            # 3.0: a boolean flag on minimum/maximum; 2020-12: the bound itself.
            if isinstance(out.get(bound), bool) and out.pop(bound) and limit in out:
                out[bound] = out.pop(limit)


_IN_PLACE_LISTS = {"allOf", "anyOf", "oneOf"}
_IN_PLACE_ONE = {"not", "if", "then", "else"}


def _in_place_refs(schema: Any) -> list[str]:
    """The ``$ref``s a schema applies to the same value (not to a property or item)."""
    if not isinstance(schema, Mapping):
        return []
    refs = [schema["$ref"]] if isinstance(schema.get("$ref"), str) else []
    for key, value in schema.items():
        if key in _IN_PLACE_LISTS and isinstance(value, list):
            for item in value:
                refs += _in_place_refs(item)
        elif key in _IN_PLACE_ONE or key == "dependentSchemas":
            subs = (
                value.values()
                if key == "dependentSchemas" and isinstance(value, Mapping)
                else [value]
            )
            for item in subs:
                refs += _in_place_refs(item)
    return refs
