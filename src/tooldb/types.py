"""Value types that flow through the pipeline (no I/O here).

``ToolSpec`` (a definition) → ``ToolRecord`` (a registered, versioned tool) →
``BoundCall`` (validated arguments) → ``ToolResult`` (the uniform outcome) →
``CallRecord`` (what the call log keeps).
"""

from __future__ import annotations

import hashlib
import json
import unicodedata
from collections.abc import Iterator
from enum import StrEnum
from typing import Any, Protocol

from pydantic import (
    BaseModel,
    ConfigDict,
    Field,
    ValidationInfo,
    field_validator,
    model_validator,
)

MAX_NAME_LENGTH = 256


class ToolKind(StrEnum):
    """How a tool is executed; the target's meaning depends on it."""

    PYTHON = "python"
    SQL = "sql"
    HTTP = "http"
    MCP = "mcp"
    SCRIPT = "script"
    AGENT = "agent"


class Returns(StrEnum):
    """The shape of a tool's result, which decides how ``output`` is rendered."""

    TABLE = "table"
    SCALAR = "scalar"
    NONE = "none"
    JSON = "json"
    TEXT = "text"


def check_name(value: str, what: str = "name") -> str:
    """Names are stored verbatim, so only reject what can never be a name."""
    if not isinstance(value, str) or not value.strip():
        raise ValueError(f"{what} must be a non-empty string")
    if value != value.strip():
        raise ValueError(f"{what} {value!r} has leading or trailing whitespace")
    if len(value) > MAX_NAME_LENGTH:
        raise ValueError(f"{what} is {len(value)} characters long (at most {MAX_NAME_LENGTH})")
    if any(unicodedata.category(ch).startswith("C") for ch in value):
        raise ValueError(f"{what} {value!r} contains control or invisible characters")
    return value


def _strings(value: Any) -> Iterator[str]:
    if isinstance(value, str):
        yield value
    elif isinstance(value, dict):
        for key, item in value.items():
            yield from _strings(key)
            yield from _strings(item)
    elif isinstance(value, list):
        for item in value:
            yield from _strings(item)


#: Validation context of a spec read back from the store (``ToolSpec.model_validate(...,
#: context=STORED)``): its text was checked for storability when it was written, and a
#: walk over every string of it is most of what reading a tool costs.
STORED: dict[str, Any] = {"stored": True}


class ToolSpec(BaseModel):
    """A tool definition: everything that, when changed, makes a new version."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    name: str
    description: str = ""
    category: str = "general"
    kind: ToolKind = ToolKind.PYTHON
    target: str
    parameters: dict[str, Any] = Field(default_factory=lambda: {"type": "object", "properties": {}})
    returns: Returns = Returns.JSON
    timeout_s: float | None = Field(default=None, gt=0)
    metadata: dict[str, Any] = Field(default_factory=dict)

    @field_validator("name")
    @classmethod
    def _valid_name(cls, value: str) -> str:
        return check_name(value, "tool name")

    @field_validator("category")
    @classmethod
    def _valid_category(cls, value: str) -> str:
        return check_name(value, "category")

    @field_validator("target")
    @classmethod
    def _valid_target(cls, value: str) -> str:
        if not value.strip():
            raise ValueError("target must not be empty")
        return value

    @model_validator(mode="after")
    def _storable_text(self, info: ValidationInfo) -> ToolSpec:
        if info.context is STORED:  # read back from the store, which it entered checked
            return self
        for text in _strings(self.model_dump(mode="json")):
            if "\x00" in text:
                raise ValueError(f"text {text[:40]!r} contains a NUL character")
            try:
                text.encode("utf-8")
            except UnicodeEncodeError:
                raise ValueError(
                    f"text {text[:40]!r} is not valid Unicode (lone surrogate)"
                ) from None
        return self

    def definition(self) -> dict[str, Any]:
        """The fields that identify a version (everything but the name)."""
        return self.model_dump(mode="json", exclude={"name"})

    def content_hash(self) -> str:
        """A stable hash of the definition: equal definitions share a version."""
        canonical = json.dumps(self.definition(), sort_keys=True, separators=(",", ":"))
        return hashlib.sha256(canonical.encode()).hexdigest()


class ToolStats(BaseModel):
    """Live statistics, maintained atomically by the recorder."""

    usage_count: int = 0
    success_count: int = 0
    total_duration_ms: float = 0.0
    last_used: float | None = None

    @property
    def success_rate(self) -> float | None:
        return self.success_count / self.usage_count if self.usage_count else None

    @property
    def avg_duration_ms(self) -> float | None:
        return self.total_duration_ms / self.usage_count if self.usage_count else None

    def summary(self) -> dict[str, Any]:
        return {
            "usage_count": self.usage_count,
            "success_count": self.success_count,
            "success_rate": self.success_rate,
            "avg_duration_ms": self.avg_duration_ms,
            "last_used": self.last_used,
        }


class ToolRecord(BaseModel):
    """A registered tool: its current definition, version, state and statistics."""

    model_config = ConfigDict(frozen=True)

    id: int
    tenant: str
    spec: ToolSpec
    version: int
    content_hash: str
    enabled: bool
    created_at: float
    updated_at: float
    stats: ToolStats = Field(default_factory=ToolStats)

    @property
    def name(self) -> str:
        return self.spec.name

    def summary(self) -> dict[str, Any]:
        """The JSON shape used by ``list``/``show``."""
        return {
            "name": self.spec.name,
            "tenant": self.tenant,
            "version": self.version,
            "enabled": self.enabled,
            **self.spec.definition(),
            "content_hash": self.content_hash,
            "stats": self.stats.summary(),
        }


class ToolVersion(BaseModel):
    """One stored version of a tool's definition."""

    version: int
    content_hash: str
    spec: ToolSpec
    created_at: float


class BoundCall(BaseModel):
    """Arguments validated and completed against one version of a tool."""

    model_config = ConfigDict(arbitrary_types_allowed=True)

    tool: ToolRecord
    arguments: dict[str, Any]


class ToolResult(BaseModel):
    """The uniform outcome of every call (DESIGN §3).

    ``output`` is what a model reads; ``data`` is the structured value.
    """

    success: bool
    output: str = ""
    data: Any = None
    error: str | None = None
    duration_ms: float = 0.0
    call_id: int | None = None

    @classmethod
    def failure(cls, error: str, duration_ms: float = 0.0) -> ToolResult:
        return cls(success=False, output=error, error=error, duration_ms=duration_ms)


class ErrorKind(StrEnum):
    """Why a recorded call did not succeed."""

    ARGUMENTS = "arguments"
    EXECUTION = "execution"
    TIMEOUT = "timeout"
    CANCELLED = "cancelled"


class CallRecord(BaseModel):
    """One row of the call log."""

    id: int
    tenant: str
    tool_id: int | None
    tool_name: str
    tool_version: int
    run_id: str | None
    session_id: str
    arguments: dict[str, Any] | None
    success: bool
    error_kind: ErrorKind | None
    error: str | None
    output_size: int
    output_preview: str | None
    duration_ms: float
    started_at: float


class Candidate(BaseModel):
    """One selected tool with every component of its score (selection explains itself).

    ``dense`` is the cosine of task and tool (None without embeddings), ``lexical`` the
    BM25 score, ``relevance`` their fusion, ``success`` the smoothed success rate,
    ``latency`` a 0-1 speed score, ``final`` what the ranking sorts by.
    """

    name: str
    rank: int
    final: float
    relevance: float
    dense: float | None
    lexical: float
    success: float
    latency: float
    calls: int
    category: str
    kind: str
    description: str = ""
    #: Learning from use: z units the evidence of similar past tasks added to relevance,
    #: and what it was ("served 14 similar tasks (closest 0.93: '...')"); see
    #: docs/selection.md.
    learned: float = 0.0
    evidence: str | None = None


class Selection(BaseModel):
    """What ``Registry.select`` returns: ranked candidates, the decision id, and notes
    (e.g. lexical-only because no embedder, or tools still waiting for embeddings)."""

    task: str
    candidates: list[Candidate]
    decision_id: int | None = None
    embedder: str | None = None
    notes: list[str] = Field(default_factory=list)
    duration_ms: float = 0.0

    @property
    def names(self) -> list[str]:
        return [candidate.name for candidate in self.candidates]


# -- agents ----------------------------------------------------------------------


class RunStatus(StrEnum):
    """How an agent run ended (``running`` while it is under way)."""

    RUNNING = "running"
    SUCCESS = "success"
    ERROR = "error"
    PARTIAL = "partial"  # a limit stopped it: requires review, keeps what it gathered
    #: Its process stopped before the run ended (killed, crashed, interrupted): found
    #: by its lease expiring (agents/leases.py), or said by the run itself on the way out.
    INTERRUPTED = "interrupted"


class ToolUse(BaseModel):
    """One tool call made during a run, as the run's history and LoopContext show it."""

    tool: str
    arguments: Any = None
    success: bool
    output: str = ""
    error: str | None = None
    call_id: int | None = None
    iteration: int = 0
    duration_ms: float = 0.0


class LoopContext(BaseModel):
    """Given to a Python tool that declares a parameter annotated ``LoopContext``
    (the parameter is hidden from the tool's schema). Outside a run it is None."""

    model_config = ConfigDict(arbitrary_types_allowed=True)

    run_id: str
    iteration: int
    history: list[ToolUse] = Field(default_factory=list)
    is_subagent: bool = False
    parent_run_id: str | None = None
    agent: str | None = None
    #: Mutable state shared by the tools (and sub-agents) of one run tree; an agent
    #: tool with a state contract gets only the keys it reads (agents/orchestrate.py).
    state: dict[str, Any] = Field(default_factory=dict)
    #: The run's model (agent tools with ``model: inherit`` run on it); not serialised.
    model: Any = Field(default=None, exclude=True, repr=False)


class RunResult(BaseModel):
    """What an agent run returns, and what ``tooldb run show`` prints.

    Never raised, always returned: a run that hits a limit is ``partial`` with
    ``requires_review`` and everything gathered so far."""

    run_id: str
    status: RunStatus
    output: str = ""
    data: Any = None
    error: str | None = None
    requires_review: bool = False
    review_reason: str | None = None
    task: str = ""
    agent: str | None = None
    mode: str = "llm"
    model: str | None = None
    parent_run_id: str | None = None
    iterations: int = 0
    tool_calls: list[ToolUse] = Field(default_factory=list)
    input_tokens: int = 0
    output_tokens: int = 0
    duration_ms: float = 0.0
    plan: dict[str, Any] | None = None  # the router's calls and why, or its decline
    #: What the run's record warns of, e.g. a call far slower than its tool's history.
    warnings: list[str] = Field(default_factory=list)

    @property
    def success(self) -> bool:
        return self.status is RunStatus.SUCCESS


class RunRecord(BaseModel):
    """One row of the run log (``tooldb runs``)."""

    id: str
    tenant: str
    parent_run_id: str | None
    agent: str | None
    mode: str
    model: str | None
    task: str
    status: RunStatus
    output: str | None
    error: str | None
    requires_review: bool
    review_reason: str | None
    iterations: int
    tool_calls: int
    input_tokens: int
    output_tokens: int
    started_at: float
    ended_at: float | None


class Access(StrEnum):
    """What a skill lets an agent do with a tool (each level includes the one before).

    ``read``: only calls that cannot change anything (SQL in a read-only transaction,
    HTTP GET/HEAD/OPTIONS, tools marked ``metadata.read_only``); ``write``: also SQL
    writes (for tools registered writable) and HTTP writes; ``execute``: also running
    code (python, script, mcp and agent tools)."""

    READ = "read"
    WRITE = "write"
    EXECUTE = "execute"


class SkillTool(BaseModel):
    """A tool a skill unlocks: the access it grants, its order among the skill's tools
    (higher ``priority`` first) and configuration the skill gives it."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    name: str
    access: Access = Access.EXECUTE
    priority: int = 0
    config: dict[str, Any] = Field(default_factory=dict)


class SkillAssignment(BaseModel):
    """A skill as an agent holds it: its priority (higher first in the agent's skill
    index) and configuration (given to the agent when it loads the skill)."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    name: str
    priority: int = 0
    config: dict[str, Any] = Field(default_factory=dict)


def _assignments(entries: Any) -> tuple[list[str], list[dict[str, Any]]] | None:
    """``skills: [name | {name, priority, config}]`` as (names by priority, then as
    written; every entry as a mapping), or None when there is nothing to convert."""
    if not isinstance(entries, list) or not any(isinstance(e, dict) for e in entries):
        return None
    rows = [e if isinstance(e, dict) else {"name": e} for e in entries]
    order = sorted(range(len(rows)), key=lambda i: (-int(rows[i].get("priority") or 0), i))
    return [str(rows[i].get("name")) for i in order], [rows[i] for i in order]


class SkillSpec(BaseModel):
    """A skill: the description an agent sees first; instructions and tools it unlocks
    when loaded (progressive disclosure)."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    name: str
    description: str
    instructions: str = ""
    parent: str | None = None
    depends_on: list[str] = Field(default_factory=list)
    #: Dependencies loaded when registered, skipped (not an error) when not.
    optional_dependencies: list[str] = Field(default_factory=list)
    tools: list[SkillTool] = Field(default_factory=list)
    active: bool = True
    metadata: dict[str, Any] = Field(default_factory=dict)

    @model_validator(mode="before")
    @classmethod
    def _optional_dependencies(cls, data: Any) -> Any:
        """``depends_on: [name | {name, optional: true}]``: optional ones apart."""
        if isinstance(data, dict) and isinstance(data.get("depends_on"), list):
            entries = data["depends_on"]
            if any(isinstance(e, dict) for e in entries):
                required = [e if isinstance(e, str) else e.get("name") for e in entries
                            if isinstance(e, str) or not e.get("optional")]  # fmt: skip
                optional = [e.get("name") for e in entries
                            if isinstance(e, dict) and e.get("optional")]  # fmt: skip
                known = list(data.get("optional_dependencies") or [])
                data = {**data, "depends_on": required,
                        "optional_dependencies": known + optional}  # fmt: skip
        return data

    @field_validator("name")
    @classmethod
    def _valid_name(cls, value: str) -> str:
        return check_name(value, "skill name")

    @field_validator("description")
    @classmethod
    def _has_description(cls, value: str) -> str:
        if not value.strip():
            raise ValueError("a skill needs a description (it is all an agent sees at first)")
        return value

    def content_hash(self) -> str:
        canonical = json.dumps(self.model_dump(mode="json"), sort_keys=True)
        return hashlib.sha256(canonical.encode()).hexdigest()


class AgentSpec(BaseModel):
    """An agent: instructions, model (``provider:model``; none = the router), the skills
    and tools it starts with, and its limits."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    name: str
    description: str = ""
    instructions: str = ""
    model: str | None = None
    #: Skill names, highest priority first (``skills: [name | {name, priority, config}]``).
    skills: list[str] = Field(default_factory=list)
    #: The skills as assigned, with priority and configuration, in the order of ``skills``.
    skill_assignments: list[SkillAssignment] = Field(default_factory=list)
    tools: list[str] | None = None
    #: Offer ``search_tools`` (selection over the whole registry) to find more tools.
    search_tools: bool = False
    #: Offer the ``subagent`` tool (child runs on sub-tasks).
    subagents: bool = False
    tool_choice: str = "auto"
    limits: dict[str, int | float] = Field(default_factory=dict)
    #: Also register the agent as a tool of kind ``agent`` (same name), so other agents
    #: and callers can delegate to it (agents/orchestrate.py).
    as_tool: bool = False
    #: The state contract of an agent tool: the shared-state keys it is given (in its
    #: prompt and its LoopContext) and the keys it may write back. None for both: the
    #: agent shares the caller's whole state (no contract).
    reads: list[str] | None = None
    writes: list[str] | None = None
    #: Per-target retry caps of an orchestrator: how many times a ``needs_retry`` may
    #: re-run each target (others: ``max_retries_per_tool``).
    retries: dict[str, int] = Field(default_factory=dict)
    metadata: dict[str, Any] = Field(default_factory=dict)

    @model_validator(mode="before")
    @classmethod
    def _skill_assignments(cls, data: Any) -> Any:
        if isinstance(data, dict):
            converted = _assignments(data.get("skills"))
            if converted is not None:
                names, rows = converted
                data = {**data, "skills": names, "skill_assignments": rows}
        return data

    def skill_config(self, skill: str) -> dict[str, Any]:
        """The configuration this agent gives ``skill`` ({} if none)."""
        return next((a.config for a in self.skill_assignments if a.name == skill), {})

    @field_validator("name")
    @classmethod
    def _valid_name(cls, value: str) -> str:
        return check_name(value, "agent name")

    @field_validator("retries")
    @classmethod
    def _valid_retries(cls, value: dict[str, int]) -> dict[str, int]:
        bad = {k: v for k, v in value.items() if isinstance(v, bool) or v < 0}
        if bad:
            raise ValueError(f"retry caps must be whole numbers >= 0, got {bad}")
        return value

    @property
    def has_contract(self) -> bool:
        return self.reads is not None or self.writes is not None

    def content_hash(self) -> str:
        data = self.model_dump(mode="json")
        for key in ("reads", "writes", "retries"):  # unset: the hash agents had before them
            if data[key] in (None, {}):
                del data[key]
        canonical = json.dumps(data, sort_keys=True)
        return hashlib.sha256(canonical.encode()).hexdigest()


class Progress(Protocol):
    """Told (done, total, stage) as a bulk job advances; ``total`` is None when not known
    up front. Stages, in order: ``reading`` (manifest entries validated), ``writing`` (new
    tools written), ``embedding`` (vectors stored)."""

    def __call__(self, done: int, total: int | None, stage: str = "embedding") -> None: ...
