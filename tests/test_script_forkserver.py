"""The script fork server, with real processes: restarts, concurrency, hostile calls
that must leave it healthy, isolation between calls, and the per-process fallback.

tests/test_script_tools.py runs every contract, limit and privilege test through the
fork server too (it is the default path for Python scripts on this machine).
"""

from __future__ import annotations

import json
import os
import signal
import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

import tooldb
from tooldb import Registry, Settings
from tooldb.executors import forkserver, sandbox

from .test_script_tools import (
    FORK_BOMB,
    NAME_ITSELF,
    _processes_named,
    add_script,
    failed,
    marker,
    slow_mark,
    wait_for_processes,
)

__all__ = ["marker", "slow_mark"]  # fixtures, used by name

WHO = """
import os, sys
def main():
    return {"pid": int(os.readlink("/proc/self")), "uid": os.getuid(),
            "forked": "--serve" in sys.orig_argv, "fds": sorted(os.listdir("/proc/self/fd"))}
"""


@pytest.fixture
def reg(sqlite_url: str) -> Iterator[Registry]:
    settings = Settings(url=sqlite_url, max_parallel_calls=32, max_parallel_per_tool=32)
    registry = tooldb.open(sqlite_url, settings=settings)
    yield registry
    registry.close()


def server() -> forkserver.ForkServer:
    found = forkserver.running(sandbox.script_python())
    assert found is not None, "no fork server is running"
    return found


def test_this_machine_uses_the_fork_server(reg: Registry) -> None:
    assert sandbox.isolation().summary()["python_launcher"] == "forkserver"
    add_script(reg, "who", WHO)
    seen = reg.call("who").data
    assert seen["forked"] is True and seen["uid"] >= sandbox.SANDBOX_UID_BASE
    # stdin, stdout, stderr and listdir's own: nothing of the server's or other calls'
    assert seen["fds"] == ["0", "1", "2", "3"]


def test_the_server_has_a_clean_environment_and_runs_as_told(reg: Registry) -> None:
    add_script(reg, "who", WHO)
    assert reg.call("who").success
    pid = server().pid
    environ = Path(f"/proc/{pid}/environ").read_bytes().split(b"\0")
    # what -X utf8 sets, and bwrap's PWD, nothing else
    assert set(environ) - {b""} <= {b"LC_CTYPE=C.UTF-8", b"PWD=/"}
    argv = Path(f"/proc/{pid}/cmdline").read_bytes().split(b"\0")
    assert argv[0].decode() == os.path.realpath(sandbox.script_python())
    assert argv[1:5] == [b"-I", b"-S", b"-X", b"utf8"]


def test_a_killed_server_is_started_again_on_the_next_call(reg: Registry) -> None:
    add_script(reg, "who", WHO)
    assert reg.call("who").data["forked"]
    first = server()
    os.kill(first.pid, signal.SIGKILL)
    first.process.wait(timeout=5)
    deadline = time.monotonic() + 5
    while first.alive and time.monotonic() < deadline:
        time.sleep(0.01)
    assert not first.alive
    result = reg.call("who")
    assert result.success and result.data["forked"], result.error
    assert server().pid != first.pid


def test_spares_killed_from_outside_do_not_stop_the_server(reg: Registry) -> None:
    add_script(reg, "who", WHO)
    assert reg.call("who").success
    pid = server().pid
    time.sleep(0.5)  # the spares are made again after the call
    children = Path(f"/proc/{pid}/task/{pid}/children").read_text().split()
    assert len(children) == forkserver.SPARES  # no call running: each child is a spare
    for child in children:
        os.kill(int(child), signal.SIGKILL)
    # Dead, not dying: a spare still exiting (its namespaces' teardown, under load) can
    # take a call and die with it, a race this test is not about.
    deadline = time.monotonic() + 10
    while any(_running(int(child)) for child in children) and time.monotonic() < deadline:
        time.sleep(0.01)
    results = reg.call_many([("who", {})] * 3)
    assert all(r.success and r.data["forked"] for r in results), [r.error for r in results]
    assert server().pid == pid


def _running(pid: int) -> bool:
    try:
        state = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
    except OSError:
        return False
    return state != "Z"


def test_a_call_running_when_the_server_dies_fails_and_leaves_nothing(
    reg: Registry, slow_mark: str
) -> None:
    add_script(reg, "who", WHO)
    assert reg.call("who").success
    victim = server()

    def kill_when_started() -> None:
        wait_for_processes(slow_mark)
        os.kill(victim.pid, signal.SIGKILL)

    killer = threading.Thread(target=kill_when_started)
    killer.start()
    start = time.perf_counter()
    error = failed(reg.call("slow"))
    killer.join()
    assert time.perf_counter() - start < 10
    assert "the script fork server exited during the call" in error
    time.sleep(0.2)
    assert _processes_named(slow_mark) == []
    assert reg.call("who").success  # and the next call has a new server


def test_ten_concurrent_calls_run_at_once_through_one_server(reg: Registry) -> None:
    source = WHO.replace("    return", "    import time\n    time.sleep(0.5)\n    return")
    add_script(reg, "nap", source)
    assert reg.call("nap").success  # the server is up
    pid = server().pid
    start = time.perf_counter()
    results = reg.call_many([("nap", {})] * 10)
    elapsed = time.perf_counter() - start
    assert all(r.success for r in results), [r.error for r in results]
    seen = [r.data for r in results]
    assert all(s["forked"] for s in seen)
    # each in a PID namespace and /proc of its own, where it is process 2; each its own uid
    assert {s["pid"] for s in seen} == {2} and len({s["uid"] for s in seen}) == 10
    assert elapsed < 2.5, f"10 calls of 0.5 s took {elapsed:.2f} s: the server serialised them"
    assert server().pid == pid


LEAVES_A_WRITER = """
import os, subprocess, sys, time
def main():
    # a process that outlives the script and keeps its stdout and stderr open
    subprocess.Popen([sys.executable, "-c", "import time; time.sleep(30)"])
    sys.stdout.write("x" * 300_000 + "\\n")  # more than a pipe holds: written as read
    sys.stderr.write("warning: done\\n")
    return "last"
"""


def test_output_is_whole_even_when_a_leftover_keeps_the_pipes_open(reg: Registry) -> None:
    # Process 1 reads the script's output while it runs and takes what is left once it
    # exits, without waiting for the pipes to close: the leftover dies with process 1.
    add_script(reg, "leaver", LEAVES_A_WRITER)
    start = time.perf_counter()
    result = reg.call("leaver")
    assert result.success, result.error
    assert result.data == "last"
    assert time.perf_counter() - start < 5


def test_stderr_tail_and_exit_code_come_through_the_memfds(reg: Registry) -> None:
    source = (
        "import sys\nsys.stdout.write('partial')\nsys.stderr.write('e' * 9000 + 'END')\nsys.exit(4)"
    )
    add_script(reg, "grumpy", source)
    error = failed(reg.call("grumpy"))
    assert "exited with code 4" in error and error.rstrip().endswith("END")
    assert "e" * 100 in error and "e" * 5000 not in error  # the tail, not the whole


def _call_in_child(url: str, queue: Any) -> None:
    with tooldb.open(url, settings=Settings(url=url)) as registry:
        queue.put((registry.call("who").data["forked"], server().pid))


def test_a_forked_host_starts_a_server_of_its_own(reg: Registry, sqlite_url: str) -> None:
    import multiprocessing

    add_script(reg, "who", WHO)
    assert reg.call("who").success
    ours = server().pid
    context = multiprocessing.get_context("fork")
    queue = context.Queue()
    child = context.Process(target=_call_in_child, args=(sqlite_url, queue))
    child.start()
    forked, theirs = queue.get(timeout=30)
    child.join(timeout=30)
    assert forked and theirs != ours
    assert reg.call("who").data["forked"] and server().pid == ours


HOSTILE: dict[str, tuple[str, dict[str, Any], str]] = {
    "4 GB allocation": ("block = bytearray(4 * 1024**3)", {}, "MemoryError"),
    "fork bomb": (FORK_BOMB, {"timeout_s": 1, "max_processes": 32}, "timed out after 1 s"),
    "1 GB to stdout": (
        "import sys\nchunk = 'x' * 65536\nfor _ in range(16384):\n    sys.stdout.write(chunk)\n",
        {"max_output_bytes": 1_000_000},
        "wrote more than 1000000 bytes to stdout",
    ),
    "sleep forever": ("import time\ntime.sleep(3600)", {"timeout_s": 0.5}, "timed out after 0.5 s"),
    "garbage output": ("import sys\nsys.stdout.buffer.write(b'\\xff\\x00 junk')", {}, "non-JSON"),
    "non-zero exit": ("raise SystemExit(3)", {}, "exited with code 3"),
    "SIGKILL itself": (
        "import os, signal\nos.kill(os.getpid(), signal.SIGKILL)",
        {},
        "killed by signal SIGKILL",
    ),
    "closes its stdio": ("import os\nfor fd in (0, 1, 2):\n    os.close(fd)\n1/0", {}, "code 1"),
}


def test_hostile_calls_fail_clearly_and_leave_the_server_healthy(reg: Registry) -> None:
    add_script(reg, "who", WHO)
    assert reg.call("who").success
    pid = server().pid
    for name, (source, options, expected) in HOSTILE.items():
        add_script(reg, "hostile", source, **options)
        error = failed(reg.call("hostile"))
        assert expected in error, (name, error)
        assert server().pid == pid and server().alive, name
        after = reg.call("who")
        assert after.success and after.data["forked"], (name, after.error)
    assert server().pid == pid


ATTACKER = """
import ctypes, os

def attempt(action):
    try:
        action()
        return "allowed"
    except OSError as exc:
        return type(exc).__name__

def ptrace(pid):
    libc = ctypes.CDLL(None, use_errno=True)
    if libc.ptrace(16, pid, None, None) != 0:  # PTRACE_ATTACH
        errno = ctypes.get_errno()
        raise OSError(errno, os.strerror(errno))

def pidfd_signal(pid):
    os.close(os.pidfd_open(pid))

def main(victim, server):
    tries = {
        "kill_victim": lambda: os.kill(victim, 0),
        "ptrace_victim": lambda: ptrace(victim),
        "pidfd_victim": lambda: pidfd_signal(victim),
        "read_victim_file": lambda: open("/tmp/victim.txt").read(),
        "victim_environ": lambda: open(f"/proc/{victim}/environ").read(),
        "victim_root": lambda: os.listdir(f"/proc/{victim}/root/"),
        "kill_server": lambda: os.kill(server, 0),
        "ptrace_server": lambda: ptrace(server),
        "pidfd_server": lambda: pidfd_signal(server),
        "server_environ": lambda: open(f"/proc/{server}/environ").read(),
        "server_mem": lambda: open(f"/proc/{server}/mem", "rb").read(1),
        "kill_all": lambda: os.kill(-1, 0),
    }
    return {name: attempt(action) for name, action in tries.items()}
"""

VICTIM = """
import time
with open("/tmp/victim.txt", "w") as handle:
    handle.write("the victim's data")
NAME_ITSELF
time.sleep(2)
"""


@pytest.mark.skipif(os.geteuid() != 0, reason="calls run as uids of their own when run as root")
def test_a_call_cannot_reach_the_server_or_another_call(reg: Registry, marker: str) -> None:
    add_script(reg, "who", WHO)
    assert reg.call("who").success
    add_script(reg, "victim", VICTIM.replace("NAME_ITSELF", NAME_ITSELF.replace("MARKER", marker)))
    add_script(reg, "attacker", ATTACKER, timeout_s=20)
    running = threading.Thread(target=reg.call, args=("victim",))
    running.start()
    try:
        [victim] = wait_for_processes(marker)  # its pid as the host sees it
        attacker = reg.call("attacker", {"victim": victim, "server": server().pid})
    finally:
        running.join()
    assert attacker.success, attacker.error
    assert attacker.data == {
        # another call's processes are in another PID namespace: not there at all
        "kill_victim": "ProcessLookupError",
        "ptrace_victim": "ProcessLookupError",
        "pidfd_victim": "ProcessLookupError",
        # its /tmp is its own tmpfs, in its own mount namespace
        "read_victim_file": "FileNotFoundError",
        # /proc is the call's own: only its own processes are in it
        "victim_environ": "FileNotFoundError",
        "victim_root": "FileNotFoundError",
        "kill_server": "ProcessLookupError",
        "ptrace_server": "ProcessLookupError",
        "pidfd_server": "ProcessLookupError",
        "server_environ": "FileNotFoundError",
        "server_mem": "FileNotFoundError",
        # kill(-1): every process it may signal but itself and process 1: there is none
        "kill_all": "ProcessLookupError",
    }


def test_every_call_gets_fresh_randomness(reg: Registry) -> None:
    """Forks of one server share its memory: nothing random may be decided there."""
    source = (
        "import os, random, tempfile, uuid\n"
        "def main():\n"
        "    return [random.random(), uuid.uuid4().hex, os.urandom(8).hex(),\n"
        "            os.path.basename(tempfile.mkdtemp())]\n"
    )
    add_script(reg, "dice", source)
    results = reg.call_many([("dice", {})] * 4)
    values = [r.data for r in results]
    for column in zip(*values, strict=True):
        assert len(set(column)) == 4, column


SCAVENGER = """
import ctypes, re

def main():
    found = set()
    with open("/proc/self/maps") as maps:
        regions = [line.split() for line in maps]
    for fields in regions:
        if not fields[1].startswith("r") or fields[-1] in ("[vvar]", "[vsyscall]", "[vvar_vclock]"):
            continue
        start, end = (int(x, 16) for x in fields[0].split("-"))
        block = ctypes.string_at(start, end - start)  # our own memory, as it is
        found.update(m.decode() for m in re.findall(rb"TOOLDB_SECRET_[0-9a-f]{64}", block))
    return sorted(found)
"""


def _occurrences(pid: int, needle: bytes) -> int:
    """How often ``needle`` is in the memory of process ``pid`` (ours to read)."""
    count = 0
    with open(f"/proc/{pid}/maps") as maps, open(f"/proc/{pid}/mem", "rb") as memory:
        for line in maps:
            fields = line.split()
            if not fields[1].startswith("r") or fields[-1] in ("[vvar]", "[vsyscall]"):
                continue
            start, end = (int(x, 16) for x in fields[0].split("-"))
            try:
                memory.seek(start)
                count += memory.read(end - start).count(needle)
            except OSError:
                continue
    return count


def test_no_call_finds_another_calls_environment_in_its_memory(
    reg: Registry, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Calls are forked from the server: what passed through it would be in every later
    call's memory. A call's config (its environment) goes around it, in a memfd."""
    secret = "TOOLDB_SECRET_" + os.urandom(2000).hex()  # malloc'd, not a small object
    monkeypatch.setenv("TOOLDB_TEST_SECRET", secret)
    add_script(reg, "owner", "import os\nprint(len(os.environ['TOOLDB_TEST_SECRET']))",
               env=["TOOLDB_TEST_SECRET"])  # fmt: skip
    add_script(reg, "fresh", SCAVENGER, network=True)  # network: forked now, not a spare
    add_script(reg, "spare", SCAVENGER)
    for _ in range(forkserver.SPARES + 2):  # every spare made after the secret went by
        assert reg.call("owner").data == len(secret)
    assert _occurrences(server().pid, secret[:78].encode()) == 0
    for name in ("fresh", "spare"):
        result = reg.call(name)
        assert result.success, result.error
        assert secret[:78] not in result.data


def test_the_setting_turns_the_fork_server_off(
    sqlite_url: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("TOOLDB_SCRIPT_FORKSERVER", "0")
    settings = Settings.load(url=sqlite_url)
    assert settings.script_forkserver is False
    with tooldb.open(sqlite_url, settings=settings) as registry:
        add_script(registry, "who", WHO)
        seen = registry.call("who").data
        assert seen["forked"] is False and seen["uid"] >= sandbox.SANDBOX_UID_BASE
        error = failed(run_hostile(registry, "import time\ntime.sleep(3600)", timeout_s=0.5))
        assert "timed out after 0.5 s; its processes were killed" in error


def run_hostile(registry: Registry, source: str, **options: Any) -> tooldb.ToolResult:
    add_script(registry, "hostile", source, **options)
    return registry.call("hostile")


def test_javascript_stays_on_the_per_process_path(reg: Registry) -> None:
    source = "module.exports = () => process.argv.includes('--serve');"
    add_script(reg, "js", source, language="javascript")
    assert reg.call("js").data is False


def test_doctor_says_which_path_python_scripts_take(
    sqlite_url: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    from typer.testing import CliRunner

    from tooldb.cli import app

    cli = CliRunner()
    shown = cli.invoke(app, ["--db", sqlite_url, "doctor", "--json"])
    assert shown.exit_code == 0, shown.output
    report = json.loads(shown.stdout)
    assert report["script_python_launcher"] == "forkserver"
    assert report["script_sandbox"]["pid_namespace"] is True
    monkeypatch.setenv("TOOLDB_SCRIPT_FORKSERVER", "false")
    shown = cli.invoke(app, ["--db", sqlite_url, "doctor", "--json"])
    assert json.loads(shown.stdout)["script_python_launcher"] == "process"
