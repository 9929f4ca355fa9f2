"""tooldb: the tool layer for AI agents as a database and a runtime.

import tooldb

@tooldb.tool
def add(a: int, b: int = 1) -> int:
    \"\"\"Add two integers.\"\"\"
    return a + b

registry = tooldb.open()          # SQLite in the user data dir, or TOOLDB_URL
registry.add(add)
registry.call("add", {"a": 2})    # ToolResult(success=True, output='3', data=3, ...)
registry.select("sum two numbers", k=3)   # Selection: the best tools, scores explained
registry.ooda(dry_run=True)       # OodaReport: figures, findings, the acts it would take
"""

from __future__ import annotations

from dataclasses import replace as _replace

from . import workers as _workers
from .agents import RUNTIME, AgentLoop, Limits, Router, run_task
from .binding import Binder, normalize_parameters
from .binding.runtime import Runtime
from .context import use_session
from .decorators import tool
from .errors import (
    ArgumentError,
    DefinitionError,
    ExecutionError,
    ModelError,
    NotFound,
    StoreError,
    ToolDBError,
    ToolDisabled,
    ToolTimeout,
    UsageError,
)
from .models import (
    FunctionModel,
    Message,
    Model,
    ModelTurn,
    ScriptedModel,
    ToolCall,
    ToolChoice,
    ToolSchema,
    Usage,
    load_model,
)
from .ooda.types import Act, Finding, FindingKind, OodaReport
from .provenance.graph import Explanation, GraphEdge, GraphNode, ProvenanceGraph, Trace
from .registry import Registry, open_registry, use_agent_runtime
from .settings import Settings
from .types import (
    Access,
    AgentSpec,
    BoundCall,
    CallRecord,
    Candidate,
    ErrorKind,
    LoopContext,
    Returns,
    RunRecord,
    RunResult,
    RunStatus,
    Selection,
    SkillSpec,
    SkillTool,
    ToolKind,
    ToolRecord,
    ToolResult,
    ToolSpec,
    ToolStats,
    ToolUse,
    ToolVersion,
)

# The composition root: the registry runs agents (and submits them to workers, without
# importing dbos until then) through the layers above it.
use_agent_runtime(_replace(RUNTIME, submit=_workers.submit, wait=_workers.wait))

open = open_registry

__version__ = "0.1.0"

__all__ = [
    "Access",
    "Act",
    "AgentLoop",
    "AgentSpec",
    "ArgumentError",
    "Binder",
    "BoundCall",
    "CallRecord",
    "Candidate",
    "DefinitionError",
    "ErrorKind",
    "ExecutionError",
    "Explanation",
    "Finding",
    "FindingKind",
    "FunctionModel",
    "GraphEdge",
    "GraphNode",
    "Limits",
    "LoopContext",
    "Message",
    "Model",
    "ModelError",
    "ModelTurn",
    "NotFound",
    "OodaReport",
    "ProvenanceGraph",
    "Registry",
    "Returns",
    "Router",
    "RunRecord",
    "RunResult",
    "RunStatus",
    "Runtime",
    "ScriptedModel",
    "Selection",
    "Settings",
    "SkillSpec",
    "SkillTool",
    "StoreError",
    "ToolCall",
    "ToolChoice",
    "ToolDBError",
    "ToolDisabled",
    "ToolKind",
    "ToolRecord",
    "ToolResult",
    "ToolSchema",
    "ToolSpec",
    "ToolStats",
    "ToolTimeout",
    "ToolUse",
    "ToolVersion",
    "Trace",
    "Usage",
    "UsageError",
    "__version__",
    "load_model",
    "normalize_parameters",
    "open",
    "open_registry",
    "run_task",
    "tool",
    "use_session",
]
