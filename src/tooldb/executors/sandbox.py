"""Subprocess mechanics for script tools: isolation, limits, capped output, tree kill.

A Python call goes to the fork server (``forkserver``, Linux): a long-lived process of
the script interpreter that clones a process per call into a new PID namespace and,
unless the tool asks for the network, a new network namespace (only a loopback
interface that is down); that process is the launcher (``sandbox_launcher``: limits,
per-call uid, then the script). Otherwise (JavaScript; the ``script_forkserver``
setting off; no fork server on this platform) a call runs
``[unshare ...] python3 -I -S -c <sandbox_launcher> CONFIG`` in a fresh session, in a
scratch directory, with an allow-listed environment: ``unshare`` (util-linux) gives
it the same two namespaces. Either way the launcher is process 1 of its PID
namespace: when it exits or is killed, the kernel kills every process the script
started, even those that left the process group.

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
import socket
import subprocess
import sys
import threading
import warnings
from collections.abc import Callable
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

from . import forkserver

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
    forkserver: bool = False  # Python scripts can go through the fork server

    def summary(self) -> dict[str, bool | str]:
        return {
            "pid_namespace": self.pid_namespace,
            "network_namespace": self.network_namespace,
            "process_limit": self.process_limit,
            "python_launcher": "forkserver" if self.forkserver else "process",
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
    forkserver = _probe_forkserver(process_limit)
    return Isolation(tuple(prefix), bool(prefix), network, process_limit, forkserver)


def python_launcher(use_forkserver: bool = True) -> str:
    """Which path Python scripts take here: ``forkserver`` or ``process``."""
    return "forkserver" if use_forkserver and isolation().forkserver else "process"


def _probe_config() -> dict[str, Any]:
    """No scratch dir: the probe only checks that the launcher can drop root."""
    return {
        "probe": True,
        "language": "python",
        "limits": asdict(Limits()),
        "uid": _call_uid(),
        "stderr_tail": STDERR_TAIL_BYTES,
    }


def _probe_forkserver(process_limit: bool) -> bool:
    """Start the fork server and have it run a probe call (new PID and network
    namespaces, limits, the uid switch when root); stop it if that fails."""
    needs = (hasattr(os, "pidfd_open"), hasattr(signal, "pidfd_send_signal"),
             hasattr(socket, "send_fds"))  # fmt: skip
    if not sys.platform.startswith("linux") or not all(needs):
        return False
    config = {
        **_probe_config(),
        "uid": _call_uid() if process_limit else None,
        "workdir": None,
        "env": {},
    }
    try:
        server = forkserver.get(script_python(), _LAUNCHER)
    except OSError as exc:
        return _forkserver_unavailable(str(exc))
    fds = [_memfd("tooldb-probe-in", b""), _memfd("tooldb-probe-out", b"")]
    fds += [fds[1], _memfd("tooldb-call", json.dumps(config).encode())]  # stderr: as stdout
    try:
        code = server.spawn({"network": False}, fds).exited.result(timeout=10)
        said = os.pread(fds[1], STDERR_TAIL_BYTES, 0).decode(errors="replace").strip()
        problem = f"exit code {code}: {said}" if code else ""
    except (forkserver.ForkServerError, TimeoutError) as exc:
        problem = str(exc) or "no answer in 10 s"
    finally:
        for fd in {*fds}:
            os.close(fd)
    if problem:
        server.close()
        return _forkserver_unavailable(problem)
    return True


def _forkserver_unavailable(why: str) -> bool:
    warnings.warn(
        f"tooldb script tools: the fork server does not work here ({why}); Python "
        "scripts start a process of their own per call",
        RuntimeWarning,
        stacklevel=4,
    )
    return False


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
    launcher = _launcher_argv(_config(limits, launch, workdir))
    return [*prefix, "--", *launcher] if prefix else launcher


def _config(limits: Limits, launch: dict[str, Any], workdir: Path) -> dict[str, Any]:
    """The launcher's config, the same on both paths."""
    return {
        **launch,
        "limits": asdict(limits),
        "uid": _call_uid() if isolation().process_limit else None,
        "workdir": str(workdir),
        "stderr_tail": STDERR_TAIL_BYTES,
    }


def _call_uid() -> int:
    return SANDBOX_UID_BASE + secrets.randbelow(SANDBOX_UID_SPAN)


def environment(limits: Limits, workdir: Path) -> dict[str, str]:
    """Nothing from the parent but the allow-list, plus a home and temp dir in the scratch dir."""
    env = {"PATH": DEFAULT_PATH, "HOME": str(workdir), "TMPDIR": str(workdir), "LANG": "C.UTF-8"}
    for name in limits.env:
        if name in os.environ:
            env[name] = os.environ[name]
    return env


async def run_script(
    limits: Limits,
    launch: dict[str, Any],
    workdir: Path,
    *,
    stdin: bytes,
    timeout_s: float | None,
    use_forkserver: bool = True,
) -> Completed:
    """Run one call: through the fork server when it can take it (Python, on a platform
    where it works, ``use_forkserver``), else as a process of its own."""
    env = environment(limits, workdir)
    if use_forkserver and launch.get("language") == "python" and isolation().forkserver:
        config = {**_config(limits, launch, workdir), "env": env}
        forked = await _Forked.start(config, stdin)
        if forked is not None:
            return await forked.finish(limits.max_output_bytes, timeout_s)
    return await run_sandboxed(
        command(limits, launch, workdir),
        stdin=stdin,
        workdir=workdir,
        env=env,
        max_output_bytes=limits.max_output_bytes,
        timeout_s=timeout_s,
    )


async def run_sandboxed(
    argv: list[str],
    *,
    stdin: bytes,
    workdir: Path,
    env: dict[str, str],
    max_output_bytes: int,
    timeout_s: float | None,
) -> Completed:
    """Run as a process of its own, feed stdin, collect capped stdout and a stderr
    tail; kill the tree when done."""
    proc = await asyncio.create_subprocess_exec(
        *argv,
        stdin=asyncio.subprocess.PIPE,
        stdout=asyncio.subprocess.PIPE,
        stderr=asyncio.subprocess.PIPE,
        cwd=workdir,
        env=env,
        start_new_session=True,
    )
    return await _collect(proc, stdin, max_output_bytes, timeout_s)


class _Forked:
    """A call run by the fork server. Its process 1 collects the script's output and
    leaves it in two memfds when the call ends (``sandbox_launcher._collect``), so here
    a call is only a wait for its exit status: no pipes or readers on the event loop."""

    def __init__(self, call: forkserver.ForkedCall, out: int, err: int) -> None:
        self.call = call
        self.out, self.err = out, err

    @classmethod
    async def start(cls, config: dict[str, Any], stdin: bytes) -> _Forked | None:
        """Hand the call to the server (started again if it died); None when no server
        can be started, so the caller runs it as a process of its own."""
        request = {"network": bool(config["limits"]["network"])}
        out = _memfd("tooldb-stdout", b"")
        err = _memfd("tooldb-stderr", b"")
        theirs: list[int] = []
        call = None
        try:
            theirs = [_memfd("tooldb-arguments", stdin), out, err]
            theirs.append(_memfd("tooldb-call", json.dumps(config).encode()))
            for _ in range(2):  # a server found dead is started again, once
                with contextlib.suppress(OSError, forkserver.ForkServerError):
                    call = forkserver.get(script_python(), _LAUNCHER).spawn(request, theirs)
                    break
        except BaseException:
            _close_fds(out, err, *theirs)
            raise
        _close_fds(theirs[0], theirs[3])  # the server has its copies
        if call is None:
            _close_fds(out, err)
            return None
        return cls(call, out, err)

    async def finish(self, max_output_bytes: int, timeout_s: float | None) -> Completed:
        """Wait for the call to end, then read what its process 1 left in the memfds."""
        try:
            code, timed_out, lost = await self._wait(timeout_s)
            stdout = _read_memfd(self.out)
            tail = _read_memfd(self.err)[-STDERR_TAIL_BYTES:].decode("utf-8", errors="replace")
        finally:
            _close_fds(self.out, self.err)
        if lost:
            tail += "\n" + lost + "\n"
        return Completed(
            returncode=code,
            stdout=stdout[:max_output_bytes],
            stderr_tail=tail,
            timed_out=timed_out,
            overflowed=len(stdout) > max_output_bytes,  # process 1 kept one byte more
        )

    async def _wait(self, timeout_s: float | None) -> tuple[int, bool, str]:
        """(exit code, killed at the timeout, why the call has no status of its own). A
        caller that gives up (cancellation) kills the call."""
        exited = asyncio.wrap_future(self.call.exited)
        try:
            async with asyncio.timeout(timeout_s):
                return await asyncio.shield(exited), False, ""
        except TimeoutError:
            self.call.kill()
            with contextlib.suppress(forkserver.ForkServerError):
                await exited
            return -signal.SIGKILL, True, ""
        except forkserver.ForkServerError as exc:
            return -signal.SIGKILL, False, f"tooldb sandbox: {exc}"
        except BaseException:
            self.call.kill()
            raise


def _read_memfd(fd: int) -> bytes:
    return os.pread(fd, os.fstat(fd).st_size, 0)


def _close_fds(*fds: int) -> None:
    for fd in fds:
        with contextlib.suppress(OSError):
            os.close(fd)


async def _collect(
    proc: asyncio.subprocess.Process, stdin: bytes, max_output_bytes: int, timeout_s: float | None
) -> Completed:
    """Feed stdin, collect capped stdout and a stderr tail; kill the tree when done."""
    assert proc.stdin and proc.stdout and proc.stderr
    overflowed = False

    def overflow() -> None:
        nonlocal overflowed
        overflowed = True
        kill_tree(proc)

    feed = asyncio.ensure_future(_feed(proc.stdin, stdin))
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
        for task in (feed, out, err):
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


def _memfd(name: str, data: bytes) -> int:
    """An anonymous file holding ``data``, read from its start by whoever gets the fd."""
    fd = os.memfd_create(name, os.MFD_CLOEXEC)
    try:
        view = memoryview(data)
        while view:
            view = view[os.write(fd, view) :]
        os.lseek(fd, 0, os.SEEK_SET)
    except BaseException:
        os.close(fd)
        raise
    return fd


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
