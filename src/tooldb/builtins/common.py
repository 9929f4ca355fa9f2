"""What the built-in groups share: the workspace root and paths confined to it, the
sandboxed command runner (shell, git), guarded HTTP requests (research, github), and
the registry and run the call belongs to."""

from __future__ import annotations

import os
import re
import shutil
from dataclasses import dataclass
from pathlib import Path, PurePosixPath
from typing import TYPE_CHECKING, Any

from ..context import current_context, current_registry
from ..errors import ExecutionError, UsageError
from ..settings import Settings, default_data_dir
from ..types import ToolKind

if TYPE_CHECKING:
    from ..executors.http import HttpExecutor
    from ..registry import Registry

#: Where the workspace is bound inside the sandbox (shell, git).
SANDBOX_WORKSPACE = "/workspace"


def workspace_root(settings: Settings, *, create: bool = True) -> Path:
    """The folder every file, shell and git tool is confined to: the ``workspace``
    setting, else ``$TOOLDB_WORKSPACE``, else ``workspace`` in the user data directory;
    created on first use."""
    chosen = settings.workspace or os.environ.get("TOOLDB_WORKSPACE", "")
    root = Path(chosen).expanduser() if chosen else default_data_dir() / "workspace"
    if create:
        root.mkdir(parents=True, exist_ok=True)
    return root.resolve()


def registry_settings() -> tuple[Registry, Settings]:
    registry = current_registry()
    return registry, registry.settings


def current_workspace() -> Path:
    return workspace_root(current_registry().settings)


def confined(root: Path, path: str, parameter: str = "path") -> Path:
    """``path`` (relative to the workspace root) as a real path inside it. Refused: an
    empty or NUL-containing path, any ``..`` part, an absolute path outside the root,
    and a path whose symlinks lead outside the root."""
    if not isinstance(path, str) or "\x00" in path:
        raise UsageError(f"'{parameter}' must be a path string without NUL characters")
    text = path.strip() or "."
    pure = PurePosixPath(text)
    if ".." in pure.parts:
        raise UsageError(
            f"'{parameter}' {path!r} is refused: '..' may not appear in a path (paths are "
            "relative to the workspace root)"
        )
    candidate = Path(text) if pure.is_absolute() else root / text
    resolved = candidate.resolve()
    if resolved != root and root not in resolved.parents:
        why = "a symlink in it leads" if not pure.is_absolute() else "it is"
        raise UsageError(
            f"'{parameter}' {path!r} is refused: {why} outside the workspace root {root}"
        )
    return resolved


def relative(root: Path, path: Path) -> str:
    return "." if path == root else path.relative_to(root).as_posix()


def run_context_agent() -> tuple[str | None, str | None]:
    """(run id, agent name) of the run in progress, or (None, None) outside a run."""
    context = current_context()
    if context is None:
        return None, None
    return context.run_id, context.agent


# -- the sandbox ---------------------------------------------------------------------------
@dataclass(frozen=True)
class CommandResult:
    exit_code: int
    stdout: str
    stderr: str
    timed_out: bool
    truncated: bool

    def as_json(self) -> dict[str, Any]:
        return {
            "exit_code": self.exit_code,
            "stdout": self.stdout,
            "stderr": self.stderr,
            "timed_out": self.timed_out,
            "output_truncated": self.truncated,
        }


async def run_in_sandbox(
    argv: list[str],
    *,
    workspace: Path,
    cwd: str = ".",
    network: bool,
    timeout_s: float,
    memory_mb: int,
    max_output_bytes: int = 1_000_000,
    env: dict[str, str] | None = None,
) -> CommandResult:
    """Run ``argv`` in bubblewrap: the system read-only, the workspace (only) bound
    read-write at /workspace and the working directory, fresh /tmp, PID/IPC/UTS
    namespaces, no network unless ``network``, no capabilities; CPU, memory, file
    size and open-file limits; output capped; the tree killed at the timeout."""
    from ..executors import bwrap as bw
    from ..executors import sandbox

    found = sandbox.isolation()
    found.require(argv[0])
    programs = tuple(p for p in (shutil.which(argv[0]),) if p)
    inner_cwd = SANDBOX_WORKSPACE if cwd in ("", ".") else f"{SANDBOX_WORKSPACE}/{cwd}"
    namespaces = ["--unshare-user", "--unshare-pid", "--unshare-ipc", "--unshare-uts"]
    namespaces += ["--unshare-cgroup-try"] + ([] if network else ["--unshare-net"])
    command = [
        found.bwrap, *namespaces, "--die-with-parent", "--new-session", "--as-pid-1",
        *bw.view(programs), "--size", str(256 * 1024 * 1024), "--tmpfs", "/tmp",
        "--bind", str(workspace), SANDBOX_WORKSPACE, "--chdir", inner_cwd,
        "--cap-drop", "ALL", "--", *argv,
    ]  # fmt: skip
    environment = {
        "PATH": sandbox.DEFAULT_PATH, "HOME": "/tmp", "TMPDIR": "/tmp", "LANG": "C.UTF-8",
        "GIT_CONFIG_NOSYSTEM": "1", "PYTHONDONTWRITEBYTECODE": "1", **(env or {}),
    }  # fmt: skip
    limits = [
        f"--as={memory_mb * 1024 * 1024}",
        f"--cpu={max(1, int(timeout_s))}",
        f"--fsize={100 * 1024 * 1024}",
        "--nofile=1024",
    ]
    prlimit = shutil.which("prlimit")
    if prlimit is None:
        raise ExecutionError("the sandbox needs `prlimit` (util-linux) to apply its limits")
    done = await sandbox.run_sandboxed(
        [prlimit, *limits, "--", *command],
        stdin=b"",
        env=environment,
        max_output_bytes=max_output_bytes,
        timeout_s=timeout_s,
    )
    return CommandResult(
        exit_code=done.returncode,
        stdout=done.stdout.decode("utf-8", errors="replace"),
        stderr=done.stderr_tail,
        timed_out=done.timed_out,
        truncated=done.overflowed,
    )


# -- guarded HTTP ------------------------------------------------------------------------------
def http_executor(registry: Registry) -> HttpExecutor:
    from ..executors.http import HttpExecutor

    executor = registry.executors.get(ToolKind.HTTP)
    if not isinstance(executor, HttpExecutor):
        raise ExecutionError("this registry has no HTTP executor (built-in web tools need one)")
    return executor


def guarded_request(
    registry: Registry,
    method: str,
    url: str,
    *,
    label: str,
    query: list[tuple[str, str]] | None = None,
    headers: list[tuple[str, str]] | None = None,
    json_body: Any = None,
    secrets: list[str] | None = None,
    raw: bool = False,
    max_bytes: int | None = None,
) -> Any:
    """One request through the HTTP guard (``http_allowed_hosts``), the time cap and
    the size cap of HTTP tools, checked redirects; secrets redacted from errors."""
    from ..executors.http_plan import Outgoing
    from ..executors.http_transfer import Transfer, send

    executor = http_executor(registry)
    settings = registry.settings
    outgoing = Outgoing(
        method,
        url,
        query or [],
        headers or [],
        json_body=json_body,
        has_body=json_body is not None,
        secrets=[s for s in (secrets or []) if s],
        auth_header="Authorization" if secrets else None,
    )
    cap = max_bytes or settings.http_max_response_bytes
    transfer = Transfer(label, outgoing, settings.http_timeout_s, cap, raw=raw)
    return send(executor.client(), transfer)


def secret(settings: Settings, name: str) -> str | None:
    """A secret by name: the ``[secrets]`` table, then the environment."""
    return settings.secrets.get(name) or os.environ.get(name) or None


_NAME = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._/-]{0,199}$")


def check_ref(value: str, parameter: str) -> str:
    """A git ref, branch or revision name: no leading '-' (it would be read as an
    option), no spaces or shell characters."""
    if not isinstance(value, str) or not _NAME.match(value) or ".." in value:
        raise UsageError(
            f"'{parameter}' {value!r} is not a valid name: letters, digits, '.', '_', '/', "
            "'-' only, not starting with '-' and without '..'"
        )
    return value
