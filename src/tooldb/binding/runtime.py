"""Parameters the runtime fills (issue 28.5): a tool declares one with
``"x-tooldb-context": FIELD`` on a property of its schema (any kind of tool: a
reasoning tool's ``sessionId``, an HTTP tool's ``X-Run-Id`` query parameter), or a
Python tool with ``Annotated[str, Runtime("run_id")]``. The model never sees such a
parameter (``visible_schema``), and what a model or user sends for it is replaced by
the runtime's value on every path (``Binder.bind``): the agent loop, the router,
``call``, ``call_many``, the MCP server. The recorded arguments hold the value filled.

Fields: ``run_id`` (the run the call is part of), ``session_id`` (the session: set by
the caller with ``context.use_session``, else the run's id; a call outside any run is
a session of its own), ``tenant``, ``agent``, ``iteration`` and ``parent_run_id``.
"""

from __future__ import annotations

import uuid
from dataclasses import dataclass
from typing import Any

from ..context import current_context, current_session
from ..errors import DefinitionError

CONTEXT_FIELD = "x-tooldb-context"
RUNTIME_FIELDS = ("run_id", "session_id", "tenant", "agent", "iteration", "parent_run_id")
#: Fields with no value outside a run: a required one there is a clear error.
_RUN_ONLY = {"run_id", "agent", "iteration", "parent_run_id"}


@dataclass(frozen=True)
class Runtime:
    """``Annotated[str, Runtime("run_id")]`` on a Python tool's parameter: filled by
    the runtime, hidden from the model."""

    field: str

    def __post_init__(self) -> None:
        if self.field not in RUNTIME_FIELDS:
            raise DefinitionError(
                f"Runtime({self.field!r}): the runtime fills {', '.join(RUNTIME_FIELDS)}"
            )


def runtime_parameters(schema: dict[str, Any]) -> list[tuple[str, str]]:
    """(parameter, field) of each property the runtime fills; a clear error for an
    unknown field (called at registration through ``check_runtime``)."""
    found = []
    for name, prop in schema.get("properties", {}).items():
        if isinstance(prop, dict) and CONTEXT_FIELD in prop:
            field = prop[CONTEXT_FIELD]
            if field not in RUNTIME_FIELDS:
                raise DefinitionError(
                    f"parameter {name!r}: {CONTEXT_FIELD} must be one of "
                    f"{', '.join(RUNTIME_FIELDS)}, got {field!r}"
                )
            found.append((name, str(field)))
    return found


def visible_schema(schema: dict[str, Any]) -> dict[str, Any]:
    """The schema a model or an MCP client sees: without the runtime's parameters."""
    hidden = {name for name, _ in runtime_parameters(schema)}
    if not hidden:
        return schema
    shown = {
        **schema,
        "properties": {k: v for k, v in schema["properties"].items() if k not in hidden},
    }
    if "required" in schema:
        shown["required"] = [name for name in schema["required"] if name not in hidden]
    return shown


def fill_runtime(
    arguments: dict[str, Any],
    wanted: list[tuple[str, str]],
    required: set[str],
    tenant: str | None,
    run_id: str | None = None,
) -> str | None:
    """Set each runtime parameter in ``arguments`` (in place), replacing what was sent;
    returns a problem's text for a required one that has no value here. The agent
    loop's LoopContext wins; else ``run_id`` (a router run, ``call(run_id=...)``)."""
    context = current_context()
    for name, field in wanted:
        value = _value(field, context, tenant, run_id)
        if value is None:
            arguments.pop(name, None)
            if name in required:
                where = "this call is not part of a run" if field in _RUN_ONLY else "none is set"
                return (
                    f"parameter {name!r} is filled by the runtime ({CONTEXT_FIELD}: {field}), "
                    f"and {where}"
                )
        else:
            arguments[name] = value
    return None


def _value(field: str, context: Any, tenant: str | None, run_id: str | None) -> Any:
    if field == "tenant":
        return tenant
    run = context.run_id if context is not None else run_id
    if field == "session_id":
        session = current_session()
        if session is not None:
            return session
        return run if run is not None else f"call-{uuid.uuid4().hex[:12]}"
    if field == "run_id":
        return run
    return None if context is None else getattr(context, field)
