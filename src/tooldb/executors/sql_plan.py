"""What a SQL tool's definition means: its statement, placeholders, connection and caps.

Checked once at registration (``plan_for``) so that a definition that cannot run
is refused with a message naming what is wrong, and cached per version at call
time. The statement is the tool's ``target`` with ``:name`` placeholders
(SQLAlchemy ``text()``): arguments are only ever bound as driver parameters.
"""

from __future__ import annotations

from dataclasses import dataclass
from enum import StrEnum
from typing import Any

import sqlalchemy as sa

from ..binding import normalize_parameters
from ..errors import DefinitionError
from ..settings import REGISTRY_CONNECTION
from ..types import Returns, ToolSpec

DEFAULT_MAX_ROWS = 1000
DEFAULT_MAX_BYTES = 1_048_576
SQL_RETURNS = (Returns.TABLE, Returns.SCALAR, Returns.NONE)


class Access(StrEnum):
    """Whether a SQL tool may change data: ``read`` unless registered with ``write``."""

    READ = "read"
    WRITE = "write"


@dataclass(frozen=True)
class SQLPlan:
    """A SQL tool's definition, checked and ready to execute."""

    tool: str
    statement: sa.TextClause
    placeholders: tuple[str, ...]
    connection: str
    access: Access
    returns: Returns
    max_rows: int
    max_bytes: int


def plan_for(spec: ToolSpec, connections: set[str]) -> SQLPlan:
    """Check a sql tool's definition against the known connection names.

    Raises DefinitionError for a placeholder without a declared parameter, a declared
    parameter the statement never uses (a model's argument that silently changes
    nothing would be a lie), an unknown connection, a bad access mode or cap, or a
    return shape SQL cannot produce.
    """
    where = f"sql tool {spec.name!r}"
    if spec.returns not in SQL_RETURNS:
        allowed = ", ".join(r.value for r in SQL_RETURNS)
        raise DefinitionError(f"{where}: returns must be one of {allowed}, got {spec.returns!r}")
    metadata = spec.metadata
    connection = metadata.get("connection", REGISTRY_CONNECTION)
    if not isinstance(connection, str) or connection not in connections:
        known = ", ".join(sorted(connections)) or "none"
        raise DefinitionError(
            f"{where}: metadata.connection {connection!r} is not a configured connection "
            f"(known: {known}; add it under [connections] in the config file or as "
            f"TOOLDB_CONNECTION_<NAME>=url)"
        )
    statement = sa.text(spec.target)
    placeholders = tuple(statement.compile().params)
    _check_parameters(where, spec, placeholders)
    access = _access(where, metadata.get("access", Access.READ.value))
    if access is Access.WRITE and connection == REGISTRY_CONNECTION:
        raise DefinitionError(
            f"{where}: the registry connection is read-only for SQL tools (they see their "
            "tenant's rows and change none); use a named connection for writes"
        )
    return SQLPlan(
        tool=spec.name,
        statement=statement,
        placeholders=placeholders,
        connection=connection,
        access=access,
        returns=spec.returns,
        max_rows=_cap(where, metadata, "max_rows", DEFAULT_MAX_ROWS),
        max_bytes=_cap(where, metadata, "max_bytes", DEFAULT_MAX_BYTES),
    )


def _check_parameters(where: str, spec: ToolSpec, placeholders: tuple[str, ...]) -> None:
    try:
        declared = set(normalize_parameters(spec.parameters).get("properties", {}))
    except DefinitionError as exc:
        raise DefinitionError(f"{where}: {exc}") from None
    undeclared = [name for name in placeholders if name not in declared]
    if undeclared:
        raise DefinitionError(
            f"{where}: the statement uses {_names(undeclared)} but the parameters do not "
            f"declare {'it' if len(undeclared) == 1 else 'them'} "
            f"(declared: {_names(sorted(declared)) or 'none'})"
        )
    unused = sorted(declared - set(placeholders))
    if unused:
        raise DefinitionError(
            f"{where}: parameter{'s' if len(unused) > 1 else ''} {_names(unused)} "
            f"{'are' if len(unused) > 1 else 'is'} declared but the statement never uses "
            f"{'them' if len(unused) > 1 else 'it'} (placeholders: "
            f"{_names(list(placeholders)) or 'none'}; write a literal colon as \\:)"
        )


def _names(names: list[str]) -> str:
    return ", ".join(f":{name}" for name in names)


def _access(where: str, value: Any) -> Access:
    try:
        return Access(value)
    except ValueError:
        raise DefinitionError(
            f"{where}: metadata.access must be 'read' or 'write', got {value!r}"
        ) from None


def _cap(where: str, metadata: dict[str, Any], key: str, default: int) -> int:
    value = metadata.get(key, default)
    if isinstance(value, bool) or not isinstance(value, int) or value < 1:
        raise DefinitionError(f"{where}: metadata.{key} must be a positive integer, got {value!r}")
    return value
