"""The store's agent tables: runs and their messages, skills, agent definitions.

A run's row is written when it starts and when it ends, its messages after every
model turn (so a crash keeps the conversation up to it), all through prebuilt SQL
on the thread's own SQLite connection or a pooled DBAPI connection: these run
once per turn and SQLAlchemy's statement machinery would cost more than the rest
of the turn.
"""

from __future__ import annotations

import json
import time
from collections.abc import Callable, Sequence
from contextlib import AbstractContextManager
from typing import Any

import sqlalchemy as sa
from sqlalchemy.pool import PoolProxiedConnection

from ..types import RunRecord, RunStatus
from .schema import (
    agent_skills,
    agents,
    calls,
    catalog_versions,
    decisions,
    run_messages,
    runs,
    skill_tools,
    skills,
)

#: (seq, iteration, role, the message as JSON text)
MessageRow = tuple[int, int, str, str]
#: Messages of one run to append: (run_id, rows).
RunMessages = tuple[str, Sequence[MessageRow]]
#: A skill's or agent's flag: (enabled, why it is disabled).
EnabledState = tuple[bool, str | None]
_CATALOG = {"skill": skills, "agent": agents}
#: The assignment rows of each kind: (table, the column naming the owner).
_LINKS = {"skill": (skill_tools, "skill"), "agent": (agent_skills, "agent")}

_RUN_COLUMNS = [
    c.name for c in runs.columns if c.name not in {"data", "metadata", "owner", "lease_expires_at"}
]


class AgentRows:
    """Mixin of SQLStore (which provides ``engine``, ``_reader`` and ``_guard``)."""

    engine: sa.Engine
    _reader: sa.Engine
    dialect: str
    _guard: Callable[[], AbstractContextManager[None]]
    _raw: Callable[..., AbstractContextManager[PoolProxiedConnection]]

    # -- runs --------------------------------------------------------------
    def create_run(self, row: dict[str, Any]) -> None:
        """Insert the run's row (every column of ``_RUN_START`` in ``row``)."""
        values = tuple(
            json.dumps(row[c], ensure_ascii=False) if c == "metadata" else row[c]
            for c in _RUN_START
        )
        self._write_prebuilt(lambda cursor: cursor.execute(_INSERT_RUN[self.dialect], values))

    def append_run_messages(self, run_id: str, rows: Sequence[MessageRow]) -> None:
        """Append messages of one run in one transaction."""
        if not rows:
            return
        self._write_prebuilt(message_writer(self.dialect, (run_id, rows)))

    def finish_run(self, run_id: str, values: dict[str, Any]) -> None:
        """Store the run's outcome: every column of ``_RUN_END`` in ``values``, ``data``
        as JSON text (the caller has made it storable, see agents/run_log.py), and
        ``metadata`` (a dict, replacing the run's) when given."""
        params = tuple(values[c] for c in _RUN_END)
        if "metadata" in values:
            params += (json.dumps(values["metadata"], ensure_ascii=False),)
            sql = _FINISH_RUN_WITH_METADATA[self.dialect]
        else:
            sql = _FINISH_RUN[self.dialect]
        self._write_prebuilt(lambda cursor: cursor.execute(sql, (*params, run_id)))

    def recent_durations(
        self, tenant: str, tool_names: Sequence[str], *, before: float, limit: int
    ) -> dict[str, list[float]]:
        """Per tool, the durations (ms) of its last ``limit`` successful calls started
        before ``before``: the history a slow call is judged against
        (agents/slow_calls.py). One indexed read per tool (``ix_calls_tenant_tool_started``)."""
        found: dict[str, list[float]] = {}
        with self._guard(), self._reader.connect() as conn:
            for name in tool_names:
                query = (
                    sa.select(calls.c.duration_ms)
                    .where(
                        calls.c.tenant == tenant,
                        calls.c.tool_name == name,
                        calls.c.started_at < before,
                        calls.c.success.is_(True),
                    )
                    .order_by(calls.c.started_at.desc())
                    .limit(limit)
                )
                found[name] = [float(row[0]) for row in conn.execute(query)]
        return found

    def renew_run_leases(self, run_ids: Sequence[str], expires_at: float) -> int:
        """Extend the leases of these runs (those still ``running``); how many were."""
        if not run_ids:
            return 0
        query = (
            runs.update()
            .where(runs.c.id.in_(list(run_ids)), runs.c.status == RunStatus.RUNNING.value)
            .values(lease_expires_at=expires_at)
        )
        with self._guard(), self.engine.begin() as conn:
            return int(conn.execute(query).rowcount or 0)

    def interrupt_expired_runs(self, tenant: str, now: float | None = None) -> list[str]:
        """Mark ``interrupted`` the tenant's ``running`` runs whose lease expired before
        ``now``: their process stopped renewing it (killed, crashed, its host gone). Each
        gets the calls and iterations it recorded; returns their ids. A read first (the
        partial index ``ix_runs_running``), so a sweep with nothing to do writes nothing."""
        now = time.time() if now is None else now
        expired = (
            runs.c.tenant == tenant,
            runs.c.status == RunStatus.RUNNING.value,
            runs.c.lease_expires_at < now,
        )
        with self._guard(), self._reader.connect() as conn:
            found = [row[0] for row in conn.execute(sa.select(runs.c.id).where(*expired))]
        if not found:
            return []
        reason = (
            "the process running it stopped before it ended (its lease expired): "
            "killed, crashed or cut off"
        )
        made_calls = (
            sa.select(sa.func.count()).select_from(calls).where(calls.c.run_id == runs.c.id)
        ).scalar_subquery()
        turns = (
            sa.select(sa.func.coalesce(sa.func.max(run_messages.c.iteration) + 1, 0))
            .where(run_messages.c.run_id == runs.c.id)
            .scalar_subquery()
        )
        interrupted: list[str] = []
        with self._guard(), self.engine.begin() as conn:
            for start in range(0, len(found), 500):
                chunk = found[start : start + 500]
                result = conn.execute(
                    runs.update()
                    .where(runs.c.id.in_(chunk), *expired)  # not renewed meanwhile
                    .values(
                        status=RunStatus.INTERRUPTED.value,
                        error=reason,
                        requires_review=True,
                        review_reason=reason,
                        tool_calls=made_calls,
                        iterations=turns,
                        ended_at=runs.c.lease_expires_at,
                    )
                    .returning(runs.c.id)
                )
                interrupted.extend(row[0] for row in result)
        return interrupted

    def _write_prebuilt(self, statements: Callable[[Any], object]) -> None:
        """One committed transaction of prebuilt SQL run by ``statements(cursor)``. These
        run at every turn and run start/end: SQLAlchemy's statement machinery would cost
        more than the statements (see the module docstring)."""
        with self._raw("failed to write an agent run") as connection:
            cursor = connection.cursor()
            try:
                if self.dialect == "sqlite":
                    cursor.execute("BEGIN IMMEDIATE")
                    statements(cursor)
                    cursor.execute("COMMIT")
                else:
                    statements(cursor)
                    connection.commit()
            except BaseException:
                connection.rollback()
                raise
            finally:
                cursor.close()

    def get_run(self, tenant: str, run_id: str) -> RunRecord | None:
        query = sa.select(runs).where(runs.c.tenant == tenant, runs.c.id == run_id)
        with self._guard(), self._reader.connect() as conn:
            row = conn.execute(query).first()
        return _run_record(row._mapping) if row else None

    def get_run_details(self, tenant: str, run_id: str) -> dict[str, Any] | None:
        """The run's row with ``data`` and ``metadata`` (what ``run show`` prints)."""
        query = sa.select(runs).where(runs.c.tenant == tenant, runs.c.id == run_id)
        with self._guard(), self._reader.connect() as conn:
            row = conn.execute(query).first()
        return dict(row._mapping) if row else None

    def run_ids_with_prefix(self, tenant: str, prefix: str, limit: int = 2) -> list[str]:
        """Ids of this tenant's runs that start with ``prefix`` (run ids are hex, so a
        prefix with LIKE's wildcards or anything else matches nothing)."""
        if not prefix or not all(c in "0123456789abcdef" for c in prefix):
            return []
        query = (
            sa.select(runs.c.id)
            .where(runs.c.tenant == tenant, runs.c.id.like(f"{prefix}%"))
            .order_by(runs.c.id)
            .limit(limit)
        )
        with self._guard(), self._reader.connect() as conn:
            return [row[0] for row in conn.execute(query)]

    def list_runs(
        self,
        tenant: str,
        *,
        parent_run_id: str | None = None,
        status: str | None = None,
        limit: int = 20,
    ) -> list[RunRecord]:
        query = sa.select(runs).where(runs.c.tenant == tenant)
        if parent_run_id is not None:
            query = query.where(runs.c.parent_run_id == parent_run_id)
        if status is not None:
            query = query.where(runs.c.status == status)
        query = query.order_by(runs.c.started_at.desc(), runs.c.id).limit(limit)
        with self._guard(), self._reader.connect() as conn:
            return [_run_record(row._mapping) for row in conn.execute(query)]

    def run_outcomes(self, tenant: str, since: float) -> list[dict[str, Any]]:
        """Runs started since ``since`` counted by (UTC day number, agent, mode, status):
        top-level runs only (a sub-run's limit is its parent's business)."""
        if self.dialect == "sqlite":  # SQLite's floor() is an optional extension
            day = sa.cast(runs.c.started_at / 86400, sa.Integer)
        else:
            day = sa.cast(sa.func.floor(runs.c.started_at / 86400), sa.Integer)
        query = (
            sa.select(
                day.label("day"),
                runs.c.agent,
                runs.c.mode,
                runs.c.status,
                sa.func.count().label("runs"),
            )
            .where(
                runs.c.tenant == tenant,
                runs.c.started_at >= since,
                runs.c.parent_run_id.is_(None),
            )
            .group_by(day, runs.c.agent, runs.c.mode, runs.c.status)
        )
        with self._guard(), self._reader.connect() as conn:
            return [dict(row._mapping) for row in conn.execute(query)]

    def run_messages(self, run_id: str) -> list[dict[str, Any]]:
        """The run's messages in order: both drivers decode the JSON column to the
        message's object (run_log.py writes each as one)."""
        query = (
            sa.select(run_messages.c.seq, run_messages.c.iteration, run_messages.c.message)
            .where(run_messages.c.run_id == run_id)
            .order_by(run_messages.c.seq)
        )
        with self._guard(), self._reader.connect() as conn:
            return [
                {"seq": seq, "iteration": iteration, **message}
                for seq, iteration, message in conn.execute(query)
            ]

    def set_decision_choice(self, decision_id: int, chosen: str) -> None:
        """Record which candidate a decision's caller actually ran."""
        with self._guard(), self.engine.begin() as conn:
            conn.execute(
                decisions.update().where(decisions.c.id == decision_id).values(chosen=chosen)
            )

    # -- skills and agents -------------------------------------------------
    def put_skill(
        self, tenant: str, row: dict[str, Any], state: EnabledState | None = None
    ) -> tuple[int, bool]:
        """Insert or update a skill by name; returns (version, changed). ``state``
        (enabled, reason) sets its flag; None keeps it (a new one is enabled)."""
        definition = {k: v for k, v in row.items() if k != "content_hash"}
        return self._put_versioned(skills, "skill", tenant, row, definition, state)

    def get_skill(self, tenant: str, name: str) -> dict[str, Any] | None:
        return self._get_named(skills, tenant, name)

    def list_skills(self, tenant: str) -> list[dict[str, Any]]:
        return self._list_named(skills, tenant)

    def remove_skill(self, tenant: str, name: str) -> bool:
        return self._remove_named(skills, "skill", tenant, name)

    def skill_search_rows(self, tenant: str, instructions_chars: int) -> list[dict[str, Any]]:
        """What skill selection needs of the enabled, active skills: name, description,
        the opening of the instructions and the content hash (no JSON columns to decode:
        read on every ``select_skills``)."""
        query = (
            sa.select(
                skills.c.name,
                skills.c.description,
                sa.func.substr(skills.c.instructions, 1, instructions_chars).label("instructions"),
                skills.c.content_hash,
            )
            .where(skills.c.tenant == tenant, skills.c.enabled, skills.c.active)
            .order_by(skills.c.name)
        )
        with self._guard(), self._reader.connect() as conn:
            return [dict(row._mapping) for row in conn.execute(query)]

    def put_agent(
        self, tenant: str, row: dict[str, Any], state: EnabledState | None = None
    ) -> tuple[int, bool]:
        return self._put_versioned(agents, "agent", tenant, row, row["definition"], state)

    def get_agent(self, tenant: str, name: str) -> dict[str, Any] | None:
        return self._get_named(agents, tenant, name)

    def list_agents(self, tenant: str) -> list[dict[str, Any]]:
        return self._list_named(agents, tenant)

    def remove_agent(self, tenant: str, name: str) -> bool:
        return self._remove_named(agents, "agent", tenant, name)

    def set_catalog_enabled(self, kind: str, tenant: str, name: str, state: EnabledState) -> bool:
        """Enable or disable a skill or agent (``kind``); False if there is none."""
        table = _CATALOG[kind]
        enabled, reason = state
        with self._guard(), self.engine.begin() as conn:
            result = conn.execute(
                table.update()
                .where(table.c.tenant == tenant, table.c.name == name)
                .values(enabled=enabled, disabled_reason=None if enabled else reason)
            )
            return bool(result.rowcount)

    def catalog_versions(self, kind: str, tenant: str, name: str) -> list[dict[str, Any]]:
        """Every version of a skill or agent definition, oldest first."""
        query = (
            sa.select(catalog_versions)
            .where(
                catalog_versions.c.tenant == tenant,
                catalog_versions.c.kind == kind,
                catalog_versions.c.name == name,
            )
            .order_by(catalog_versions.c.version)
        )
        with self._guard(), self._reader.connect() as conn:
            return [dict(row._mapping) for row in conn.execute(query)]

    def _put_versioned(
        self,
        table: sa.Table,
        kind: str,
        tenant: str,
        row: dict[str, Any],
        definition: Any,
        state: EnabledState | None,
    ) -> tuple[int, bool]:
        now = time.time()
        flag = {} if state is None else {"enabled": state[0], "disabled_reason": state[1]}
        with self._guard(), self.engine.begin() as conn:
            current = conn.execute(
                sa.select(table.c.id, table.c.version, table.c.content_hash)
                .where(table.c.tenant == tenant, table.c.name == row["name"])
                .with_for_update()
            ).first()
            if current is None:
                version = 1
                conn.execute(
                    table.insert().values(
                        tenant=tenant, version=1, created_at=now, updated_at=now, **row, **flag
                    )
                )
            elif current.content_hash == row["content_hash"]:
                if flag:
                    conn.execute(table.update().where(table.c.id == current.id).values(**flag))
                return int(current.version), False
            else:
                version = int(current.version) + 1
                conn.execute(
                    table.update()
                    .where(table.c.id == current.id)
                    .values(version=version, updated_at=now, **row, **flag)
                )
            _write_links(conn, kind, tenant, row["name"], definition)
            conn.execute(
                catalog_versions.insert().values(
                    tenant=tenant,
                    kind=kind,
                    name=row["name"],
                    version=version,
                    definition=definition,
                    content_hash=row["content_hash"],
                    created_at=now,
                )
            )
            return version, True

    def _get_named(self, table: sa.Table, tenant: str, name: str) -> dict[str, Any] | None:
        query = sa.select(table).where(table.c.tenant == tenant, table.c.name == name)
        with self._guard(), self._reader.connect() as conn:
            row = conn.execute(query).first()
        return dict(row._mapping) if row else None

    def _list_named(self, table: sa.Table, tenant: str) -> list[dict[str, Any]]:
        query = sa.select(table).where(table.c.tenant == tenant).order_by(table.c.name)
        with self._guard(), self._reader.connect() as conn:
            return [dict(row._mapping) for row in conn.execute(query)]

    def catalog_links(self, kind: str, tenant: str, name: str) -> list[dict[str, Any]]:
        """An agent's skills or a skill's tools as stored rows, in their order."""
        table, owner = _LINKS[kind]
        query = (
            sa.select(table)
            .where(table.c.tenant == tenant, table.c[owner] == name)
            .order_by(table.c.position)
        )
        with self._guard(), self._reader.connect() as conn:
            return [dict(row._mapping) for row in conn.execute(query)]

    def _remove_named(self, table: sa.Table, kind: str, tenant: str, name: str) -> bool:
        """Remove the definition, its versions and its assignment rows."""
        with self._guard(), self.engine.begin() as conn:
            result = conn.execute(
                table.delete().where(table.c.tenant == tenant, table.c.name == name)
            )
            _write_links(conn, kind, tenant, name, None)
            conn.execute(
                catalog_versions.delete().where(
                    catalog_versions.c.tenant == tenant,
                    catalog_versions.c.kind == kind,
                    catalog_versions.c.name == name,
                )
            )
            return bool(result.rowcount)


_RUN_START = (
    "id", "tenant", "parent_run_id", "agent", "mode", "model", "task", "status", "metadata",
    "started_at", "owner", "lease_expires_at",
)  # fmt: skip
_RUN_END = (
    "status", "output", "data", "error", "requires_review", "review_reason", "iterations",
    "tool_calls", "input_tokens", "output_tokens", "ended_at",
)  # fmt: skip
_JSON_COLUMNS = {"metadata", "data"}


_INSERT_RUN = {
    "sqlite": f"INSERT INTO runs ({', '.join(_RUN_START)}) VALUES ("
    + ", ".join("?" for _ in _RUN_START)
    + ")",
    "postgresql": f"INSERT INTO runs ({', '.join(_RUN_START)}) VALUES ("
    + ", ".join("%s::jsonb" if c in _JSON_COLUMNS else "%s" for c in _RUN_START)
    + ")",
}
_FINISH_RUN = {
    "sqlite": f"UPDATE runs SET {', '.join(f'{c} = ?' for c in _RUN_END)} WHERE id = ?",
    "postgresql": "UPDATE runs SET "
    + ", ".join(f"{c} = %s::jsonb" if c in _JSON_COLUMNS else f"{c} = %s" for c in _RUN_END)
    + " WHERE id = %s",
}
_FINISH_RUN_WITH_METADATA = {
    "sqlite": _FINISH_RUN["sqlite"].replace(" WHERE", ", metadata = ? WHERE"),
    "postgresql": _FINISH_RUN["postgresql"].replace(" WHERE", ", metadata = %s::jsonb WHERE"),
}
_INSERT_MESSAGE = {
    "sqlite": "INSERT INTO run_messages (run_id, seq, iteration, role, message, created_at)"
    " VALUES (?, ?, ?, ?, ?, ?)",
    "postgresql": "INSERT INTO run_messages (run_id, seq, iteration, role, message, created_at)"
    " VALUES (%s, %s, %s, %s, %s::jsonb, %s)",
}


def message_writer(dialect: str, messages: RunMessages) -> Callable[[Any], object]:
    """What appends these messages with a cursor, inside the caller's transaction."""
    run_id, rows = messages
    now = time.time()
    values = [(run_id, seq, iteration, role, text, now) for seq, iteration, role, text in rows]
    sql = _INSERT_MESSAGE[dialect]
    return lambda cursor: cursor.executemany(sql, values)


def _write_links(conn: sa.Connection, kind: str, tenant: str, name: str, definition: Any) -> None:
    """Replace the assignment rows of a definition (None: remove them)."""
    table, owner = _LINKS[kind]
    conn.execute(table.delete().where(table.c.tenant == tenant, table.c[owner] == name))
    if definition is None:
        return
    if kind == "skill":
        rows = [
            {"tool": t["name"], "access": t.get("access", "execute"),
             "priority": t.get("priority", 0), "config": t.get("config", {})}
            for t in definition["tools"]  # a skill row always has its tools (NOT NULL)
        ]  # fmt: skip
    else:
        held = {a["name"]: a for a in definition.get("skill_assignments") or []}
        rows = [
            {"skill": skill, "priority": held.get(skill, {}).get("priority", 0),
             "config": held.get(skill, {}).get("config", {})}
            for skill in definition.get("skills", [])
        ]  # fmt: skip
    if rows:
        conn.execute(
            table.insert(),
            [{**r, "tenant": tenant, owner: name, "position": i} for i, r in enumerate(rows)],
        )


def _run_record(row: Any) -> RunRecord:
    values = {name: row[name] for name in _RUN_COLUMNS}
    values["status"] = RunStatus(values["status"])
    return RunRecord(**values)
