"""The first process inside a script tool's sandbox (standard library only).

The host runs this file's text with ``python -I -c`` (under ``unshare`` when the
platform allows), passing one JSON argument. It is process 1 of the new PID
namespace, so it must not be the script: process 1 ignores signals it has no
handler for (a CPU limit's SIGXCPU, ``abort()``) and orphans are its to reap.
So it forks; the child applies the limits and becomes the script; this process
reaps everything, then exits with the script's status. Its exit ends the
namespace, which kills whatever the script left behind.

Limits are applied here, not in the host, because RLIMIT_NPROC counts processes
per *real* uid and is ignored for root. When run as root, the child gives up root
for good before it becomes the script: it hands its scratch directory to a per-call
uid and gid, drops supplementary groups, sets real, effective and saved ids to them
(which clears every capability) and sets no_new_privs, so nothing it executes can
regain privileges. The host runs this launcher with an interpreter that such a uid
can read (the system's, not a virtualenv under a private home: see sandbox.py).
"""

from __future__ import annotations

import ctypes
import json
import math
import os
import resource
import signal
import sys
from typing import Any

MIB = 1024 * 1024
_PR_SET_NO_NEW_PRIVS = 38


def _drop_root(uid: int, workdir: str | None) -> None:
    """Become ``uid`` (and gid ``uid``) for good: no groups, no capabilities, no way back.
    Only the call's own scratch directory (made by the host, ``tooldb-*``) is handed over."""
    if workdir is not None and not os.path.basename(workdir).startswith("tooldb-"):
        raise OSError(f"refusing to hand {workdir!r} to the sandbox: not a tooldb scratch dir")
    for root, dirs, files in os.walk(workdir or ""):
        for name in [root, *(os.path.join(root, n) for n in dirs + files)]:
            os.chown(name, uid, uid, follow_symlinks=False)
    os.setgroups([])
    os.setresgid(uid, uid, uid)
    os.setresuid(uid, uid, uid)  # all three ids non-zero: the kernel clears every capability
    libc = ctypes.CDLL(None, use_errno=True)
    if libc.prctl(_PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) != 0:
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


def _run_python(path: str) -> None:
    """Run the tool's source: the function form if it defines ``main``, else as a script."""
    with open(path, encoding="utf-8") as handle:
        code = compile(handle.read(), os.path.basename(path), "exec")
    # A module-level ``def main`` (cheaper to find in the code object than with ast).
    function_form = "main" in code.co_names and any(
        isinstance(const, type(code)) and const.co_name == "main" for const in code.co_consts
    )
    namespace: dict[str, Any] = {
        "__name__": "__tool__" if function_form else "__main__",
        "__file__": path,
        "__builtins__": __builtins__,
    }
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


def _reap(child: int, limits: dict[str, Any]) -> int:
    """Wait for the script, reaping orphans meanwhile; return the exit code to report."""
    while True:
        try:
            pid, status, usage = os.wait4(-1, 0)
        except ChildProcessError:
            return 1
        if pid != child:
            continue
        if os.WIFSIGNALED(status):
            signum = os.WTERMSIG(status)
            cpu_used = usage.ru_utime + usage.ru_stime
            sys.stderr.write("\n" + _describe(signum, limits, cpu_used) + "\n")
            return 128 + signum
        return os.waitstatus_to_exitcode(status)


def _child(config: dict[str, Any]) -> None:
    try:
        _apply_limits(config)
    except BaseException as exc:
        sys.stderr.write(f"tooldb sandbox: cannot apply limits: {exc}\n")
        os._exit(125)
    if config.get("probe"):
        os._exit(0)
    command = config.get("exec")
    if command:
        os.execv(command[0], command)
    try:
        _run_python(config["script"])
    except SystemExit:
        raise
    except BaseException as exc:
        _print_user_traceback(exc)
        raise SystemExit(1) from None


def main() -> None:
    config: dict[str, Any] = json.loads(sys.argv[1])
    child = os.fork()
    if child == 0:
        _child(config)
        return
    sys.exit(_reap(child, config["limits"]))


if __name__ == "__main__":
    main()
