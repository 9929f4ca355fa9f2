"""Packs: worked agent systems (tools, skills, agents and their own database) that
``tooldb add pack NAME`` registers in one step.

A pack is a subpackage ``tooldb.packs.<name>`` with

- ``DESCRIPTION``: one line for ``tooldb packs``;
- ``install(registry, database_url) -> PackReport``: registers what the pack ships
  (usually by calling :func:`register_contents`) and creates or upgrades the pack's own
  database (``database_url`` is None for the pack's default, :func:`default_database`).

A pack's tools learn which database they serve from their own metadata
(``pack_database``, written at install), read back with :func:`pack_database` during a
call: the URL then follows the registry (and its tenant), not the process's environment.
"""

from __future__ import annotations

import importlib
import pkgutil
from collections.abc import Iterable
from dataclasses import dataclass, field
from pathlib import Path
from types import ModuleType
from typing import TYPE_CHECKING

from ..context import current_registry
from ..decorators import tools_of_module
from ..errors import UsageError
from ..registry.skills import read_agent
from ..settings import default_data_dir

if TYPE_CHECKING:
    from ..registry import Registry

#: Tool metadata keys a pack writes on its tools.
PACK_KEY = "pack"
DATABASE_KEY = "pack_database"


@dataclass
class PackReport:
    """What an install registered: tool, skill and agent names, and the pack's database."""

    name: str
    database_url: str
    tools: list[str] = field(default_factory=list)
    skills: list[str] = field(default_factory=list)
    agents: list[str] = field(default_factory=list)


def available() -> dict[str, str]:
    """The packs this installation ships: name to one-line description."""
    found: dict[str, str] = {}
    for info in pkgutil.iter_modules(__path__):
        if info.ispkg:
            found[info.name] = str(getattr(_load(info.name), "DESCRIPTION", ""))
    return found


def install(registry: Registry, name: str, database_url: str | None = None) -> PackReport:
    """Register pack ``name`` (tools, skills, agents) and prepare its database."""
    report: PackReport = _load(name).install(registry, database_url)
    return report


def default_database(pack: str) -> str:
    """The pack's default database: a SQLite file beside the default registry."""
    folder = default_data_dir() / "packs"
    folder.mkdir(parents=True, exist_ok=True)
    return f"sqlite:///{folder / f'{pack}.db'}"


def register_contents(
    registry: Registry,
    pack: str,
    database_url: str,
    *,
    tool_modules: Iterable[str] = (),
    skills: Path | None = None,
    agents: Path | None = None,
) -> PackReport:
    """Register a pack's ``@tool`` modules (each tool stamped with the pack and its
    database), its SKILL.md folder and its agent YAML files (``as_tool`` agents also
    as tools)."""
    report = PackReport(name=pack, database_url=database_url)
    specs = []
    for module in tool_modules:
        for spec, _ in tools_of_module(module):
            metadata = {**spec.metadata, PACK_KEY: pack, DATABASE_KEY: database_url}
            specs.append(spec.model_copy(update={"metadata": metadata}))
    registry.register(specs)
    report.tools = [spec.name for spec in specs]
    if skills is not None and skills.is_dir():
        registry.add_skill(skills)
        report.skills = sorted(
            path.parent.name for path in skills.rglob("SKILL.md") if path.is_file()
        )
    if agents is not None and agents.is_dir():
        agent_specs = [read_agent(path) for path in sorted(agents.glob("*.yaml"))]
        # Agents name each other (an orchestrator names its agent-tools): the first pass
        # registers each, disabled while what it names is not there yet; the second
        # completes them, or says clearly what the pack itself lacks.
        for agent in agent_specs:
            registry.add_agent(agent, allow_missing=True)  # an ``as_tool`` one: a tool too
        for agent in agent_specs:
            registry.add_agent(agent)
            report.agents.append(agent.name)
    return report


def pack_database(tool: str) -> str:
    """The database URL pack tool ``tool`` was installed with (inside a registry call)."""
    url = current_registry().get(tool).spec.metadata.get(DATABASE_KEY)
    if not isinstance(url, str):
        raise UsageError(f"tool {tool!r} was not installed by a pack: it has no pack database")
    return url


def _load(name: str) -> ModuleType:
    if not name.isidentifier():
        raise UsageError(f"no pack named {name!r}; packs: {', '.join(_names()) or 'none'}")
    try:
        return importlib.import_module(f"{__name__}.{name}")
    except ModuleNotFoundError as exc:
        if exc.name != f"{__name__}.{name}":
            raise
        raise UsageError(
            f"no pack named {name!r}; packs: {', '.join(_names()) or 'none'}"
        ) from None


def _names() -> list[str]:
    return sorted(info.name for info in pkgutil.iter_modules(__path__) if info.ispkg)
