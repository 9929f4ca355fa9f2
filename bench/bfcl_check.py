"""BFCL's AST check (bfcl_eval/eval_checker/ast_eval/ast_checker.py), re-written here.

A call is right when its function is the expected one, it has every required
parameter and no parameter outside the schema, each value it gives is one of the
acceptable values (type-aware: an int stands for a float; strings lower-cased without
spaces and ``,./-_*^``; lists and dicts item by item), and each parameter it leaves
out lists "" (optional) among the acceptable values. Several expected calls are matched
in any order, one to one.
"""

from __future__ import annotations

import re
from typing import Any

_NUMERIC = {"integer", "int", "float", "number", "double", "long"}


def standardize(text: str) -> str:
    return re.sub(r"[ ,./\-_*^]", "", text).lower().replace("'", '"')


def check_calls(
    calls: list[dict[str, Any]], expected: list[dict[str, Any]], functions: list[dict[str, Any]],
    *, ordered: bool = False,
) -> tuple[bool, str]:  # fmt: skip
    """Whether ``calls`` match ``expected``, and the reason of a miss."""
    if not calls:
        return False, "declined"
    if len(calls) != len(expected):
        return False, f"{len(calls)} calls for {len(expected)}"
    docs = {f["name"]: f for f in functions}
    remaining = list(range(len(calls)))
    first_error = ""
    for want in expected:
        for index in remaining:
            ok, why = check_one(calls[index], want, docs)
            if ok:
                remaining.remove(index)
                break
            first_error = first_error or why
        else:
            return False, first_error or "no call matches"
    return True, ""


def check_one(call: dict[str, Any], want: dict[str, Any], docs: dict[str, Any]) -> tuple[bool, str]:
    ((name, arguments),) = call.items()
    ((want_name, acceptable),) = want.items()
    if name != want_name:
        return False, "wrong function"
    doc = docs.get(name, {})
    properties = (doc.get("parameters") or {}).get("properties") or {}
    required = (doc.get("parameters") or {}).get("required") or []
    for param in required:
        if param not in arguments:
            return False, "required argument missing"
    for param, value in arguments.items():
        if param not in properties:
            return False, "extra parameter"
        if param not in acceptable:
            return False, "extra parameter"
        kind = (properties[param] or {}).get("type", "")
        if not value_matches(value, acceptable[param], kind):
            return False, f"wrong {kind or 'value'} value"
    for param, values in acceptable.items():
        if param not in arguments and "" not in values:
            return False, "optional argument missing"
    return True, ""


def value_matches(value: Any, acceptable: list[Any], kind: str) -> bool:
    return any(_same(value, option, kind) for option in acceptable if option != "" or value == "")


def _same(value: Any, option: Any, kind: str) -> bool:
    if isinstance(option, str):
        return isinstance(value, str) and standardize(value) == standardize(option)
    if isinstance(option, bool) or isinstance(value, bool):
        return value is option
    if isinstance(option, int | float):
        if not isinstance(value, int | float):
            return False
        if isinstance(option, float) or kind in {"float", "number", "double"}:
            return float(value) == float(option)
        return isinstance(value, int) and value == option
    if isinstance(option, list):
        return (
            isinstance(value, list)
            and len(value) == len(option)
            and all(_same(v, o, "") for v, o in zip(value, option, strict=True))
        )
    if isinstance(option, dict):
        if not isinstance(value, dict):
            return False
        for key, options in option.items():
            if key not in value:
                if "" not in options:
                    return False
                continue
            if not value_matches(value[key], options, ""):
                return False
        return all(key in option for key in value)
    return bool(value == option)
