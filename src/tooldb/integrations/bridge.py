"""What every framework adapter shares: the tools offered, the call path and the runs.

A ``ToolBridge`` is made once per ``as_tools``/``toolset`` call. With a task it selects
the ``k`` tools ``Registry.select`` ranks for it (the decision recorded under the
bridge's run, so ``explain`` walks a call back to it); with names it offers those
(unknown or disabled ones raise, as for an agent's pinned tools). A call is bound,
run and recorded by ``Registry.call``/``acall`` with a run id, so every call lands in
the call log under a tooldb run whose row carries the task: the bridge's own run, or
one per key a framework hands over (a LangGraph thread, a Pydantic AI run, an OpenAI
Agents trace group), a child of the bridge's run when there is one. tooldb's argument
errors come back as a ``Reply`` for the adapter to hand to its model in the
framework's idiom. Runs stay ``running`` (their lease renewed) while the bridge is
alive and are finished when it is closed or collected, or at exit.
"""

from __future__ import annotations

import json
import logging
import threading
import time
import uuid
import weakref
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

from ..agents.run_log import RunLog
from ..errors import ArgumentError, NotFound, ToolDisabled, UsageError
from ..models.base import Message
from ..registry import Registry
from ..types import RunResult, RunStatus, ToolRecord, ToolResult, ToolUse

logger = logging.getLogger(__name__)
#: A tool whose last call took less than this (ms) runs on the event loop's thread next
#: time (``ToolBridge.acall``): blocking the loop that briefly costs less than a hop.
QUICK_MS = 1.0
#: Runs kept open per bridge for framework keys (threads, groups) that never say when
#: they end: past this, the run opened longest ago is finished (a later call under its
#: key opens a new run), so a long-lived process holds neither rows nor leases forever.
MAX_OPEN_RUNS = 256


def missing_framework(framework: str, extra: str, error: ImportError) -> ImportError:
    """The ImportError an adapter raises when its framework is not installed."""
    return ImportError(
        f"tooldb's {framework} adapter needs {framework}, which is not installed "
        f"({error}): pip install 'tooldb[{extra}]'"
    )


@dataclass(frozen=True)
class Reply:
    """One call's outcome as the framework's model should read it."""

    text: str
    ok: bool
    #: tooldb refused the arguments (nothing ran): the model should correct its call.
    rejected: bool = False
    result: ToolResult | None = None


@dataclass
class _OpenRun:
    log: RunLog
    task: str
    uses: list[ToolUse] = field(default_factory=list)


class ToolBridge:
    """The tools one adapter offers, and their calls, recorded under tooldb runs."""

    def __init__(
        self,
        registry: Registry,
        framework: str,
        *,
        task: str | None = None,
        k: int = 8,
        names: Sequence[str] | None = None,
        category: str | None = None,
    ) -> None:
        if task is None and names is None:
            raise UsageError(
                "give a task (the tools selection ranks for it are offered) or the names of "
                "the tools to offer"
            )
        if isinstance(names, str) or not all(isinstance(n, str) for n in names or ()):
            raise UsageError("names must be a list of tool names")
        if task is not None and (not isinstance(task, str) or not task.strip()):
            raise UsageError("the task must be a non-empty string")
        self.registry = registry
        self.framework = framework
        self.task = task
        self.category = category
        self.names = list(names) if names is not None else None
        self._lock = threading.Lock()
        self._runs: dict[str | None, _OpenRun] = {}
        self._quick: set[str] = set()
        self._closer = weakref.finalize(self, _finish_runs, self._runs, self._lock)
        if task is not None:
            run_id = self.run_id(None)
            chosen = registry.select(task, k, category=category, names=names, run_id=run_id).names
            self.tools = self._records(chosen, strict=False)
        else:
            self.tools = self._records(list(dict.fromkeys(names or ())), strict=True)

    # -- which tools -------------------------------------------------------
    def _records(self, names: list[str], *, strict: bool) -> list[ToolRecord]:
        found = self.registry.current_tools(names)
        usable = [
            found[n]
            for n in names
            if n in found
            and found[n].enabled
            and (self.category is None or found[n].spec.category == self.category)
        ]
        if strict and len(usable) < len(names):
            missing = sorted(set(names) - {t.name for t in usable})
            where = f" (or not in category {self.category!r})" if self.category else ""
            raise NotFound(f"tools not found or disabled{where}: {', '.join(missing)}")
        return usable

    def select(self, task: str, k: int) -> list[ToolRecord]:
        """The tools ranked for ``task`` now (dynamic toolsets), recorded as a decision of
        the bridge's run."""
        run_id = self.run_id(None)
        names = self.registry.select(
            task, k, category=self.category, names=self.names, run_id=run_id
        ).names
        return self._records(names, strict=False)

    # -- runs --------------------------------------------------------------
    def run_id(self, key: str | None = None, task: str | None = None) -> str:
        """The tooldb run that groups the calls of ``key`` (None: the bridge's own run),
        opened at first use with ``task`` (default: the bridge's task)."""
        return self._run(key, task).log.run_id

    def _run(self, key: str | None, task: str | None) -> _OpenRun:
        run = self._runs.get(key)
        if run is not None:
            return run
        idle: str | None = None
        with self._lock:
            run = self._runs.get(key)
            if run is None:
                run = self._runs[key] = self._open(key, task)
                if len(self._runs) > MAX_OPEN_RUNS:
                    idle = self._oldest_keyed()
        if idle is not None:
            self.finish(idle)
        return run

    def _oldest_keyed(self) -> str | None:
        """The key opened longest ago (the bridge's own run is kept open)."""
        return next((k for k in self._runs if k is not None), None)

    def _open(self, key: str | None, task: str | None) -> _OpenRun:
        text = task or self.task or f"{self.framework} tools: {self._names_text()}"
        parent = self._runs.get(None) if key is not None else None
        metadata: dict[str, Any] = {"framework": self.framework}
        if key is not None:
            metadata["key"] = key
        registry = self.registry
        log = RunLog(
            registry.store,
            registry.tenant,
            uuid.uuid4().hex,
            task=text,
            mode=self.framework,
            parent_run_id=parent.log.run_id if parent is not None else None,
            metadata=metadata,
            lease_s=registry.settings.agent_run_lease_s,
            settings=registry.settings,
        )
        log.add(0, [Message.user(text)])
        return _OpenRun(log, text)

    def _names_text(self) -> str:
        tools = getattr(self, "tools", None)
        return ", ".join(t.name for t in tools) if tools else "none"

    def close(self) -> None:
        """Finish the runs this bridge opened (also done when it is collected, or at exit)."""
        self._closer()

    def finish(self, key: str) -> None:
        """Finish ``key``'s run now (its framework run ended); a later call under the same
        key opens a new one."""
        with self._lock:
            run = self._runs.pop(key, None)
        if run is not None:
            _finish_runs({key: run}, threading.Lock())

    # -- calls -------------------------------------------------------------
    def call(
        self, name: str, arguments: Any, key: str | None = None, task: str | None = None
    ) -> Reply:
        """Bind, run and record one call under ``key``'s run."""
        run = self._run(key, task)
        try:
            result = self.registry.call(name, _parsed(arguments), run_id=run.log.run_id)
        except (ArgumentError, NotFound, ToolDisabled) as exc:
            return self._refused(run, name, arguments, exc)
        return self._replied(run, name, arguments, result)

    async def acall(
        self, name: str, arguments: Any, key: str | None = None, task: str | None = None
    ) -> Reply:
        """``call`` on an event loop. A blocking tool runs in a worker thread, unless its
        last call here took under ``QUICK_MS``: then it runs on the loop's thread, sparing
        a thread hop that costs more than the tool (~150 µs with the bind and record)."""
        run = self._run(key, task)
        inline = name in self._quick
        try:
            result = await self.registry.acall(
                name, _parsed(arguments), run_id=run.log.run_id, inline=inline
            )
        except (ArgumentError, NotFound, ToolDisabled) as exc:
            return self._refused(run, name, arguments, exc)
        if result.duration_ms < QUICK_MS:
            self._quick.add(name)
        else:
            self._quick.discard(name)
        return self._replied(run, name, arguments, result)

    def _refused(self, run: _OpenRun, name: str, arguments: Any, exc: Exception) -> Reply:
        rejected = isinstance(exc, ArgumentError)
        run.uses.append(_use(name, arguments, False, error=str(exc), iteration=len(run.uses)))
        return Reply(f"Error: {exc}", ok=False, rejected=rejected)

    def _replied(self, run: _OpenRun, name: str, arguments: Any, result: ToolResult) -> Reply:
        run.uses.append(
            _use(name, arguments, result.success, error=result.error, call_id=result.call_id,
                 iteration=len(run.uses), duration_ms=result.duration_ms)
        )  # fmt: skip
        if result.success:
            return Reply(result.output, ok=True, result=result)
        return Reply(f"Error: {result.error}", ok=False, result=result)


def _parsed(arguments: Any) -> Any:
    """Arguments as a model sent them: a JSON text is read (binding then says what is
    wrong with its content); anything else goes to the binder as it is."""
    if isinstance(arguments, str | bytes):
        try:
            return json.loads(arguments or "{}")
        except ValueError:
            return arguments  # the binder rejects it, and the rejection is recorded
    return arguments


def _use(name: str, arguments: Any, success: bool, **fields: Any) -> ToolUse:
    """The run's note of one call; its record is in the call log (model_construct: no
    validation on the call path)."""
    args = arguments if isinstance(arguments, dict) else {"value": arguments}
    return ToolUse.model_construct(tool=name, arguments=args, success=success, **fields)


def _finish_runs(runs: dict[str | None, _OpenRun], lock: threading.Lock) -> None:
    """End every open run: ``success`` with the calls it made (the framework, not tooldb,
    knows how the conversation ended)."""
    with lock:
        finished = list(runs.values())
        runs.clear()
    for run in finished:
        started = run.log.started_at
        result = RunResult(
            run_id=run.log.run_id,
            status=RunStatus.SUCCESS,
            task=run.task,
            iterations=len(run.uses),
            tool_calls=run.uses,
            duration_ms=(time.time() - started) * 1000,
        )
        try:
            run.log.finish(result)
        except Exception as exc:  # a closed store at exit: the run's lease ends it
            logger.debug("could not finish run %s: %s", run.log.run_id, exc)
