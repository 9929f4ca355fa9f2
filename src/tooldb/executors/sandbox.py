"""Subprocess mechanics for script tools: isolation, limits, capped output, tree kill.

The sandbox is bubblewrap's (``bwrap``): the file system view and the namespaces are
in ``bwrap.py``. A Python call goes to the fork server (``forkserver``, Linux): a
long-lived process of the script interpreter, started inside ``bwrap``, that clones a
process per call into new PID, mount, IPC and UTS namespaces and, unless the tool asks
for the network, a new network namespace (only a loopback interface that is down);
that process mounts the call's ``/proc``, ``/tmp`` and ``/dev/shm`` and is the launcher
(``sandbox_launcher``: limits, per-call uid, then the script). Otherwise (JavaScript;
the ``script_forkserver`` setting off; no fork server on this platform) a call runs
``bwrap ... -- python3 -I -S -c <sandbox_launcher> CONFIG`` in a fresh session with an
allow-listed environment. Either way the launcher is process 1 of its PID namespace:
when it exits or is killed, the kernel kills every process the script started, even
those that left the process group.

Where ``bwrap`` is missing or cannot make its namespaces, script calls fail closed
with an error naming what is missing (``isolation().problem``).
"""

from __future__ import annotations

import asyncio
import contextlib
import functools
import json
import os
import secrets
import signal
import socket
import subprocess
import sys
import warnings
from collections.abc import Callable
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

from ..errors import ExecutionError
from . import bwrap, forkserver

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

    bwrap: str  # the bubblewrap binary; empty when it is missing or does not work here
    problem: str  # why scripts cannot run here ("" when they can)
    process_limit: bool  # RLIMIT_NPROC applies (root: per-call real uid)
    forkserver: bool = False  # Python scripts can go through the fork server

    @property
    def available(self) -> bool:
        return not self.problem

    def summary(self) -> dict[str, bool | str]:
        return {
            "sandbox": "bubblewrap" if self.available else f"unavailable: {self.problem}",
            "pid_namespace": self.available,
            "network_namespace": self.available,
            "process_limit": self.process_limit,
            "python_launcher": "forkserver" if self.forkserver else "process",
        }

    def require(self, tool: str) -> None:
        """Fail closed: no script runs without the sandbox."""
        if self.problem:
            raise ExecutionError(f"script tool {tool!r} cannot run: {self.problem}")


@dataclass(frozen=True)
class Completed:
    """How a sandboxed run ended (the caller turns it into a value or an error)."""

    returncode: int
    stdout: bytes
    stderr_tail: str
    timed_out: bool = False
    overflowed: bool = False


@functools.cache
def isolation() -> Isolation:
    """Probe once: a call through ``bwrap`` that makes every namespace and, as root,
    drops to a per-call uid (which makes RLIMIT_NPROC apply); then the fork server."""
    found = bwrap.find() if sys.platform.startswith("linux") else None
    if found is None:
        problem = (
            "the script sandbox needs bubblewrap (`bwrap`), which is not installed "
            "(Debian/Ubuntu: apt-get install bubblewrap; Fedora: dnf install bubblewrap)"
            if sys.platform.startswith("linux")
            else f"the script sandbox needs Linux and bubblewrap (this is {sys.platform})"
        )
        return Isolation("", problem, process_limit=False)
    said = _probe_call(found)
    if said:
        problem = (
            f"bubblewrap ({found}) cannot make the script sandbox here (it needs user "
            f"namespaces, or root; mount, PID and network namespaces): {said}"
        )
        return Isolation("", problem, process_limit=False)
    process_limit = os.geteuid() == 0
    return Isolation(found, "", process_limit, _probe_forkserver(found, process_limit))


def _probe_call(found: str) -> str:
    """Run the launcher's probe through bwrap as a call would; what went wrong, or ""."""
    source = _memfd("tooldb-probe", b"")
    argv = bwrap.call_argv(found, _programs(), network=False, tmp_bytes=MIB, source=(source, "p"))
    try:
        done = subprocess.run(
            [*argv, *_launcher_argv(_probe_config())],
            capture_output=True,
            timeout=10,
            stdin=subprocess.DEVNULL,
            pass_fds=[source],
            env={"PATH": DEFAULT_PATH},
        )
    except (OSError, subprocess.SubprocessError) as exc:
        return str(exc)
    finally:
        os.close(source)
    if done.returncode != 0:
        return done.stderr.decode(errors="replace").strip()[-500:] or f"exit {done.returncode}"
    return ""


def _programs() -> tuple[str, ...]:
    """The interpreters scripts run on, which the sandbox's view must hold."""
    from .script import node_binary  # script imports this module

    node = node_binary()
    return (script_python(), node) if node else (script_python(),)


def python_launcher(use_forkserver: bool = True) -> str:
    """Which path Python scripts take here: ``forkserver`` or ``process``."""
    return "forkserver" if use_forkserver and isolation().forkserver else "process"


def _probe_config() -> dict[str, Any]:
    """The probe checks that the launcher can drop root (when root)."""
    return {
        "probe": True,
        "language": "python",
        "limits": asdict(Limits()),
        "uid": _call_uid() if os.geteuid() == 0 else None,
        "workdir": bwrap.TMP,
        "stderr_tail": STDERR_TAIL_BYTES,
    }


def _probe_forkserver(found: str, process_limit: bool) -> bool:
    """Start the fork server and have it run a probe call (new PID and network
    namespaces, limits, the uid switch when root); stop it if that fails."""
    needs = (hasattr(os, "pidfd_open"), hasattr(signal, "pidfd_send_signal"),
             hasattr(socket, "send_fds"))  # fmt: skip
    if not sys.platform.startswith("linux") or not all(needs):
        return False
    config = {
        **_probe_config(),
        "uid": _call_uid() if process_limit else None,
        "env": {},
        "source": "",
        "source_path": f"{bwrap.TMP}/tool.py",
    }
    try:
        server = _server(found)
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
    python = os.path.realpath(script_python())  # a virtualenv's link is not in the view
    return [python, "-I", "-S", "-X", "utf8", "-c", _LAUNCHER, json.dumps(config)]


def _server(found: str) -> forkserver.ForkServer:
    return forkserver.get(script_python(), _LAUNCHER, bwrap.server_argv(found, _programs()))


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


def command(limits: Limits, launch: dict[str, Any], source_fd: int) -> list[str]:
    """The argv of one sandboxed run: bwrap (the source read from ``source_fd`` into
    the call's /tmp), the launcher and its JSON config."""
    name = os.path.basename(launch["source_path"])
    prefix = bwrap.call_argv(
        isolation().bwrap,
        _programs(),
        network=limits.network,
        tmp_bytes=2 * limits.max_file_mb * MIB,  # as sandbox_launcher._private_tmp
        source=(source_fd, name),
    )
    return [*prefix, *_launcher_argv(_config(limits, launch))]


def _config(limits: Limits, launch: dict[str, Any]) -> dict[str, Any]:
    """The launcher's config, the same on both paths (the source is not in it)."""
    return {
        **launch,
        "limits": asdict(limits),
        "uid": _call_uid() if isolation().process_limit else None,
        "workdir": bwrap.TMP,
        "stderr_tail": STDERR_TAIL_BYTES,
    }


def _call_uid() -> int:
    return SANDBOX_UID_BASE + secrets.randbelow(SANDBOX_UID_SPAN)


def environment(limits: Limits) -> dict[str, str]:
    """Nothing from the parent but the allow-list; home and temp dir: the call's /tmp."""
    env = {"PATH": DEFAULT_PATH, "HOME": bwrap.TMP, "TMPDIR": bwrap.TMP, "LANG": "C.UTF-8"}
    for name in limits.env:
        if name in os.environ:
            env[name] = os.environ[name]
    return env


async def run_script(
    limits: Limits,
    launch: dict[str, Any],
    source: str,
    *,
    stdin: bytes,
    timeout_s: float | None,
    use_forkserver: bool = True,
    tool: str = "",
) -> Completed:
    """Run one call: through the fork server when it can take it (Python, on a platform
    where it works, ``use_forkserver``), else as a process of its own. ``launch`` names
    where the source goes in the call's /tmp (``source_path``) and how to run it."""
    found = isolation()
    found.require(tool)
    env = environment(limits)
    if use_forkserver and launch.get("language") == "python" and found.forkserver:
        config = {**_config(limits, launch), "env": env, "source": source}
        forked = await _Forked.start(config, stdin)
        if forked is not None:
            return await forked.finish(limits.max_output_bytes, timeout_s)
    source_fd = _memfd("tooldb-source", source.encode())
    try:
        return await run_sandboxed(
            command(limits, launch, source_fd),
            stdin=stdin,
            env=env,
            max_output_bytes=limits.max_output_bytes,
            timeout_s=timeout_s,
            pass_fds=(source_fd,),
        )
    finally:
        os.close(source_fd)


async def run_sandboxed(
    argv: list[str],
    *,
    stdin: bytes,
    env: dict[str, str],
    max_output_bytes: int,
    timeout_s: float | None,
    pass_fds: tuple[int, ...] = (),
) -> Completed:
    """Run as a process of its own, feed stdin, collect capped stdout and a stderr
    tail; kill the tree when done."""
    proc = await asyncio.create_subprocess_exec(
        *argv,
        stdin=asyncio.subprocess.PIPE,
        stdout=asyncio.subprocess.PIPE,
        stderr=asyncio.subprocess.PIPE,
        cwd="/",
        env=env,
        start_new_session=True,
        pass_fds=pass_fds,
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
                    call = _server(isolation().bwrap).spawn(request, theirs)
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
        if proc.returncode is None:
            kill_tree(proc)  # the timeout or an overflow: bwrap's death ends the namespace
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
