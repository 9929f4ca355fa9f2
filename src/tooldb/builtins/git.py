"""Git group (dangerous: registered only by name): status, diff, log, show, commit and
branch on a repository inside the workspace, by the git program run in the script
sandbox (only the workspace visible, no network). Arguments are passed as separate
words, never through a shell; names that git would read as options are refused."""

from __future__ import annotations

from typing import Any

from ..decorators import tool
from ..errors import ExecutionError, UsageError
from .common import (
    check_ref,
    confined,
    current_workspace,
    registry_settings,
    relative,
    run_in_sandbox,
)

GROUP = {"builtin": "git"}
AUTHOR_NAME = "tooldb agent"
AUTHOR_EMAIL = "agent@tooldb.invalid"


async def _git(repo: str, *args: str, ok_codes: tuple[int, ...] = (0,)) -> str:
    root = current_workspace()
    folder = confined(root, repo, "repo")
    if not folder.is_dir():
        raise UsageError(f"'repo' {repo!r} is not a folder in the workspace")
    _, settings = registry_settings()
    argv = [
        "git", "-c", f"user.name={AUTHOR_NAME}", "-c", f"user.email={AUTHOR_EMAIL}",
        "-c", "safe.directory=*", "-c", "core.pager=cat", "-c", "init.defaultBranch=main",
        *args,
    ]  # fmt: skip
    result = await run_in_sandbox(
        argv,
        workspace=root,
        cwd=relative(root, folder),
        network=False,
        timeout_s=min(60.0, settings.shell_timeout_s),
        memory_mb=settings.shell_memory_mb,
    )
    if result.exit_code not in ok_codes:
        raise ExecutionError(
            f"git {args[0]} failed (exit {result.exit_code}): "
            f"{(result.stderr or result.stdout).strip()[-2000:]}"
        )
    return result.stdout


def _paths(paths: list[str], repo: str) -> list[str]:
    root = current_workspace()
    base = confined(root, repo, "repo")
    checked = []
    for path in paths:
        target = confined(root, f"{relative(root, base)}/{path}", "paths")
        checked.append(target.relative_to(base).as_posix() if target != base else ".")
    return checked


@tool(category="git", metadata=GROUP, timeout_s=120)
async def git_status(repo: str = ".") -> dict[str, Any]:
    """Show the branch and the changed, staged and untracked files of a git repository
    in the workspace. Use it before committing. Returns the branch line and one entry
    per file with its two-letter status (git status --porcelain).

    Args:
        repo: The repository folder relative to the workspace root.
    """
    out = await _git(repo, "status", "--porcelain=v1", "--branch")
    lines = out.splitlines()
    branch = lines[0][3:] if lines and lines[0].startswith("## ") else ""
    files = [{"status": line[:2], "path": line[3:]} for line in lines if not line.startswith("## ")]
    return {"branch": branch, "files": files, "clean": not files}


@tool(category="git", metadata=GROUP, timeout_s=120)
async def git_diff(repo: str = ".", staged: bool = False, path: str = "") -> str:
    """The unified diff of uncommitted changes in a workspace repository (working tree
    against the index, or with staged=true the index against HEAD). Returns the diff text.

    Args:
        repo: The repository folder relative to the workspace root.
        staged: Show what is staged for the next commit instead.
        path: Only this file or folder (relative to the repository).
    """
    args = ["diff", "--no-color", *(["--staged"] if staged else [])]
    if path:
        args += ["--", *_paths([path], repo)]
    return await _git(repo, *args)


@tool(category="git", metadata=GROUP, timeout_s=120)
async def git_log(repo: str = ".", limit: int = 10, ref: str = "HEAD") -> list[dict[str, str]]:
    """Recent commits of a workspace repository, newest first: hash, author, date and
    subject. Use it to see history before a show or diff.

    Args:
        repo: The repository folder relative to the workspace root.
        limit: How many commits (1 to 200).
        ref: Branch, tag or commit to start from.
    """
    if not 1 <= limit <= 200:
        raise UsageError(f"'limit' must be from 1 to 200, got {limit}")
    check_ref(ref, "ref")
    out = await _git(
        repo, "log", f"--max-count={limit}", "--format=%H%x1f%an%x1f%aI%x1f%s", ref, "--"
    )
    rows = [line.split("\x1f") for line in out.splitlines() if line]
    return [{"hash": h, "author": a, "date": d, "subject": s} for h, a, d, s in rows]


@tool(category="git", metadata=GROUP, timeout_s=120)
async def git_show(repo: str = ".", ref: str = "HEAD") -> str:
    """One commit of a workspace repository: its message and its diff (git show).

    Args:
        repo: The repository folder relative to the workspace root.
        ref: The commit, branch or tag to show.
    """
    check_ref(ref, "ref")
    return await _git(repo, "show", "--no-color", ref, "--")


@tool(category="git", metadata=GROUP, timeout_s=120)
async def git_commit(
    message: str, repo: str = ".", paths: list[str] | None = None
) -> dict[str, Any]:
    """Stage files and commit them in a workspace repository (created with git init if
    the folder is not one yet). Without paths, every change is staged (git add -A).
    Returns the new commit's hash and what it changed.

    Args:
        message: The commit message.
        repo: The repository folder relative to the workspace root.
        paths: Files to stage, relative to the repository (default: all changes).
    """
    if not isinstance(message, str) or not message.strip():
        raise UsageError("'message' must be a non-empty commit message")
    root = current_workspace()
    if not (confined(root, repo, "repo") / ".git").exists():
        await _git(repo, "init", "-q")
    staged = _paths(paths, repo) if paths else []
    await _git(repo, "add", "-A", "--", *staged)
    await _git(repo, "commit", "-q", "-m", message)
    commit = (await _git(repo, "rev-parse", "HEAD")).strip()
    stat = await _git(repo, "show", "--stat", "--format=", "HEAD")
    return {"commit": commit, "stat": stat.strip()}


@tool(category="git", metadata=GROUP, timeout_s=120)
async def git_branch(repo: str = ".", create: str = "", switch: str = "") -> dict[str, Any]:
    """List the branches of a workspace repository, or create one, or switch to one
    (create and switch together: create it and switch to it). Returns the branches and
    the current one.

    Args:
        repo: The repository folder relative to the workspace root.
        create: Name of a branch to create at HEAD.
        switch: Name of a branch to switch to.
    """
    if create:
        check_ref(create, "create")
        await _git(repo, "branch", create)
    if switch:
        check_ref(switch, "switch")
        await _git(repo, "switch", "-q", switch)
    out = await _git(repo, "branch", "--format=%(HEAD)%(refname:short)")
    names = [line[1:] for line in out.splitlines() if line]
    current = next((line[1:] for line in out.splitlines() if line.startswith("*")), "")
    return {"branches": names, "current": current}
