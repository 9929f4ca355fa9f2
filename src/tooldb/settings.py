"""Configuration: defaults, overridden by a TOML file, overridden by ``TOOLDB_*`` env vars.

The file is ``$TOOLDB_CONFIG`` or ``config.toml`` in the user config directory,
with top-level keys named like the fields below (``url``, ``default_timeout_s``...).
Named database connections for SQL tools are a ``[connections]`` table
(``name = "sqlalchemy-url"``) or ``TOOLDB_CONNECTION_<NAME>=url`` variables; each
source adds to (and by name overrides) the connections of the sources before it.
HTTP tools' secrets are a ``[secrets]`` table (``NAME = "value"``), merged the same way.
"""

from __future__ import annotations

import os
import tomllib
from dataclasses import dataclass, field, fields, replace
from pathlib import Path
from typing import Any

import platformdirs

from .errors import UsageError

APP_NAME = "tooldb"
#: The connection name that always means the registry's own database.
REGISTRY_CONNECTION = "registry"
_CONNECTION_ENV_PREFIX = "TOOLDB_CONNECTION_"


def default_data_dir() -> Path:
    """Where the default SQLite registry lives (``$TOOLDB_HOME`` wins)."""
    home = os.environ.get("TOOLDB_HOME")
    return Path(home) if home else Path(platformdirs.user_data_dir(APP_NAME))


def default_url() -> str:
    return f"sqlite:///{default_data_dir() / 'registry.db'}"


@dataclass(frozen=True)
class Settings:
    """Every knob tooldb reads; one immutable object passed down explicitly."""

    url: str | None = None
    tenant: str = "default"
    default_timeout_s: float = 30.0
    record_calls: bool = True
    record_output_chars: int = 4096
    sqlite_busy_timeout_s: float = 60.0
    #: auto (local MiniLM if installed, else none), local, hash[:DIM], openai:MODEL, none.
    embedder: str = "auto"
    embedder_url: str = ""
    embedder_api_key_env: str = "OPENAI_API_KEY"
    #: Selection: the lexical (BM25) share of blended relevance; the rest is the vectors'.
    #: A fixed half: chosen leave-one-dataset-out over a share that followed how much of
    #: the task the best lexical match covered, which did not hold on sets left out of it.
    select_lexical_share: float = 0.5
    #: Pooled tools whose vectors are at least this alike are near-twins: the words do not
    #: order them, the vectors do (retrieval.merge_twins). 1 turns it off.
    select_twin_cosine: float = 0.85
    #: The vectors' check of the words' best match: if its cosine is less than this many
    #: spreads above the average tool's, the lexical share is multiplied by
    #: ``select_unrelated_share`` (retrieval.Mix.vetted); a share of 1 turns the check off.
    select_unrelated_z: float = 0.15
    select_unrelated_share: float = 0.5
    select_success_weight: float = 0.3
    select_latency_weight: float = 0.05
    #: Pseudo-calls of prior belief in a new tool's success (smoothing), and that belief.
    select_prior_calls: float = 5.0
    select_prior_success: float = 0.9
    #: A tool this slow (average ms) gets half the latency score.
    select_latency_ref_ms: float = 1000.0
    #: Past this many embedded tools a tenant's dense search goes through an HNSW graph
    #: (needs tooldb[ann]); 0 keeps it exact at any size.
    select_ann_min_tools: int = 20_000
    #: Learning from use (selection/evidence.py, docs/selection.md): tasks a tool served
    #: (or failed) move it up (down) for similar tasks. ``select_learning`` false: rank
    #: zero-shot and store no evidence.
    select_learning: bool = True
    select_evidence_weight: float = 16.0
    select_evidence_min_cosine: float = 0.5
    select_evidence_neighbours: int = 32
    select_evidence_merge_cosine: float = 0.95
    select_evidence_cap: int = 1000
    #: Past this many stored tasks a tenant's evidence is searched through an HNSW graph
    #: (needs tooldb[ann]; candidates rescored exactly); 0 keeps it exact at any size.
    select_evidence_ann_min: int = 5_000
    #: The OODA cycle drops evidence not seen for this long (seconds; 0 keeps it).
    evidence_max_age_s: float = 180 * 86400.0
    record_decisions: bool = True
    #: Agents: ``provider:model`` (empty = no model: ``tooldb run`` uses the router),
    #: the server's base URL (OpenAI-compatible providers), the env var holding the key.
    model: str = ""
    model_base_url: str = ""
    model_api_key_env: str = ""
    model_max_tokens: int = 4096
    model_timeout_s: float = 120.0
    #: Retries of a failed model request (connection errors, 408/409/429/5xx) by the SDK.
    model_max_retries: int = 2
    #: Default limits of an agent run (an agent's own limits override them).
    agent_max_iterations: int = 10
    agent_max_tool_calls: int = 15
    agent_max_retries_per_tool: int = 2
    #: An agent with more skills than this sees only the best this many for its task in
    #: its prompt, and finds the rest with ``search_skills`` (docs/agents.md).
    skill_index_k: int = 12
    agent_timeout_s: float = 300.0
    #: Agents calling agents (kind ``agent``): how deep a chain may go.
    agent_max_depth: int = 3
    #: Agent runs' records (docs/agents.md): 1 (the default) commits every call before
    #: its result goes back to the model, so a killed process loses no executed call.
    #: N > 1 opts into group commit: up to N calls held between commits while nothing
    #: waits (what a killed process can lose; a scripted run's turn is cheaper).
    agent_held_calls: int = 1
    #: A running run's lease (s): renewed by its process every quarter of it; a run
    #: whose lease expired is marked ``interrupted`` by the next open or sweep.
    agent_run_lease_s: float = 60.0
    #: A run's record warns of each tool call slower than this many times the p95 of
    #: the tool's last successful calls (at least ``slow_call_min_history`` of them, so
    #: a new tool is not judged); 0 turns the warning off (agents/slow_calls.py).
    slow_call_factor: float = 3.0
    slow_call_min_history: int = 20
    #: OODA (ooda/optimize.py, docs/ooda.md): the analysis window, then the findings'
    #: thresholds, the act policy, and the per-tenant cycle lease.
    ooda_window_s: float = 7 * 86400.0
    ooda_low_success_rate: float = 0.7
    ooda_low_success_min_calls: int = 100
    ooda_alpha: float = 0.01
    ooda_degrade_min_calls: int = 20
    ooda_degrade_min_drop: float = 0.05
    ooda_latency_degrade_ratio: float = 1.25
    ooda_slow_p95_ms: float = 10_000.0
    ooda_slow_min_calls: int = 20
    ooda_never_used_after_s: float = 7 * 86400.0
    ooda_alternatives: int = 3
    ooda_alternative_min_relevance: float = 0.5
    ooda_disable_success_rate: float = 0.5
    ooda_disable_min_calls: int = 200
    ooda_protected_categories: tuple[str, ...] = ("diagnostics",)
    ooda_lock_ttl_s: float = 600.0
    ooda_lock_wait_s: float = 0.0
    max_parallel_calls: int = 16
    max_parallel_per_tool: int = 8
    #: Python script tools go through the fork server where the platform allows
    #: (docs/scripts.md); false: a process of their own per call, as JavaScript.
    script_forkserver: bool = True
    #: Provenance push (``tooldb trace --push``, the ``neo4j`` extra): the server, the
    #: user, the env var holding the password (never the password itself), the database.
    neo4j_url: str = ""
    neo4j_user: str = "neo4j"
    neo4j_password_env: str = "NEO4J_PASSWORD"
    neo4j_database: str = ""
    connections: dict[str, str] = field(default_factory=dict)
    #: Where SQL tools over a PostgreSQL registry connect, as the role ``tooldb_sql``
    #: (docs/sql.md); empty: the registry's URL with that user and no password.
    registry_sql_url: str = ""
    # HTTP tools: host patterns that may be called ("public" = any host whose every
    # address is public; see executors/http_guard.py), a per-request time cap and a
    # response size cap enforced while streaming.
    http_allowed_hosts: tuple[str, ...] = ("public",)
    http_timeout_s: float = 30.0
    http_max_response_bytes: int = 10_000_000
    #: MCP tools: a result (or error) past this many bytes of text is cut, saying so.
    mcp_max_result_bytes: int = 10_000_000
    #: Manifests (``add manifest``): files past this size are refused unread.
    manifest_max_bytes: int = 10_000_000
    # Secret values by name (auth of HTTP tools stores only the name); env vars also work.
    secrets: dict[str, str] = field(default_factory=dict, repr=False)
    # Built-in tools (``tooldb add builtins``, docs/builtins.md): the folder the file,
    # shell, git, code and chart tools are confined to (empty: $TOOLDB_WORKSPACE, else
    # ``workspace`` in the user data directory), their caps, whether ``bash`` has the
    # network, the web search provider (searxng | brave | tavily; empty: none) with its
    # base URL and the name of the secret holding its key, and GitHub's API.
    workspace: str = ""
    workspace_max_file_bytes: int = 1_000_000
    shell_network: bool = False
    shell_timeout_s: float = 120.0
    shell_memory_mb: int = 1024
    web_search_provider: str = ""
    web_search_url: str = ""
    web_search_key_secret: str = ""
    github_api_url: str = "https://api.github.com"
    github_token_secret: str = "GITHUB_TOKEN"

    def __post_init__(self) -> None:
        # Python callers may pass a list: store a tuple, immutable like the rest.
        object.__setattr__(self, "http_allowed_hosts", tuple(self.http_allowed_hosts))
        object.__setattr__(self, "ooda_protected_categories", tuple(self.ooda_protected_categories))
        for name in _POSITIVE:
            if getattr(self, name) <= 0:
                raise UsageError(f"setting {name!r} must be positive, got {getattr(self, name)}")
        for name in _FRACTIONS:
            if not 0 <= getattr(self, name) <= 1:
                raise UsageError(f"setting {name!r} must be from 0 to 1, got {getattr(self, name)}")
        for name in _NOT_NEGATIVE:
            if getattr(self, name) < 0:
                raise UsageError(f"setting {name!r} must be 0 or more, got {getattr(self, name)}")

    @property
    def resolved_url(self) -> str:
        return self.url or default_url()

    @classmethod
    def load(cls, **overrides: Any) -> Settings:
        """Defaults < config file < environment < explicit overrides (None ignored)."""
        settings = cls()
        settings = settings._merge(_read_config_file(), "config file")
        settings = settings._merge(_read_env(), "environment")
        return settings._merge({k: v for k, v in overrides.items() if v is not None}, "argument")

    def _merge(self, values: dict[str, Any], source: str) -> Settings:
        known = {f.name: f for f in fields(self)}
        changes: dict[str, Any] = {}
        for key, raw in values.items():
            if key not in known:
                raise UsageError(f"unknown setting {key!r} from {source}")
            if key == "connections":
                changes[key] = {**self.connections, **_connections(raw, source)}
            elif key == "secrets":
                changes[key] = {**self.secrets, **_string_table(key, raw, source)}
            else:
                changes[key] = _coerce(key, raw, type(getattr(self, key)), source)
        return replace(self, **changes)


_POSITIVE = (
    "default_timeout_s", "http_timeout_s", "http_max_response_bytes", "mcp_max_result_bytes",
    "manifest_max_bytes", "ooda_window_s", "ooda_slow_p95_ms", "ooda_latency_degrade_ratio",
    "ooda_lock_ttl_s", "agent_max_depth", "agent_held_calls", "agent_run_lease_s",
    "workspace_max_file_bytes", "shell_timeout_s", "shell_memory_mb",
)  # fmt: skip
_FRACTIONS = (
    "ooda_low_success_rate", "ooda_alpha", "ooda_degrade_min_drop",
    "ooda_alternative_min_relevance", "ooda_disable_success_rate", "select_twin_cosine",
    "select_unrelated_share", "select_lexical_share",
)  # fmt: skip
_NOT_NEGATIVE = (
    "ooda_low_success_min_calls", "ooda_degrade_min_calls", "ooda_slow_min_calls",
    "ooda_never_used_after_s", "ooda_alternatives", "ooda_disable_min_calls", "ooda_lock_wait_s",
    "select_ann_min_tools", "select_evidence_ann_min", "slow_call_factor",
    "slow_call_min_history",
)  # fmt: skip


def _connections(raw: Any, source: str) -> dict[str, str]:
    """Connection names to URLs; ``registry`` is reserved for the registry's own database."""
    if not isinstance(raw, dict):
        raise UsageError(f"setting 'connections' from {source} must be a table of name = URL")
    for name, url in raw.items():
        if not isinstance(name, str) or not name or not isinstance(url, str) or not url:
            raise UsageError(
                f"connection {name!r} from {source} must map a name to a URL string, got {url!r}"
            )
        if name == REGISTRY_CONNECTION:
            raise UsageError(
                f"connection name {name!r} from {source} is reserved for the registry's database"
            )
    return dict(raw)


def _coerce(key: str, raw: Any, kind: type, source: str) -> Any:
    if key == "url" or kind is str:
        return str(raw)
    if kind is tuple:
        return _string_list(key, raw, source)
    try:
        if kind is bool and isinstance(raw, str):
            lowered = raw.strip().lower()
            if lowered not in {"1", "0", "true", "false", "yes", "no", "on", "off"}:
                raise ValueError(raw)
            return lowered in {"1", "true", "yes", "on"}
        return kind(raw)
    except (TypeError, ValueError):
        raise UsageError(
            f"setting {key!r} from {source} must be {kind.__name__}, got {raw!r}"
        ) from None


def _string_list(key: str, raw: Any, source: str) -> tuple[str, ...]:
    """A comma-separated string (environment) or a list of strings (file, argument)."""
    items = raw.split(",") if isinstance(raw, str) else raw
    if not isinstance(items, list | tuple) or not all(isinstance(i, str) for i in items):
        raise UsageError(f"setting {key!r} from {source} must be a list of strings, got {raw!r}")
    return tuple(i.strip() for i in items if i.strip())


def _string_table(key: str, raw: Any, source: str) -> dict[str, str]:
    if not isinstance(raw, dict) or not all(
        isinstance(k, str) and isinstance(v, str) for k, v in raw.items()
    ):
        raise UsageError(f"setting {key!r} from {source} must be a table of strings")
    return dict(raw)


def _read_config_file() -> dict[str, Any]:
    explicit = os.environ.get("TOOLDB_CONFIG")
    path = (
        Path(explicit) if explicit else Path(platformdirs.user_config_dir(APP_NAME)) / "config.toml"
    )
    if not path.is_file():
        if explicit:
            raise UsageError(f"TOOLDB_CONFIG points to {path}, which is not a file")
        return {}
    try:
        return tomllib.loads(path.read_text())
    except tomllib.TOMLDecodeError as exc:
        raise UsageError(f"config file {path} is not valid TOML: {exc}") from None


_ENV_KEYS = {
    "TOOLDB_URL": "url",
    "TOOLDB_TENANT": "tenant",
    "TOOLDB_DEFAULT_TIMEOUT": "default_timeout_s",
    "TOOLDB_RECORD_CALLS": "record_calls",
    "TOOLDB_RECORD_OUTPUT_CHARS": "record_output_chars",
    "TOOLDB_EMBEDDER": "embedder",
    "TOOLDB_EMBEDDER_URL": "embedder_url",
    "TOOLDB_RECORD_DECISIONS": "record_decisions",
    "TOOLDB_SELECT_ANN_MIN_TOOLS": "select_ann_min_tools",
    "TOOLDB_SELECT_LEARNING": "select_learning",
    "TOOLDB_SELECT_EVIDENCE_ANN_MIN": "select_evidence_ann_min",
    "TOOLDB_MAX_PARALLEL_CALLS": "max_parallel_calls",
    "TOOLDB_MAX_PARALLEL_PER_TOOL": "max_parallel_per_tool",
    "TOOLDB_HTTP_ALLOWED_HOSTS": "http_allowed_hosts",
    "TOOLDB_HTTP_TIMEOUT": "http_timeout_s",
    "TOOLDB_HTTP_MAX_RESPONSE_BYTES": "http_max_response_bytes",
    "TOOLDB_MCP_MAX_RESULT_BYTES": "mcp_max_result_bytes",
    "TOOLDB_MANIFEST_MAX_BYTES": "manifest_max_bytes",
    "TOOLDB_SCRIPT_FORKSERVER": "script_forkserver",
    "TOOLDB_AGENT_HELD_CALLS": "agent_held_calls",
    "TOOLDB_AGENT_RUN_LEASE": "agent_run_lease_s",
    "TOOLDB_SLOW_CALL_FACTOR": "slow_call_factor",
    "TOOLDB_MODEL": "model",
    "TOOLDB_MODEL_BASE_URL": "model_base_url",
    "TOOLDB_OODA_WINDOW": "ooda_window_s",
    "TOOLDB_OODA_PROTECTED_CATEGORIES": "ooda_protected_categories",
    "TOOLDB_NEO4J_URL": "neo4j_url",
    "TOOLDB_NEO4J_USER": "neo4j_user",
    "TOOLDB_REGISTRY_SQL_URL": "registry_sql_url",
    "TOOLDB_WORKSPACE": "workspace",
    "TOOLDB_SKILL_INDEX_K": "skill_index_k",
}


def _read_env() -> dict[str, Any]:
    values: dict[str, Any] = {
        key: os.environ[env] for env, key in _ENV_KEYS.items() if os.environ.get(env)
    }
    connections = {
        env[len(_CONNECTION_ENV_PREFIX) :].lower(): url
        for env, url in os.environ.items()
        if env.startswith(_CONNECTION_ENV_PREFIX) and len(env) > len(_CONNECTION_ENV_PREFIX) and url
    }
    if connections:
        values["connections"] = connections
    return values
