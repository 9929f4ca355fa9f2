"""Script tools: Python, JavaScript or Java source stored in the registry, run in a sandbox.

The target is the source. The bound arguments go to the script as one JSON
object on stdin; its result comes back as JSON on stdout (the whole stdout, or
else its last non-empty line, so earlier prints are allowed). Configuration
lives in ``metadata`` (``language``, limits, ``env``, ``network``), documented
in docs/scripts.md. The subprocess mechanics are in ``sandbox``.
"""

from __future__ import annotations

import asyncio
import json
import os
import re
import shutil
import subprocess
import tempfile
from dataclasses import fields
from pathlib import Path
from typing import Any

from ..errors import DefinitionError, ExecutionError, ToolTimeout
from ..types import ToolKind, ToolRecord, ToolSpec
from . import sandbox
from .sandbox import Completed, Limits
from .script_java import NO_JDK, check_java, java_binary, java_launch

LANGUAGES = ("python", "javascript", "java")
_JS_RUNNER = Path(__file__).with_name("script_runner.js").read_text(encoding="utf-8")
_ENV_NAME = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")
_INT_LIMITS = ("memory_mb", "max_output_bytes", "max_processes", "max_file_mb")
_PREVIEW_CHARS = 200


class ScriptExecutor:
    """Runs ``script`` tools in a fresh sandboxed process per call (Python ones forked
    by the fork server unless ``forkserver`` is False: see ``sandbox``)."""

    kind = ToolKind.SCRIPT

    def __init__(self, forkserver: bool = True) -> None:
        self.forkserver = forkserver

    def check(self, spec: ToolSpec) -> None:
        language = language_of(spec)
        limits_of(spec)
        if not spec.target.strip():
            raise DefinitionError(f"script tool {spec.name!r} has no source")
        if language == "python":
            _check_python(spec)
        elif language == "java":
            check_java(spec)
        else:
            _check_javascript(spec)

    def prepare(self, tool: ToolRecord) -> None:
        """Probe the platform's isolation once per process, before the clock starts; fail
        closed where there is no sandbox."""
        sandbox.isolation().require(tool.name)
        language = language_of(tool.spec)
        if language == "javascript" and node_binary() is None:
            raise ExecutionError(f"script tool {tool.name!r} needs node, which is not on PATH")
        if language == "java" and java_binary() is None:
            raise ExecutionError(f"script tool {tool.name!r} needs a JDK: {NO_JDK}")

    def run(self, tool: ToolRecord, arguments: dict[str, Any], timeout_s: float | None) -> Any:
        coroutine = self.arun(tool, arguments, timeout_s)
        try:
            asyncio.get_running_loop()
        except RuntimeError:
            return asyncio.run(coroutine)
        from .python import _loop_thread  # inside someone's loop: run on tooldb's own

        return _loop_thread().run(coroutine)

    async def arun(
        self, tool: ToolRecord, arguments: dict[str, Any], timeout_s: float | None
    ) -> Any:
        spec = tool.spec
        language = language_of(spec)
        limits = limits_of(spec)
        # No file on the host: the source goes into the call's own /tmp in the sandbox
        # (a tmpfs that ends with the call).
        done = await sandbox.run_script(
            limits,
            _launch(spec, language),
            spec.target,
            stdin=json.dumps(arguments, ensure_ascii=False).encode(),
            timeout_s=timeout_s,
            use_forkserver=self.forkserver,
            tool=tool.name,
        )
        return result_of(tool.name, done, limits, timeout_s)


def language_of(spec: ToolSpec) -> str:
    language = spec.metadata.get("language", "python")
    if language not in LANGUAGES:
        raise DefinitionError(
            f"script tool {spec.name!r}: unknown language {language!r} "
            f"(metadata.language must be one of: {', '.join(LANGUAGES)})"
        )
    return str(language)


def limits_of(spec: ToolSpec) -> Limits:
    """The tool's limits from its metadata, each checked, defaults for the rest."""
    meta = spec.metadata
    values: dict[str, Any] = {}
    for name in _INT_LIMITS:
        if name in meta:
            values[name] = _positive(spec, name, meta[name], integer=True)
    if meta.get("cpu_s") is not None:
        values["cpu_s"] = _positive(spec, "cpu_s", meta["cpu_s"], integer=False)
    if "network" in meta:
        if not isinstance(meta["network"], bool):
            raise _bad(spec, "network", "true or false", meta["network"])
        values["network"] = meta["network"]
    if "env" in meta:
        names = meta["env"]
        if not isinstance(names, list) or not all(
            isinstance(n, str) and _ENV_NAME.fullmatch(n) for n in names
        ):
            raise _bad(spec, "env", "a list of environment variable names", names)
        values["env"] = tuple(names)
    assert set(values) <= {f.name for f in fields(Limits)}
    return Limits(**values)


def _positive(spec: ToolSpec, name: str, value: Any, *, integer: bool) -> int | float:
    kinds = (int,) if integer else (int, float)
    if isinstance(value, bool) or not isinstance(value, kinds) or value <= 0:
        raise _bad(spec, name, "a positive integer" if integer else "a positive number", value)
    return value


def _bad(spec: ToolSpec, key: str, expected: str, given: Any) -> DefinitionError:
    return DefinitionError(
        f"script tool {spec.name!r}: metadata.{key} must be {expected}, got {given!r}"
    )


def _check_python(spec: ToolSpec) -> None:
    try:
        compile(spec.target, f"<script tool {spec.name}>", "exec", dont_inherit=True)
    except SyntaxError as exc:
        raise DefinitionError(
            f"script tool {spec.name!r}: Python syntax error at line {exc.lineno}: {exc.msg}"
        ) from None


NODE_FALLBACKS = ("/usr/bin/node", "/usr/local/bin/node")


def node_binary() -> str | None:
    """``node`` on PATH, else at the usual places."""
    found = shutil.which("node")
    if found:
        return found
    return next((path for path in NODE_FALLBACKS if os.access(path, os.X_OK)), None)


def _check_javascript(spec: ToolSpec) -> None:
    node = node_binary()
    if node is None:
        raise DefinitionError(
            f"script tool {spec.name!r} is JavaScript, but node is not installed (not on PATH)"
        )
    with tempfile.TemporaryDirectory(prefix="tooldb-check-") as scratch:
        source = Path(scratch) / "tool.js"
        source.write_text(spec.target, encoding="utf-8")
        try:
            done = subprocess.run(
                [node, "--check", str(source)], capture_output=True, text=True, timeout=30
            )
        except subprocess.TimeoutExpired:
            raise DefinitionError(f"script tool {spec.name!r}: node --check timed out") from None
    if done.returncode != 0:
        detail = done.stderr.replace(str(source), "tool.js").strip()
        raise DefinitionError(f"script tool {spec.name!r}: JavaScript syntax error:\n{detail}")


def _launch(spec: ToolSpec, language: str) -> dict[str, Any]:
    """The launcher's run instructions: where the source goes in the call's /tmp (its
    working directory in the sandbox) and how to run it."""
    if language == "python":
        path = f"{sandbox.bwrap.TMP}/tool.py"
        return {"language": language, "script": path, "source_path": path}
    if language == "java":
        return java_launch(spec, sandbox.bwrap.TMP, limits_of(spec).memory_mb)
    path = f"{sandbox.bwrap.TMP}/tool.js"
    node = node_binary()
    if node is None:
        raise ExecutionError(f"script tool {spec.name!r} needs node, which is not on PATH")
    node = os.path.realpath(node)  # the real file: a link under /usr/local may point away
    return {"language": language, "exec": [node, "-e", _JS_RUNNER, path], "source_path": path}


def result_of(name: str, done: Completed, limits: Limits, timeout_s: float | None) -> Any:
    """The script's JSON result, or the error that explains why there is none."""
    if done.timed_out:
        raise ToolTimeout(
            f"script tool {name!r} timed out after {timeout_s:g} s; its processes were killed"
        )
    if done.overflowed:
        raise ExecutionError(
            f"script tool {name!r} wrote more than {limits.max_output_bytes} bytes to stdout "
            "(metadata.max_output_bytes) and was killed"
        )
    if done.returncode != 0:
        raise ExecutionError(_exit_message(name, done, limits))
    return parse_output(name, done.stdout)


def _exit_message(name: str, done: Completed, limits: Limits) -> str:
    text = f"script tool {name!r} exited with code {done.returncode}"
    tail = done.stderr_tail.strip()
    lowered = tail.lower()
    if "memoryerror" in lowered or "out of memory" in lowered:
        text += f" (out of memory: the limit is {limits.memory_mb} MB, metadata.memory_mb)"
    if "file too large" in lowered:
        text += f" (a file reached the limit of {limits.max_file_mb} MB, metadata.max_file_mb)"
    if tail:
        lines = tail.splitlines()[-20:]
        text += ". stderr (end):\n" + "\n".join(lines)
    return text


def parse_output(name: str, stdout: bytes) -> Any:
    """Whole stdout as JSON, else its last non-empty line; empty stdout means null."""
    text = stdout.decode("utf-8", errors="replace").strip()
    if not text:
        return None
    try:
        return json.loads(text)
    except ValueError:
        pass
    last = text.splitlines()[-1]
    try:
        return json.loads(last)
    except ValueError:
        preview = last if len(last) <= _PREVIEW_CHARS else last[:_PREVIEW_CHARS] + "..."
        raise ExecutionError(
            f"script tool {name!r} printed non-JSON on stdout (the result must be JSON: the "
            f"whole stdout or its last line); last line: {preview!r}"
        ) from None
