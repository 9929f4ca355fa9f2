"""Import an MCP server: list its tools and turn each into an ``mcp`` ToolSpec.

A tool ``get_time`` of a server imported as ``clock`` is registered as
``clock__get_time``: letters, digits, ``_`` and ``-`` only, which every model
provider accepts as a tool-call name (dots and slashes are not). Characters of
the remote name outside that set become ``_``; the exact remote name is kept in
the target ``clock/get_time``.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

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
) -> list[ToolSpec]:
    """Connect, list the server's tools and build their specs (nothing is stored here)."""
    check_server_name(server)
    config.check_runnable()
    return specs_for_tools(server, config, sessions.list_tools(config), category, timeout_s)


def specs_for_tools(
    server: str,
    config: ServerConfig,
    tools: Sequence[Tool],
    category: str | None,
    timeout_s: float | None,
) -> list[ToolSpec]:
    specs: dict[str, ToolSpec] = {}
    for tool in tools:
        spec = _spec(server, config, tool, category or server, timeout_s)
        if spec.name in specs:
            raise DefinitionError(
                f"MCP server {server!r} has tools {specs[spec.name].target!r} and "
                f"{spec.target!r} that both become {spec.name!r}"
            )
        specs[spec.name] = spec
    return list(specs.values())


def _spec(
    server: str, config: ServerConfig, tool: Tool, category: str, timeout_s: float | None
) -> ToolSpec:
    name = tool_name(server, tool.name)
    try:
        parameters = normalize_parameters(tool.input_schema)
    except DefinitionError as exc:
        raise DefinitionError(f"MCP tool {tool.name!r} of {server!r}: {exc}") from None
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
        raise DefinitionError(f"MCP tool {tool.name!r} of {server!r}: {exc}") from None
