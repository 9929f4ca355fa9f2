"""The first process inside a script tool's sandbox (standard library only).

Both paths run inside bubblewrap's view of the file system (see bwrap.py) and share
these functions:

* Per process (JavaScript, and Python where the fork server is off or unavailable):
  the host runs ``bwrap ... -- python -I -S -c <this file> CONFIG``; ``launch`` does
  the rest.
* As the fork server (``--serve FD SPARES``, Python scripts on Linux): a long-lived
  process started inside bwrap with an empty environment; it never runs user code and
  never reads a call's config. ``Zygote`` keeps SPARES spares ready: a process cloned
  into new PID, mount, IPC, UTS and network namespaces (``spare``: process 1 there,
  with a fresh /proc, in a new session, having forked the script's process; both
  wait). Per call the host sends, on the Unix socket FD, the call's id and network
  flag with four fds: stdin (a memfd of the arguments), empty memfds for stdout and
  stderr, and a memfd of the config (the per-process one plus the environment and the
  source). The server hands them to a spare (or clones one: tools with the network
  keep the server's), sends the host a pidfd of its process 1 and goes back to
  serving; it reaps that process later and sends its exit status. Process 1 mounts
  the call's own /tmp and /dev/shm, writes the source there, passes the call to the
  script's process with pipes for stdout and stderr, collects them (``_collect``),
  reaps as ``launch`` does and leaves the output in the memfds. The server makes
  spares again after 10 ms idle.

The launcher is process 1 of the call's PID namespace (which ignores signals it has
no handler for, and reaps orphans), so it forks the script: the child applies the
limits (here: RLIMIT_NPROC counts per *real* uid, and not for root), gives up root for
good when run as root (``_drop_root``) and becomes the script; this process reaps
everything and exits with its status, which ends the namespace.
"""

from __future__ import annotations

import ctypes
import errno
import gc
import json
import math
import os
import resource
import signal
import sys
import time
from typing import Any, NoReturn

MIB = 1024 * 1024
_TMP = "/tmp"
_PR_SET_NO_NEW_PRIVS = 38
# Made once: a CDLL builds a class of its own (the fork server's calls would each pay).
_LIBC = ctypes.CDLL(None, use_errno=True)


def _drop_root(uid: int, workdir: str | None) -> None:
    """Become ``uid`` (and gid ``uid``) for good: no groups, no capabilities, no way back.
    Only the call's own scratch directory (its ``/tmp``, a tmpfs of its own) is given."""
    if workdir not in (None, _TMP):
        raise OSError(f"refusing to hand {workdir!r} to the sandbox: not the call's /tmp")
    for root, dirs, files in os.walk(workdir or "", topdown=False):  # a 0700 dir last
        for name in [*(os.path.join(root, n) for n in dirs + files), root]:
            os.chown(name, uid, uid, follow_symlinks=False)
    os.setgroups([])
    os.setresgid(uid, uid, uid)
    os.setresuid(uid, uid, uid)  # all three ids non-zero: the kernel clears every capability
    if _LIBC.prctl(_PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) != 0:
        raise OSError(ctypes.get_errno(), "prctl(PR_SET_NO_NEW_PRIVS) failed")
    if os.getuid() == 0 or os.geteuid() == 0:
        raise OSError("the sandbox could not give up root")


def _lower(kind: int, value: int) -> None:
    _, hard = resource.getrlimit(kind)
    if hard != resource.RLIM_INFINITY:
        value = min(value, hard)
    resource.setrlimit(kind, (value, value))


def _cpu_seconds(limits: dict[str, Any]) -> int | None:
    cpu_s = limits.get("cpu_s")
    return None if cpu_s is None else max(1, math.ceil(float(cpu_s)))


def _apply_limits(config: dict[str, Any]) -> None:
    limits: dict[str, Any] = config["limits"]
    memory = int(limits["memory_mb"]) * MIB
    _lower(resource.RLIMIT_DATA, memory)
    if config["language"] == "python":
        # V8 reserves ~750 MB of address space at start, so node gets RLIMIT_DATA only.
        _lower(resource.RLIMIT_AS, memory)
    _lower(resource.RLIMIT_FSIZE, int(limits["max_file_mb"]) * MIB)
    _lower(resource.RLIMIT_CORE, 0)
    _lower(resource.RLIMIT_NOFILE, int(limits["max_open_files"]))
    cpu = _cpu_seconds(limits)
    if cpu is not None:
        resource.setrlimit(resource.RLIMIT_CPU, (cpu, cpu + 1))
    if config.get("uid") is not None:
        _drop_root(int(config["uid"]), config.get("workdir"))
        _lower(resource.RLIMIT_NPROC, int(limits["max_processes"]))


def _run_python(path: str, namespace: dict[str, Any]) -> None:
    """Run the tool's source in ``namespace``: the function form if it defines ``main``,
    else as a script."""
    with open(path, encoding="utf-8") as handle:
        code = compile(handle.read(), os.path.basename(path), "exec")
    # A module-level ``def main`` (cheaper to find in the code object than with ast).
    function_form = "main" in code.co_names and any(
        isinstance(const, type(code)) and const.co_name == "main" for const in code.co_consts
    )
    namespace.update(
        __name__="__tool__" if function_form else "__main__",
        __file__=path,
        __builtins__=__builtins__,
    )
    sys.argv = [path]
    exec(code, namespace)
    if not function_form:
        return
    value = namespace["main"](**json.load(sys.stdin))
    if hasattr(value, "__await__"):
        import asyncio  # only async tools pay for the import

        value = asyncio.run(_wait(value))
    try:
        text = json.dumps(value, ensure_ascii=False)
    except (TypeError, ValueError) as exc:
        sys.stderr.write(f"main() returned a value that cannot be written as JSON: {exc}\n")
        raise SystemExit(1) from None
    sys.stdout.write("\n" + text + "\n")


async def _wait(awaitable: Any) -> Any:
    return await awaitable


def _print_user_traceback(exc: BaseException) -> None:
    """The traceback from the tool's own frames on (this launcher's are noise)."""
    import traceback

    tb = exc.__traceback__
    while tb is not None and tb.tb_frame.f_code.co_filename == "<string>":
        tb = tb.tb_next
    traceback.print_exception(type(exc), exc, tb)


def _describe(signum: int, limits: dict[str, Any], cpu_used: float) -> str:
    name = signal.Signals(signum).name if signum in signal.valid_signals() else str(signum)
    cpu = _cpu_seconds(limits)
    text = f"tooldb sandbox: the script was killed by signal {name}"
    if cpu is not None and (
        signum == signal.SIGXCPU or (signum == signal.SIGKILL and cpu_used >= cpu - 0.1)
    ):
        return f"{text}: it used its CPU time limit of {limits['cpu_s']:g} s (metadata.cpu_s)"
    if signum == signal.SIGXFSZ:
        return f"{text}: it wrote a file past {limits['max_file_mb']} MB (metadata.max_file_mb)"
    return text


def _reap(child: int, limits: dict[str, Any]) -> tuple[int, str]:
    """Wait for the script, reaping orphans meanwhile; return the exit code to report and
    what to add to its stderr (why it was killed, if it was)."""
    while True:
        try:
            pid, status, usage = os.wait4(-1, 0)
        except ChildProcessError:
            return 1, ""
        if pid != child:
            continue
        if os.WIFSIGNALED(status):
            signum = os.WTERMSIG(status)
            cpu_used = usage.ru_utime + usage.ru_stime
            return 128 + signum, "\n" + _describe(signum, limits, cpu_used) + "\n"
        return os.waitstatus_to_exitcode(status), ""


def _child(config: dict[str, Any]) -> None:
    try:
        _apply_limits(config)
    except BaseException as exc:
        sys.stderr.write(f"tooldb sandbox: cannot apply limits: {exc}\n")
        os._exit(125)
    if config.get("probe"):
        os._exit(0)
    gc.enable()  # off in the fork server
    command = config.get("exec")
    if command:
        os.execv(command[0], command)
    namespace: dict[str, Any] = {}
    try:
        _run_python(config["script"], namespace)
        code = 0
    except SystemExit as exc:
        code = _exit_code(exc)
    except BaseException as exc:
        _print_user_traceback(exc)
        code = 1
    _finish(code, namespace)


def _exit_code(exc: SystemExit) -> int:
    """The status the interpreter would exit with (it prints a non-integer code)."""
    if exc.code is None:
        return 0
    if isinstance(exc.code, int):
        return exc.code
    sys.stderr.write(f"{exc.code}\n")
    return 1


def _finish(code: int, namespace: dict[str, Any]) -> None:
    """Exit as the interpreter would, as far as a script can tell: wait for its
    non-daemon threads, run its atexit callbacks, drop its globals (their open files are
    flushed and closed), flush stdio. Then ``_exit``, skipping the teardown of every
    module: in a process forked from the fork server that would write to, and so copy,
    most of the server's memory, ~10 ms a call for nothing."""
    threading = sys.modules.get("threading")
    if threading is not None:
        threading._shutdown()
    import atexit

    atexit._run_exitfuncs()
    namespace.clear()
    for stream in (sys.stdout, sys.stderr):
        try:
            stream.flush()
        except (OSError, ValueError):
            code = 120  # as the interpreter: stdio could not be flushed
    os._exit(code & 0xFF)


def launch(config: dict[str, Any]) -> None:
    """Per process: fork the script (it returns in the child, to run it and exit as it
    does); in this process, reap everything and exit with the script's status."""
    child = os.fork()
    if child == 0:
        _child(config)
        return
    code, said = _reap(child, config["limits"])
    sys.stderr.write(said)
    sys.stderr.flush()
    os._exit(code)  # no user code ran here: nothing to finalize


# -- the fork server -------------------------------------------------------------

_CLONE_NEWNS, _CLONE_NEWUTS, _CLONE_NEWIPC = 0x00020000, 0x04000000, 0x08000000
_CLONE_NEWUSER, _CLONE_NEWPID, _CLONE_NEWNET = 0x10000000, 0x20000000, 0x40000000
_SYS_CLONE = {"x86_64": 56, "aarch64": 220}  # clone(2): flags and stack come first on both
_PR_SET_PDEATHSIG = 1
_MAX_REQUEST = 1 << 20
_REFILL_AFTER_S = 0.01
_SPARE_PAUSE_S = 1.0
_CALL_FDS = 4  # the call's stdin, stdout, stderr; its config


def clone(flags: int) -> int:
    """fork(2) into new namespaces: clone(2) without a new stack, wrapped in CPython's
    before- and after-fork hooks exactly as ``os.fork`` wraps fork(2) (Python 3.11 has
    no ``os.unshare``, and unshare(CLONE_NEWPID) would need one more fork)."""
    number = _SYS_CLONE.get(os.uname().machine)
    if number is None:
        raise OSError(errno.ENOSYS, f"clone(2) is not wired for {os.uname().machine}")
    api = ctypes.pythonapi
    api.PyOS_BeforeFork()
    pid = _LIBC.syscall(
        ctypes.c_long(number), ctypes.c_ulong(flags | signal.SIGCHLD), None, None, None, None
    )
    if pid == 0:
        api.PyOS_AfterFork_Child()
        return 0
    failure = ctypes.get_errno()
    api.PyOS_AfterFork_Parent()
    if pid < 0:
        raise OSError(failure, f"clone(2) failed: {os.strerror(failure)}")
    return int(pid)


class Spare(BaseException):
    """Raised in a process the server has just cloned, to leave the server's loop and
    become process 1 of a call's namespace (``spare``); ``channel`` brings the call."""

    def __init__(self, channel: Any, user_namespace: bool, host_ids: tuple[int, int]) -> None:
        self.channel = channel
        self.user_namespace = user_namespace
        self.host_ids = host_ids


class Zygote:
    """The fork server: the host's socket, spares (process 1 of fresh namespaces each,
    with the script's process forked, both waiting) and the calls, watched by pidfds."""

    def __init__(self, fd: int, spares: int) -> None:
        import selectors  # here, not at the top: the per-process path does not pay for them
        import socket

        self.control = socket.socket(fileno=fd)
        self.selector = selectors.DefaultSelector()
        self.selector.register(self.control, selectors.EVENT_READ)
        self.want_spares = spares
        self.no_spares_until = 0.0  # after a spare failed: a pause, not a loop of failures
        self.spares: list[tuple[int, int, Any]] = []  # (pid, pidfd, channel), network off
        self.calls: dict[int, tuple[int | None, int]] = {}  # pid -> (call id, pidfd)
        self.user_namespace = os.geteuid() != 0  # not root: a user namespace per call too
        self.host_ids = (os.getuid(), os.getgid())

    def serve(self) -> NoReturn:
        """Start and reap calls until the host hangs up (then exit); between requests,
        make spares. Leaves only by ``Spare``, in a process cloned for a call."""
        # No collections here (they would write to every object, which the calls then
        # copy); the calls turn them back on for the script, and skip what is frozen.
        gc.disable()
        while True:
            short = len(self.spares) < self.want_spares
            wait = max(_REFILL_AFTER_S, self.no_spares_until - time.monotonic())
            events = self.selector.select(wait if short else None)
            if not events and short:  # idle for a while: not while a burst of calls starts
                try:
                    self.spares.append(self._clone(network=False))
                except OSError:  # out of processes or memory, say: try again later
                    self.no_spares_until = time.monotonic() + _SPARE_PAUSE_S
            for key, _ in events:
                if key.fileobj is self.control:
                    self._start()
                else:
                    self._reap(key.data)

    def _start(self) -> None:
        """One call: the request says only its id and whether it may use the network;
        its config (environment included) is in the fourth fd, a memfd this server
        never reads, so that nothing of one call lingers here for a later fork to find."""
        import socket

        message, fds, _, _ = socket.recv_fds(self.control, _MAX_REQUEST, _CALL_FDS)
        if not message:
            raise SystemExit(0)  # the host closed its end; the calls die with us
        request: dict[str, Any] = json.loads(message)
        try:
            made = self.spares.pop() if self.spares and not request["network"] else None
            if made is not None:
                try:
                    socket.send_fds(made[2], [b"call"], fds)
                except OSError:  # it died: reaped when its pidfd says so
                    made[2].close()
                    made = None
            if made is None:
                made = self._clone(request["network"])
                socket.send_fds(made[2], [b"call"], fds)
        except OSError as exc:
            self._send({"id": request["id"], "error": str(exc)})
            return
        finally:
            for fd in fds:
                os.close(fd)  # the call's processes hold them: the host sees EOF when they end
        pid, pidfd, channel = made
        channel.close()
        self.calls[pid] = (request["id"], pidfd)
        self._send({"id": request["id"], "pid": pid}, [pidfd])

    def _clone(self, network: bool) -> tuple[int, int, Any]:
        """A new process 1 of fresh namespaces, waiting on a channel of its own."""
        import socket

        ours, theirs = socket.socketpair(socket.AF_UNIX, socket.SOCK_SEQPACKET)
        flags = _CLONE_NEWPID | _CLONE_NEWNS | _CLONE_NEWIPC | _CLONE_NEWUTS
        flags |= 0 if network else _CLONE_NEWNET
        flags |= _CLONE_NEWUSER if self.user_namespace else 0
        gc.freeze()
        try:
            pid = clone(flags)
        except BaseException:
            ours.close()
            theirs.close()
            raise
        if pid == 0:
            ours.close()
            self._leave()
            raise Spare(theirs, self.user_namespace, self.host_ids)
        theirs.close()
        pidfd = os.pidfd_open(pid)
        self.selector.register(pidfd, 1, pid)  # selectors.EVENT_READ
        self.calls[pid] = (None, pidfd)  # no call yet
        return pid, pidfd, ours

    def _reap(self, pid: int) -> None:
        _, status = os.waitpid(pid, 0)  # its pidfd is readable: it has exited
        call_id, pidfd = self.calls.pop(pid)
        self.selector.unregister(pidfd)
        os.close(pidfd)
        if call_id is not None:
            self._send({"id": call_id, "status": os.waitstatus_to_exitcode(status)})
        else:  # a spare died before its call (killed from outside?): pause the spares
            self.no_spares_until = time.monotonic() + _SPARE_PAUSE_S
            for unused in [s for s in self.spares if s[0] == pid]:
                self.spares.remove(unused)
                unused[2].close()

    def _send(self, reply: dict[str, Any], fds: list[int] | None = None) -> None:
        import socket

        try:
            socket.send_fds(self.control, [json.dumps(reply).encode()], fds or [])
        except OSError:
            raise SystemExit(0) from None  # the host is gone

    def _leave(self) -> None:
        """In a cloned process: drop everything of the server's (other calls' pidfds,
        other spares' channels) before anything else runs."""
        self.selector.close()
        self.control.close()
        for _, _, channel in self.spares:
            channel.close()
        for _, pidfd in self.calls.values():
            os.close(pidfd)
        self.spares.clear()
        self.calls.clear()


def spare(made: Spare) -> None:
    """Process 1 of a call's namespaces, made by the server ahead of the call: fork the
    script's process now, then wait for the call (its stdin, stdout, stderr and config),
    hand it on to the script's process, and reap as ``launch`` does."""
    import socket

    channel = made.channel
    _LIBC.prctl(_PR_SET_PDEATHSIG, signal.SIGKILL, 0, 0, 0)  # the server's death ends it
    if made.user_namespace:  # not root: be root of a user namespace of our own
        uid, gid = made.host_ids
        for name, text in (("setgroups", "deny"), ("uid_map", f"0 {uid} 1"),
                           ("gid_map", f"0 {gid} 1")):  # fmt: skip
            with open(f"/proc/self/{name}", "w", encoding="ascii") as handle:
                handle.write(text)
    _close_all_but(channel.fileno())
    os.setsid()
    _mount(None, "/", None, _MS_REC | _MS_PRIVATE)  # nothing of ours reaches the server
    _mount("proc", "/proc", "proc", _MS_NOSUID | _MS_NODEV | _MS_NOEXEC)  # our PIDs only
    ours, theirs = socket.socketpair(socket.AF_UNIX, socket.SOCK_SEQPACKET)
    child = os.fork()
    if child == 0:
        channel.close()
        ours.close()
        try:
            config = _take_call(theirs)
            if config.get("workdir"):
                os.chdir(config["workdir"])
            os.environ.clear()
            os.environ.update(config["env"])
        except BaseException as exc:
            sys.stderr.write(f"tooldb sandbox: cannot start the call: {exc}\n")
            os._exit(125)
        _child(config)
        return
    theirs.close()
    message, fds, _, _ = socket.recv_fds(channel, _MAX_REQUEST, _CALL_FDS)
    channel.close()
    if not message:
        os._exit(0)  # the server is gone
    try:
        stdin, out_file, err_file, config_fd = fds
        os.dup2(err_file, 2)  # anything this process says goes to the call's stderr
        config = _read_config(config_fd)
        _private_tmp(config)
        out_r, out_w = os.pipe()
        err_r, err_w = os.pipe()
        socket.send_fds(ours, [message], [stdin, out_w, err_w, config_fd])
        ours.close()
        for fd in (stdin, out_w, err_w, config_fd):
            os.close(fd)
    except BaseException as exc:
        sys.stderr.write(f"tooldb sandbox: cannot start the call: {exc}\n")
        sys.stderr.flush()
        os._exit(125)
    limits = config["limits"]
    out, err = _collect(child, out_r, err_r, limits, int(config["stderr_tail"]))
    code, said = _reap(child, limits)
    _write_all(out_file, out)  # past the cap (one byte more) when it overflowed
    _write_all(err_file, err + said.encode())
    os._exit(code)


_MS_NOSUID, _MS_NODEV, _MS_NOEXEC, _MS_REC, _MS_PRIVATE = 2, 4, 8, 1 << 14, 1 << 18


def _mount(source: str | None, target: str, kind: str | None, flags: int, data: str = "") -> None:
    names = [None if text is None else text.encode() for text in (source, target, kind)]
    if _LIBC.mount(*names, flags, data.encode() or None) != 0:
        failure = ctypes.get_errno()
        raise OSError(failure, f"mount {target}: {os.strerror(failure)}")


def _private_tmp(config: dict[str, Any]) -> None:
    """The call's own /tmp (its working directory, holding the source) and /dev/shm:
    tmpfs of twice ``max_file_mb`` each (the script's process hands /tmp to its uid)."""
    size = 2 * int(config["limits"]["max_file_mb"]) * MIB
    flags = _MS_NOSUID | _MS_NODEV
    _mount("tmpfs", _TMP, "tmpfs", flags, f"size={size},mode=0700")
    _mount("tmpfs", "/dev/shm", "tmpfs", flags, f"size={size},mode=1777")
    fd = os.open(config["source_path"], os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o644)
    try:
        _write_all(fd, config.pop("source").encode())
    finally:
        os.close(fd)


def _collect(
    child: int, out_r: int, err_r: int, limits: dict[str, Any], keep: int
) -> tuple[bytes, bytes]:
    """Process 1 of a forked call reads the script's stdout (up to the cap: one byte more
    and the script is killed) and stderr (its last ``keep`` bytes) while it runs, for
    the call's memfds: the host only waits for the exit, with no pipes on its event
    loop. Returns when both pipes are closed or the script has exited (then what is
    left in the pipes is read without waiting)."""
    import select

    cap = int(limits["max_output_bytes"])
    out, err = bytearray(), bytearray()
    open_pipes = {out_r: out, err_r: err}
    pidfd = os.pidfd_open(child)
    poller = select.poll()
    for fd in (out_r, err_r, pidfd):
        poller.register(fd, select.POLLIN)
    tails = {out_r: 0, err_r: keep}  # stdout whole, stderr's tail
    exited = False
    while open_pipes and not exited and len(out) <= cap:
        for fd, _ in poller.poll():
            if fd == pidfd:
                exited = True
            elif fd in open_pipes and not _read_into(fd, open_pipes[fd], tails[fd]):
                poller.unregister(fd)
                del open_pipes[fd]
    for fd, buffer in open_pipes.items():  # the script has exited: what it left behind
        os.set_blocking(fd, False)
        for _ in range(64):  # bounded: a leftover process may still be writing
            if len(out) > cap or not _read_into(fd, buffer, tails[fd]):
                break
    if len(out) > cap:
        os.kill(child, signal.SIGKILL)  # as the per-process path does on overflow
    return bytes(out[: cap + 1]), bytes(err[-keep:])


def _read_into(fd: int, buffer: bytearray, keep: int) -> bool:
    """One read into ``buffer`` (only its last ``keep`` bytes kept, when ``keep``); False
    at the end of the pipe or when nothing more is there to read."""
    try:
        chunk = os.read(fd, 65536)
    except BlockingIOError:
        return False
    buffer += chunk
    if keep and len(buffer) > 2 * keep:
        del buffer[:-keep]
    return bool(chunk)


def _write_all(fd: int, data: bytes) -> None:
    view = memoryview(data)
    while view:
        view = view[os.write(fd, view) :]


def _read_config(fd: int) -> dict[str, Any]:  # pread: the fd's offset is shared
    config: dict[str, Any] = json.loads(os.pread(fd, os.fstat(fd).st_size, 0))
    return config


def _take_call(channel: Any) -> dict[str, Any]:
    """In the script's process of a spare: wait for the call from process 1, make its
    first three fds our stdio and read its config from the fourth."""
    import socket

    message, fds, _, _ = socket.recv_fds(channel, _MAX_REQUEST, _CALL_FDS)
    channel.close()
    if not message:
        os._exit(0)  # process 1 is gone
    *stdio, memfd = fds
    for target, fd in enumerate(stdio):
        os.dup2(fd, target)
        os.close(fd)
    try:
        return _read_config(memfd)
    finally:
        os.close(memfd)


def _close_all_but(keep: int) -> None:
    top = resource.getrlimit(resource.RLIMIT_NOFILE)[0]
    os.closerange(3, keep)
    os.closerange(keep + 1, max(top, keep + 1))


def main() -> None:
    if sys.argv[1] == "--serve":
        try:
            Zygote(int(sys.argv[2]), int(sys.argv[3])).serve()
        except Spare as cloned:
            made = cloned.with_traceback(None)
        spare(made)  # not in the except block: the call would see Spare as its context
        return
    launch(json.loads(sys.argv[1]))


if __name__ == "__main__":
    main()
