"""Built-in tool groups (``tooldb add builtins [GROUP ...]``, docs/builtins.md).

Each group is a module of ordinary ``@tool`` functions: registered like ``tooldb add
python`` would, they are selectable, recorded, counted by OODA and served over MCP.
They are built on tooldb's own parts: the script sandbox (shell, git), the HTTP guard
(research, github), the store (memory, planning), the registry's embedder (memory) and
model (reasoning). The dangerous groups, which touch files, run commands or write to
GitHub, are registered only when named.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from typing import TYPE_CHECKING

from ..decorators import tools_of_module
from ..errors import UsageError

if TYPE_CHECKING:
    from ..registry import Registry
    from ..stores import PutOutcome

#: Group name -> the module holding its tools.
GROUPS: dict[str, str] = {
    "diagnostics": "tooldb.tools.diagnostics",
    "planning": "tooldb.builtins.planning",
    "memory": "tooldb.builtins.memory",
    "research": "tooldb.builtins.research",
    "code": "tooldb.builtins.code",
    "reasoning": "tooldb.builtins.reasoning",
    "charts": "tooldb.builtins.charts",
    "workspace": "tooldb.builtins.workspace",
    "shell": "tooldb.builtins.shell",
    "git": "tooldb.builtins.git",
    "github": "tooldb.builtins.github",
}
#: Registered only when asked for by name: they read and write files, run commands,
#: or act on GitHub with the user's token.
DANGEROUS = frozenset({"workspace", "shell", "git", "github"})
#: What ``tooldb add builtins`` registers without names.
SAFE_DEFAULT = tuple(group for group in GROUPS if group not in DANGEROUS)


def groups_to_add(names: Sequence[str]) -> tuple[str, ...]:
    """The groups ``names`` asks for (no names: every safe group); unknown names are a
    clear error listing the groups."""
    if not names:
        return SAFE_DEFAULT
    unknown = [name for name in names if name not in GROUPS]
    if unknown:
        raise UsageError(
            f"unknown built-in group(s) {', '.join(map(repr, unknown))}; groups: "
            f"{', '.join(GROUPS)} (dangerous, only by name: {', '.join(sorted(DANGEROUS))})"
        )
    return tuple(dict.fromkeys(names))


def add_builtins(registry: Registry, names: Sequence[str] = ()) -> list[PutOutcome]:
    """Register the tools of the groups ``names`` asks for (see ``groups_to_add``)."""
    specs = [spec for group in groups_to_add(names) for spec, _ in tools_of_module(GROUPS[group])]
    return registry.register(specs)


def tool_names(group: str) -> list[str]:
    return [spec.name for spec, _ in tools_of_module(GROUPS[group])]


def enabled_groups(registry: Registry) -> dict[str, list[str]]:
    """Each group with at least one of its tools registered and enabled here -> those tools
    (for ``tooldb doctor``)."""
    enabled = {record.name for record in registry.list()}
    found: dict[str, list[str]] = {}
    for group in GROUPS:
        names = [name for name in tool_names(group) if name in enabled]
        if names:
            found[group] = names
    return found


def describe(groups: Iterable[str]) -> str:
    return ", ".join(f"{g} (dangerous)" if g in DANGEROUS else g for g in groups)
