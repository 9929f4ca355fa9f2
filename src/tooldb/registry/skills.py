"""Skill and agent definitions from files: Agent-Skills-style ``SKILL.md`` and agent YAML.

A ``SKILL.md`` is YAML front matter (``name``, ``description``, and tooldb's own
``tools`` with access levels, ``depends_on``, ``parent``) followed by the markdown
instructions an agent reads when it loads the skill. ``tools`` may be a list of
names (access ``execute``), of ``{name, access}`` objects, or a ``name: access``
mapping. A folder is searched for ``SKILL.md`` files at any depth.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import yaml
from pydantic import ValidationError

from ..errors import DefinitionError
from ..types import AgentSpec, SkillSpec, SkillTool

SKILL_FILE = "SKILL.md"


def read_skills(path: str | Path) -> list[SkillSpec]:
    """Every skill at ``path``: one SKILL.md file, or a folder of them."""
    root = Path(path)
    if root.is_dir():
        files = sorted(root.rglob(SKILL_FILE))
        if not files:
            raise DefinitionError(f"no {SKILL_FILE} under {root}")
        return [read_skill(file) for file in files]
    if not root.is_file():
        raise DefinitionError(f"{root} is neither a {SKILL_FILE} file nor a folder")
    return [read_skill(root)]


def read_skill(path: Path) -> SkillSpec:
    try:
        text = path.read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError) as exc:
        raise DefinitionError(f"cannot read {path}: {exc}") from None
    front, body = _front_matter(text, path)
    return skill_from_mapping({**front, "instructions": body.strip()}, str(path))


def skill_from_mapping(data: dict[str, Any], where: str = "skill") -> SkillSpec:
    data = dict(data)
    data["tools"] = _skill_tools(data.get("tools"), where)
    extra = {k: data.pop(k) for k in list(data) if k not in SkillSpec.model_fields}
    if extra:  # Agent-Skills fields tooldb does not use (license, allowed-tools ...) are kept
        data["metadata"] = {**extra, **(data.get("metadata") or {})}
    try:
        return SkillSpec.model_validate(data)
    except ValidationError as exc:
        raise DefinitionError(f"{where}: {_problems(exc)}") from None


def read_agent(path: str | Path) -> AgentSpec:
    file = Path(path)
    try:
        data = yaml.safe_load(file.read_text(encoding="utf-8"))
    except (OSError, UnicodeDecodeError) as exc:
        raise DefinitionError(f"cannot read {file}: {exc}") from None
    except yaml.YAMLError as exc:
        raise DefinitionError(f"{file} is not valid YAML: {exc}") from None
    if not isinstance(data, dict):
        raise DefinitionError(f"{file} must hold a mapping (name, instructions, model ...)")
    return agent_from_mapping(data, str(file))


def agent_from_mapping(data: dict[str, Any], where: str = "agent") -> AgentSpec:
    try:
        return AgentSpec.model_validate(data)
    except ValidationError as exc:
        raise DefinitionError(f"{where}: {_problems(exc)}") from None


def _front_matter(text: str, path: Path) -> tuple[dict[str, Any], str]:
    lines = text.lstrip("\ufeff").splitlines(keepends=True)
    if not lines or lines[0].strip() != "---":
        raise DefinitionError(f"{path} must start with YAML front matter between '---' lines")
    for index in range(1, len(lines)):
        if lines[index].strip() == "---":
            try:
                front = yaml.safe_load("".join(lines[1:index])) or {}
            except yaml.YAMLError as exc:
                raise DefinitionError(f"{path}: front matter is not valid YAML: {exc}") from None
            if not isinstance(front, dict):
                raise DefinitionError(f"{path}: front matter must be a mapping")
            return front, "".join(lines[index + 1 :])
    raise DefinitionError(f"{path}: front matter is not closed by a '---' line")


def _skill_tools(raw: Any, where: str) -> list[dict[str, Any]]:
    if raw is None:
        return []
    if isinstance(raw, dict):
        return [{"name": str(name), "access": access or "execute"} for name, access in raw.items()]
    if not isinstance(raw, list):
        raise DefinitionError(f"{where}: 'tools' must be a list or a name: access mapping")
    out: list[dict[str, Any]] = []
    for item in raw:
        if isinstance(item, str):
            out.append({"name": item})
        elif isinstance(item, dict):
            out.append(item)
        else:
            raise DefinitionError(f"{where}: each tool must be a name or {{name, access}}")
    return out


def _problems(exc: ValidationError) -> str:
    return "; ".join(
        f"{'.'.join(str(p) for p in error['loc']) or 'value'}: {error['msg']}"
        for error in exc.errors()
    )


__all__ = [
    "SkillTool",
    "agent_from_mapping",
    "read_agent",
    "read_skill",
    "read_skills",
    "skill_from_mapping",
]
