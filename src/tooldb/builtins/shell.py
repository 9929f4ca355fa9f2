"""Shell group (dangerous: registered only by name): ``bash`` runs a command in the
script sandbox (bubblewrap) with the workspace as its working directory and the only
writable folder of the host, no network unless the ``shell_network`` setting allows
it, and CPU, memory, time and output limits."""

from __future__ import annotations

from typing import Any

from ..decorators import tool
from ..errors import UsageError
from .common import confined, current_workspace, registry_settings, relative, run_in_sandbox

GROUP = {"builtin": "shell"}
MAX_COMMAND_CHARS = 100_000


@tool(category="shell", metadata=GROUP, timeout_s=3600)
async def bash(command: str, cwd: str = ".", timeout_s: float = 60.0) -> dict[str, Any]:
    """Run a bash command in a sandbox whose working directory is the workspace: run
    tests, build, inspect files with the usual programs (python3, git, grep, sed...).
    Only the workspace is writable; the rest of the system is read-only, there is no
    network unless the operator allowed it, and time, CPU and memory are limited.
    Returns exit_code, stdout and stderr (the end of it).

    Args:
        command: The bash command line, e.g. "python3 -m unittest -q".
        cwd: Working folder relative to the workspace root.
        timeout_s: Seconds before the command is killed (at most the shell_timeout_s setting).
    """
    if not isinstance(command, str) or not command.strip():
        raise UsageError("'command' must be a non-empty command line")
    if len(command) > MAX_COMMAND_CHARS or "\x00" in command:
        raise UsageError(f"'command' must be at most {MAX_COMMAND_CHARS} characters, without NUL")
    _, settings = registry_settings()
    if not 0 < timeout_s <= settings.shell_timeout_s:
        raise UsageError(
            f"'timeout_s' must be above 0 and at most {settings.shell_timeout_s:g} (the "
            f"shell_timeout_s setting), got {timeout_s}"
        )
    root = current_workspace()
    folder = confined(root, cwd, "cwd")
    if not folder.is_dir():
        raise UsageError(f"'cwd' {cwd!r} is not a folder in the workspace")
    result = await run_in_sandbox(
        ["/bin/bash", "-c", command],
        workspace=root,
        cwd=relative(root, folder),
        network=settings.shell_network,
        timeout_s=timeout_s,
        memory_mb=settings.shell_memory_mb,
    )
    return result.as_json()
