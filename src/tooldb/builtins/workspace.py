"""Workspace group (dangerous: registered only by name): read, write, edit, list and
search files confined to the workspace root (common.workspace_root). ``..``, absolute
paths outside the root and symlinks leading out are refused; sizes are capped by the
``workspace_max_file_bytes`` setting."""

from __future__ import annotations

import os
import re
from pathlib import Path
from typing import Any

from ..decorators import tool
from ..errors import UsageError
from .common import confined, current_workspace, registry_settings, relative

GROUP = {"builtin": "workspace"}
MAX_LIST = 2000
MAX_MATCHES = 500


def _cap() -> int:
    return registry_settings()[1].workspace_max_file_bytes


def _read_text(path: Path, shown: str) -> str:
    if not path.is_file():
        raise UsageError(f"'path' {shown!r} is not a file in the workspace")
    size = path.stat().st_size
    if size > _cap():
        raise UsageError(
            f"'path' {shown!r} is {size} bytes, more than the {_cap()} the "
            "workspace_max_file_bytes setting allows"
        )
    try:
        return path.read_text(encoding="utf-8")
    except UnicodeDecodeError:
        raise UsageError(f"'path' {shown!r} is not UTF-8 text") from None


@tool(category="workspace", metadata=GROUP)
def read_file(path: str, start_line: int = 1, max_lines: int = 2000) -> dict[str, Any]:
    """Read a UTF-8 text file from the workspace, with line numbers. Use it before
    editing a file, to see its exact text. Returns the numbered lines, the line count
    and whether the text was cut.

    Args:
        path: File path relative to the workspace root, e.g. "src/app.py".
        start_line: First line to return (1-based).
        max_lines: How many lines at most (1 to 10000).
    """
    if start_line < 1:
        raise UsageError(f"'start_line' must be 1 or more, got {start_line}")
    if not 1 <= max_lines <= 10_000:
        raise UsageError(f"'max_lines' must be from 1 to 10000, got {max_lines}")
    root = current_workspace()
    target = confined(root, path)
    lines = _read_text(target, path).splitlines()
    chosen = lines[start_line - 1 : start_line - 1 + max_lines]
    numbered = "\n".join(f"{start_line + i:>5}  {line}" for i, line in enumerate(chosen))
    return {
        "path": relative(root, target),
        "lines": len(lines),
        "text": numbered,
        "truncated": start_line - 1 + max_lines < len(lines),
    }


@tool(category="workspace", metadata=GROUP)
def write_file(path: str, content: str, overwrite: bool = True) -> dict[str, Any]:
    """Create or replace a text file in the workspace (parent folders are created). Use
    it for new files or complete rewrites; to change part of a file, use edit_file.
    Returns the path and the bytes written.

    Args:
        path: File path relative to the workspace root.
        content: The whole new content of the file.
        overwrite: False refuses to replace an existing file.
    """
    root = current_workspace()
    target = confined(root, path)
    data = content.encode("utf-8")
    if len(data) > _cap():
        raise UsageError(
            f"'content' is {len(data)} bytes, more than the {_cap()} the "
            "workspace_max_file_bytes setting allows"
        )
    if target.is_dir():
        raise UsageError(f"'path' {path!r} is a folder")
    if target.exists() and not overwrite:
        raise UsageError(f"'path' {path!r} exists and 'overwrite' is false")
    target.parent.mkdir(parents=True, exist_ok=True)  # inside: target is resolved
    temporary = target.with_name(f".{target.name}.tooldb-{os.getpid()}")
    temporary.write_bytes(data)
    os.replace(temporary, target)  # never a half-written file
    return {"path": relative(root, target), "bytes": len(data)}


@tool(category="workspace", metadata=GROUP)
def edit_file(path: str, old_text: str, new_text: str, count: int = 1) -> dict[str, Any]:
    """Change part of a workspace file by exact-match replacement: ``old_text`` must
    occur exactly ``count`` times (read_file shows the text to copy; line numbers are
    not part of it). Returns the path and how many replacements were made.

    Args:
        path: File path relative to the workspace root.
        old_text: The exact text to replace, including its indentation.
        new_text: The text to put in its place.
        count: How many occurrences are expected and replaced (1 or more).
    """
    if not old_text:
        raise UsageError("'old_text' must not be empty")
    if count < 1:
        raise UsageError(f"'count' must be 1 or more, got {count}")
    root = current_workspace()
    target = confined(root, path)
    text = _read_text(target, path)
    found = text.count(old_text)
    if found != count:
        raise UsageError(
            f"'old_text' occurs {found} times in {path!r}, expected {count}: "
            + (
                "read the file and copy the text exactly"
                if not found
                else "set 'count' or give more context"
            )
        )
    write_file(relative(root, target), text.replace(old_text, new_text))
    return {"path": relative(root, target), "replacements": found}


@tool(category="workspace", metadata=GROUP)
def list_files(path: str = ".", pattern: str = "*", recursive: bool = True) -> dict[str, Any]:
    """List files and folders in the workspace (hidden .git folders skipped). Use it to
    find out what is there before reading. Returns paths relative to the root, folders
    ending in '/', and whether the list was cut.

    Args:
        path: Folder relative to the workspace root ("." for the root).
        pattern: Glob on names, e.g. "*.py".
        recursive: Also list inside subfolders.
    """
    _name_pattern(pattern, "pattern")
    root = current_workspace()
    folder = confined(root, path)
    if not folder.is_dir():
        raise UsageError(f"'path' {path!r} is not a folder in the workspace")
    found: list[str] = []
    entries = folder.rglob(pattern) if recursive else folder.glob(pattern)
    for entry in sorted(entries):
        if ".git" in entry.relative_to(root).parts:
            continue
        if entry.is_symlink() and not _inside(root, entry):
            continue
        found.append(relative(root, entry) + ("/" if entry.is_dir() else ""))
        if len(found) >= MAX_LIST:
            break
    return {"path": relative(root, folder), "entries": found, "truncated": len(found) >= MAX_LIST}


def _name_pattern(pattern: str, parameter: str) -> str:
    """A glob on file names only: a '/' or '..' would let it walk out of the folder."""
    if not isinstance(pattern, str) or not pattern or "/" in pattern or ".." in pattern:
        raise UsageError(
            f"'{parameter}' {pattern!r} must be a pattern on names, e.g. '*.py' (no '/' or '..')"
        )
    return pattern


def _inside(root: Path, entry: Path) -> bool:
    real = entry.resolve()
    return real == root or root in real.parents


@tool(category="workspace", metadata=GROUP)
def search_files(regex: str, path: str = ".", glob: str = "*") -> dict[str, Any]:
    """Search the text of workspace files with a regular expression (Python syntax), like
    grep. Use it to find where something is defined or used. Returns matches as path,
    line number and line.

    Args:
        regex: The regular expression to look for, e.g. "def \\w+_total".
        path: Folder (or file) relative to the workspace root.
        glob: Only files whose names match, e.g. "*.py".
    """
    try:
        compiled = re.compile(regex)
    except re.error as exc:
        raise UsageError(f"'regex' {regex!r} is not a valid regular expression: {exc}") from None
    _name_pattern(glob, "glob")
    root = current_workspace()
    start = confined(root, path)
    files = [start] if start.is_file() else sorted(start.rglob(glob))
    cap = _cap()
    matches: list[dict[str, Any]] = []
    for file in files:
        if not file.is_file() or ".git" in file.relative_to(root).parts:
            continue
        if not _inside(root, file) or file.stat().st_size > cap:
            continue
        try:
            lines = file.read_text(encoding="utf-8").splitlines()
        except UnicodeDecodeError:
            continue
        for number, line in enumerate(lines, 1):
            if compiled.search(line):
                matches.append({"path": relative(root, file), "line": number, "text": line[:500]})
                if len(matches) >= MAX_MATCHES:
                    return {"matches": matches, "truncated": True}
    return {"matches": matches, "truncated": False}
