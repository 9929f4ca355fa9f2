"""The registry: the one object users hold. It registers, finds, binds, runs and records tools.

Every operation is scoped to the registry's tenant; another tenant's tools are
indistinguishable from tools that do not exist.
"""

from __future__ import annotations

import builtins
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import replace
from pathlib import Path
from typing import Any

from .binding import Binder
from .decorators import SPEC_ATTRIBUTE, spec_from_function, tools_of_module
from .errors import ArgumentError, NotFound, StoreError, ToolDisabled, UsageError
from .execution import Outcome, aexecute, execute
from .executors import Executor, default_executors, executor_for
from .executors.http import HttpExecutor
from .executors.python import PythonExecutor
from .manifests import read_manifest, spec_from_mapping
from .openapi import OpenAPIImport, read_openapi
from .recording import Recorder
from .settings import Settings
from .stores import PutOutcome, Store, ToolHead, open_store
from .stores.migrate import HEAD
from .types import (
    BoundCall,
    CallRecord,
    ErrorKind,
    ToolKind,
    ToolRecord,
    ToolResult,
    ToolSpec,
    ToolVersion,
    check_name,
)

ToolLike = ToolSpec | Mapping[str, Any] | Callable[..., Any]


class Registry:
    """Tools in a SQL store, for one tenant."""

    def __init__(
        self,
        store: Store,
        settings: Settings | None = None,
        *,
        tenant: str | None = None,
        executors: dict[ToolKind, Executor] | None = None,
    ) -> None:
        self.settings = settings or Settings()
        try:
            self.tenant = check_name(tenant or self.settings.tenant, "tenant")
        except ValueError as exc:
            raise UsageError(str(exc)) from None
        self.store = store
        self.executors = executors if executors is not None else default_executors(self.settings)
        self.recorder = Recorder(store, self.settings, self.tenant)
        self._bound: dict[tuple[int, str], tuple[ToolRecord, Binder]] = {}

    # -- lifecycle -----------------------------------------------------------
    def init(self) -> tuple[str | None, str]:
        """Create or upgrade the schema in place; returns (revision before, after)."""
        return self.store.migrate()

    def close(self) -> None:
        """Close the store and the executors' connections (HTTP client pools)."""
        for executor in self.executors.values():
            close = getattr(executor, "close", None)
            if callable(close):
                close()
        self.store.close()

    def __enter__(self) -> Registry:
        return self

    def __exit__(self, *_exc: object) -> None:
        self.close()

    # -- registration --------------------------------------------------------
    def add(self, *tools: ToolLike) -> list[PutOutcome]:
        """Register tools given as specs, manifest mappings or ``@tool`` functions.

        Re-adding an identical definition is a no-op; a changed one becomes a new version.
        """
        return self.register([self._to_spec(item) for item in tools])

    def add_function(self, func: Callable[..., Any], **overrides: Any) -> ToolRecord:
        """Register one function (decorated or not); it is callable in this process even
        when its module cannot be imported by path."""
        spec = getattr(func, SPEC_ATTRIBUTE, None)
        if overrides or not isinstance(spec, ToolSpec):
            spec = spec_from_function(func, **overrides)
        self._python().provide(spec.target, func)
        return self.register([spec])[0].record

    def add_module(self, module_name: str) -> list[PutOutcome]:
        """Register every ``@tool`` function of an importable module."""
        found = tools_of_module(module_name)
        if not found:
            raise UsageError(f"module {module_name!r} has no @tool functions")
        return self.register([spec for spec, _ in found])

    def add_manifest(self, path: str | Path) -> list[PutOutcome]:
        """Register every tool of a YAML/JSON/JSONL manifest, all or none."""
        return self.register(read_manifest(path))

    def add_openapi(
        self,
        source: str | Path | Mapping[str, Any],
        *,
        base_url: str | None = None,
        category: str | None = None,
        auth_secret: str | None = None,
    ) -> OpenAPIImport:
        """Register every operation of an OpenAPI 3 document (a file, an http(s) URL fetched
        through the host guard, or a mapping) as an http tool; all or none."""
        http = self.executors.get(ToolKind.HTTP)
        fetch = http.fetch_document if isinstance(http, HttpExecutor) else None
        found = read_openapi(
            source,
            fetch=fetch,
            max_bytes=self.settings.http_max_response_bytes,
            base_url=base_url,
            category=category,
            auth_secret=auth_secret,
        )
        return replace(found, outcomes=self.register(found.specs))

    def register(self, specs: Sequence[ToolSpec]) -> list[PutOutcome]:
        """Check each spec can run here, then write them in one transaction."""
        for spec in specs:
            executor_for(self.executors, spec.kind).check(spec)
        return self.store.put_tools(self.tenant, specs)

    def _to_spec(self, item: ToolLike) -> ToolSpec:
        if isinstance(item, ToolSpec):
            return item
        if isinstance(item, Mapping):
            return spec_from_mapping(item)
        if callable(item):
            spec = getattr(item, SPEC_ATTRIBUTE, None) or spec_from_function(item)
            self._python().provide(spec.target, item)
            return spec
        raise UsageError(
            f"cannot register {type(item).__name__}: give a ToolSpec, a mapping or a function"
        )

    def _python(self) -> PythonExecutor:
        executor = self.executors.get(ToolKind.PYTHON)
        if not isinstance(executor, PythonExecutor):
            raise UsageError("this registry has no Python executor")
        return executor

    # -- reading and managing ------------------------------------------------
    def get(self, name: str) -> ToolRecord:
        tool = self.store.get_tool(self.tenant, name)
        if tool is None:
            raise self._not_found(name)
        return tool

    def list(
        self,
        *,
        category: str | None = None,
        kind: str | None = None,
        include_disabled: bool = False,
    ) -> list[ToolRecord]:
        return self.store.list_tools(
            self.tenant, category=category, kind=kind, include_disabled=include_disabled
        )

    def versions(self, name: str) -> builtins.list[ToolVersion]:
        versions = self.store.tool_versions(self.tenant, name)
        if not versions:
            raise self._not_found(name)
        return versions

    def version(self, name: str, version: int) -> ToolVersion:
        for candidate in self.versions(name):
            if candidate.version == version:
                return candidate
        raise NotFound(f"tool {name!r} has no version {version}")

    def enable(self, name: str) -> None:
        if not self.store.set_enabled(self.tenant, name, True):
            raise self._not_found(name)

    def disable(self, name: str) -> None:
        if not self.store.set_enabled(self.tenant, name, False):
            raise self._not_found(name)

    def remove(self, name: str) -> None:
        """Delete the tool and its versions; its recorded calls are kept."""
        if not self.store.remove_tool(self.tenant, name):
            raise self._not_found(name)

    def calls(
        self, *, tool: str | None = None, run_id: str | None = None, limit: int = 20
    ) -> builtins.list[CallRecord]:
        if limit < 0:
            raise UsageError(f"limit must be 0 or more, got {limit}")
        return self.store.list_calls(self.tenant, tool_name=tool, run_id=run_id, limit=limit)

    def stats(self) -> builtins.list[ToolRecord]:
        """Every tool, enabled or not, with its live statistics."""
        return self.list(include_disabled=True)

    # -- calling -------------------------------------------------------------
    def bind(self, name: str, arguments: Any = None) -> BoundCall:
        """Resolve an enabled tool and validate arguments (raises NotFound, ToolDisabled,
        ArgumentError)."""
        tool, binder = self._resolve(name)
        return BoundCall(tool=tool, arguments=binder.bind(arguments))

    def call(
        self,
        name: str,
        arguments: Any = None,
        *,
        run_id: str | None = None,
        timeout_s: float | None = None,
    ) -> ToolResult:
        """Bind, execute and record one call.

        The caller's mistakes raise (NotFound, ToolDisabled, ArgumentError); whatever the
        tool does — raise, time out — comes back as a ToolResult with ``success=False``.
        """
        bound = self._bind_recording_rejects(name, arguments, run_id)
        outcome = execute(self._executor(bound.tool), bound, self._timeout(bound.tool, timeout_s))
        return self._finish(bound, outcome, run_id)

    async def acall(
        self,
        name: str,
        arguments: Any = None,
        *,
        run_id: str | None = None,
        timeout_s: float | None = None,
    ) -> ToolResult:
        """``call`` for code already inside an event loop."""
        bound = self._bind_recording_rejects(name, arguments, run_id)
        timeout = self._timeout(bound.tool, timeout_s)
        outcome = await aexecute(self._executor(bound.tool), bound, timeout)
        return self._finish(bound, outcome, run_id)

    def _bind_recording_rejects(self, name: str, arguments: Any, run_id: str | None) -> BoundCall:
        tool, binder = self._resolve(name)
        try:
            return BoundCall(tool=tool, arguments=binder.bind(arguments))
        except ArgumentError as exc:
            rejected = Outcome(ToolResult.failure(str(exc)), ErrorKind.ARGUMENTS, time.time())
            self.recorder.record(tool, arguments, rejected, run_id=run_id)
            raise

    def _finish(self, bound: BoundCall, outcome: Outcome, run_id: str | None) -> ToolResult:
        result = outcome.result
        result.call_id = self.recorder.record(bound.tool, bound.arguments, outcome, run_id=run_id)
        return result

    def _resolve(self, name: str) -> tuple[ToolRecord, Binder]:
        if not isinstance(name, str):
            raise UsageError(f"tool name must be a string, got {type(name).__name__}")
        head = self.store.tool_head(self.tenant, name)
        if head is None:
            raise self._not_found(name)
        if not head.enabled:
            raise ToolDisabled(f"tool {name!r} is disabled in tenant {self.tenant!r}")
        cached = self._bound.get((head.id, head.content_hash))
        if cached is not None:
            return cached
        return self._load(name, head)

    def _load(self, name: str, head: ToolHead) -> tuple[ToolRecord, Binder]:
        tool = self.store.get_tool(self.tenant, name)
        if tool is None:  # removed between the two reads
            raise self._not_found(name)
        entry = (tool, Binder(tool.name, tool.spec.parameters))
        if len(self._bound) > 10_000:
            self._bound.clear()
        self._bound[(head.id, tool.content_hash)] = entry
        return entry

    def _executor(self, tool: ToolRecord) -> Executor:
        return executor_for(self.executors, tool.spec.kind)

    def _timeout(self, tool: ToolRecord, override: float | None) -> float | None:
        if override is not None:
            if override <= 0:
                raise UsageError(f"timeout must be positive, got {override}")
            return override
        return tool.spec.timeout_s or self.settings.default_timeout_s

    def _not_found(self, name: str) -> NotFound:
        return NotFound(f"no tool named {name!r} in tenant {self.tenant!r}")


def open_registry(
    url: str | None = None,
    tenant: str | None = None,
    *,
    settings: Settings | None = None,
    create: bool = True,
) -> Registry:
    """Open the registry at ``url`` (default: settings / ``TOOLDB_URL`` / the user data dir).

    A new, empty database is initialised when ``create`` is true; an existing one
    whose schema is behind must be upgraded with ``tooldb init`` first.
    """
    if settings is None:
        settings = Settings.load(url=url, tenant=tenant)
    elif url is not None:
        settings = replace(settings, url=url)
    store = open_store(settings.resolved_url, sqlite_busy_timeout_s=settings.sqlite_busy_timeout_s)
    try:
        revision = store.revision()
        if revision is None and create:
            store.migrate()
        elif revision != HEAD:
            raise StoreError(
                f"registry {store.url} has schema revision {revision!r}, this tooldb expects "
                f"{HEAD!r}: run `tooldb init` to create or upgrade it"
            )
        return Registry(store, settings, tenant=tenant)
    except BaseException:
        store.close()
        raise
