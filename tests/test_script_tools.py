"""Script tools: Python and JavaScript source run in a real sandboxed subprocess.

Hostile scripts (fork bombs, endless loops, 4 GB allocations, floods of output,
garbage, non-zero exits) must come back as failed results with a clear error,
quickly, leaving nothing running.
"""

from __future__ import annotations

import asyncio
import json
import os
import socket
import threading
import time
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

import tooldb
from tooldb import DefinitionError, ErrorKind, Registry, Settings, ToolResult
from tooldb.executors import sandbox, script

ANY_ARGS = {"type": "object", "additionalProperties": True}


@pytest.fixture
def reg(sqlite_url: str) -> Iterator[Registry]:
    """The sandbox does not depend on the store: hostile cases run on SQLite only."""
    registry = tooldb.open(sqlite_url, settings=Settings(url=sqlite_url))
    yield registry
    registry.close()


@pytest.fixture
def marker() -> str:
    """A process name (``comm``, 15 bytes at most) unique to the test: a script that
    takes it (``NAME_ITSELF``) passes it to every process it forks, and the test finds
    them from the host (the sandbox shares nothing else with it)."""
    return f"tdb{uuid.uuid4().hex[:12]}"


NAME_ITSELF = "import ctypes\nctypes.CDLL(None).prctl(15, b'MARKER', 0, 0, 0)\n"  # PR_SET_NAME


def add_script(
    registry: Registry,
    name: str,
    source: str,
    *,
    timeout_s: float = 5,
    parameters: dict[str, Any] | None = None,
    **metadata: Any,
) -> None:
    registry.add(
        {
            "name": name,
            "kind": "script",
            "target": source,
            "parameters": parameters or ANY_ARGS,
            "timeout_s": timeout_s,
            "metadata": metadata,
        }
    )


def run(registry: Registry, source: str, args: Any = None, **options: Any) -> ToolResult:
    add_script(registry, "t", source, **options)
    return registry.call("t", args or {})


def failed(result: ToolResult) -> str:
    assert not result.success, result
    assert result.error is not None
    return result.error


# -- the contract, through registry.call on both stores ------------------------


ADD_PY = """
def main(a, b=1):
    print("debugging output is allowed before the result")
    return {"sum": a + b}
"""


def test_python_main_function_on_both_stores(registry: Registry) -> None:
    add_script(
        registry,
        "add",
        ADD_PY,
        parameters={"a": {"type": "int", "required": True}, "b": {"type": "int", "default": 1}},
    )
    result = registry.call("add", {"a": "2"})
    assert result.success and result.data == {"sum": 3}
    assert json.loads(result.output) == {"sum": 3}
    [record] = registry.calls()
    assert record.success and record.arguments == {"a": 2, "b": 1}
    assert registry.get("add").stats.usage_count == 1


def test_javascript_exported_function_on_both_stores(registry: Registry) -> None:
    source = "module.exports = async ({ a, b }) => ({ product: a * b, node: typeof process });"
    add_script(registry, "mul", source, language="javascript")
    result = registry.call("mul", {"a": 6, "b": 7})
    assert result.success and result.data == {"product": 42, "node": "object"}


def test_failure_is_recorded_on_both_stores(registry: Registry) -> None:
    add_script(registry, "boom", "import sys\nsys.exit('no luck')")
    result = registry.call("boom")
    assert "exited with code 1" in failed(result) and "no luck" in failed(result)
    [record] = registry.calls()
    assert record.error_kind is ErrorKind.EXECUTION and not record.success


def test_plain_python_script_reads_stdin_and_writes_stdout(reg: Registry) -> None:
    source = (
        "import json, sys\n"
        "args = json.load(sys.stdin)\n"
        "if __name__ == '__main__':\n"
        "    json.dump({'echo': args, 'name': __name__}, sys.stdout, indent=2)\n"
    )
    result = run(reg, source, {"text": "héllo; rm -rf / $(x) `y` 'z'"})
    assert result.data == {"echo": {"text": "héllo; rm -rf / $(x) `y` 'z'"}, "name": "__main__"}


def test_async_main_and_none_result(reg: Registry) -> None:
    source = "import asyncio\nasync def main(n):\n    await asyncio.sleep(0)\n    return [n] * n\n"
    assert run(reg, source, {"n": 3}).data == [3, 3, 3]
    nothing = run(reg, "def main():\n    print('side effect only')\n")
    assert nothing.success and nothing.data is None and nothing.output == ""


def test_empty_stdout_is_a_null_result(reg: Registry) -> None:
    result = run(reg, "x = 1")
    assert result.success and result.data is None


def test_last_line_is_the_result_when_whole_stdout_is_not_json(reg: Registry) -> None:
    result = run(reg, "print('log line')\nprint('another')\nprint('[1, 2]')")
    assert result.success and result.data == [1, 2]


def test_javascript_exports_main_and_plain_script(reg: Registry) -> None:
    source = "exports.main = (args) => args.words.map((w) => w.toUpperCase());"
    assert run(reg, source, {"words": ["a", "b"]}, language="javascript").data == ["A", "B"]
    plain = (
        "const args = JSON.parse(require('fs').readFileSync(0, 'utf8'));\n"
        "console.log('log');\n"
        "console.log(JSON.stringify({ keys: Object.keys(args) }));\n"
    )
    assert run(reg, plain, {"x": 1}, language="javascript").data == {"keys": ["x"]}


def test_javascript_main_that_throws(reg: Registry) -> None:
    source = "module.exports = () => { throw new TypeError('bad input ' + 42); };"
    error = failed(run(reg, source, language="javascript"))
    assert "exited with code 1" in error and "TypeError: bad input 42" in error


# -- hostile scripts ---------------------------------------------------------------


def test_exit_code_and_stderr_tail_are_reported(reg: Registry) -> None:
    source = "import sys\nfor i in range(500):\n    print('noise', i, file=sys.stderr)\nsys.exit(3)"
    error = failed(run(reg, source))
    assert error.startswith("script tool 't' exited with code 3")
    assert "noise 499" in error and "noise 0\n" not in error  # the tail, not everything


def test_exception_in_main_shows_the_tools_traceback(reg: Registry) -> None:
    error = failed(run(reg, "def main(a):\n    raise ValueError(f'no {a}')\n", {"a": "x"}))
    assert 'File "tool.py", line 2, in main' in error and "ValueError: no x" in error
    assert "<string>" not in error  # the launcher's frames are left out


def test_non_json_output_fails(reg: Registry) -> None:
    error = failed(run(reg, "print('hello world')"))
    assert "printed non-JSON on stdout" in error and "'hello world'" in error
    binary = failed(run(reg, "import sys\nsys.stdout.buffer.write(b'\\xff\\xfe garbage')"))
    assert "printed non-JSON" in binary


def test_unserialisable_return_value_fails(reg: Registry) -> None:
    error = failed(run(reg, "def main():\n    return {1, 2}\n"))
    assert "cannot be written as JSON" in error and "set" in error


def test_script_that_sleeps_forever_times_out(reg: Registry) -> None:
    start = time.perf_counter()
    result = run(reg, "import time\ntime.sleep(3600)", timeout_s=0.5)
    assert "timed out after 0.5 s; its processes were killed" in failed(result)
    assert time.perf_counter() - start < 3
    [record] = reg.calls()
    assert record.error_kind is ErrorKind.TIMEOUT


def test_script_ignoring_signals_is_still_killed(reg: Registry) -> None:
    source = (
        "import signal, time\n"
        "for s in (signal.SIGTERM, signal.SIGINT, signal.SIGHUP):\n"
        "    signal.signal(s, signal.SIG_IGN)\n"
        "while True:\n    time.sleep(1)\n"
    )
    assert "timed out" in failed(run(reg, source, timeout_s=0.5))


def _processes_named(name: str) -> list[int]:
    """The host's processes named ``name`` (see ``marker``)."""
    found = []
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit():
            try:
                if (entry / "comm").read_text().strip() == name:
                    found.append(int(entry.name))
            except OSError:
                continue
    return found


def wait_for_processes(name: str, timeout_s: float = 10) -> list[int]:
    deadline = time.monotonic() + timeout_s
    while not (found := _processes_named(name)) and time.monotonic() < deadline:
        time.sleep(0.01)
    assert found, f"no process named {name} appeared in {timeout_s} s"
    return found


FORK_BOMB = """
import os
while True:
    try:
        os.fork()
    except OSError:
        pass
"""


def test_fork_bomb_is_contained_and_leaves_nothing(reg: Registry, marker: str) -> None:
    start = time.perf_counter()
    source = NAME_ITSELF.replace("MARKER", marker) + FORK_BOMB
    result = run(reg, source, timeout_s=1, max_processes=32)
    assert "timed out after 1 s" in failed(result)
    assert time.perf_counter() - start < 5
    assert _processes_named(marker) == []


def test_process_limit_stops_forks(reg: Registry) -> None:
    source = """
import os, time
children = 0
while children < 200:
    try:
        pid = os.fork()
    except OSError:
        break
    if pid == 0:
        time.sleep(30)
        os._exit(0)
    children += 1
print(children)
"""
    result = run(reg, source, max_processes=20)
    assert result.success, result.error
    if sandbox.isolation().process_limit:
        assert result.data < 20
    else:  # without root there is no per-call uid: RLIMIT_NPROC would count all your processes
        assert result.data == 200


def test_children_that_leave_the_session_die_with_the_script(reg: Registry, marker: str) -> None:
    source = NAME_ITSELF.replace("MARKER", marker) + (
        "import os, time\n"
        "if os.fork() == 0:\n"
        "    os.setsid()\n"
        "    open('escaped', 'w').close()\n"
        "    time.sleep(3600)\n"
        "while not os.path.exists('escaped'):\n"
        "    time.sleep(0.01)\n"
        "print(1)\n"
    )
    assert run(reg, source).data == 1
    time.sleep(0.2)
    assert _processes_named(marker) == []


def test_four_gigabyte_allocation_fails_fast(reg: Registry) -> None:
    start = time.perf_counter()
    error = failed(run(reg, "block = bytearray(4 * 1024**3)\nprint(len(block))"))
    assert "MemoryError" in error and "limit is 512 MB, metadata.memory_mb" in error
    assert time.perf_counter() - start < 3


def test_javascript_out_of_memory_is_reported(reg: Registry) -> None:
    source = "const keep = []; for (;;) keep.push(new Array(1e6).fill(1.5));"
    error = failed(run(reg, source, language="javascript", memory_mb=200, timeout_s=10))
    assert "out of memory: the limit is 200 MB" in error


def test_gigabyte_of_stdout_is_capped_and_killed(reg: Registry) -> None:
    source = (
        "import sys\nchunk = 'x' * 65536\nfor _ in range(16384):\n    sys.stdout.write(chunk)\n"
    )
    start = time.perf_counter()
    error = failed(run(reg, source, max_output_bytes=1_000_000))
    assert "wrote more than 1000000 bytes to stdout" in error and "was killed" in error
    assert time.perf_counter() - start < 3


def test_cpu_limit(reg: Registry) -> None:
    error = failed(run(reg, "while True:\n    pass\n", cpu_s=1, timeout_s=10))
    assert "SIGXCPU" in error and "CPU time limit of 1 s (metadata.cpu_s)" in error


def test_file_size_limit(reg: Registry) -> None:
    source = "with open('big', 'wb') as f:\n    f.write(b'x' * (3 * 1024 * 1024))\n"
    error = failed(run(reg, source, max_file_mb=1))
    assert "File too large" in error and "the limit of 1 MB, metadata.max_file_mb" in error


# -- environment, scratch directory, network ------------------------------------


def test_environment_is_an_allow_list_and_workdir_is_fresh(
    reg: Registry, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("TOOLDB_SECRET_FOR_TEST", "do-not-leak")
    monkeypatch.setenv("ALLOWED_FOR_TEST", "visible")
    source = (
        "import os\n"
        "def main():\n"
        "    return {'env': dict(os.environ), 'cwd': os.getcwd(), 'files': os.listdir('.')}\n"
    )
    data = run(reg, source, env=["ALLOWED_FOR_TEST", "NOT_SET_ANYWHERE"]).data
    env = data["env"]
    assert env["ALLOWED_FOR_TEST"] == "visible"
    assert "TOOLDB_SECRET_FOR_TEST" not in env and "NOT_SET_ANYWHERE" not in env
    assert set(env) <= {"PATH", "HOME", "TMPDIR", "LANG", "ALLOWED_FOR_TEST", "LC_CTYPE"}
    # the call's own /tmp (a tmpfs of the sandbox's, gone with the call): nothing on the host
    assert env["HOME"] == data["cwd"] == env["TMPDIR"] == "/tmp" and data["files"] == ["tool.py"]


@pytest.fixture
def listener() -> Iterator[int]:
    """A real TCP server on 127.0.0.1 that accepts connections."""
    server = socket.socket()
    server.bind(("127.0.0.1", 0))
    server.listen(8)
    server.settimeout(0.2)
    stop = threading.Event()

    def accept() -> None:
        while not stop.is_set():
            try:
                connection, _ = server.accept()
                connection.close()
            except OSError:
                continue

    thread = threading.Thread(target=accept, daemon=True)
    thread.start()
    yield server.getsockname()[1]
    stop.set()
    thread.join()
    server.close()


CONNECT = """
import shutil
import socket
import tempfile
def main(port):
    try:
        socket.create_connection(("127.0.0.1", port), timeout=1).close()
        return {"connected": True}
    except OSError as exc:
        return {"connected": False, "error": str(exc)}
"""


def test_network_is_off_by_default_and_on_when_asked(reg: Registry, listener: int) -> None:
    assert sandbox.isolation().available, "bubblewrap must work on this machine"
    add_script(reg, "closed", CONNECT)
    add_script(reg, "open", CONNECT, network=True)
    assert reg.call("closed", {"port": listener}).data["connected"] is False
    assert reg.call("open", {"port": listener}).data == {"connected": True}


def test_this_machine_enforces_every_layer() -> None:
    """On this project's machines (Linux, root) every layer holds; docs/scripts.md
    explains what is left elsewhere."""
    found = sandbox.isolation()
    assert found.available and found.bwrap and found.problem == ""
    assert found.process_limit == (os.geteuid() == 0)
    assert found.forkserver and found.summary()["python_launcher"] == "forkserver"
    assert found.summary() == {
        "sandbox": "bubblewrap", "pid_namespace": True, "network_namespace": True,
        "process_limit": found.process_limit, "python_launcher": "forkserver",
    }  # fmt: skip


@pytest.fixture
def no_sandbox(monkeypatch: pytest.MonkeyPatch) -> Iterator[pytest.MonkeyPatch]:
    """Probe the sandbox again with what the test patches; probe the real one after."""
    sandbox.isolation.cache_clear()
    yield monkeypatch
    monkeypatch.undo()
    sandbox.isolation.cache_clear()


@pytest.mark.parametrize("language", ["python", "javascript"])
def test_without_bubblewrap_scripts_fail_closed(
    reg: Registry, no_sandbox: pytest.MonkeyPatch, language: str
) -> None:
    no_sandbox.setattr(sandbox.bwrap, "find", lambda: None)
    source = "print(1)" if language == "python" else "module.exports = () => 1;"
    error = failed(run(reg, source, language=language))
    assert "cannot run: the script sandbox needs bubblewrap (`bwrap`), which is not" in error
    assert "apt-get install bubblewrap" in error
    assert sandbox.isolation().summary()["sandbox"].startswith("unavailable: ")


def test_a_bubblewrap_that_cannot_make_namespaces_fails_closed(
    reg: Registry, no_sandbox: pytest.MonkeyPatch
) -> None:
    no_sandbox.setattr(sandbox.bwrap, "find", lambda: "/bin/false")
    error = failed(run(reg, "print(1)"))
    assert "bubblewrap (/bin/false) cannot make the script sandbox here" in error
    assert "user namespaces" in error


@pytest.fixture
def slow_mark(reg: Registry, marker: str) -> str:
    """Adds the tool ``slow``: it takes the process name returned, then sleeps an hour
    (its timeout is 30 s)."""
    source = NAME_ITSELF.replace("MARKER", marker) + "import time\ntime.sleep(3600)"
    add_script(reg, "slow", source, timeout_s=30)
    return marker


def test_cancelled_acall_kills_the_script(reg: Registry, slow_mark: str) -> None:
    async def cancel() -> None:
        with pytest.raises(TimeoutError):
            await asyncio.wait_for(reg.acall("slow"), 1)

    asyncio.run(cancel())
    time.sleep(0.1)
    assert _processes_named(slow_mark) == []


# -- callers: threads, event loops ---------------------------------------------


def test_parallel_calls_from_threads(reg: Registry) -> None:
    add_script(reg, "square", "def main(x):\n    return x * x\n", max_processes=16)
    results: dict[int, Any] = {}

    def call(x: int) -> None:
        results[x] = reg.call("square", {"x": x}).data

    threads = [threading.Thread(target=call, args=(x,)) for x in range(8)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert results == {x: x * x for x in range(8)}


def test_acall_and_sync_call_inside_a_running_loop(reg: Registry) -> None:
    add_script(reg, "echo", "def main(**kw):\n    return kw\n")

    async def inside() -> tuple[Any, Any]:
        both = await asyncio.gather(reg.acall("echo", {"a": 1}), reg.acall("echo", {"b": 2}))
        nested = reg.call("echo", {"c": 3})  # sync call from async code: tooldb's own loop
        return [r.data for r in both], nested.data

    assert asyncio.run(inside()) == ([{"a": 1}, {"b": 2}], {"c": 3})


def test_large_arguments_reach_scripts_that_read_or_ignore_stdin(reg: Registry) -> None:
    big = "é" * 1_000_000
    assert run(reg, "def main(text):\n    return len(text)\n", {"text": big}).data == 1_000_000
    assert run(reg, "print(7)", {"text": big}).data == 7


# -- registration -------------------------------------------------------------------


@pytest.mark.parametrize(
    ("source", "metadata", "expected"),
    [
        ("print(1)", {"language": "ruby"}, "unknown language 'ruby'"),
        ("def main(:\n", {}, "Python syntax error at line 1"),
        ("module.exports = (a => ;", {"language": "javascript"}, "JavaScript syntax error"),
        ("print(1)", {"memory_mb": -5}, "metadata.memory_mb must be a positive integer"),
        ("print(1)", {"cpu_s": "1"}, "metadata.cpu_s must be a positive number"),
        ("print(1)", {"network": "yes"}, "metadata.network must be true or false"),
        ("print(1)", {"env": "HOME"}, "metadata.env must be a list of environment variable"),
        ("print(1)", {"env": ["BAD-NAME"]}, "metadata.env must be a list"),
    ],
)
def test_invalid_definitions_are_rejected(
    reg: Registry, source: str, metadata: dict[str, Any], expected: str
) -> None:
    with pytest.raises(DefinitionError, match="script tool 'bad'") as caught:
        add_script(reg, "bad", source, **metadata)
    assert expected in str(caught.value)
    assert reg.list() == []


def test_empty_source_is_rejected(reg: Registry) -> None:
    with pytest.raises(DefinitionError, match="target must not be empty"):
        add_script(reg, "empty", "   \n")


def test_javascript_without_node_is_rejected(
    reg: Registry, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("PATH", str(tmp_path))  # a real PATH without node
    monkeypatch.setattr(script, "NODE_FALLBACKS", ())
    with pytest.raises(DefinitionError, match="script tool 'js' is JavaScript, but node is not"):
        add_script(reg, "js", "module.exports = () => 1;", language="javascript")


def test_manifest_example_script_tool_runs(reg: Registry) -> None:
    root = Path(__file__).resolve().parent.parent
    reg.add_manifest(root / "examples" / "tools.yaml")
    result = reg.call("top_words", {"text": "the cat and the hat and the bat", "n": 2})
    assert result.success and result.data == [["the", 3], ["and", 2]]


def test_cli_calls_script_tools(sqlite_url: str) -> None:
    from typer.testing import CliRunner

    from tooldb.cli import app

    root = Path(__file__).resolve().parent.parent
    cli = CliRunner()
    added = cli.invoke(
        app, ["--db", sqlite_url, "add", "manifest", str(root / "examples/tools.yaml")]
    )
    assert added.exit_code == 0, added.output
    args = json.dumps({"text": "b a b", "n": 1})
    ok = cli.invoke(app, ["--db", sqlite_url, "call", "top_words", "--args", args, "--json"])
    assert ok.exit_code == 0 and json.loads(ok.stdout)["data"] == [["b", 2]]
    with tooldb.open(sqlite_url, settings=Settings(url=sqlite_url)) as registry:
        add_script(registry, "crash", "raise SystemExit(4)")
    failed_call = cli.invoke(app, ["--db", sqlite_url, "call", "crash", "--json"])
    assert failed_call.exit_code == 1
    assert "exited with code 4" in json.loads(failed_call.stdout)["error"]


PRIVILEGES = """
import os

def main():
    status = dict(line.split(":\\t", 1) for line in open("/proc/self/status").read().splitlines()
                  if ":\\t" in line)
    tries = {}
    for name, attempt in {
        "read_root_home": lambda: open("/root/.bashrc").read(),
        "list_root_home": lambda: os.listdir("/root"),
        "write_etc": lambda: open("/etc/tooldb-sandbox-test", "w").write("x"),
        "kill_host": lambda: os.kill(HOST_PID, 0),
        "kill_launcher": lambda: os.kill(os.getppid(), 0),
        "setuid_back": lambda: os.setuid(0),
    }.items():
        try:
            attempt()
            tries[name] = "allowed"
        except OSError as exc:
            tries[name] = type(exc).__name__
    return {
        "uid": os.getuid(), "euid": os.geteuid(), "gid": os.getgid(), "groups": os.getgroups(),
        "cap_eff": status["CapEff"].strip(), "cap_prm": status["CapPrm"].strip(),
        "no_new_privs": status["NoNewPrivs"].strip(), "cwd_owner": os.stat(".").st_uid,
        "tries": tries,
    }
"""


@pytest.mark.skipif(os.geteuid() != 0, reason="the uid switch applies when tooldb runs as root")
def test_scripts_run_as_root_give_up_root_for_good(reg: Registry) -> None:
    source = PRIVILEGES.replace("HOST_PID", str(os.getpid()))
    result = run(reg, source)
    assert result.success, result.error
    seen = result.data
    assert seen["uid"] >= sandbox.SANDBOX_UID_BASE and seen["euid"] == seen["uid"]
    assert seen["gid"] == seen["uid"] and seen["groups"] == []
    assert seen["cap_eff"] == "0000000000000000" and seen["cap_prm"] == "0000000000000000"
    assert seen["no_new_privs"] == "1" and seen["cwd_owner"] == seen["uid"]
    assert seen["tries"] == {
        "read_root_home": "FileNotFoundError",  # not in the sandbox's view at all
        "list_root_home": "FileNotFoundError",
        "write_etc": "PermissionError",
        "kill_host": "ProcessLookupError",  # its own PID namespace: the host is not there
        "kill_launcher": "PermissionError",  # its root parent, process 1 of that namespace
        "setuid_back": "PermissionError",
    }
    assert not Path("/etc/tooldb-sandbox-test").exists()
    assert sandbox.script_python().startswith(("/usr/bin/", "/usr/local/bin/"))
