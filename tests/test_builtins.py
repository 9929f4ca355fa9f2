"""Built-in groups (issue 23): registration rules, memory, planning, workspace, shell,
git, code and charts, called through the registry as an agent would (recorded)."""

from __future__ import annotations

import base64
import os
from collections.abc import Iterator
from pathlib import Path

import pytest

import tooldb
from tooldb import Registry, Settings
from tooldb.builtins import DANGEROUS, GROUPS, add_builtins, enabled_groups, groups_to_add
from tooldb.errors import UsageError


@pytest.fixture
def workspace(tmp_path: Path) -> Path:
    root = tmp_path / "ws"
    root.mkdir()
    return root


@pytest.fixture
def builtins(store_url: str, workspace: Path) -> Iterator[Registry]:
    settings = Settings(embedder="hash", url=store_url, workspace=str(workspace))
    with tooldb.open(store_url, settings=settings) as registry:
        add_builtins(registry, list(GROUPS))
        yield registry


def ok(registry: Registry, tool: str, arguments: dict[str, object]) -> object:
    result = registry.call(tool, arguments)
    assert result.success, result.error
    return result.data


def refused(registry: Registry, tool: str, arguments: dict[str, object]) -> str:
    result = registry.call(tool, arguments)
    assert not result.success and result.error
    return result.error


# -- registration -----------------------------------------------------------------------
def test_dangerous_groups_only_by_name(sqlite_url: str) -> None:
    with tooldb.open(sqlite_url, settings=Settings(embedder="hash", url=sqlite_url)) as registry:
        names = {o.record.name for o in add_builtins(registry)}
        assert {"plan", "remember", "recall", "forget", "fetch_url", "web_search"} <= names
        assert {"analyze_code", "render_chart", "chain_of_thought", "analyze_system_state"} <= names
        assert not names & {"read_file", "write_file", "bash", "git_commit", "github_create_issue"}
        assert set(enabled_groups(registry)) == set(GROUPS) - DANGEROUS
        add_builtins(registry, ["shell"])
        assert "shell" in enabled_groups(registry) and "workspace" not in enabled_groups(registry)
    with pytest.raises(UsageError, match=r"unknown built-in group.*'files'"):
        groups_to_add(["files"])


def test_every_tool_has_a_description_for_a_model(builtins: Registry) -> None:
    for record in builtins.list():
        assert len(record.spec.description) > 60, record.name
        for name, schema in record.spec.parameters["properties"].items():
            assert schema.get("description"), f"{record.name}.{name}"


# -- memory -----------------------------------------------------------------------------
def test_memory_remember_recall_forget(builtins: Registry) -> None:
    first = ok(builtins, "remember", {"text": "The staging host is zephyr-3", "tags": ["infra"]})
    ok(builtins, "remember", {"text": "The user prefers short answers", "tags": ["prefs"]})
    found = ok(builtins, "recall", {"query": "which staging host?"})
    assert found["memories"][0]["text"] == "The staging host is zephyr-3"
    only = ok(builtins, "recall", {"query": "answers host", "tags": ["prefs"]})
    assert [m["text"] for m in only["memories"]] == ["The user prefers short answers"]
    ok(builtins, "forget", {"id": first["id"]})
    after = ok(builtins, "recall", {"query": "zephyr-3 staging host"})
    assert all("zephyr" not in m["text"] for m in after["memories"])
    assert "no such memory" in refused(builtins, "forget", {"id": first["id"]})
    assert "'text'" in refused(builtins, "remember", {"text": "  "})
    assert "'k'" in refused(builtins, "recall", {"query": "x", "k": 500})


def test_memory_is_per_tenant(builtins: Registry) -> None:
    ok(builtins, "remember", {"text": "tenant default secret plan"})
    other = builtins.for_tenant("other")
    add_builtins(other, ["memory"])
    assert ok(other, "recall", {"query": "secret plan"})["memories"] == []


def test_memory_recomputes_vectors_of_another_embedder(builtins: Registry) -> None:
    ok(builtins, "remember", {"text": "Invoices are archived in bucket acme-bills"})
    from tooldb.builtins import rows

    with rows.transaction(builtins.store) as connection:
        connection.execute(rows.memories.update().values(embedder="old", vector=b"xx"))
    found = ok(builtins, "recall", {"query": "where are invoices archived"})
    assert found["memories"][0]["text"].startswith("Invoices")
    stored = rows.list_memories(builtins.store, builtins.tenant, "default", 10)
    assert stored[0]["embedder"] == builtins.embedder.id  # type: ignore[union-attr]


# -- planning ---------------------------------------------------------------------------
def test_plan_needs_a_run(builtins: Registry) -> None:
    assert "agent run" in refused(builtins, "plan", {"action": "list"})


# -- workspace --------------------------------------------------------------------------
def test_workspace_read_write_edit_list_search(builtins: Registry, workspace: Path) -> None:
    ok(builtins, "write_file", {"path": "src/app.py", "content": "def total(x):\n    return x\n"})
    assert (workspace / "src/app.py").read_text().startswith("def total")
    ok(
        builtins,
        "edit_file",
        {"path": "src/app.py", "old_text": "return x", "new_text": "return 2 * x"},
    )
    read = ok(builtins, "read_file", {"path": "src/app.py"})
    assert "return 2 * x" in read["text"] and read["lines"] == 2
    listed = ok(builtins, "list_files", {"path": "."})
    assert listed["entries"] == ["src/", "src/app.py"]
    found = ok(builtins, "search_files", {"regex": r"def \w+"})
    assert found["matches"] == [{"path": "src/app.py", "line": 1, "text": "def total(x):"}]
    assert "occurs 0 times" in refused(
        builtins, "edit_file", {"path": "src/app.py", "old_text": "nope", "new_text": "x"}
    )
    assert "'regex'" in refused(builtins, "search_files", {"regex": "(unclosed"})
    assert "'pattern'" in refused(builtins, "list_files", {"pattern": "../*"})
    assert "'glob'" in refused(builtins, "search_files", {"regex": "x", "glob": "../../*"})


@pytest.mark.parametrize("path", ["../outside.txt", "src/../../x", "/etc/passwd", "a/\x00b"])
def test_workspace_refuses_paths_outside(builtins: Registry, path: str) -> None:
    assert "'path'" in refused(builtins, "read_file", {"path": path})
    assert "'path'" in refused(builtins, "write_file", {"path": path, "content": "x"})


def test_workspace_refuses_symlinks_that_escape(
    builtins: Registry, workspace: Path, tmp_path: Path
) -> None:
    secret = tmp_path / "secret.txt"
    secret.write_text("top secret")
    (workspace / "link.txt").symlink_to(secret)
    (workspace / "dir").symlink_to(tmp_path)
    assert "outside the workspace" in refused(builtins, "read_file", {"path": "link.txt"})
    assert "outside the workspace" in refused(
        builtins, "write_file", {"path": "dir/new.txt", "content": "x"}
    )
    assert not (tmp_path / "new.txt").exists()
    assert "link.txt" not in ok(builtins, "list_files", {})["entries"]
    assert ok(builtins, "search_files", {"regex": "secret"})["matches"] == []


def test_workspace_caps_sizes(store_url: str, workspace: Path) -> None:
    settings = Settings(
        embedder="hash", url=store_url, workspace=str(workspace), workspace_max_file_bytes=100
    )
    with tooldb.open(store_url, settings=settings) as registry:
        add_builtins(registry, ["workspace"])
        assert "workspace_max_file_bytes" in refused(
            registry, "write_file", {"path": "big.txt", "content": "x" * 101}
        )
        (workspace / "big.txt").write_text("y" * 500)
        assert "500 bytes" in refused(registry, "read_file", {"path": "big.txt"})


def test_workspace_root_from_environment(
    sqlite_url: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("TOOLDB_WORKSPACE", str(tmp_path / "from-env"))
    with tooldb.open(sqlite_url, settings=Settings(embedder="hash", url=sqlite_url)) as registry:
        add_builtins(registry, ["workspace"])
        ok(registry, "write_file", {"path": "a.txt", "content": "hello"})
    assert (tmp_path / "from-env" / "a.txt").read_text() == "hello"
    monkeypatch.delenv("TOOLDB_WORKSPACE")
    with tooldb.open(sqlite_url, settings=Settings(embedder="hash", url=sqlite_url)) as registry:
        ok(registry, "write_file", {"path": "b.txt", "content": "hi"})
    assert (Path(os.environ["TOOLDB_HOME"]) / "workspace" / "b.txt").read_text() == "hi"


# -- shell ------------------------------------------------------------------------------
def test_bash_runs_in_the_workspace(builtins: Registry, workspace: Path) -> None:
    (workspace / "t.py").write_text("print(6 * 7)\n")
    done = ok(builtins, "bash", {"command": "python3 t.py && echo made > out.txt && pwd"})
    assert done["exit_code"] == 0 and done["stdout"].split() == ["42", "/workspace"]
    assert (workspace / "out.txt").read_text() == "made\n"
    failed = ok(builtins, "bash", {"command": "echo oops >&2; exit 3"})
    assert failed["exit_code"] == 3 and "oops" in failed["stderr"]


def test_bash_cannot_reach_outside(builtins: Registry, tmp_path: Path) -> None:
    outside = tmp_path / "keep.txt"
    outside.write_text("keep")
    command = f"cat {outside}; rm -rf {tmp_path}; ls /home /root; cat /etc/shadow; echo $(id -u)"
    done = ok(builtins, "bash", {"command": command})
    assert outside.read_text() == "keep"
    assert "keep" not in done["stdout"]
    net = ok(
        builtins,
        "bash",
        {"command": "python3 -c \"import socket; socket.create_connection(('1.1.1.1', 53), 3)\""},
    )
    assert net["exit_code"] != 0 and "unreachable" in net["stderr"].lower()


def test_bash_limits(builtins: Registry) -> None:
    slow = ok(builtins, "bash", {"command": "sleep 30", "timeout_s": 1})
    assert slow["timed_out"] is True
    assert "'timeout_s'" in refused(builtins, "bash", {"command": "true", "timeout_s": 10_000})
    assert "'cwd'" in refused(builtins, "bash", {"command": "ls", "cwd": "../"})
    assert "'command'" in refused(builtins, "bash", {"command": " "})


# -- git --------------------------------------------------------------------------------
def test_git_commit_log_diff_show_branch(builtins: Registry, workspace: Path) -> None:
    (workspace / "repo").mkdir()
    (workspace / "repo/a.txt").write_text("one\n")
    first = ok(builtins, "git_commit", {"repo": "repo", "message": "add a"})
    assert len(first["commit"]) == 40 and "a.txt" in first["stat"]
    (workspace / "repo/a.txt").write_text("two\n")
    status = ok(builtins, "git_status", {"repo": "repo"})
    assert status["files"] == [{"status": " M", "path": "a.txt"}] and status["branch"] == "main"
    assert "+two" in ok(builtins, "git_diff", {"repo": "repo"})
    ok(builtins, "git_commit", {"repo": "repo", "message": "change a", "paths": ["a.txt"]})
    log = ok(builtins, "git_log", {"repo": "repo"})
    assert [c["subject"] for c in log] == ["change a", "add a"]
    assert "-one" in ok(builtins, "git_show", {"repo": "repo", "ref": log[0]["hash"]})
    branches = ok(
        builtins, "git_branch", {"repo": "repo", "create": "feature", "switch": "feature"}
    )
    assert branches == {"branches": ["feature", "main"], "current": "feature"}


@pytest.mark.parametrize(
    ("tool", "arguments"),
    [
        ("git_log", {"ref": "--output=/tmp/pwned"}),
        ("git_show", {"ref": "HEAD; rm -rf /"}),
        ("git_branch", {"create": "$(touch /tmp/pwned)"}),
        ("git_status", {"repo": "../"}),
        ("git_commit", {"message": "x", "paths": ["../../etc/passwd"]}),
    ],
)
def test_git_refuses_injection(builtins: Registry, tool: str, arguments: dict[str, object]) -> None:
    error = refused(builtins, tool, arguments)
    assert any(f"'{name}'" in error for name in ("ref", "create", "repo", "paths"))
    assert not Path("/tmp/pwned").exists()


# -- code -------------------------------------------------------------------------------
def test_analyze_code(builtins: Registry, workspace: Path) -> None:
    (workspace / "m.py").write_text(
        "import os\nfrom . import x\n\n"
        "class A:\n    def f(self, a):\n        if a and a > 1:\n            return 1\n"
        "        for i in range(3):\n            pass\n        return 0\n\n"
        "def g():\n    return [i for i in range(3) if i]\n"
    )
    (workspace / "bad.py").write_text("def (:\n")
    report = ok(builtins, "analyze_code", {"path": "."})
    by_path = {f["path"]: f for f in report["files"]}
    assert "syntax error" in by_path["bad.py"]["error"]
    functions = {f["name"]: f for f in by_path["m.py"]["functions"]}
    assert functions["A.f"]["complexity"] == 4 and functions["A.f"]["lines"] == 6
    assert functions["g"]["complexity"] == 3
    assert by_path["m.py"]["classes"][0]["methods"] == ["f"]
    assert by_path["m.py"]["imports"] == [".", "os"]
    assert any(f["code"] == "F401" for f in report["lint"])  # ruff's finding: os unused
    assert "'path'" in refused(builtins, "analyze_code", {"path": "../"})


# -- charts -----------------------------------------------------------------------------
def test_render_chart(builtins: Registry, workspace: Path) -> None:
    spec = {"mark": "bar", "encoding": {"x": {"field": "city", "type": "nominal"},
                                        "y": {"field": "n", "type": "quantitative"}}}  # fmt: skip
    rows = [{"city": "Oslo", "n": 3}, {"city": "Lima", "n": 5}]
    png = ok(builtins, "render_chart", {"spec": spec, "rows": rows, "path": "out/c.png"})
    assert (workspace / "out/c.png").read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    assert base64.b64decode(png["data_uri"].split(",", 1)[1])[:4] == b"\x89PNG"
    svg = ok(builtins, "render_chart", {"spec": spec, "rows": rows, "format": "svg"})
    assert svg["path"].startswith("charts/") and (workspace / svg["path"]).read_text().startswith(
        "<svg"
    )
    with_url = {**spec, "data": {"url": "http://169.254.169.254/latest"}}
    assert "'spec'" in refused(builtins, "render_chart", {"spec": with_url, "rows": rows})
    assert "'path'" in refused(
        builtins, "render_chart", {"spec": spec, "rows": rows, "path": "../c"}
    )


def test_doctor_shows_enabled_groups_and_the_workspace_root(
    sqlite_url: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    import json

    from typer.testing import CliRunner

    from tooldb.cli import app

    monkeypatch.setenv("TOOLDB_WORKSPACE", str(tmp_path / "ws-doctor"))
    runner = CliRunner()
    assert (
        runner.invoke(app, ["--db", sqlite_url, "add", "builtins", "memory", "shell"]).exit_code
        == 0
    )
    report = json.loads(runner.invoke(app, ["--db", sqlite_url, "doctor", "--json"]).stdout)
    assert report["builtin_groups"] == ["memory", "shell"]
    assert report["dangerous_groups_enabled"] == ["shell"]
    assert report["workspace_root"] == str(tmp_path / "ws-doctor")
    wrong = runner.invoke(app, ["--db", sqlite_url, "add", "builtins", "files"])
    assert wrong.exit_code == 2 and "unknown built-in group" in wrong.stderr


def test_plan_survives_its_run_and_memory_is_per_agent(builtins: Registry) -> None:
    from tooldb import AgentLoop
    from tooldb.models import ScriptedModel, ToolCall

    def run(agent: str, *calls: ToolCall) -> str:
        model = ScriptedModel([*[[c] for c in calls], "done"])
        result = AgentLoop(builtins, model, tools=["plan", "remember", "recall"], agent=agent).run(
            "work"
        )
        assert result.success, result.error
        return result.run_id

    first = run(
        "alice",
        ToolCall(id="1", name="plan", arguments={"action": "create", "steps": ["a", "b"]}),
        ToolCall(id="2", name="plan", arguments={"action": "complete", "step": 1}),
        ToolCall(id="3", name="remember", arguments={"text": "alice's note about zebras"}),
    )
    kept = ok(builtins, "plan", {"action": "list", "run_id": first})
    assert kept["plan"] == "1. [x] a\n2. [ ] b" and kept["remaining"] == 1
    assert "'run_id'" in refused(
        builtins, "plan", {"action": "complete", "step": 2, "run_id": first}
    )
    assert "no plan" in refused(builtins, "plan", {"action": "list", "run_id": "nope"})
    other = builtins.for_tenant("other")
    add_builtins(other, ["planning"])
    assert "no plan" in refused(other, "plan", {"action": "list", "run_id": first})
    bob = run("bob", ToolCall(id="1", name="recall", arguments={"query": "zebras"}))
    (use,) = [c for c in builtins.calls() if c.run_id == bob]
    assert '"memories": []' in (use.output_preview or "")
    assert ok(builtins, "recall", {"query": "zebras"})["memories"] == []  # outside: "default"


def test_parallel_plan_calls_of_one_turn_lose_no_step(builtins: Registry) -> None:
    from tooldb import AgentLoop
    from tooldb.models import ScriptedModel, ToolCall

    steps = [f"step {n}" for n in range(1, 9)]
    create = ToolCall(id="c", name="plan", arguments={"action": "create", "steps": steps})
    completes = [
        ToolCall(id=f"d{n}", name="plan", arguments={"action": "complete", "step": n})
        for n in range(1, 9)
    ]
    model = ScriptedModel([[create], completes, "done"])
    result = AgentLoop(builtins, model, tools=["plan"]).run("do eight things")
    assert result.success, result.error
    kept = ok(builtins, "plan", {"action": "list", "run_id": result.run_id})
    assert kept["remaining"] == 0, kept["plan"]
