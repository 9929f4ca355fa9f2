"""Stores: where the registry lives. ``open_store(url)`` picks the backend by URL scheme."""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from typing import Any, Protocol

from ..errors import UsageError
from ..types import CallRecord, ToolRecord, ToolSpec, ToolVersion
from .ooda_rows import CallLogScan
from .search_rows import IndexRow, LiveStats, TenantState
from .sql_store import PutOutcome, SQLStore, ToolHead

__all__ = [
    "IndexRow",
    "LiveStats",
    "PutOutcome",
    "SQLStore",
    "Store",
    "TenantState",
    "ToolHead",
    "open_store",
]


class Store(Protocol):
    """What the registry needs from a store; SQLStore implements it for SQLite and PostgreSQL."""

    dialect: str

    @property
    def url(self) -> str: ...
    def close(self) -> None: ...
    def revision(self) -> str | None: ...
    def migrate(self) -> tuple[str | None, str]: ...
    def tool_head(self, tenant: str, name: str) -> ToolHead | None: ...
    def get_tool(self, tenant: str, name: str) -> ToolRecord | None: ...
    def list_tools(
        self,
        tenant: str,
        *,
        category: str | None = None,
        kind: str | None = None,
        include_disabled: bool = False,
    ) -> list[ToolRecord]: ...
    def put_tools(
        self, tenant: str, specs: Sequence[ToolSpec], documents: Sequence[str] | None = None
    ) -> list[PutOutcome]: ...
    def set_enabled(self, tenant: str, name: str, enabled: bool) -> bool: ...
    def remove_tool(self, tenant: str, name: str) -> bool: ...
    def tool_versions(self, tenant: str, name: str) -> list[ToolVersion]: ...
    def record_call(self, row: dict[str, Any], *, counted: bool) -> int: ...
    def list_calls(
        self,
        tenant: str,
        *,
        tool_name: str | None = None,
        run_id: str | None = None,
        limit: int = 20,
    ) -> list[CallRecord]: ...
    def count_calls(self, tenant: str, tool_name: str | None = None) -> int: ...
    def record_calls(self, rows: Sequence[dict[str, Any]]) -> int: ...
    # selection (stores/search_rows.py)
    def tenants(self) -> list[str]: ...
    def tenant_state(self, tenant: str) -> TenantState: ...
    def index_rows(self, tenant: str, since: int = -1) -> Iterator[IndexRow]: ...
    def live_stats(self, tenant: str, ids: Sequence[int]) -> dict[int, LiveStats]: ...
    def pending_embeddings(
        self, tenant: str, embedder: str, *, after_id: int = 0, limit: int = 256
    ) -> list[tuple[int, str]]: ...
    def embedding_counts(self, tenant: str) -> dict[str | None, int]: ...
    def put_embeddings(
        self, tenant: str, embedder: str, dim: int, vectors: Sequence[tuple[int, str, bytes]]
    ) -> int: ...
    def reset_documents(self, tenant: str, documents: Sequence[tuple[int, str]]) -> int: ...
    def record_decision(self, row: dict[str, Any]) -> int: ...
    def list_decisions(
        self, tenant: str, *, run_id: str | None = None, limit: int = 20
    ) -> list[dict[str, Any]]: ...
    def get_decision(self, tenant: str, decision_id: int) -> dict[str, Any] | None: ...
    # OODA (stores/ooda_rows.py)
    def scan_call_log(
        self, tenant: str, start: float, middle: float, end: float
    ) -> CallLogScan: ...
    def apply_analysis(
        self,
        tenant: str,
        scan: CallLogScan,
        analyzed_at: float,
        window_s: float,
        cycle: dict[str, Any],
    ) -> int: ...
    def finish_cycle(self, tenant: str, cycle_id: int, values: dict[str, Any]) -> None: ...
    def list_cycles(self, tenant: str, limit: int = 20) -> list[dict[str, Any]]: ...
    def stats_history(
        self, tenant: str, tool_name: str, limit: int = 50
    ) -> list[dict[str, Any]]: ...
    def window_counts(
        self, tenant: str, tool_id: int, since: float, until: float
    ) -> tuple[int, int]: ...
    def apply_act(
        self, row: dict[str, Any], *, set_enabled: bool | None, only_if_enabled: bool | None
    ) -> int | None: ...
    def list_acts(
        self,
        tenant: str,
        *,
        tool_id: int | None = None,
        active_disables: bool = False,
        limit: int = 50,
    ) -> list[dict[str, Any]]: ...
    def get_act(self, tenant: str, act_id: int) -> dict[str, Any] | None: ...
    def overrides(self, tenant: str) -> dict[int, float]: ...
    def acquire_ooda_lock(
        self, tenant: str, holder: str, ttl_s: float
    ) -> tuple[bool, str, float]: ...
    def renew_ooda_lock(self, tenant: str, holder: str, ttl_s: float) -> bool: ...
    def release_ooda_lock(self, tenant: str, holder: str) -> None: ...
    # diagnostics (stores/health_rows.py)
    def system_state(
        self, tenant: str, since: float, until: float, *, top: int = 5
    ) -> dict[str, Any]: ...


def open_store(url: str, *, sqlite_busy_timeout_s: float = 60.0) -> Store:
    """Open (not create) the store at ``url``: ``sqlite:///path`` or ``postgresql://...``."""
    scheme = url.split(":", 1)[0].split("+", 1)[0].lower()
    if scheme == "sqlite":
        from .sqlite import Checkpointer, create_sqlite_engine, database_file

        engine = create_sqlite_engine(url, sqlite_busy_timeout_s)
        path = database_file(url)
        return SQLStore(engine, checkpointer=Checkpointer(path) if path else None)
    if scheme in {"postgresql", "postgres"}:
        from .postgres import create_postgres_engine

        return SQLStore(create_postgres_engine(url))
    raise UsageError(
        f"unsupported store URL {url.split('@')[-1]!r}: use sqlite:///PATH or postgresql://..."
    )
