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
from typing import Any, Protocol

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
    return {"probe": True, "language": "python", "limits": asdict(Limits()), "uid": _call_uid()}


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
        child = await _Forked.start(config, stdin)
        if child is not None:
            return await _collect(child, stdin, limits.max_output_bytes, timeout_s)
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
    return await _collect(_Process(proc), stdin, max_output_bytes, timeout_s)


class _Child(Protocol):
    """A started call, whichever way it was started."""

    stdout: asyncio.StreamReader
    stderr: asyncio.StreamReader
    kill_after_exit: bool  # leftovers may outlive process 1 (no PID namespace)
    lost: str  # why the call ended without its own exit status, if it did

    @property
    def stdin(self) -> asyncio.StreamWriter | None: ...  # None: the input is already there

    @property
    def returncode(self) -> int | None: ...

    def kill(self) -> None: ...

    async def wait(self) -> int: ...

    def close(self) -> None: ...


class _Process:
    """A call run as a process of its own (``asyncio.subprocess``)."""

    def __init__(self, proc: asyncio.subprocess.Process) -> None:
        assert proc.stdin and proc.stdout and proc.stderr
        self.proc = proc
        self.stdin, self.stdout, self.stderr = proc.stdin, proc.stdout, proc.stderr
        self.kill_after_exit = not isolation().pid_namespace
        self.lost = ""

    @property
    def returncode(self) -> int | None:
        return self.proc.returncode

    def kill(self) -> None:
        kill_tree(self.proc)

    async def wait(self) -> int:
        return await self.proc.wait()

    def close(self) -> None:
        pass  # asyncio's subprocess transport closes the pipes


class _Forked:
    """A call run by the fork server: our pipe ends, and the server's handle on it."""

    kill_after_exit = False  # always process 1 of its own PID namespace

    stdin = None  # the arguments are already in the call's stdin, a memfd

    def __init__(
        self,
        call: forkserver.ForkedCall,
        streams: tuple[asyncio.StreamReader, asyncio.StreamReader],
        transports: list[asyncio.BaseTransport],
    ) -> None:
        self.call = call
        self.stdout, self.stderr = streams
        self.transports = transports
        self.code: int | None = None
        self.lost = ""

    @classmethod
    async def start(cls, config: dict[str, Any], stdin: bytes) -> _Forked | None:
        """Hand the call to the server (started again if it died); None when no server
        can be started, so the caller runs it as a process of its own."""
        out, err = os.pipe(), os.pipe()  # not inheritable
        files = [open(out[0], "rb", buffering=0), open(err[0], "rb", buffering=0)]  # noqa: SIM115
        theirs = [out[1], err[1]]
        request = {"network": bool(config["limits"]["network"])}
        call = None
        try:
            theirs.insert(0, _memfd("tooldb-arguments", stdin))  # stdin
            theirs.append(_memfd("tooldb-call", json.dumps(config).encode()))
            for _ in range(2):  # a server found dead is started again, once
                with contextlib.suppress(OSError, forkserver.ForkServerError):
                    call = forkserver.get(script_python(), _LAUNCHER).spawn(request, theirs)
                    break
        except BaseException:
            for file in files:
                file.close()
            raise
        finally:
            for fd in theirs:
                os.close(fd)
        if call is None:
            for file in files:
                file.close()
            return None
        loop = asyncio.get_running_loop()
        transports: list[asyncio.BaseTransport] = []
        readers = []
        try:
            for file in files:
                reader = asyncio.StreamReader(loop=loop)
                transport, _ = await loop.connect_read_pipe(
                    functools.partial(asyncio.StreamReaderProtocol, reader, loop=loop), file
                )
                transports.append(transport)
                readers.append(reader)
        except BaseException:
            call.kill()
            for opened in transports:
                opened.close()
            for file in files[len(transports) :]:
                file.close()
            raise
        return cls(call, (readers[0], readers[1]), transports)

    @property
    def returncode(self) -> int | None:
        return self.code

    def kill(self) -> None:
        self.call.kill()

    async def wait(self) -> int:
        if self.code is None:
            try:
                self.code = await asyncio.wrap_future(self.call.exited)
            except forkserver.ForkServerError as exc:
                self.lost = f"tooldb sandbox: {exc}"
                self.code = -signal.SIGKILL
        return self.code

    def close(self) -> None:
        for transport in self.transports:
            transport.close()


async def _collect(
    child: _Child, stdin: bytes, max_output_bytes: int, timeout_s: float | None
) -> Completed:
    """Feed stdin, collect capped stdout and a stderr tail; kill the tree when done."""
    overflowed = False

    def overflow() -> None:
        nonlocal overflowed
        overflowed = True
        child.kill()

    tasks = [asyncio.ensure_future(_feed(child.stdin, stdin))] if child.stdin else []
    out = asyncio.ensure_future(_read_capped(child.stdout, max_output_bytes, overflow))
    err = asyncio.ensure_future(_read_tail(child.stderr, STDERR_TAIL_BYTES))
    timed_out = False
    try:
        async with asyncio.timeout(timeout_s):
            await asyncio.gather(out, err)
            await child.wait()
    except TimeoutError:
        timed_out = True
    finally:
        if child.returncode is None or child.kill_after_exit:
            child.kill()  # the timeout, an overflow, or leftovers without a PID namespace
        for task in (*tasks, out, err):
            task.cancel()
        await child.wait()
        child.close()
    stdout = out.result() if out.done() and not out.cancelled() else b""
    tail = err.result() if err.done() and not err.cancelled() else b""
    stderr_tail = tail.decode("utf-8", errors="replace")
    if child.lost:
        stderr_tail += "\n" + child.lost + "\n"
    return Completed(
        returncode=child.returncode if child.returncode is not None else -signal.SIGKILL,
        stdout=stdout,
        stderr_tail=stderr_tail,
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
