"""Access levels granted by skills, checked before a call (docs/agents.md has the table).

``read`` lets a tool run only where tooldb can guarantee it changes nothing: SQL
tools run in a read-only transaction whatever they were registered with, HTTP
tools only with GET/HEAD/OPTIONS, and other kinds only when registered with
``metadata.read_only = true``. ``write`` adds SQL writes (for tools registered
writable) and HTTP writes. ``execute`` adds running code: python, script, mcp and
agent tools.
"""

from __future__ import annotations

from ..types import Access, ToolKind, ToolRecord

SAFE_METHODS = {"GET", "HEAD", "OPTIONS"}


def access_problem(tool: ToolRecord, level: str) -> str | None:
    """Why ``level`` does not allow calling ``tool`` (None when it does)."""
    kind = tool.spec.kind
    granted = Access(level)
    if tool.spec.metadata.get("read_only") is True or granted is Access.EXECUTE:
        return None
    if kind is ToolKind.SQL:
        return None  # read runs it read-only (executors/sql.py)
    if kind is ToolKind.HTTP:
        method = tool.spec.target.strip().split(" ", 1)[0].upper()
        if granted is Access.READ and method not in SAFE_METHODS:
            return _refused(tool, level, f"it sends {method}, which may change data")
        return None
    return _refused(tool, level, f"running a {kind.value} tool needs 'execute'")


def _refused(tool: ToolRecord, level: str, why: str) -> str:
    return f"not run: the skill granted {level!r} access to {tool.name!r}, and {why}"
