"""Built-in tools: ordinary tools shipped with tooldb (``registry.add_builtin_tools()``).

They run like any python tool; those that inspect the registry find the one
running them through ``tooldb.context.current_registry()``.
"""

from __future__ import annotations

#: Modules whose ``@tool`` functions ``add_builtin_tools`` registers.
BUILTIN_MODULES = ("tooldb.tools.diagnostics",)
