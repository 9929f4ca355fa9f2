"""Python tools: ``module:function`` targets, sync or async, called with keyword arguments."""

from __future__ import annotations

import asyncio
import importlib
import inspect
import threading
from collections.abc import Callable
from typing import Any

from ..background_loop import BackgroundLoop, background_loop
from ..context import CONTEXT_KEY, current_context
from ..errors import DefinitionError, ExecutionError, ToolTimeout
from ..types import ToolKind, ToolRecord, ToolSpec
from .deadline import DeadlineExceeded, deadline
from .threads import run_blocking


class PythonExecutor:
    """Resolves targets once and runs them with the tool's timeout."""

    kind = ToolKind.PYTHON

    def __init__(self) -> None:
        self._resolved: dict[str, Callable[..., Any]] = {}
        self._lock = threading.Lock()
        #: Whether each resolved callable is a coroutine function (asked on every call).
        self._is_async: dict[Callable[..., Any], bool] = {}

    def provide(self, target: str, func: Callable[..., Any]) -> None:
        """Use this callable for ``target`` (functions not importable by path, e.g. in tests)."""
        with self._lock:
            self._resolved[target] = func

    def check(self, spec: ToolSpec) -> None:
        self.resolve(spec.target)

    def resolve(self, target: str) -> Callable[..., Any]:
        func = self._resolved.get(target)
        if func is not None:
            return func
        func = _import_target(target)
        with self._lock:
            self._resolved[target] = func
        return func

    def prepare(self, tool: ToolRecord) -> None:
        self._callable(tool)

    def blocking(self, tool: ToolRecord) -> bool:
        """A plain function: ``run`` in a worker thread is all ``arun`` would do."""
        return not self._async(self._callable(tool))

    def run(self, tool: ToolRecord, arguments: dict[str, Any], timeout_s: float | None) -> Any:
        func = self._callable(tool)
        arguments = with_context(tool, arguments)
        if self._async(func):
            return _loop_thread().run(self._run_async(tool, func, arguments, timeout_s))
        try:
            with deadline(timeout_s):
                value = func(**arguments)
        except DeadlineExceeded:
            raise _timeout(tool, timeout_s) from None
        if type(value) not in _NOT_AWAITABLE and inspect.isawaitable(value):
            return _loop_thread().run(self._await(tool, value, timeout_s))
        return value

    def _async(self, func: Callable[..., Any]) -> bool:
        try:
            known = self._is_async.get(func)
        except TypeError:  # an unhashable callable object
            return inspect.iscoroutinefunction(func)
        if known is None:
            known = self._is_async[func] = inspect.iscoroutinefunction(func)
        return known

    async def arun(
        self, tool: ToolRecord, arguments: dict[str, Any], timeout_s: float | None
    ) -> Any:
        func = self._callable(tool)
        if self._async(func):
            return await self._run_async(tool, func, with_context(tool, arguments), timeout_s)
        return await run_blocking(self.run, tool, arguments, timeout_s)

    async def _run_async(
        self,
        tool: ToolRecord,
        func: Callable[..., Any],
        arguments: dict[str, Any],
        timeout_s: float | None,
    ) -> Any:
        return await self._await(tool, func(**arguments), timeout_s)

    @staticmethod
    async def _await(tool: ToolRecord, awaitable: Any, timeout_s: float | None) -> Any:
        try:
            return await asyncio.wait_for(awaitable, timeout_s)
        except TimeoutError:
            raise _timeout(tool, timeout_s) from None

    def _callable(self, tool: ToolRecord) -> Callable[..., Any]:
        try:
            return self.resolve(tool.spec.target)
        except DefinitionError as exc:
            raise ExecutionError(str(exc)) from None


#: Return values that are certainly not awaitable (exact types): no ABC check for them.
_NOT_AWAITABLE = frozenset({int, float, str, bool, type(None), dict, list, tuple, bytes})


def with_context(tool: ToolRecord, arguments: dict[str, Any]) -> dict[str, Any]:
    """Add the current LoopContext for a tool that declared a parameter for it."""
    name = tool.spec.metadata.get(CONTEXT_KEY)
    if not name:
        return arguments
    return {**arguments, name: current_context()}


def _timeout(tool: ToolRecord, timeout_s: float | None) -> ToolTimeout:
    return ToolTimeout(f"tool {tool.name!r} timed out after {timeout_s:g} s and was stopped")


def _import_target(target: str) -> Callable[..., Any]:
    module_name, sep, qualname = target.partition(":")
    if not sep or not module_name or not qualname:
        raise DefinitionError(f"python target {target!r} must look like 'package.module:function'")
    try:
        value: Any = importlib.import_module(module_name)
    except ImportError as exc:
        raise DefinitionError(
            f"python target {target!r}: cannot import {module_name!r}: {exc}"
        ) from None
    for part in qualname.split("."):
        try:
            value = getattr(value, part)
        except AttributeError:
            raise DefinitionError(
                f"python target {target!r}: {module_name!r} has no attribute {qualname!r}"
            ) from None
    if not callable(value):
        raise DefinitionError(f"python target {target!r} is not callable")
    return value


def _loop_thread() -> BackgroundLoop:
    return background_loop("tooldb-async")
