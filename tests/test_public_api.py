"""The public API is curated: this pins it so changes are deliberate."""

import tooldb

EXPECTED = {
    "ArgumentError", "Binder", "BoundCall", "Candidate", "Selection", "CallRecord",
    "DefinitionError", "ErrorKind",
    "ExecutionError", "ModelError", "NotFound", "Registry", "Returns", "Settings", "StoreError",
    "ToolDBError", "ToolDisabled", "ToolKind", "ToolRecord", "ToolResult", "ToolSpec", "ToolStats",
    "ToolTimeout", "ToolVersion", "UsageError", "__version__", "normalize_parameters", "open",
    "open_registry", "tool", "Runtime", "use_session",
    # agents
    "Access", "AgentLoop", "AgentSpec", "FunctionModel", "Limits", "LoopContext", "Message",
    "Model", "ModelTurn", "Router", "RunRecord", "RunResult", "RunStatus", "ScriptedModel",
    "SkillSpec", "SkillTool", "ToolCall", "ToolChoice", "ToolSchema", "ToolUse", "Usage",
    "load_model", "run_task",
    "Act", "Finding", "FindingKind", "OodaReport",
    # provenance
    "Explanation", "GraphEdge", "GraphNode", "ProvenanceGraph", "Trace",
}  # fmt: skip


def test_all_is_pinned() -> None:
    assert set(tooldb.__all__) == EXPECTED
    for name in tooldb.__all__:
        assert hasattr(tooldb, name), name


def test_error_tree() -> None:
    assert issubclass(tooldb.ArgumentError, tooldb.UsageError)
    assert issubclass(tooldb.NotFound, tooldb.UsageError)
    assert issubclass(tooldb.ToolTimeout, tooldb.ExecutionError)
    for name in ("UsageError", "ExecutionError", "ModelError", "StoreError"):
        assert issubclass(getattr(tooldb, name), tooldb.ToolDBError)
    assert tooldb.UsageError.exit_code == 2 and tooldb.ExecutionError.exit_code == 1
