"""How to reach an MCP server, as stored in an ``mcp`` tool's ``metadata["server"]``.

Every ``mcp`` tool row carries its server's connection, so any process holding
the registry can start the server (no separate table, no schema change)::

    {"transport": "stdio", "command": "uvx", "args": ["mcp-server-time"], "env": ["TZ"]}
    {"transport": "http", "url": "http://127.0.0.1:8000/mcp"}

``env`` lists *names* of environment variables passed through from the calling
process, so secrets stay in the environment and out of the database. Pure data:
nothing here needs the ``mcp`` SDK.
"""

from __future__ import annotations

import json
import os
import re
import shutil
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Literal
from urllib.parse import urlsplit

from ..errors import DefinitionError

Transport = Literal["stdio", "http"]
_ENV_NAME = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")
_KEYS: dict[str, set[str]] = {
    "stdio": {"transport", "command", "args", "env"},
    "http": {"transport", "url"},
}


@dataclass(frozen=True)
class ServerConfig:
    """One MCP server connection; equal configs share one session."""

    transport: Transport
    command: str = ""
    args: tuple[str, ...] = ()
    env: tuple[str, ...] = ()
    url: str = ""

    @classmethod
    def stdio(cls, command: Sequence[str], env: Sequence[str] = ()) -> ServerConfig:
        """A server started as ``command[0] command[1:]`` speaking MCP on stdin/stdout."""
        if isinstance(command, str) or not command:
            raise DefinitionError("an MCP stdio server needs a command: a non-empty list of words")
        return cls._checked({"transport": "stdio", "command": command[0],
                             "args": list(command[1:]), "env": list(env)})  # fmt: skip

    @classmethod
    def http(cls, url: str) -> ServerConfig:
        """A server reached over streamable HTTP at ``url``."""
        return cls._checked({"transport": "http", "url": url})

    @classmethod
    def from_metadata(cls, metadata: Mapping[str, Any]) -> ServerConfig:
        """Read ``metadata["server"]`` of an ``mcp`` tool; DefinitionError if malformed."""
        server = metadata.get("server")
        if not isinstance(server, Mapping):
            raise DefinitionError(
                'an mcp tool needs metadata.server: {"transport": "stdio", "command": ...} '
                'or {"transport": "http", "url": ...}'
            )
        return cls._checked(server)

    @classmethod
    def _checked(cls, server: Mapping[str, Any]) -> ServerConfig:
        transport = server.get("transport")
        if transport not in _KEYS:
            raise DefinitionError(
                f"metadata.server.transport must be 'stdio' or 'http', got {transport!r}"
            )
        unknown = sorted(set(server) - _KEYS[transport])
        if unknown:
            raise DefinitionError(
                f"metadata.server has unknown keys for transport {transport!r}: {unknown} "
                f"(allowed: {sorted(_KEYS[transport])})"
            )
        if transport == "http":
            return cls(transport="http", url=_url(server.get("url")))
        return cls(
            transport="stdio",
            command=_command(server.get("command")),
            args=_strings(server.get("args", []), "args"),
            env=_env_names(server.get("env", [])),
        )

    def to_metadata(self) -> dict[str, Any]:
        if self.transport == "http":
            return {"transport": "http", "url": self.url}
        server: dict[str, Any] = {
            "transport": "stdio",
            "command": self.command,
            "args": list(self.args),
        }
        if self.env:
            server["env"] = list(self.env)
        return server

    @property
    def key(self) -> str:
        """A canonical text identifying the connection (sessions are keyed by it)."""
        return json.dumps(self.to_metadata(), sort_keys=True, separators=(",", ":"))

    def describe(self) -> str:
        """The server as a person would name it in an error message."""
        if self.transport == "http":
            return self.url
        return " ".join([self.command, *self.args])

    def environment(self) -> dict[str, str]:
        """The passed-through variables that are set in this process."""
        return {name: os.environ[name] for name in self.env if name in os.environ}

    def check_runnable(self) -> None:
        """DefinitionError if a stdio command cannot be found from this process."""
        if self.transport == "stdio" and shutil.which(self.command) is None:
            raise DefinitionError(
                f"MCP server command {self.command!r} is not an executable file "
                "and was not found on PATH"
            )


def _command(value: Any) -> str:
    if not isinstance(value, str) or not value.strip():
        raise DefinitionError(f"metadata.server.command must be a non-empty string, got {value!r}")
    return value


def _strings(value: Any, what: str) -> tuple[str, ...]:
    if not isinstance(value, list | tuple) or not all(isinstance(v, str) for v in value):
        raise DefinitionError(f"metadata.server.{what} must be a list of strings, got {value!r}")
    return tuple(value)


def _env_names(value: Any) -> tuple[str, ...]:
    names = _strings(value, "env")
    for name in names:
        if not _ENV_NAME.fullmatch(name):
            raise DefinitionError(
                f"metadata.server.env lists names of environment variables; {name!r} is not one"
            )
    return tuple(sorted(set(names)))


def _url(value: Any) -> str:
    if not isinstance(value, str):
        raise DefinitionError(f"metadata.server.url must be a string, got {value!r}")
    parts = urlsplit(value)
    if parts.scheme not in {"http", "https"} or not parts.hostname:
        raise DefinitionError(f"MCP server URL {value!r} must be http:// or https:// with a host")
    return value
