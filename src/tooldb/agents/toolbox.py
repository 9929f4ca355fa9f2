"""The tools offered to a model during one run, which can grow as the run goes.

A run starts with a few tools (an explicit list, the tools selection found for the
task, or none but ``load_skill``); built-ins such as ``search_tools`` and
``load_skill`` add more, offered from the next model turn on. Only offered tools
may be called, so a model cannot reach a tool the agent was not given.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Iterable
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from ..binding.runtime import visible_schema
from ..models.base import ToolSchema
from ..types import LoopContext, ToolRecord, ToolResult

if TYPE_CHECKING:
    from ..registry import Registry

#: A built-in's implementation: (arguments, context of the call) -> result.
BuiltinRun = Callable[[dict[str, Any], LoopContext], Awaitable[ToolResult]]


@dataclass
class Builtin:
    """A tool the loop itself implements (not in the registry): schema and coroutine."""

    schema: ToolSchema
    run: BuiltinRun


@dataclass
class Toolbox:
    registry: Registry
    offered: dict[str, ToolSchema] = field(default_factory=dict)
    builtins: dict[str, Builtin] = field(default_factory=dict)
    #: Access level granted per tool by the skill that unlocked it (read|write|execute).
    access: dict[str, str] = field(default_factory=dict)
    records: dict[str, ToolRecord] = field(default_factory=dict)
    _schemas: list[ToolSchema] | None = None
    #: Records ``missing`` just read, so the ``add_tools`` that follows reads nothing.
    _checked: dict[str, ToolRecord] = field(default_factory=dict)

    def add_builtin(self, builtin: Builtin) -> None:
        self.builtins[builtin.schema.name] = builtin
        self._schemas = None

    def add_tools(self, names: Iterable[str], access: str | None = None) -> list[str]:
        """Offer these registry tools; returns the names newly offered. Unknown or disabled
        tools are skipped (the caller reports them)."""
        names = list(names)
        if access is not None:
            for name in names:
                self.access[name] = _wider(self.access.get(name), access)
        new = [n for n in dict.fromkeys(names) if n not in self.offered and n not in self.builtins]
        checked, self._checked = self._checked, {}
        unread = [n for n in new if n not in checked]
        found = {**checked, **self.registry.current_tools(unread)} if unread else checked
        added: list[str] = []
        for name in new:
            tool = found.get(name)
            if tool is None or not tool.enabled:
                continue
            self.records[name] = tool
            # the spec was validated when it was stored: no need to validate it again
            self.offered[name] = ToolSchema.model_construct(
                name=name,
                description=tool.spec.description,
                parameters=visible_schema(tool.spec.parameters),
            )
            added.append(name)
        if added:
            self._schemas = None
        return added

    def missing(self, names: Iterable[str]) -> list[str]:
        """Which of these names cannot be offered (unknown or disabled)."""
        names = [n for n in names if n not in self.offered and n not in self.builtins]
        found = self.registry.current_tools(names) if names else {}
        self._checked = found
        return [n for n in names if n not in found or not found[n].enabled]

    def schemas(self) -> list[ToolSchema]:
        if self._schemas is None:
            self._schemas = [b.schema for b in self.builtins.values()] + list(self.offered.values())
        return self._schemas

    def names(self) -> list[str]:
        return [*self.builtins, *self.offered]


_ORDER = {"read": 0, "write": 1, "execute": 2}


def _wider(current: str | None, new: str) -> str:
    if current is None:
        return new
    return current if _ORDER.get(current, 0) >= _ORDER.get(new, 0) else new
