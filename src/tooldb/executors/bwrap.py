"""The script sandbox's file system view and namespaces, made by bubblewrap (``bwrap``).

A script sees the system read-only (``/usr`` and its links ``/bin``, ``/lib``...; a
short list of ``/etc`` files that programs need to start, resolve names and check
certificates), a fresh ``/proc`` of its own PID namespace, a minimal ``/dev``, and a
``/tmp`` of its own (a small tmpfs, its working directory): nothing else of the host.
No ``/run`` or ``/var/run`` (so no socket files: PostgreSQL's, Docker's, D-Bus'), no
home directories, no registry. Without ``network: true`` it has a network namespace of
its own, so no abstract Unix socket of the host is reachable either.

Two uses (see sandbox.py): a call run as a process of its own runs
``bwrap ... -- python3 <launcher>`` (``call_argv``); the fork server runs once inside
``bwrap`` with the same view (``server_argv``) and gives each call, on top, a mount
namespace with a fresh ``/proc`` and its own ``/tmp`` and ``/dev/shm`` (in
``sandbox_launcher``), so a call costs no ``bwrap`` start.
"""

from __future__ import annotations

import functools
import os
import shutil
from pathlib import Path

#: The system, bound read-only (symlinks, as on merged-/usr systems, are recreated).
SYSTEM_PATHS = ("/usr", "/bin", "/sbin", "/lib", "/lib32", "/lib64", "/libx32")
#: What of /etc programs need: the loader, users and groups, names and services, time
#: zone, certificates, MIME types, Debian's alternatives. Not the rest (configurations
#: of local services, their credentials).
ETC_PATHS = (
    "/etc/ld.so.cache", "/etc/ld.so.conf", "/etc/ld.so.conf.d", "/etc/passwd", "/etc/group",
    "/etc/nsswitch.conf", "/etc/hosts", "/etc/host.conf", "/etc/resolv.conf", "/etc/gai.conf",
    "/etc/protocols", "/etc/services", "/etc/localtime", "/etc/timezone", "/etc/ssl",
    "/etc/ca-certificates", "/etc/pki", "/etc/mime.types", "/etc/alternatives",
    "/etc/os-release", "/etc/debian_version",
)  # fmt: skip
#: What the launcher needs of root, when tooldb runs as root, before it drops to the
#: call's uid: that drop, the scratch dir's owner, killing the script on an overflow.
CALL_CAPS = ("CAP_SETUID", "CAP_SETGID", "CAP_CHOWN", "CAP_KILL")
#: The fork server also makes each call's namespaces and mounts.
SERVER_CAPS = (*CALL_CAPS, "CAP_SYS_ADMIN")
TMP = "/tmp"


@functools.cache
def find() -> str | None:
    """The ``bwrap`` binary: on PATH, else at Debian's place."""
    found = shutil.which("bwrap")
    if found:
        return found
    return "/usr/bin/bwrap" if os.access("/usr/bin/bwrap", os.X_OK) else None


def _under_system(path: str) -> bool:
    return any(path == top or path.startswith(top + "/") for top in SYSTEM_PATHS)


def program_dirs(*programs: str) -> tuple[str, ...]:
    """The installation prefixes of programs outside the system paths (a pyenv Python,
    node under /opt), bound read-only too: ``PREFIX`` of ``PREFIX/bin/python3``."""
    found = []
    for program in programs:
        real = os.path.realpath(program)
        if not _under_system(real):
            found.append(str(Path(real).parent.parent))
    return tuple(dict.fromkeys(found))


@functools.cache
def _jdk_etc() -> tuple[str, ...]:
    """Debian's JDKs keep their configuration (security policy, logging) under
    ``/etc/java-N-openjdk``, linked from ``/usr/lib/jvm``: Java tools need it to start."""
    return tuple(sorted(str(path) for path in Path("/etc").glob("java-*") if path.is_dir()))


def view(programs: tuple[str, ...] = ()) -> list[str]:
    """bwrap's arguments for the file system a script sees (without ``/tmp``)."""
    args: list[str] = []
    for path in SYSTEM_PATHS:
        if os.path.islink(path):
            args += ["--symlink", os.readlink(path), path]
        elif os.path.isdir(path):
            args += ["--ro-bind", path, path]
    for path in program_dirs(*programs):
        args += ["--ro-bind", path, path]
    args += ["--perms", "0755", "--dir", "/etc"]  # bwrap would make it 0700
    for path in (*ETC_PATHS, *_jdk_etc()):
        args += ["--ro-bind-try", path, path]
    return [*args, "--proc", "/proc", "--dev", "/dev"]


def _namespaces(network: bool) -> list[str]:
    args = ["--unshare-pid", "--unshare-ipc", "--unshare-uts", "--unshare-cgroup-try"]
    if os.geteuid() != 0:
        args.append("--unshare-user")  # the account is root of a namespace of its own
    return args if network else [*args, "--unshare-net"]


def _caps(caps: tuple[str, ...]) -> list[str]:
    """Root keeps every capability in bwrap unless told: only what the launcher needs.
    (Not root, bwrap drops them all, and the launcher needs none.)"""
    if os.geteuid() != 0:
        return []
    return ["--cap-drop", "ALL", *(arg for cap in caps for arg in ("--cap-add", cap))]


def call_argv(
    bwrap: str, programs: tuple[str, ...], *, network: bool, tmp_bytes: int, source: tuple[int, str]
) -> list[str]:
    """One call as a process of its own: the launcher is process 1 of a new PID
    namespace; ``/tmp`` is a tmpfs of ``tmp_bytes`` holding the source (read from the
    fd ``source[0]``, written as ``/tmp/NAME``), and the working directory."""
    fd, name = source
    return [
        bwrap, *_namespaces(network), "--die-with-parent", "--new-session", "--as-pid-1",
        *view(programs),
        "--perms", "1777", "--size", str(tmp_bytes), "--tmpfs", "/dev/shm",
        "--perms", "0700", "--size", str(tmp_bytes), "--tmpfs", TMP,
        "--perms", "0644", "--file", str(fd), f"{TMP}/{name}",
        "--chdir", TMP, *_caps(CALL_CAPS), "--",
    ]  # fmt: skip


def server_argv(bwrap: str, programs: tuple[str, ...]) -> list[str]:
    """The fork server: the same view, in PID, IPC and UTS namespaces of its own (it is
    process 1 there, bwrap's only child), with the host's network (calls without it
    get a network namespace each)."""
    return [
        bwrap, *_namespaces(network=True), "--die-with-parent", "--as-pid-1", *view(programs),
        "--perms", "0700", "--size", str(1 << 20), "--tmpfs", TMP, "--chdir", "/",
        *_caps(SERVER_CAPS), "--",
    ]  # fmt: skip
