"""The registry: the one object users hold. It registers, finds, binds, runs and records tools.

Every operation is scoped to the registry's tenant; another tenant's tools are
indistinguishable from tools that do not exist. The registry drives the stages below
it (selection, executors, stores, OODA, provenance) and never imports the layers above:
the agent loops reach it as an ``AgentRuntime`` handed down by ``tooldb/__init__.py``.
"""

from __future__ import annotations

import builtins
import logging
import time
from collections.abc import Awaitable, Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, replace
from pathlib import Path
from typing import TYPE_CHECKING, Any

from ..binding import Binder
from ..decorators import SPEC_ATTRIBUTE, spec_from_function, tools_of_module
from ..embedders import Embedder, open_embedder
from ..errors import NotFound, StoreError, ToolDBError, UsageError
from ..executors import Closeable, Executor, default_executors, executor_for
from ..executors.http import HttpExecutor
from ..executors.python import PythonExecutor
from ..executors.threads import reserve as reserve_threads
from ..ooda.optimize import Optimizer
from ..provenance import graph as provenance
from ..provenance.graph import Explanation, Trace
from ..recording import HeldRecords, Recorder
from ..selection.documents import tool_document
from ..selection.embedding import Progress, embed_pending
from ..selection.index import ToolIndex
from ..selection.select import Filters, Selector, Weights, check_request
from ..settings import Settings
from ..stores import PutOutcome, SQLStore, Store, open_store
from ..stores.migrate import HEAD
from ..stores.storable import storable_text
from ..tools import BUILTIN_MODULES
from ..types import (
    CallRecord,
    RunResult,
    Selection,
    ToolKind,
    ToolRecord,
    ToolSpec,
    ToolVersion,
    check_name,
)
from .calls import CallPath
from .catalog import MISSING, Catalog
from .learning import Learning
from .manifests import Found, Imported, Skipped, find_manifest, spec_from_mapping

if TYPE_CHECKING:
    from ..executors.mcp import McpExecutor
    from ..openapi import OpenAPIImport

ToolLike = ToolSpec | Mapping[str, Any] | Callable[..., Any]
logger = logging.getLogger(__name__)


@dataclass(frozen=True)
class AgentRuntime:
    """The agent layer as the registry sees it: ``Registry.run`` calls ``run_task(registry,
    task, agent=, model=, tool_choice=)`` and ``agent`` tools await ``run_agent_tool(registry,
    agent, arguments)``. ``tooldb.agents`` provides both; ``tooldb/__init__.py`` installs
    them with ``use_agent_runtime``, so the registry never imports the layer above it."""

    run_task: Callable[..., RunResult]
    run_agent_tool: Callable[[Registry, str, dict[str, Any]], Awaitable[Any]]
    submit: Callable[..., str] | None = None
    wait: Callable[..., RunResult] | None = None


_installed_runtime: AgentRuntime | None = None


def use_agent_runtime(runtime: AgentRuntime | None) -> None:
    """Make ``runtime`` the agent layer of every registry built from now on without one."""
    global _installed_runtime
    _installed_runtime = runtime


class Registry(CallPath, Catalog, Learning):
    """Tools in a SQL store, for one tenant."""

    def __init__(
        self,
        store: Store,
        settings: Settings | None = None,
        *,
        tenant: str | None = None,
        executors: dict[ToolKind, Executor] | None = None,
        agent_runtime: AgentRuntime | None = None,
    ) -> None:
        self.settings = settings or Settings()
        self.agent_runtime = agent_runtime or _installed_runtime
        try:
            self.tenant = check_name(tenant or self.settings.tenant, "tenant")
        except ValueError as exc:
            raise UsageError(str(exc)) from None
        self.store = store
        self._owns_executors = executors is None
        self.executors = (
            executors
            if executors is not None
            else default_executors(
                self.settings,
                _unmasked_url(store, self.settings),
                self.agent_runtime.run_agent_tool if self.agent_runtime else None,
            )
        )
        reserve_threads(self.settings.max_parallel_calls)
        self.recorder = Recorder(store, self.settings, self.tenant)
        self._bound: dict[tuple[int, str], tuple[ToolRecord, Binder | None]] = {}
        self._embedder: Embedder | None = None
        self._embedder_loaded = False
        self._selector: Selector | None = None
        self._optimizer: Optimizer | None = None
        #: Why the last registration could not embed its tools (None when it could).
        self.embedding_error: str | None = None

    # -- lifecycle -----------------------------------------------------------
    def init(self) -> tuple[str | None, str]:
        """Create or upgrade the schema in place; returns (revision before, after)."""
        return self.store.migrate()

    def close(self) -> None:
        """Close the store and the executors this registry created (sessions, pools)."""
        try:
            if self._owns_executors:
                for executor in self.executors.values():
                    if isinstance(executor, Closeable):
                        executor.close()
        finally:
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

    def add_manifest(
        self, path: str | Path, *, strict: bool = False, progress: Progress | None = None
    ) -> Imported:
        """Register the tools of a YAML/JSON/JSONL manifest: an invalid tool is skipped, a
        wrong parameter default coerced losslessly or dropped, each in the result's
        ``skipped``/``repaired`` with its reason; ``strict``: all or none."""
        max_bytes = self.settings.manifest_max_bytes
        found = find_manifest(path, progress=progress, strict=strict, max_bytes=max_bytes)
        return self._register_found(found, strict, progress)

    def _register_found(self, found: Found, strict: bool, progress: Progress | None) -> Imported:
        check = lambda spec: executor_for(self.executors, spec.kind).check(spec)  # noqa: E731
        specs = found.specs if strict else found.runnable(check)
        return Imported(self.register(specs, progress=progress), found.skipped, found.repaired)

    def add_openapi(
        self,
        source: str | Path | Mapping[str, Any],
        *,
        base_url: str | None = None,
        category: str | None = None,
        auth_secret: str | None = None,
        progress: Progress | None = None,
    ) -> OpenAPIImport:
        """Register every operation of an OpenAPI 3 document (a file, an http(s) URL fetched
        through the host guard, or a mapping) as an http tool; all or none."""
        from ..openapi import read_openapi  # only when asked: `import tooldb` skips it

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
        return replace(found, outcomes=self.register(found.specs, progress=progress))

    def add_mcp(
        self,
        name: str,
        *,
        command: Sequence[str] | None = None,
        url: str | None = None,
        env: Sequence[str] = (),
        category: str | None = None,
        timeout_s: float | None = None,
        strict: bool = False,
    ) -> Imported:
        """Connect to an MCP server (a stdio ``command`` or a streamable-HTTP ``url``), list
        its tools and register each as ``NAME__TOOL`` (kind ``mcp``, schema from the server).

        ``env`` names environment variables passed through to a stdio server at start. A
        tool that cannot be imported is skipped and a wrong default repaired, as for
        manifests (``strict``: all or none).
        """
        from ..mcp.config import ServerConfig
        from ..mcp.importer import import_server

        if (command is None) == (url is None):
            raise UsageError("give an MCP server command or a url, not both or neither")
        if url is not None and env:
            raise UsageError("env passes variables to a stdio server; an HTTP server has none")
        config = (
            ServerConfig.http(url) if url is not None else ServerConfig.stdio(command or [], env)
        )
        specs, skipped, repaired = import_server(
            self._mcp().sessions, name, config, category=category, timeout_s=timeout_s,
            strict=strict,
        )  # fmt: skip
        found = Found(specs, [Skipped(*s) for s in skipped], [Skipped(*r) for r in repaired])
        return self._register_found(found, strict, None)

    def add_builtin_tools(self) -> list[PutOutcome]:
        """Register tooldb's built-in tools (``analyze_system_state``,
        ``explain_inference``; category ``diagnostics``); re-running it updates them to
        this version of tooldb."""
        return self.register([spec for m in BUILTIN_MODULES for spec, _ in tools_of_module(m)])

    def register(
        self, specs: Sequence[ToolSpec], *, embed: bool = True, progress: Progress | None = None
    ) -> list[PutOutcome]:
        """Check each spec can run here, write them in one transaction, then embed the new
        and changed ones (an embedder failure leaves them registered, ranked by words until
        ``embed`` succeeds; ``embedding_error`` says why)."""
        for spec in specs:
            executor_for(self.executors, spec.kind).check(spec)
        documents = [tool_document(s) for s in specs]
        outcomes = self.store.put_tools(self.tenant, specs, documents, progress=progress)
        if embed:
            changed = sum(1 for outcome in outcomes if outcome.status != "unchanged")
            try:
                self.embed(progress=progress, total=changed)
                self.embedding_error = None
            except (ToolDBError, OSError) as exc:
                self.embedding_error = str(exc)
        return outcomes

    # -- selection -----------------------------------------------------------
    @property
    def embedder(self) -> Embedder | None:
        """The configured embedder (loaded on first use), None for lexical-only selection."""
        if not self._embedder_loaded:
            self._embedder = open_embedder(
                self.settings.embedder,
                url=self.settings.embedder_url or None,
                api_key_env=self.settings.embedder_api_key_env,
            )
            self._embedder_loaded = True
        return self._embedder

    def embed(
        self, *, progress: Progress | None = None, total: int | None = None, rebuild: bool = False
    ) -> int:
        """Embed every tool that has no vector from the current embedder; returns how many.

        ``rebuild`` first rewrites every tool's search text (after an upgrade changed how
        tools are described), which re-embeds those whose text changed.
        """
        if rebuild:
            self.refresh_documents()
        else:
            self._document_unregistered()
        embedder = self.embedder
        if embedder is None:
            return 0
        if total is None:
            counts = self.store.embedding_counts(self.tenant)
            total = sum(n for name, n in counts.items() if name != embedder.id)
        return embed_pending(self.store, self.tenant, embedder, total=total, progress=progress)

    def for_tenant(self, tenant: str) -> Registry:
        """Another tenant's view of the same store and settings (shares the connection pool)."""
        return Registry(
            self.store,
            self.settings,
            tenant=tenant,
            executors=self.executors,
            agent_runtime=self.agent_runtime,
        )

    def _document_unregistered(self) -> None:
        """Write the search documents of tools added by plain SQL (never registered):
        without one a tool is never embedded, and selection only knows its name."""
        missing = set(self.store.undocumented_tools(self.tenant))
        if missing:
            tools = [t for t in self.list(include_disabled=True) if t.id in missing]
            self.store.reset_documents(self.tenant, [(t.id, tool_document(t.spec)) for t in tools])

    def refresh_documents(self) -> int:
        """Rewrite every tool's search text (after an upgrade); returns how many changed."""
        tools = self.list(include_disabled=True)
        return self.store.reset_documents(
            self.tenant, [(t.id, tool_document(t.spec)) for t in tools]
        )

    @property
    def selector(self) -> Selector:
        if self._selector is None:
            embedder = self.embedder
            dim = embedder.dim if embedder is not None else 0
            if embedder is not None and not dim:  # learned on first use (remote embedders)
                dim = int(embedder.embed(["dimension probe"]).shape[1])
            ann_min = self.settings.select_ann_min_tools or None
            index = ToolIndex(
                self.store, self.tenant, embedder.id if embedder else None, dim, ann_min
            )
            self._selector = Selector(index, embedder, Weights.from_settings(self.settings))
            self._attach_evidence(self._selector)  # learning from use (learning.py)
        return self._selector

    def select(
        self,
        task: str,
        k: int = 5,
        *,
        category: str | None = None,
        kind: str | None = None,
        names: Sequence[str] | None = None,
        run_id: str | None = None,
        record: bool | None = None,
        hold: HeldRecords | None = None,
    ) -> Selection:
        """The ``k`` enabled tools most likely to do ``task``, best first, each with the
        components of its score; recorded as a decision unless ``record`` is False
        (``hold``, an agent run's: held there and committed with its next group, the
        ``decision_id`` set then)."""
        task = check_request(task, k)
        filters = Filters(category, kind, list(names) if names is not None else None)
        selection = self.selector.select(task, k, filters)
        if not (self.settings.record_decisions if record is None else record):
            return selection
        row = {
            "tenant": self.tenant,
            "run_id": run_id,
            "task": storable_text(task[:10_000]) or "",
            "k": k,
            "filters": filters.as_json(),
            "candidates": selection.candidates,
            "chosen": selection.candidates[0].name if selection.candidates else None,
            "embedder": selection.embedder,
            "duration_ms": selection.duration_ms,
            "created_at": time.time(),
        }
        if hold is not None:
            hold.hold_decision(row, selection)
        else:
            selection.decision_id = self.store.record_decision(row)
        return selection

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

    def _mcp(self) -> McpExecutor:
        from ..executors.mcp import McpExecutor

        executor = self.executors.get(ToolKind.MCP)
        if not isinstance(executor, McpExecutor):
            raise UsageError("this registry has no MCP executor")
        return executor

    @property
    def ooda(self) -> Optimizer:
        """Self-optimisation for this tenant: ``registry.ooda(dry_run=False)`` runs a
        cycle and returns an OodaReport; ``.findings()``, ``.history()``,
        ``.undo(act_id)``, ``.trend(name)`` (ooda/optimize.py, docs/ooda.md)."""
        if self._optimizer is None:
            self._optimizer = Optimizer(self)
        return self._optimizer

    def trace(self, run_id: str) -> Trace:
        """A run's provenance: its decisions, calls, results, skills and sub-runs as a
        graph and a time-ordered tree (provenance/graph.py, docs/provenance.md)."""
        return provenance.trace(self, run_id)

    def explain(self, call_id: int | str) -> Explanation:
        """A recorded call walked back to its run, task and the selection behind it."""
        return provenance.explain(self, call_id)

    # -- reading and managing ------------------------------------------------
    def get(self, name: str) -> ToolRecord:
        tool = self.store.get_tool(self.tenant, name)
        if tool is None:
            raise self._not_found(name)
        return tool

    def get_many(self, names: Iterable[str]) -> dict[str, ToolRecord]:
        """The named tools that exist (enabled or not), in one query; their records are
        cached so the first call of each skips a second read."""
        found = self.store.get_tools(self.tenant, list(names))
        for tool in found.values():
            self._cache_record(tool)
        return found

    def current_tools(self, names: Iterable[str]) -> dict[str, ToolRecord]:
        """The named tools that exist (enabled or not) as ``call`` would run them: their
        heads in one query, each record from this registry's cache when its version is
        current (so its statistics are as of when it was first read; ``get_many`` reads
        them anew). What an agent run's toolbox needs, at a fraction of ``get_many``."""
        heads = self.store.tool_heads(self.tenant, list(names))
        found: dict[str, ToolRecord] = {}
        stale: list[str] = []
        for name, head in heads.items():
            cached = self._bound.get((head.id, head.content_hash))
            if cached is not None and cached[0].enabled == head.enabled:
                found[name] = cached[0]
            else:
                stale.append(name)
        if stale:
            found.update(self.get_many(stale))
        return found

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

    def remove(self, name: str, *, force: bool = False) -> None:
        """Delete the tool and its versions; its recorded calls are kept. A tool that an
        enabled skill or agent names is removed only with ``force``, which disables
        those (the reason names the tool), so none is left pointing at nothing."""
        users = self.users_of_tool(name)
        if users and not force:
            raise UsageError(
                f"tool {name!r} is used by {', '.join(users)}: pass --force (force=True) to "
                "remove it anyway (they are disabled)"
            )
        if not self.store.remove_tool(self.tenant, name):
            raise self._not_found(name)
        for user in users:
            kind, _, user_name = user.partition(" ")
            self.disable_definition(kind, user_name, f"{MISSING}tool {name!r} (removed)")

    def calls(
        self, *, tool: str | None = None, run_id: str | None = None, limit: int = 20
    ) -> builtins.list[CallRecord]:
        if limit < 0:
            raise UsageError(f"limit must be 0 or more, got {limit}")
        return self.store.list_calls(self.tenant, tool_name=tool, run_id=run_id, limit=limit)

    def stats(self) -> builtins.list[ToolRecord]:
        """Every tool, enabled or not, with its live statistics."""
        return self.list(include_disabled=True)

    # -- agents --------------------------------------------------------------
    def run(
        self,
        task: str,
        *,
        agent: str | None = None,
        model: Any = None,
        tool_choice: str | None = None,
    ) -> RunResult:
        """Run a task: the LLM loop with a model (``provider:model`` or a Model), the
        router without one. See ``tooldb.agents.run_task``."""
        if self.agent_runtime is None:
            raise UsageError(
                "this registry was built without an agent runtime: pass "
                "Registry(..., agent_runtime=...) or `import tooldb` first"
            )
        return self.agent_runtime.run_task(
            self, task, agent=agent, model=model, tool_choice=tool_choice
        )

    def submit(self, task: str, **options: Any) -> str:
        """Enqueue ``task`` (``agent=``, ``model=``, ``tool_choice=`` as ``run``) for the
        workers (``tooldb worker``, PostgreSQL only); its run id, at once."""
        if self.agent_runtime is None or self.agent_runtime.submit is None:
            raise UsageError("this registry's runtime cannot submit runs: `import tooldb` first")
        return self.agent_runtime.submit(self, task, **options)

    def wait(self, run_id: str, timeout_s: float | None = None) -> RunResult:
        """Block until the submitted run ``run_id`` ends; its result."""
        if self.agent_runtime is None or self.agent_runtime.wait is None:
            raise UsageError("this registry's runtime cannot wait for runs: `import tooldb` first")
        return self.agent_runtime.wait(self, run_id, timeout_s)


def _unmasked_url(store: Store, settings: Settings) -> str | None:
    """The registry database's URL with its password, for SQL tools on ``registry``."""
    if isinstance(store, SQLStore):
        return store.engine.url.render_as_string(hide_password=False)
    return settings.url


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
        elif revision is None:
            raise UsageError(f"no registry at {store.url}: run `tooldb init` to create it")
        elif revision != HEAD:
            raise StoreError(
                f"registry {store.url} has schema revision {revision!r}, this tooldb expects "
                f"{HEAD!r}: run `tooldb init` to create or upgrade it"
            )
        registry = Registry(store, settings, tenant=tenant)
    except BaseException:
        store.close()
        raise
    try:
        registry.sweep_runs()  # runs whose process died are marked, never left running
    except StoreError as exc:  # a read-only or busy store: open anyway, sweep later
        logger.debug("could not sweep interrupted runs: %s", exc)
    return registry
