"""MCP tools: a tool of a remote MCP server, called through a managed session.

``target`` is ``"SERVER/TOOL"``: the label the server was imported under and the
tool's name on that server (everything after the first ``/``, verbatim).
``metadata["server"]`` is the connection (see ``tooldb.mcp.config``), so the row alone
is enough to start the server from any process.

The ``CallToolResult`` becomes: text content joined into ``output``;
``structuredContent``, else the text parsed as JSON, else the text, into
``data``; ``isError`` an ``ExecutionError`` carrying the server's text. A result or
error whose text passes ``max_result_bytes`` (setting ``mcp_max_result_bytes``) is
cut there and says so; structured content that large is dropped.
"""

from __future__ import annotations

import asyncio
import json
from typing import TYPE_CHECKING, Any

from ..errors import DefinitionError, ExecutionError
from ..mcp.config import ServerConfig
from ..mcp.sessions import SDK_HINT, SessionManager, sdk_available
from ..settings import Settings
from ..types import ToolKind, ToolRecord, ToolSpec
from . import Rendered
from .mcp_guard import McpHostGuard

if TYPE_CHECKING:
    from mcp.types import CallToolResult


def parse_target(target: str) -> tuple[str, str]:
    """``"SERVER/TOOL"`` -> (server label, remote tool name)."""
    server, sep, remote = target.partition("/")
    if not sep or not server or not remote:
        raise DefinitionError(f"mcp target {target!r} must look like 'SERVER/TOOL'")
    return server, remote


class McpExecutor:
    """Runs ``mcp`` tools through a SessionManager. Without one it makes its own, whose
    servers over HTTP are reached only on hosts ``settings.http_allowed_hosts`` allows
    (mcp_guard.py), and stops it on ``close``; a manager passed in (shared by several
    registries, say) is the caller's to close, and brings its own guard."""

    kind = ToolKind.MCP

    def __init__(
        self,
        sessions: SessionManager | None = None,
        *,
        max_result_bytes: int = 10_000_000,
        settings: Settings | None = None,
    ) -> None:
        self._owns_sessions = sessions is None
        self.max_result_bytes = max_result_bytes
        if sessions is None:
            allowed = (settings or Settings()).http_allowed_hosts
            sessions = SessionManager(http_guard=McpHostGuard(allowed))
        self.sessions = sessions
        self._configs: dict[str, tuple[str, ServerConfig]] = {}

    def check(self, spec: ToolSpec) -> None:
        parse_target(spec.target)
        ServerConfig.from_metadata(spec.metadata).check_runnable()
        if not sdk_available():
            raise DefinitionError(SDK_HINT)

    def prepare(self, tool: ToolRecord) -> None:
        """Start the session before the clock runs, except inside an event loop
        (``arun`` then awaits the start instead of blocking the caller's loop)."""
        _, config = self._resolve(tool)
        try:
            asyncio.get_running_loop()
        except RuntimeError:
            self.sessions.start(config)

    def run(self, tool: ToolRecord, arguments: dict[str, Any], timeout_s: float | None) -> Any:
        remote, config = self._resolve(tool)
        result = self.sessions.call_tool(config, remote, arguments, timeout_s, tool.name)
        return rendered(result, tool.name, self.max_result_bytes)

    async def arun(
        self, tool: ToolRecord, arguments: dict[str, Any], timeout_s: float | None
    ) -> Any:
        remote, config = self._resolve(tool)
        result = await self.sessions.acall_tool(config, remote, arguments, timeout_s, tool.name)
        return rendered(result, tool.name, self.max_result_bytes)

    def close(self) -> None:
        if self._owns_sessions:
            self.sessions.close()

    def _resolve(self, tool: ToolRecord) -> tuple[str, ServerConfig]:
        cached = self._configs.get(tool.content_hash)
        if cached is not None:
            return cached
        if not sdk_available():
            raise ExecutionError(SDK_HINT)
        try:
            resolved = (
                parse_target(tool.spec.target)[1],
                ServerConfig.from_metadata(tool.spec.metadata),
            )
        except DefinitionError as exc:
            raise ExecutionError(f"tool {tool.name!r}: {exc}") from None
        if len(self._configs) > 10_000:
            self._configs.clear()
        self._configs[tool.content_hash] = resolved
        return resolved


def rendered(result: CallToolResult, label: str, max_bytes: int = 10_000_000) -> Rendered:
    """Split a CallToolResult into what a model reads and the structured value; text
    past ``max_bytes`` is cut, with a note saying so."""
    text = "\n".join(_block_text(block) for block in result.content)
    text, cut = _capped(text, max_bytes)
    if result.is_error:
        raise ExecutionError(text or f"MCP tool {label!r} reported an error without a message")
    if result.structured_content is not None:
        data = result.structured_content
        shown, data_cut = _capped(text or json.dumps(data, ensure_ascii=False), max_bytes)
        if cut or data_cut:  # a value cut in half is not the value: no data
            return Rendered(shown, None)
        return Rendered(shown, data)
    if cut:
        return Rendered(text, None)
    try:
        return Rendered(text, json.loads(text))
    except ValueError:
        return Rendered(text, text if text else None)


def _capped(text: str, max_bytes: int) -> tuple[str, bool]:
    """The text, at most ``max_bytes`` of UTF-8 and a note if it had to be cut."""
    if len(text) <= max_bytes // 4:  # certainly within the cap
        return text, False
    data = text.encode("utf-8", "surrogatepass")
    if len(data) <= max_bytes:
        return text, False
    kept = data[:max_bytes].decode("utf-8", "ignore")
    note = (
        f"\n[cut: the MCP result was {len(data)} bytes, more than mcp_max_result_bytes"
        f" ({max_bytes})]"
    )
    return kept + note, True


def _block_text(block: Any) -> str:
    """Text blocks verbatim; other content as a short bracketed note a model can read."""
    kind = getattr(block, "type", "")
    if kind == "text":
        return str(block.text)
    if kind in {"image", "audio"}:
        size = len(block.data) * 3 // 4
        return f"[{kind} {block.mime_type}, about {size} bytes]"
    if kind == "resource":
        resource = block.resource
        text = getattr(resource, "text", None)
        return str(text) if text is not None else f"[resource {resource.uri}]"
    if kind == "resource_link":
        return f"[resource link {block.uri}]"
    return f"[{kind or type(block).__name__} content]"
