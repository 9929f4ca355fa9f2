"""An example tool that asks the runtime for its run and session (docs/agents.md,
"Parameters the runtime fills"): the model never sees ``run_id`` or ``session``."""

from __future__ import annotations

from typing import Annotated

from tooldb import Runtime, tool


@tool(category="notes")
def take_note(
    note: str,
    run_id: Annotated[str | None, Runtime("run_id")] = None,
    session: Annotated[str, Runtime("session_id")] = "",
) -> dict[str, str | None]:
    """Take a note for the current session, stamped with the run that took it.

    Args:
        note: What to note down.
    """
    return {"note": note, "run_id": run_id, "session": session}
