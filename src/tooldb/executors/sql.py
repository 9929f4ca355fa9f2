"""SQL tools: one named statement with ``:name`` placeholders, run on a named connection.

The target is the statement; ``metadata`` says where and how it runs
(``connection``: a name from the ``connections`` setting or ``registry``, the
registry's own database; ``access``: ``read`` (default) or ``write``;
``max_rows``/``max_bytes``: result caps). Arguments are always bound as driver
parameters, never formatted into SQL. Read tools run read-only (the database
refuses writes); a write tool's statement runs in one transaction, committed.
Timeouts and cancellation interrupt the running statement (sql_engines.py).
"""

from __future__ import annotations

import asyncio
import contextlib
import functools
import re
import threading
from collections.abc import Callable
from dataclasses import replace
from typing import Any

import sqlalchemy as sa

from ..context import current_access
from ..errors import DefinitionError, ExecutionError, ToolTimeout
from ..settings import REGISTRY_CONNECTION, Settings
from ..stores.postgres import create_postgres_engine
from ..stores.tenant_scope import SQL_ROLE, read_secret
from ..types import Returns, ToolKind, ToolRecord, ToolSpec
from .sql_engines import (
    create_engine,
    dialect_of,
    interrupter,
    is_read_only_violation,
    is_statement_timeout,
    start_transaction,
)
from .sql_plan import Access, SQLPlan, plan_for
from .sql_results import driver_parameters, shape
from .sql_tenancy import role_url, set_sqlite_tenant, tenant_settings
from .threads import Alarm, call_later, run_blocking

#: Statements PostgreSQL can run through a server-side cursor, so that only the rows
#: kept under ``max_rows`` travel to the client (for ``table`` results: the cursor
#: costs two round trips, and the other shapes use one row or none).
_STREAMABLE = {"select", "with", "values", "table"}
_FIRST_WORD = re.compile(r"(?:\s+|--[^\n]*(?:\n|$)|/\*.*?\*/|\()*(\w+)", re.DOTALL)


class SQLExecutor:
    """Runs sql tools; engines are created once per (connection, access) and shared."""

    kind = ToolKind.SQL

    def __init__(self, settings: Settings, registry_url: str | None = None) -> None:
        self._urls = dict(settings.connections)
        self._registry_url = registry_url
        if registry_url is not None:
            self._urls[REGISTRY_CONNECTION] = registry_url
        self._registry_sql_url = settings.registry_sql_url or None
        self._busy_timeout_s = settings.sqlite_busy_timeout_s
        self._default_timeout_s = settings.default_timeout_s or 30.0
        self._secret: str | None = None
        self._engines: dict[tuple[str, Access], sa.Engine] = {}
        self._plans: dict[str, SQLPlan] = {}
        self._lock = threading.Lock()

    def close(self) -> None:
        """Release every pooled connection."""
        with self._lock:
            engines, self._engines = list(self._engines.values()), {}
        for engine in engines:
            engine.dispose()

    def check(self, spec: ToolSpec) -> None:
        plan = plan_for(spec, set(self._urls))
        dialect_of(plan.connection, self._urls[plan.connection])

    def prepare(self, tool: ToolRecord) -> None:
        plan = self._plan(tool)
        self._engine(plan)

    def run(self, tool: ToolRecord, arguments: dict[str, Any], timeout_s: float | None) -> Any:
        return self._execute(tool, arguments, timeout_s, _Stopper())

    async def arun(
        self, tool: ToolRecord, arguments: dict[str, Any], timeout_s: float | None
    ) -> Any:
        stopper = _Stopper()
        try:
            return await run_blocking(self._execute, tool, arguments, timeout_s, stopper)
        except asyncio.CancelledError:
            stopper.stop("cancelled")  # the thread's statement is interrupted, not awaited
            raise

    # -- one call ----------------------------------------------------------
    def _execute(
        self, tool: ToolRecord, arguments: dict[str, Any], timeout_s: float | None, stop: _Stopper
    ) -> Any:
        plan = self._plan(tool)
        if plan.access is Access.WRITE and current_access() == Access.READ.value:
            plan = replace(plan, access=Access.READ)  # a skill granted read only
        engine = self._engine(plan)
        parameters = driver_parameters(plan, arguments, engine.dialect.name)
        scope = self._scope(plan, engine, tool.tenant)
        timer = stop.after(timeout_s)
        try:
            with engine.connect() as conn:
                sqlite_registry = scope is None
                try:
                    if sqlite_registry:
                        set_sqlite_tenant(conn, tool.tenant)
                    stop.attach(interrupter(conn))
                    bound = timeout_s if timeout_s is not None else self._default_timeout_s
                    return self._transaction(conn, plan, parameters, bound, stop, scope or {})
                except BaseException:
                    if stop.reason is not None:
                        conn.invalidate()  # never hand an interrupted connection to another call
                    raise
                finally:
                    stop.detach()
                    if sqlite_registry and not conn.invalidated:
                        set_sqlite_tenant(conn, None)
        except sa.exc.SQLAlchemyError as exc:
            raise self._error(plan, exc, stop, timeout_s) from None
        except _Stopped:
            raise self._stopped(plan, stop, timeout_s) from None
        finally:
            if timer is not None:
                timer.cancel()

    def _transaction(
        self,
        conn: sa.Connection,
        plan: SQLPlan,
        parameters: dict[str, Any],
        timeout_s: float,
        stop: _Stopper,
        scope: dict[str, str],
    ) -> Any:
        stream = (
            conn.dialect.name == "postgresql"
            and plan.access is Access.READ
            and plan.returns is Returns.TABLE
            and _first_word(plan.statement.text) in _STREAMABLE
        )
        with conn.begin() as transaction:
            start_transaction(conn, timeout_s, scope)
            options = {"yield_per": min(plan.max_rows + 1, 1000)} if stream else {}
            result = conn.execute(plan.statement, parameters, execution_options=options)
            value = shape(result, plan)
            result.close()
            if stop.reason is not None:
                raise _Stopped  # rolls back: a stopped call leaves nothing behind
            if plan.access is Access.READ:
                transaction.rollback()  # nothing to keep, and nothing kept by accident
        return value

    # -- errors --------------------------------------------------------------
    def _error(
        self, plan: SQLPlan, exc: sa.exc.SQLAlchemyError, stop: _Stopper, timeout_s: float | None
    ) -> ExecutionError:
        dbapi = exc if isinstance(exc, sa.exc.DBAPIError) else None
        if stop.reason is not None or (dbapi is not None and is_statement_timeout(dbapi)):
            return self._stopped(plan, stop, timeout_s)
        text = _first_line(dbapi.orig if dbapi is not None else exc)
        if plan.access is Access.READ and dbapi is not None and is_read_only_violation(dbapi):
            return ExecutionError(
                f"sql tool {plan.tool!r} is read-only (metadata.access is 'read') and its "
                f"statement tried to write; nothing was written ({text}). Register it with "
                "metadata.access = 'write' to allow writes."
            )
        if plan.connection == REGISTRY_CONNECTION and SQL_ROLE in text:
            text += (
                f" (SQL tools over a PostgreSQL registry connect as {SQL_ROLE}: run `tooldb "
                "init` as a role with CREATEROLE, or see docs/sql.md)"
            )
        return ExecutionError(
            f"sql tool {plan.tool!r} failed on connection {plan.connection!r}: {text}"
        )

    @staticmethod
    def _stopped(plan: SQLPlan, stop: _Stopper, timeout_s: float | None) -> ExecutionError:
        if stop.reason == "cancelled":
            return ExecutionError(f"sql tool {plan.tool!r} was cancelled and stopped")
        return ToolTimeout(
            f"tool {plan.tool!r} timed out after {timeout_s or 0:g} s and was stopped"
        )

    # -- cached per version / connection ---------------------------------------
    def _plan(self, tool: ToolRecord) -> SQLPlan:
        plan = self._plans.get(tool.content_hash)
        if plan is None:
            try:
                plan = plan_for(tool.spec, set(self._urls))
            except DefinitionError as exc:
                raise ExecutionError(str(exc)) from None
            with self._lock:
                if len(self._plans) > 10_000:
                    self._plans.clear()
                self._plans[tool.content_hash] = plan
        return plan

    def _scope(self, plan: SQLPlan, engine: sa.Engine, tenant: str) -> dict[str, str] | None:
        """What scopes this call to its tenant: PostgreSQL's per-transaction settings;
        None for SQLite's registry (its connection's tenant slot); {} elsewhere."""
        if plan.connection != REGISTRY_CONNECTION:
            return {}
        if engine.dialect.name != "postgresql":
            if _first_word(plan.statement.text) == "explain":
                raise ExecutionError(  # a plan could name the tenant views' inner views
                    f"sql tool {plan.tool!r}: EXPLAIN is not allowed on the registry connection"
                )
            return None
        if self._secret is None:
            owner = create_postgres_engine(self._urls[REGISTRY_CONNECTION])
            try:
                with owner.connect() as conn:
                    self._secret = read_secret(conn)
            except (sa.exc.SQLAlchemyError, LookupError) as exc:
                raise ExecutionError(
                    f"sql tool {plan.tool!r}: cannot scope the registry connection to the "
                    f"tenant ({_first_line(exc)}): run `tooldb init`"
                ) from None
            finally:
                owner.dispose()
        return tenant_settings(self._secret, tenant)

    def _engine(self, plan: SQLPlan) -> sa.Engine:
        key = (plan.connection, plan.access)
        engine = self._engines.get(key)
        if engine is not None:
            return engine
        with self._lock:
            engine = self._engines.get(key)
            if engine is None:
                registry = plan.connection == REGISTRY_CONNECTION
                url = self._urls[plan.connection]
                try:
                    if registry and dialect_of(plan.connection, url) == "postgresql":
                        url = role_url(url, self._registry_sql_url)
                    engine = create_engine(
                        plan.connection, url, plan.access, self._busy_timeout_s,
                        registry=registry,
                    )  # fmt: skip
                except DefinitionError as exc:
                    raise ExecutionError(str(exc)) from None
                self._engines[key] = engine
            return engine


class _Stopped(Exception):
    """The call was stopped before the database noticed (raised inside the transaction)."""


class _Stopper:
    """Stops one call's running statement, from a timer (timeout) or the event loop
    (cancellation); remembers why, so the error can say so."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._interrupt: Callable[[], None] | None = None
        self.reason: str | None = None

    def after(self, timeout_s: float | None) -> Alarm | None:
        if timeout_s is None:
            return None
        return call_later(timeout_s, functools.partial(self.stop, "timeout"))

    def attach(self, interrupt: Callable[[], None]) -> None:
        with self._lock:
            if self.reason is not None:
                raise _Stopped
            self._interrupt = interrupt

    def detach(self) -> None:
        with self._lock:
            self._interrupt = None

    def stop(self, reason: str) -> None:
        with self._lock:
            if self.reason is not None:
                return
            self.reason = reason
            if self._interrupt is not None:
                # The statement may have just finished: then there is nothing to stop.
                with contextlib.suppress(Exception):
                    self._interrupt()


def _first_word(statement: str) -> str:
    match = _FIRST_WORD.match(statement)
    return match.group(1).lower() if match else ""


def _first_line(exc: BaseException | None) -> str:
    text = str(exc or "").strip()
    return text.splitlines()[0] if text else type(exc).__name__
