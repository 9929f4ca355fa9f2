"""Issue 20, items 2 and 3: what a script tool can reach of the host (the registry file,
other processes' arguments, the host's files, Unix sockets without ``network: true``).

Each test is the reproduction from the issue, run from inside a real sandboxed script
on every launch path (the fork server, a process of its own, JavaScript's).
"""

from __future__ import annotations

import os
import shutil
import socket
import subprocess
import sys
import tempfile
import threading
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

import tooldb
from tooldb import Registry, Settings
from tooldb.executors import bwrap

from .test_registry_files import SQL_TOOL, shared_parent

__all__ = ["shared_parent"]  # a fixture, used by name

ANY_ARGS = {"type": "object", "additionalProperties": True}
PATHS = ["forkserver", "process"]


@pytest.fixture(params=PATHS)
def reg(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[Registry]:
    """A registry whose Python scripts take the launch path named by the parameter."""
    url = f"sqlite:///{tmp_path / 'registry.db'}"
    settings = Settings(url=url, script_forkserver=request.param == "forkserver")
    registry = tooldb.open(url, settings=settings)
    yield registry
    registry.close()


def call(registry: Registry, source: str, args: dict[str, Any], **metadata: Any) -> Any:
    name = f"t{uuid.uuid4().hex[:8]}"
    registry.add({"name": name, "kind": "script", "target": source, "parameters": ANY_ARGS,
                  "timeout_s": 20, "metadata": metadata})  # fmt: skip
    result = registry.call(name, args)
    assert result.success, result.error
    return result.data


# -- item 2: the registry file, other processes' arguments, the host's files -------


READ_REGISTRY = """
import os
def main(path):
    seen = {}
    for name in (path, os.path.dirname(path)):
        try:
            if os.path.isdir(name):
                seen[name] = sorted(os.listdir(name))
            else:
                with open(name, "rb") as handle:
                    seen[name] = len(handle.read())
        except OSError as exc:
            seen[name] = type(exc).__name__
    return seen
"""


def test_a_script_cannot_read_the_registry(
    reg: Registry, shared_parent: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    home = shared_parent / "home"
    monkeypatch.setenv("TOOLDB_HOME", str(home))
    with tooldb.open() as default:
        default.add(SQL_TOOL)
        default.call("x", {})  # another tenant's call, with its arguments, in the file
    database = str(home / "registry.db")
    seen = call(reg, READ_REGISTRY, {"path": database})
    assert seen == {database: "FileNotFoundError", str(home): "FileNotFoundError"}


SCAN_PROC = """
import os
def main(secret):
    pids = sorted(int(p) for p in os.listdir("/proc") if p.isdigit())
    leaked = []
    for pid in pids:
        try:
            with open(f"/proc/{pid}/cmdline", "rb") as handle:
                if secret.encode() in handle.read():
                    leaked.append(pid)
        except OSError:
            pass
    return {"pids": pids, "me": os.getpid(), "leaked": leaked}
"""


@pytest.fixture
def root_process_with_a_secret() -> Iterator[str]:
    """A host process whose argv holds an API key (the issue's reproduction)."""
    secret = f"sk-test-{uuid.uuid4().hex}"
    code = "import sys, time; time.sleep(120)"
    process = subprocess.Popen([sys.executable, "-c", code, "--api-key", secret])
    yield secret
    process.kill()
    process.wait()


def test_a_script_sees_only_its_own_processes(
    reg: Registry, root_process_with_a_secret: str
) -> None:
    seen = call(reg, SCAN_PROC, {"secret": root_process_with_a_secret})
    assert seen["leaked"] == []
    assert seen["pids"] == sorted({1, seen["me"]}), seen  # process 1 of its namespace, itself


LOOK_AROUND = """
import os
def main(probes):
    seen = {}
    for path in probes:
        try:
            os.lstat(path)
            seen[path] = sorted(os.listdir(path)) if os.path.isdir(path) else "file"
        except OSError as exc:
            seen[path] = type(exc).__name__
    writes = {}
    for path in ("/usr/tooldb-probe", "/etc/tooldb-probe", "/tooldb-probe", "/tmp/mine"):
        try:
            with open(path, "w") as handle:
                handle.write("x")
            writes[path] = "written"
        except OSError as exc:
            writes[path] = type(exc).__name__
    return {"seen": seen, "writes": writes, "cwd": os.getcwd(), "tmp": sorted(os.listdir("/tmp"))}
"""


def test_a_script_sees_system_files_only_and_a_private_tmp(reg: Registry) -> None:
    host_tmp = Path(tempfile.mkdtemp(prefix="tooldb-sec-tmp-"))
    host_tmp.chmod(0o755)
    (host_tmp / "note").write_text("host data")
    (host_tmp / "note").chmod(0o644)
    try:
        probes = ["/run", "/var/run", "/home", "/root", "/work", str(host_tmp),
                  "/var/run/postgresql", "/usr/bin"]  # fmt: skip
        seen = call(reg, LOOK_AROUND, {"probes": probes})
    finally:
        subprocess.run(["rm", "-rf", str(host_tmp)], check=False)
    for path in probes[:-1]:
        assert seen["seen"][path] == "FileNotFoundError", (path, seen["seen"][path])
    assert "python3" in seen["seen"]["/usr/bin"]  # the system is there, read-only
    assert seen["writes"]["/tmp/mine"] == "written"
    for path in ("/usr/tooldb-probe", "/etc/tooldb-probe", "/tooldb-probe"):
        assert seen["writes"][path] in ("PermissionError", "OSError"), seen["writes"]
    assert seen["tmp"] == sorted(["mine", "tool.py"]) and seen["cwd"] == "/tmp"


# -- item 3: sockets without network: true -----------------------------------------


@pytest.fixture
def unix_listeners() -> Iterator[dict[str, str]]:
    """A Unix socket anyone may connect to, at a path in a world-readable directory, and
    an abstract one, both accepting in a thread."""
    folder = Path(tempfile.mkdtemp(prefix="tooldb-sec-sock-"))
    folder.chmod(0o755)
    path = str(folder / "s")
    abstract = f"tooldb-test-{uuid.uuid4().hex}"
    servers = []
    for address in (path, "\0" + abstract):
        server = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        server.bind(address)
        server.listen(8)
        server.settimeout(0.2)
        servers.append(server)
    os.chmod(path, 0o777)
    stop = threading.Event()

    def accept(server: socket.socket) -> None:
        while not stop.is_set():
            try:
                server.accept()[0].close()
            except OSError:
                continue

    threads = [threading.Thread(target=accept, args=(s,), daemon=True) for s in servers]
    for thread in threads:
        thread.start()
    yield {"path": path, "abstract": abstract}
    stop.set()
    for thread in threads:
        thread.join()
    for server in servers:
        server.close()
    subprocess.run(["rm", "-rf", str(folder)], check=False)


CONNECT_UNIX = """
import socket
def main(path, abstract, postgres):
    seen = {}
    for name, address in (("path", path), ("abstract", "\\0" + abstract),
                          ("postgres", postgres)):
        client = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        client.settimeout(2)
        try:
            client.connect(address)
            seen[name] = "connected"
        except OSError as exc:
            seen[name] = type(exc).__name__
        finally:
            client.close()
    return seen
"""

CONNECT_UNIX_JS = """
const net = require("net");
function attempt(address) {
  return new Promise((resolve) => {
    const client = net.connect(address);
    client.on("connect", () => { client.destroy(); resolve("connected"); });
    client.on("error", (error) => resolve(error.code));
  });
}
module.exports = async ({ path, abstract, postgres }) => ({
  path: await attempt(path),
  abstract: await attempt("\\0" + abstract),
  postgres: await attempt(postgres),
});
"""

POSTGRES_SOCKET = "/var/run/postgresql/.s.PGSQL.5432"


@pytest.mark.parametrize("language", ["python", "javascript"])
def test_no_unix_socket_is_reachable_without_network(
    reg: Registry, unix_listeners: dict[str, str], language: str
) -> None:
    args = {**unix_listeners, "postgres": POSTGRES_SOCKET}
    source = CONNECT_UNIX if language == "python" else CONNECT_UNIX_JS
    # the test itself can reach all three (PostgreSQL's when it runs on this machine)
    for address in (unix_listeners["path"], "\0" + unix_listeners["abstract"]):
        socket.socket(socket.AF_UNIX).connect(address)
    seen = call(reg, source, args, language=language)
    assert seen["path"] != "connected" and seen["abstract"] != "connected", seen
    assert seen["postgres"] != "connected", seen


# -- the arguments bwrap is given: what no script can observe cheaply -------------


def _has(argv: list[str], *run: str) -> bool:
    """``run`` appears in ``argv`` as consecutive arguments."""
    return any(argv[i : i + len(run)] == list(run) for i in range(len(argv)))


def test_the_view_binds_the_system_read_only_and_etc_by_name() -> None:
    args = bwrap.view()
    for path in bwrap.SYSTEM_PATHS:
        if os.path.islink(path):
            assert _has(args, "--symlink", os.readlink(path), path)
        elif os.path.isdir(path):
            assert _has(args, "--ro-bind", path, path)
        else:
            assert path not in args
    assert _has(args, "--perms", "0755", "--dir", "/etc")
    tried = [args[i + 1] for i, arg in enumerate(args) if arg == "--ro-bind-try"]
    assert tried == [*bwrap.ETC_PATHS, *bwrap._jdk_etc()]  # nothing else of /etc
    for path in tried:
        assert _has(args, "--ro-bind-try", path, path)
    assert args[-4:] == ["--proc", "/proc", "--dev", "/dev"]
    assert _has(bwrap.view(("/opt/node/bin/node",)), "--ro-bind", "/opt/node", "/opt/node")


def test_each_system_path_is_bound_or_linked_in_turn(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(bwrap, "SYSTEM_PATHS", ("/usr", "/bin", "/etc", "/nonexistent"))
    args = bwrap.view(("/opt/node/bin/node",))
    linked = os.path.islink("/bin")
    first = ["--symlink", os.readlink("/bin"), "/bin"] if linked else ["--ro-bind", "/bin", "/bin"]
    assert args[:12] == [
        "--ro-bind", "/usr", "/usr", *first, "--ro-bind", "/etc", "/etc",
        "--ro-bind", "/opt/node", "/opt/node",
    ]  # fmt: skip
    assert "/nonexistent" not in args


def test_programs_outside_the_system_paths_bring_their_prefix() -> None:
    assert bwrap.program_dirs("/usr/bin/env", "/bin/sh") == ()
    assert bwrap.program_dirs("/opt/a/bin/x", "/opt/a/bin/y", "/usrx/bin/z") == (
        "/opt/a",
        "/usrx",
    )
    assert bwrap._jdk_etc() == tuple(sorted(str(p) for p in Path("/etc").glob("java-*")))


def test_namespaces_and_capabilities(monkeypatch: pytest.MonkeyPatch) -> None:
    closed = bwrap._namespaces(network=False)
    assert closed[:4] == ["--unshare-pid", "--unshare-ipc", "--unshare-uts",
                          "--unshare-cgroup-try"]  # fmt: skip
    assert closed[-1] == "--unshare-net" and "--unshare-net" not in bwrap._namespaces(True)
    monkeypatch.setattr(bwrap.os, "geteuid", lambda: 0)
    assert "--unshare-user" not in bwrap._namespaces(False)
    assert bwrap._caps(("CAP_KILL", "CAP_CHOWN")) == [
        "--cap-drop", "ALL", "--cap-add", "CAP_KILL", "--cap-add", "CAP_CHOWN"
    ]  # fmt: skip
    monkeypatch.setattr(bwrap.os, "geteuid", lambda: 1000)
    assert "--unshare-user" in bwrap._namespaces(False) and bwrap._caps(("CAP_KILL",)) == []


def test_a_calls_argv_and_the_fork_servers(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(bwrap.os, "geteuid", lambda: 0)
    argv = bwrap.call_argv("bw", (), network=False, tmp_bytes=4096, source=(7, "s.py"))
    assert argv[0] == "bw" and argv[-1] == "--"
    for run in (
        ("--die-with-parent", "--new-session", "--as-pid-1"),
        ("--perms", "1777", "--size", "4096", "--tmpfs", "/dev/shm"),
        ("--perms", "0700", "--size", "4096", "--tmpfs", "/tmp"),
        ("--perms", "0644", "--file", "7", "/tmp/s.py"),
        ("--chdir", "/tmp", "--cap-drop", "ALL"),
        ("--unshare-net",),
    ):
        assert _has(argv, *run), run
    assert "CAP_SYS_ADMIN" not in argv and _has(argv, "--cap-add", "CAP_SETUID")
    networked = bwrap.call_argv("bw", (), network=True, tmp_bytes=4096, source=(7, "s.py"))
    assert "--unshare-net" not in networked and "--unshare-pid" in networked
    server = bwrap.server_argv("bw", ())
    assert server[0] == "bw" and server[-1] == "--" and "--unshare-net" not in server
    for run in (
        ("--die-with-parent", "--as-pid-1"),
        ("--perms", "0700", "--size", str(1 << 20), "--tmpfs", "/tmp", "--chdir", "/"),
        ("--cap-add", "CAP_SYS_ADMIN"),
        ("--cap-add", "CAP_SETUID"),
    ):
        assert _has(server, *run), run
    assert "--new-session" not in server


def test_bwrap_is_found_on_path_or_at_debians_place(monkeypatch: pytest.MonkeyPatch) -> None:
    bwrap.find.cache_clear()
    try:
        monkeypatch.setenv("PATH", "/nonexistent")
        assert bwrap.find() == "/usr/bin/bwrap"
        bwrap.find.cache_clear()
        monkeypatch.setenv("PATH", "/usr/bin")
        assert bwrap.find() == shutil.which("bwrap")
    finally:
        bwrap.find.cache_clear()
