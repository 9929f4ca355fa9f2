"""Import an MCP server: list its tools and turn each into an ``mcp`` ToolSpec.

A tool ``get_time`` of a server imported as ``clock`` is registered as
``clock__get_time``: letters, digits, ``_`` and ``-`` only, which every model
provider accepts as a tool-call name (dots and slashes are not). Characters of
the remote name outside that set become ``_``; the exact remote name is kept in
the target ``clock/get_time``.

A tool that cannot be imported (a name too long, a remote ``$ref``, two remote names
that become one) is skipped with its reason and a parameter default of the wrong type
coerced losslessly or dropped, unless ``strict``: then one such tool fails the import.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from typing import TYPE_CHECKING, Any, NamedTuple

from ..binding import normalize_parameters
from ..errors import DefinitionError
from ..types import Returns, ToolKind, ToolSpec
from .config import ServerConfig

if TYPE_CHECKING:
    from mcp.types import Tool

    from .sessions import SessionManager

SEPARATOR = "__"
_SERVER_NAME = re.compile(r"[A-Za-z0-9][A-Za-z0-9_-]{0,63}")
_UNSAFE = re.compile(r"[^A-Za-z0-9_-]")


def check_server_name(name: str) -> str:
    if not isinstance(name, str) or not _SERVER_NAME.fullmatch(name) or SEPARATOR in name:
        raise DefinitionError(
            f"MCP server name {name!r} must be 1-64 letters, digits, '_' or '-', start with "
            f"a letter or digit and not contain {SEPARATOR!r}"
        )
    return name


def tool_name(server: str, remote: str) -> str:
    """The registry name of a server's tool: ``SERVER__TOOL``."""
    return f"{server}{SEPARATOR}{_UNSAFE.sub('_', remote)}"


def import_server(
    sessions: SessionManager,
    server: str,
    config: ServerConfig,
    *,
    category: str | None = None,
    timeout_s: float | None = None,
    strict: bool = True,
) -> tuple[list[ToolSpec], list[Skipped], list[Skipped]]:
    """Connect, list the server's tools and build their specs (nothing is stored here):
    (specs, skipped tools, repaired tools), each of the last two with its reason."""
    check_server_name(server)
    config.check_runnable()
    tools = sessions.list_tools(config)
    return specs_for_tools(server, config, tools, category, timeout_s, strict=strict)


class Skipped(NamedTuple):
    """A remote tool left out or changed, and why."""

    tool: str
    reason: str


def specs_for_tools(
    server: str,
    config: ServerConfig,
    tools: Sequence[Tool],
    category: str | None,
    timeout_s: float | None,
    *,
    strict: bool = True,
) -> tuple[list[ToolSpec], list[Skipped], list[Skipped]]:
    specs: dict[str, ToolSpec] = {}
    skipped: list[Skipped] = []
    repaired: list[Skipped] = []
    for tool in tools:
        repairs: list[str] | None = None if strict else []
        try:
            spec = _spec(server, config, tool, category or server, timeout_s, repairs)
            if spec.name in specs:
                raise DefinitionError(
                    f"MCP server {server!r} has tools {specs[spec.name].target!r} and "
                    f"{spec.target!r} that both become {spec.name!r}"
                )
        except DefinitionError as exc:
            if strict:
                raise
            skipped.append(Skipped(_shown_name(tool.name), str(exc)))
            continue
        specs[spec.name] = spec
        repaired.extend(Skipped(spec.name, note) for note in repairs or ())
    return list(specs.values()), skipped, repaired


def _shown_name(name: str) -> str:
    text = name.encode("utf-8", "backslashreplace").decode("utf-8")
    return text if len(text) <= 80 else f"{text[:80]}… ({len(text)} characters)"


def _spec(
    server: str,
    config: ServerConfig,
    tool: Tool,
    category: str,
    timeout_s: float | None,
    repairs: list[str] | None = None,
) -> ToolSpec:
    name = tool_name(server, tool.name)
    try:
        parameters = normalize_parameters(tool.input_schema, repairs=repairs)
    except DefinitionError as exc:
        raise DefinitionError(f"MCP tool {_shown_name(tool.name)!r} of {server!r}: {exc}") from None
    metadata: dict[str, Any] = {"server": config.to_metadata()}
    if tool.annotations is not None:
        metadata["annotations"] = tool.annotations.model_dump(
            mode="json", by_alias=True, exclude_none=True
        )
    try:
        return ToolSpec(
            name=name,
            description=tool.description or tool.title or "",
            category=category,
            kind=ToolKind.MCP,
            target=f"{server}/{tool.name}",
            parameters=parameters,
            returns=Returns.JSON if tool.output_schema else Returns.TEXT,
            timeout_s=timeout_s,
            metadata=metadata,
        )
    except ValueError as exc:  # pydantic: a name or text the registry cannot store
        shown = _shown_name(tool.name)
        raise DefinitionError(f"MCP tool {shown!r} of {server!r}: {_first(exc)}") from None


def _first(exc: ValueError) -> str:
    """pydantic's report without its long footer."""
    errors = getattr(exc, "errors", None)
    if callable(errors):
        return "; ".join(f"{'.'.join(map(str, e['loc']))}: {e['msg']}" for e in errors()[:3])
    return str(exc)
