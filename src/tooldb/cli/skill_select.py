"""How ``tooldb select --skills`` prints a skill selection."""

from __future__ import annotations

import sys

from ..selection.skills import SkillSelection
from .app import _out, _print_json, _table, _text


def print_skill_selection(found: SkillSelection, as_json: bool) -> None:
    for note in found.notes:
        sys.stderr.write(f"note: {note}\n")
    if as_json:
        _print_json(found.model_dump(mode="json"))
        return
    table = _table("#", "final", "dense", "lexical", "name", "description")
    for c in found.candidates:
        table.add_row(
            str(c.rank), f"{c.final:.3f}", "-" if c.dense is None else f"{c.dense:.3f}",
            f"{c.lexical:.2f}", _text(c.name), _text(c.description[:80]),
        )  # fmt: skip
    _out.print(table)
    _out.print(f"{len(found.candidates)} skill(s), {found.duration_ms:.1f} ms")
