"""The registry's tables at the head migration (SQLAlchemy Core).

Migrations create these; a test checks that a migrated database matches this
metadata exactly, so the two cannot drift apart. Timestamps are Unix seconds
(floats): cheap to write on the hot path and trivially comparable in windows.
"""

from __future__ import annotations

import sqlalchemy as sa
from sqlalchemy.dialects.postgresql import JSONB

metadata = sa.MetaData()

#: JSON everywhere, JSONB on PostgreSQL so later issues can index into it.
Json = sa.JSON().with_variant(JSONB(), "postgresql")
#: 64-bit ids on PostgreSQL; SQLite needs INTEGER to alias the rowid.
BigId = sa.BigInteger().with_variant(sa.Integer(), "sqlite")

tools = sa.Table(
    "tools",
    metadata,
    sa.Column("id", BigId, primary_key=True, autoincrement=True),
    sa.Column("tenant", sa.Text, nullable=False),
    sa.Column("name", sa.Text, nullable=False),
    sa.Column("description", sa.Text, nullable=False),
    sa.Column("category", sa.Text, nullable=False),
    sa.Column("kind", sa.Text, nullable=False),
    sa.Column("target", sa.Text, nullable=False),
    sa.Column("parameters", Json, nullable=False),
    sa.Column("returns", sa.Text, nullable=False),
    sa.Column("timeout_s", sa.Float, nullable=True),
    sa.Column("metadata", Json, nullable=False),
    sa.Column("version", sa.Integer, nullable=False),
    sa.Column("content_hash", sa.Text, nullable=False),
    sa.Column("enabled", sa.Boolean, nullable=False),
    sa.Column("created_at", sa.Float, nullable=False),
    sa.Column("updated_at", sa.Float, nullable=False),
    sa.Column("usage_count", sa.BigInteger, nullable=False, server_default="0"),
    sa.Column("success_count", sa.BigInteger, nullable=False, server_default="0"),
    sa.Column("total_duration_ms", sa.Float, nullable=False, server_default="0"),
    sa.Column("last_used", sa.Float, nullable=True),
    # The tenant generation at the tool's last change (definition, state or embedding):
    # in-process indexes reload only rows past the generation they last saw.
    sa.Column("change_seq", sa.BigInteger, nullable=False, server_default="0"),
    # OODA (ooda/optimize.py): the figures of the last analysis over its window, and the
    # lifetime counters at that instant, so selection reads "window + calls since".
    sa.Column("analyzed_at", sa.Float, nullable=True),
    sa.Column("window_s", sa.Float, nullable=True),
    sa.Column("window_calls", sa.BigInteger, nullable=True),
    sa.Column("window_successes", sa.BigInteger, nullable=True),
    sa.Column("window_duration_ms", sa.Float, nullable=True),
    sa.Column("window_p50_ms", sa.Float, nullable=True),
    sa.Column("window_p95_ms", sa.Float, nullable=True),
    sa.Column("base_usage_count", sa.BigInteger, nullable=True),
    sa.Column("base_success_count", sa.BigInteger, nullable=True),
    sa.Column("base_duration_ms", sa.Float, nullable=True),
    sa.UniqueConstraint("tenant", "name", name="uq_tools_tenant_name"),
)
sa.Index("ix_tools_tenant_category", tools.c.tenant, tools.c.category)
sa.Index("ix_tools_tenant_change_seq", tools.c.tenant, tools.c.change_seq)
#: The tools with calls counted: selection reads a pool's statistics through it, so a
#: never-called tool (most of a pool) costs a probe of a small index (migration 0005).
_called = tools.c.usage_count != 0
sa.Index("ix_tools_called", tools.c.id, sqlite_where=_called, postgresql_where=_called)

#: One row per tenant: ``generation`` grows with every change to its tools, ``removals``
#: with every removal (an index that sees removals changed reloads in full).
tenant_state = sa.Table(
    "tenant_state",
    metadata,
    sa.Column("tenant", sa.Text, primary_key=True),
    sa.Column("generation", sa.BigInteger, nullable=False, server_default="0"),
    sa.Column("removals", sa.BigInteger, nullable=False, server_default="0"),
)

#: What selection searches: the tool's document text, and its embedding under one
#: embedder (switching embedder replaces the vector, never mixes spaces).
tool_search = sa.Table(
    "tool_search",
    metadata,
    sa.Column(
        "tool_id",
        BigId,
        sa.ForeignKey("tools.id", ondelete="CASCADE", name="fk_tool_search_tool"),
        primary_key=True,
    ),
    sa.Column("text", sa.Text, nullable=False),
    sa.Column("text_hash", sa.Text, nullable=False),
    sa.Column("embedder", sa.Text, nullable=True),
    sa.Column("dim", sa.Integer, nullable=True),
    sa.Column("vector", sa.LargeBinary, nullable=True),
    sa.Column("embedded_at", sa.Float, nullable=True),
)
sa.Index("ix_tool_search_embedder", tool_search.c.embedder)

tool_versions = sa.Table(
    "tool_versions",
    metadata,
    sa.Column("id", BigId, primary_key=True, autoincrement=True),
    sa.Column(
        "tool_id",
        BigId,
        sa.ForeignKey("tools.id", ondelete="CASCADE", name="fk_tool_versions_tool"),
        nullable=False,
    ),
    sa.Column("version", sa.Integer, nullable=False),
    sa.Column("content_hash", sa.Text, nullable=False),
    sa.Column("definition", Json, nullable=False),
    sa.Column("created_at", sa.Float, nullable=False),
    sa.UniqueConstraint("tool_id", "version", name="uq_tool_versions_tool_version"),
)

# Calls keep the tool's name and version rather than a foreign key: the log
# outlives a removed tool, and provenance must still explain old results.
calls = sa.Table(
    "calls",
    metadata,
    sa.Column("id", BigId, primary_key=True, autoincrement=True),
    sa.Column("tenant", sa.Text, nullable=False),
    sa.Column("tool_id", sa.BigInteger, nullable=True),
    sa.Column("tool_name", sa.Text, nullable=False),
    sa.Column("tool_version", sa.Integer, nullable=False),
    sa.Column("run_id", sa.Text, nullable=True),
    sa.Column("session_id", sa.Text, nullable=False),
    sa.Column("arguments", sa.JSON, nullable=True),
    sa.Column("success", sa.Boolean, nullable=False),
    sa.Column("error_kind", sa.Text, nullable=True),
    sa.Column("error", sa.Text, nullable=True),
    sa.Column("output_size", sa.BigInteger, nullable=False),
    sa.Column("output_preview", sa.Text, nullable=True),
    sa.Column("duration_ms", sa.Float, nullable=False),
    sa.Column("started_at", sa.Float, nullable=False),
)
sa.Index("ix_calls_tenant_started", calls.c.tenant, calls.c.started_at)
sa.Index("ix_calls_tenant_tool_started", calls.c.tenant, calls.c.tool_name, calls.c.started_at)
sa.Index("ix_calls_run", calls.c.run_id)

#: Every selection: the task, the candidates with their component scores, the choice.
decisions = sa.Table(
    "decisions",
    metadata,
    sa.Column("id", BigId, primary_key=True, autoincrement=True),
    sa.Column("tenant", sa.Text, nullable=False),
    sa.Column("run_id", sa.Text, nullable=True),
    sa.Column("task", sa.Text, nullable=False),
    sa.Column("k", sa.Integer, nullable=False),
    sa.Column("filters", Json, nullable=False),
    sa.Column("candidates", Json, nullable=False),
    sa.Column("chosen", sa.Text, nullable=True),
    sa.Column("embedder", sa.Text, nullable=True),
    sa.Column("duration_ms", sa.Float, nullable=False),
    sa.Column("created_at", sa.Float, nullable=False),
)
sa.Index("ix_decisions_tenant_created", decisions.c.tenant, decisions.c.created_at)
sa.Index("ix_decisions_run", decisions.c.run_id)

#: One row per agent run (LLM loop or router); ``parent_run_id`` links sub-agent runs.
runs = sa.Table(
    "runs",
    metadata,
    sa.Column("id", sa.Text, primary_key=True),
    sa.Column("tenant", sa.Text, nullable=False),
    sa.Column("parent_run_id", sa.Text, nullable=True),
    sa.Column("agent", sa.Text, nullable=True),
    sa.Column("mode", sa.Text, nullable=False),
    sa.Column("model", sa.Text, nullable=True),
    sa.Column("task", sa.Text, nullable=False),
    sa.Column("status", sa.Text, nullable=False),
    sa.Column("output", sa.Text, nullable=True),
    sa.Column("data", Json, nullable=True),
    sa.Column("error", sa.Text, nullable=True),
    sa.Column("requires_review", sa.Boolean, nullable=False, server_default=sa.false()),
    sa.Column("review_reason", sa.Text, nullable=True),
    sa.Column("iterations", sa.Integer, nullable=False, server_default="0"),
    sa.Column("tool_calls", sa.Integer, nullable=False, server_default="0"),
    sa.Column("input_tokens", sa.BigInteger, nullable=False, server_default="0"),
    sa.Column("output_tokens", sa.BigInteger, nullable=False, server_default="0"),
    sa.Column("metadata", Json, nullable=False),
    sa.Column("started_at", sa.Float, nullable=False),
    sa.Column("ended_at", sa.Float, nullable=True),
    # The process running it (host:pid:nonce) and until when it is known alive: renewed
    # while the run is under way, so a ``running`` run whose lease expired lost its
    # process and is marked ``interrupted`` (migration 0007, agents/leases.py).
    sa.Column("owner", sa.Text, nullable=True),
    sa.Column("lease_expires_at", sa.Float, nullable=True),
)
sa.Index("ix_runs_tenant_started", runs.c.tenant, runs.c.started_at)
sa.Index("ix_runs_parent", runs.c.parent_run_id)
_RUNNING = sa.text("status = 'running'")
sa.Index(
    "ix_runs_running",
    runs.c.tenant,
    runs.c.lease_expires_at,
    sqlite_where=_RUNNING,
    postgresql_where=_RUNNING,
)
# The dashboard's review queue and status filter (migration 0010).
_REVIEW = sa.text("requires_review")
sa.Index("ix_runs_review", runs.c.tenant, runs.c.started_at, sqlite_where=_REVIEW,
         postgresql_where=_REVIEW)  # fmt: skip
sa.Index("ix_runs_tenant_status_started", runs.c.tenant, runs.c.status, runs.c.started_at)

#: The conversation of a run, one message per row in order (``seq``), written as it happens.
run_messages = sa.Table(
    "run_messages",
    metadata,
    sa.Column("id", BigId, primary_key=True, autoincrement=True),
    sa.Column(
        "run_id",
        sa.Text,
        sa.ForeignKey("runs.id", ondelete="CASCADE", name="fk_run_messages_run"),
        nullable=False,
    ),
    sa.Column("seq", sa.Integer, nullable=False),
    sa.Column("iteration", sa.Integer, nullable=False),
    sa.Column("role", sa.Text, nullable=False),
    sa.Column("message", Json, nullable=False),
    sa.Column("created_at", sa.Float, nullable=False),
    sa.UniqueConstraint("run_id", "seq", name="uq_run_messages_run_seq"),
)

#: Skills: a description an agent sees first, instructions and tools it unlocks when loaded.
skills = sa.Table(
    "skills",
    metadata,
    sa.Column("id", BigId, primary_key=True, autoincrement=True),
    sa.Column("tenant", sa.Text, nullable=False),
    sa.Column("name", sa.Text, nullable=False),
    sa.Column("description", sa.Text, nullable=False),
    sa.Column("instructions", sa.Text, nullable=False),
    sa.Column("parent", sa.Text, nullable=True),
    sa.Column("depends_on", Json, nullable=False),
    sa.Column("optional_dependencies", Json, nullable=False, server_default=sa.text("'[]'")),
    sa.Column("tools", Json, nullable=False),
    sa.Column("metadata", Json, nullable=False),
    sa.Column("version", sa.Integer, nullable=False),
    sa.Column("content_hash", sa.Text, nullable=False),
    sa.Column("active", sa.Boolean, nullable=False),
    sa.Column("created_at", sa.Float, nullable=False),
    sa.Column("updated_at", sa.Float, nullable=False),
    sa.Column("enabled", sa.Boolean, nullable=False, server_default=sa.true()),
    sa.Column("disabled_reason", sa.Text, nullable=True),
    sa.UniqueConstraint("tenant", "name", name="uq_skills_tenant_name"),
)

#: Agent definitions (instructions, model, skills, tools, limits) as one JSON document.
agents = sa.Table(
    "agents",
    metadata,
    sa.Column("id", BigId, primary_key=True, autoincrement=True),
    sa.Column("tenant", sa.Text, nullable=False),
    sa.Column("name", sa.Text, nullable=False),
    sa.Column("definition", Json, nullable=False),
    sa.Column("version", sa.Integer, nullable=False),
    sa.Column("content_hash", sa.Text, nullable=False),
    sa.Column("created_at", sa.Float, nullable=False),
    sa.Column("updated_at", sa.Float, nullable=False),
    sa.Column("enabled", sa.Boolean, nullable=False, server_default=sa.true()),
    sa.Column("disabled_reason", sa.Text, nullable=True),
    sa.UniqueConstraint("tenant", "name", name="uq_agents_tenant_name"),
)

#: Every version of every skill and agent definition (``kind`` skill or agent): the
#: current one is also in ``skills``/``agents``; ``tooldb show agent X --version N``.
catalog_versions = sa.Table(
    "catalog_versions",
    metadata,
    sa.Column("id", BigId, primary_key=True, autoincrement=True),
    sa.Column("tenant", sa.Text, nullable=False),
    sa.Column("kind", sa.Text, nullable=False),
    sa.Column("name", sa.Text, nullable=False),
    sa.Column("version", sa.Integer, nullable=False),
    sa.Column("definition", Json, nullable=False),
    sa.Column("content_hash", sa.Text, nullable=False),
    sa.Column("created_at", sa.Float, nullable=False),
    sa.UniqueConstraint("tenant", "kind", "name", "version", name="uq_catalog_versions"),
)

#: An agent's skills as rows (position, priority, configuration): what uses a skill.
agent_skills = sa.Table(
    "agent_skills",
    metadata,
    sa.Column("tenant", sa.Text, primary_key=True),
    sa.Column("agent", sa.Text, primary_key=True),
    sa.Column("skill", sa.Text, primary_key=True),
    sa.Column("position", sa.Integer, nullable=False),
    sa.Column("priority", sa.Integer, nullable=False),
    sa.Column("config", Json, nullable=False),
)

#: A skill's tools as rows (position, access granted, priority, configuration).
skill_tools = sa.Table(
    "skill_tools",
    metadata,
    sa.Column("tenant", sa.Text, primary_key=True),
    sa.Column("skill", sa.Text, primary_key=True),
    sa.Column("tool", sa.Text, primary_key=True),
    sa.Column("position", sa.Integer, nullable=False),
    sa.Column("access", sa.Text, nullable=False),
    sa.Column("priority", sa.Integer, nullable=False),
    sa.Column("config", Json, nullable=False),
    sa.Index("ix_skill_tools_tool", "tenant", "tool"),
)

#: Each skill's embedding by content hash and embedder (migration 0014): a new process
#: loads these instead of embedding every skill again (selection/skills.py).
skill_vectors = sa.Table(
    "skill_vectors",
    metadata,
    sa.Column("tenant", sa.Text, primary_key=True),
    sa.Column("embedder", sa.Text, primary_key=True),
    sa.Column("content_hash", sa.Text, primary_key=True),
    sa.Column("dim", sa.Integer, nullable=False),
    sa.Column("vector", sa.LargeBinary, nullable=False),
    sa.Column("embedded_at", sa.Float, nullable=False),
)

# -- OODA (ooda/optimize.py) --------------------------------------------------------------------

#: One row per tool per analysis: the trend of its windowed figures. No foreign key: the
#: series outlives a removed tool, like the call log.
tool_stats_history = sa.Table(
    "tool_stats_history",
    metadata,
    sa.Column("id", BigId, primary_key=True, autoincrement=True),
    sa.Column("tenant", sa.Text, nullable=False),
    sa.Column("tool_id", sa.BigInteger, nullable=False),
    sa.Column("tool_name", sa.Text, nullable=False),
    sa.Column("cycle_id", sa.BigInteger, nullable=True),
    sa.Column("analyzed_at", sa.Float, nullable=False),
    sa.Column("window_s", sa.Float, nullable=False),
    sa.Column("calls", sa.BigInteger, nullable=False),
    sa.Column("successes", sa.BigInteger, nullable=False),
    sa.Column("duration_ms", sa.Float, nullable=False),
    sa.Column("p50_ms", sa.Float, nullable=True),
    sa.Column("p95_ms", sa.Float, nullable=True),
)
sa.Index(
    "ix_tool_stats_history_tenant_tool",
    tool_stats_history.c.tenant,
    tool_stats_history.c.tool_id,
    tool_stats_history.c.analyzed_at,
)

#: Every OODA cycle that was not a dry run: what it looked at and what it found.
ooda_cycles = sa.Table(
    "ooda_cycles",
    metadata,
    sa.Column("id", BigId, primary_key=True, autoincrement=True),
    sa.Column("tenant", sa.Text, nullable=False),
    sa.Column("started_at", sa.Float, nullable=False),
    sa.Column("ended_at", sa.Float, nullable=False),
    sa.Column("window_s", sa.Float, nullable=False),
    sa.Column("tools_analyzed", sa.Integer, nullable=False),
    sa.Column("calls_analyzed", sa.BigInteger, nullable=False),
    sa.Column("findings", Json, nullable=False),
    sa.Column("acts", sa.Integer, nullable=False),
    sa.Column("notes", Json, nullable=False),
)
sa.Index("ix_ooda_cycles_tenant_started", ooda_cycles.c.tenant, ooda_cycles.c.started_at)

#: The audit of every change OODA (or an undo) made: what, why, evidence, which policy.
#: ``reverses`` points at the act an undo reversed; ``undone_by`` at the act that undid it.
ooda_acts = sa.Table(
    "ooda_acts",
    metadata,
    sa.Column("id", BigId, primary_key=True, autoincrement=True),
    sa.Column("tenant", sa.Text, nullable=False),
    sa.Column("cycle_id", sa.BigInteger, nullable=True),
    sa.Column("tool_id", sa.BigInteger, nullable=False),
    sa.Column("tool_name", sa.Text, nullable=False),
    sa.Column("action", sa.Text, nullable=False),
    sa.Column("policy", sa.Text, nullable=False),
    sa.Column("actor", sa.Text, nullable=False),
    sa.Column("reason", sa.Text, nullable=False),
    sa.Column("evidence", Json, nullable=False),
    sa.Column("created_at", sa.Float, nullable=False),
    sa.Column("reverses", sa.BigInteger, nullable=True),
    sa.Column("undone_at", sa.Float, nullable=True),
    sa.Column("undone_by", sa.BigInteger, nullable=True),
)
sa.Index("ix_ooda_acts_tenant_created", ooda_acts.c.tenant, ooda_acts.c.created_at)
sa.Index("ix_ooda_acts_tenant_tool", ooda_acts.c.tenant, ooda_acts.c.tool_id)

#: One row per tenant while a cycle acts: a lease, so a crashed holder expires.
ooda_locks = sa.Table(
    "ooda_locks",
    metadata,
    sa.Column("tenant", sa.Text, primary_key=True),
    sa.Column("holder", sa.Text, nullable=False),
    sa.Column("acquired_at", sa.Float, nullable=False),
    sa.Column("expires_at", sa.Float, nullable=False),
)

#: The secret of the tenant MAC that SQL tools over a PostgreSQL registry run under
#: (stores/tenant_scope.py, migration 0006): one row, readable by the owner only. Empty
#: on SQLite, where the SQL executor scopes each connection itself.
sql_tenant_key = sa.Table(
    "sql_tenant_key",
    metadata,
    sa.Column("id", sa.Integer, primary_key=True, autoincrement=False),
    sa.Column("secret", sa.Text, nullable=False),
)

#: Built-in tools (migration 0009, tooldb/builtins/): the long-term memory of
#: ``remember``/``recall``/``forget``, per tenant and agent namespace, with the vector of
#: one embedder (NULL until embedded; another embedder's is recomputed on recall).
memories = sa.Table(
    "memories",
    metadata,
    sa.Column("id", BigId, primary_key=True, autoincrement=True),
    sa.Column("tenant", sa.Text, nullable=False),
    sa.Column("namespace", sa.Text, nullable=False),
    sa.Column("text", sa.Text, nullable=False),
    sa.Column("tags", Json, nullable=False),
    sa.Column("embedder", sa.Text, nullable=True),
    sa.Column("vector", sa.LargeBinary, nullable=True),
    sa.Column("created_at", sa.Float, nullable=False),
    # Ids are never reused (recall's cache keys a namespace on its count and newest id).
    sqlite_autoincrement=True,
)
sa.Index("ix_memories_tenant_namespace", memories.c.tenant, memories.c.namespace)

#: The ``plan`` tool's steps, one row per run: kept with the run (``runs show``).
run_plans = sa.Table(
    "run_plans",
    metadata,
    sa.Column("tenant", sa.Text, primary_key=True),
    sa.Column("run_id", sa.Text, primary_key=True),
    sa.Column("steps", Json, nullable=False),
    sa.Column("updated_at", sa.Float, nullable=False),
)

#: What a submitted run did that tooldb keeps for its resumption instead of DBOS
#: (workers/durable.py, migration 0015): each tool call's full result under a key naming
#: its turn and arguments (``call_id``: its record), and a marker per tool the finished
#: run taught selection (``learn:TOOL``). A resumed run reuses a call's result rather than
#: run it again, and learns from a tool only once. ``result`` is JSON text, read whole.
run_steps = sa.Table(
    "run_steps",
    metadata,
    sa.Column("tenant", sa.Text, primary_key=True),
    sa.Column("run_id", sa.Text, primary_key=True),
    sa.Column("step", sa.Text, primary_key=True),
    sa.Column("call_id", sa.BigInteger, nullable=True),
    sa.Column("result", sa.Text, nullable=True),
    sa.Column("created_at", sa.Float, nullable=False),
)

#: The HTTP server's API keys (server/auth.py, migration 0010): only each key's SHA-256
#: is kept, with a short prefix to name it; one tenant and one scope per key.
api_keys = sa.Table(
    "api_keys",
    metadata,
    sa.Column("id", BigId, primary_key=True, autoincrement=True),
    sa.Column("tenant", sa.Text, nullable=False),
    sa.Column("prefix", sa.Text, nullable=False),
    sa.Column("key_hash", sa.Text, nullable=False),
    sa.Column("scope", sa.Text, nullable=False),
    sa.Column("name", sa.Text, nullable=True),
    sa.Column("created_at", sa.Float, nullable=False),
    sa.Column("last_used_at", sa.Float, nullable=True),
    sa.Column("revoked_at", sa.Float, nullable=True),
)
sa.Index("ix_api_keys_hash", api_keys.c.key_hash, unique=True)
sa.Index("ix_api_keys_tenant", api_keys.c.tenant, api_keys.c.created_at)

#: Learning from use (selection/evidence.py, migration 0008): a task a tool served (or
#: failed), embedded, per tenant. Near-duplicate tasks of one tool share a row and add up
#: its ``good``/``bad`` counts; ``last_seen`` is when it last happened (OODA prunes stale
#: rows). The tool is named, not referenced: evidence outlives a re-registration.
task_evidence = sa.Table(
    "task_evidence",
    metadata,
    sa.Column("id", BigId, primary_key=True, autoincrement=True),
    sa.Column("tenant", sa.Text, nullable=False),
    sa.Column("tool", sa.Text, nullable=False),
    sa.Column("task", sa.Text, nullable=False),
    sa.Column("embedder", sa.Text, nullable=False),
    sa.Column("vector", sa.LargeBinary, nullable=False),
    sa.Column("good", sa.Float, nullable=False),
    sa.Column("bad", sa.Float, nullable=False),
    sa.Column("created_at", sa.Float, nullable=False),
    sa.Column("last_seen", sa.Float, nullable=False),
)
sa.Index("ix_task_evidence_tenant_tool", task_evidence.c.tenant, task_evidence.c.tool)

#: One row per tenant whose evidence changed: ``version`` grows with every write, so an
#: in-process evidence matrix knows whether another process changed it.
evidence_state = sa.Table(
    "evidence_state",
    metadata,
    sa.Column("tenant", sa.Text, primary_key=True),
    sa.Column("version", sa.BigInteger, nullable=False, server_default="0"),
)
