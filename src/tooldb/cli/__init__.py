"""The ``tooldb`` command, one module per command group: ``tools`` (register, list,
call, statistics), ``selection`` (select, embed, doctor), ``agents`` (run, runs,
skills, agents), ``workers`` (submit, worker),
``ooda``, ``trace`` (provenance) and ``mcp`` (serve). ``app.py`` holds
what they share; it is the only place errors become exit codes (0 ok, 1 tool failure,
2 bad usage or input).
"""

from __future__ import annotations

# The command groups register their commands on import, in the order `--help` lists them.
# isort: off
from . import tools, mcp, agents, workers, ooda, selection, trace, packs, evidence  # noqa: F401
from . import sessionsight  # noqa: F401  (the sessionsight pack's agents)
from . import serve  # noqa: F401  (tooldb serve, tooldb keys)

# isort: on
from .app import app, main

__all__ = ["app", "main"]
