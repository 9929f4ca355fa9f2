"""Subprocess mechanics for script tools: isolation, limits, capped output, tree kill.

A call runs ``[unshare ...] python3 -I -S -c <sandbox_launcher> CONFIG`` in a fresh
session, in a scratch directory, with an allow-listed environment. ``unshare``
(util-linux) gives the call its own PID namespace (when the launcher, process 1
there, exits or is killed, the kernel kills every process the script started,
even those that left the process group) and, unless the tool asks for the
network, its own network namespace (only a loopback interface that is down).
The launcher applies the resource limits and runs the script (see its docstring).

What is enforced depends on the platform and is reported by ``isolation()``:
without ``unshare`` (or the right to use it) the tree kill falls back to the
process group, and the network is not isolated (a warning says so once).
"""

from __future__ import annotations

import asyncio
import contextlib
import functools
import json
import os
import secrets
import shutil
import signal
import subprocess
import sys
import threading
import warnings
from collections.abc import Callable
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

MIB = 1024 * 1024
DEFAULT_PATH = "/usr/local/bin:/usr/bin:/bin"
STDERR_TAIL_BYTES = 4096
READ_CHUNK = 64 * 1024
# Per-call real uids for scripts run by root, far above any system's regular users.
SANDBOX_UID_BASE = 1_900_000_000
SANDBOX_UID_SPAN = 100_000_000
_LAUNCHER = (Path(__file__).with_name("sandbox_launcher.py")).read_text(encoding="utf-8")


@dataclass(frozen=True)
class Limits:
    """Per-call limits (``metadata`` keys of a script tool, see docs/scripts.md)."""

    memory_mb: int = 512
    cpu_s: float | None = None
    max_output_bytes: int = 10 * MIB
    max_processes: int = 64
    max_file_mb: int = 100
    max_open_files: int = 1024
    network: bool = False
    env: tuple[str, ...] = field(default_factory=tuple)


@dataclass(frozen=True)
class Isolation:
    """What this platform lets the sandbox enforce (probed once per process)."""

    unshare: tuple[str, ...]  # the prefix without --net; empty when unavailable
    pid_namespace: bool
    network_namespace: bool
    process_limit: bool  # RLIMIT_NPROC applies (root: per-call real uid)

    def summary(self) -> dict[str, bool]:
        return {
            "pid_namespace": self.pid_namespace,
            "network_namespace": self.network_namespace,
            "process_limit": self.process_limit,
        }


@dataclass(frozen=True)
class Completed:
    """How a sandboxed run ended (the caller turns it into a value or an error)."""

    returncode: int
    stdout: bytes
    stderr_tail: str
    timed_out: bool = False
    overflowed: bool = False


def _probe(argv: list[str]) -> bool:
    try:
        done = subprocess.run(argv, capture_output=True, timeout=10, stdin=subprocess.DEVNULL)
    except (OSError, subprocess.SubprocessError):
        return False
    return done.returncode == 0


@functools.cache
def isolation() -> Isolation:
    """Probe once: ``unshare`` (as root directly, else through a user namespace), and
    whether the launcher can make RLIMIT_NPROC apply (root only, see its docstring)."""
    unshare = shutil.which("unshare")
    prefix: list[str] = []
    network = False
    if unshare is not None:
        base = [unshare] if os.geteuid() == 0 else [unshare, "--user", "--map-root-user"]
        candidate = [*base, "--pid", "--fork", "--kill-child"]
        if _probe([*candidate, "--net", "--", "true"]):
            prefix, network = candidate, True
        elif _probe([*candidate, "--", "true"]):
            prefix = candidate
    process_limit = os.geteuid() == 0 and _probe(_launcher_argv(_probe_config()))
    return Isolation(tuple(prefix), bool(prefix), network, process_limit)


def _probe_config() -> dict[str, Any]:
    """No scratch dir: the probe only checks that the launcher can drop root."""
    return {"probe": True, "language": "python", "limits": asdict(Limits()), "uid": _call_uid()}


def _launcher_argv(config: dict[str, Any]) -> list[str]:
    return [script_python(), "-I", "-S", "-X", "utf8", "-c", _LAUNCHER, json.dumps(config)]


@functools.cache
def script_python() -> str:
    """The interpreter scripts run on: ``$TOOLDB_SCRIPT_PYTHON``; else, for root, the
    system's ``python3`` (a script drops to an unprivileged uid, which cannot read a
    virtualenv or pyenv under root's private home); else this process's interpreter.
    Scripts get the standard library only (``-I``), whichever it is."""
    explicit = os.environ.get("TOOLDB_SCRIPT_PYTHON")
    if explicit:
        return explicit
    if os.geteuid() == 0:
        for candidate in ("/usr/bin/python3", "/usr/local/bin/python3"):
            if os.access(candidate, os.X_OK) and _world_readable_path(candidate):
                return candidate
    return sys.executable


def _world_readable_path(path: str) -> bool:
    """Every directory on the way to the real file can be entered by anyone."""
    real = Path(os.path.realpath(path))
    return all(os.stat(parent).st_mode & 0o001 for parent in real.parents)


_warned = threading.Event()


def _warn_network_once() -> None:
    if not _warned.is_set():
        _warned.set()
        warnings.warn(
            "tooldb script tools: network isolation is not enforced on this platform "
            "(no usable `unshare --net`); scripts with network: false can still connect",
            RuntimeWarning,
            stacklevel=4,
        )


def command(limits: Limits, launch: dict[str, Any], workdir: Path) -> list[str]:
    """The argv of one sandboxed run: isolation prefix, launcher and its JSON config
    (``workdir``: the call's scratch dir, handed to the unprivileged uid)."""
    found = isolation()
    prefix = list(found.unshare)
    if not limits.network:
        if found.network_namespace:
            prefix.append("--net")
        else:
            _warn_network_once()
    config = {
        **launch,
        "limits": asdict(limits),
        "uid": _call_uid() if found.process_limit else None,
        "workdir": str(workdir),
    }
    launcher = _launcher_argv(config)
    return [*prefix, "--", *launcher] if prefix else launcher


def _call_uid() -> int:
    return SANDBOX_UID_BASE + secrets.randbelow(SANDBOX_UID_SPAN)


def environment(limits: Limits, workdir: Path) -> dict[str, str]:
    """Nothing from the parent but the allow-list, plus a home and temp dir in the scratch dir."""
    env = {"PATH": DEFAULT_PATH, "HOME": str(workdir), "TMPDIR": str(workdir), "LANG": "C.UTF-8"}
    for name in limits.env:
        if name in os.environ:
            env[name] = os.environ[name]
    return env


async def run_sandboxed(
    argv: list[str],
    *,
    stdin: bytes,
    workdir: Path,
    env: dict[str, str],
    max_output_bytes: int,
    timeout_s: float | None,
) -> Completed:
    """Run, feed stdin, collect capped stdout and a stderr tail; kill the tree when done."""
    proc = await asyncio.create_subprocess_exec(
        *argv,
        stdin=asyncio.subprocess.PIPE,
        stdout=asyncio.subprocess.PIPE,
        stderr=asyncio.subprocess.PIPE,
        cwd=workdir,
        env=env,
        start_new_session=True,
    )
    assert proc.stdin and proc.stdout and proc.stderr
    overflowed = False

    def overflow() -> None:
        nonlocal overflowed
        overflowed = True
        kill_tree(proc)

    feeder = asyncio.ensure_future(_feed(proc.stdin, stdin))
    out = asyncio.ensure_future(_read_capped(proc.stdout, max_output_bytes, overflow))
    err = asyncio.ensure_future(_read_tail(proc.stderr, STDERR_TAIL_BYTES))
    timed_out = False
    try:
        async with asyncio.timeout(timeout_s):
            await asyncio.gather(out, err)
            await proc.wait()
    except TimeoutError:
        timed_out = True
    finally:
        if proc.returncode is None or not isolation().pid_namespace:
            kill_tree(proc)  # the timeout, an overflow, or leftovers without a PID namespace
        for task in (feeder, out, err):
            task.cancel()
        await proc.wait()
    stdout = out.result() if out.done() and not out.cancelled() else b""
    tail = err.result() if err.done() and not err.cancelled() else b""
    return Completed(
        returncode=proc.returncode if proc.returncode is not None else -signal.SIGKILL,
        stdout=stdout,
        stderr_tail=tail.decode("utf-8", errors="replace"),
        timed_out=timed_out,
        overflowed=overflowed,
    )


def kill_tree(proc: asyncio.subprocess.Process) -> None:
    """SIGKILL the session's process group (with a PID namespace, that ends them all)."""
    with contextlib.suppress(ProcessLookupError, PermissionError):
        os.killpg(proc.pid, signal.SIGKILL)


async def _feed(stream: asyncio.StreamWriter, data: bytes) -> None:
    """Write the arguments; a script that does not read them is not an error."""
    try:
        stream.write(data)
        await stream.drain()
    except (BrokenPipeError, ConnectionResetError):
        pass
    finally:
        with contextlib.suppress(BrokenPipeError, ConnectionResetError):
            stream.close()


async def _read_capped(
    stream: asyncio.StreamReader, cap: int, on_overflow: Callable[[], None]
) -> bytes:
    """Read up to ``cap`` bytes; past it, call ``on_overflow`` (which kills) and stop."""
    buffer = bytearray()
    while chunk := await stream.read(READ_CHUNK):
        buffer += chunk
        if len(buffer) > cap:
            on_overflow()
            return bytes(buffer[:cap])
    return bytes(buffer)


async def _read_tail(stream: asyncio.StreamReader, keep: int) -> bytes:
    """Read everything, keep only the last ``keep`` bytes."""
    buffer = bytearray()
    while chunk := await stream.read(READ_CHUNK):
        buffer += chunk
        if len(buffer) > 2 * keep:
            del buffer[:-keep]
    return bytes(buffer[-keep:])
