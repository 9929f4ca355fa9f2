"""tooldb tools as a Pydantic AI toolset. Needs ``pip install 'tooldb[pydantic-ai]'``.

    agent = Agent(model, toolsets=[toolset(registry, task="...")])
    agent = Agent(model, toolsets=[toolset(registry, task="...", dynamic=True)])

Pydantic AI passes the model's arguments through as a JSON object and tooldb binds
them: an argument error is raised as ``ModelRetry`` with tooldb's message (the model
reads it and corrects its call), a tool that fails as ``ToolFailed``. Each Pydantic
AI run is recorded as one tooldb run with the run's prompt as its task, finished when
the agent run ends. With
``dynamic=True`` the tools offered on each step are those selection ranks for the
latest user message (selected again only when that message changes).
"""

from __future__ import annotations

import asyncio
import copy
from collections.abc import Sequence
from typing import Any

from ..registry import Registry
from ..types import ToolRecord
from .bridge import ToolBridge, missing_framework

try:
    from pydantic_ai import ModelRetry, RunContext
    from pydantic_ai.exceptions import ToolFailed
    from pydantic_ai.messages import ModelRequest, UserPromptPart
    from pydantic_ai.tools import ToolDefinition
    from pydantic_ai.toolsets import AbstractToolset
    from pydantic_ai.toolsets.abstract import ToolsetTool
    from pydantic_core import SchemaValidator, core_schema
except ImportError as exc:  # pragma: no cover - exercised in a subprocess
    raise missing_framework("Pydantic AI", "pydantic-ai", exc) from None

__all__ = ["TooldbToolset", "toolset"]

#: Any JSON object: the arguments reach tooldb's binder as the model sent them.
ANY_OBJECT = SchemaValidator(
    core_schema.dict_schema(core_schema.str_schema(), core_schema.any_schema())
)


def toolset(
    registry: Registry,
    task: str | None = None,
    k: int = 8,
    names: Sequence[str] | None = None,
    category: str | None = None,
    *,
    dynamic: bool = False,
    id: str | None = None,
    max_retries: int = 1,
) -> TooldbToolset:
    """A toolset of the tools ``registry.select`` ranks for ``task`` (the best ``k``) or
    of the named ones; ``dynamic``: re-selected on each step from the latest user
    message (the task, if given, is what is offered before there is one)."""
    bridge = ToolBridge(registry, "pydantic-ai", task=task, k=k, names=names, category=category)
    return TooldbToolset(bridge, k=k, dynamic=dynamic, id=id, max_retries=max_retries)


class TooldbToolset(AbstractToolset[Any]):
    """tooldb tools for a Pydantic AI agent (see ``toolset``)."""

    def __init__(
        self,
        bridge: ToolBridge,
        *,
        k: int = 8,
        dynamic: bool = False,
        id: str | None = None,
        max_retries: int = 1,
    ) -> None:
        self.bridge = bridge
        self.k = k
        self.dynamic = dynamic
        self.max_retries = max_retries
        self._id = id
        self._offered = self._tools(bridge.tools)
        self._selected_for: tuple[str, dict[str, ToolsetTool[Any]]] | None = None
        self._run_key: str | None = None  # set on the copy ``for_run`` makes

    @property
    def id(self) -> str | None:
        return self._id

    async def for_run(self, ctx: RunContext[Any]) -> TooldbToolset:
        """This toolset for one agent run: the same tools, and leaving it (the run's end)
        finishes the run's tooldb run."""
        scoped = copy.copy(self)
        scoped._run_key = ctx.run_id
        return scoped

    async def __aexit__(self, *args: Any) -> bool | None:
        if self._run_key is not None:
            await asyncio.to_thread(self.bridge.finish, self._run_key)
        return None

    def _tools(self, records: Sequence[ToolRecord]) -> dict[str, ToolsetTool[Any]]:
        return {
            record.name: ToolsetTool(
                toolset=self,
                tool_def=ToolDefinition(
                    name=record.name,
                    description=record.spec.description,
                    parameters_json_schema=record.spec.parameters,
                ),
                max_retries=self.max_retries,
                args_validator=ANY_OBJECT,
            )
            for record in records
        }

    async def get_tools(self, ctx: RunContext[Any]) -> dict[str, ToolsetTool[Any]]:
        if not self.dynamic:
            return self._offered
        latest = latest_user_text(ctx)
        if not latest:
            return self._offered
        if self._selected_for is None or self._selected_for[0] != latest:
            records = await asyncio.to_thread(self.bridge.select, latest, self.k)
            self._selected_for = (latest, self._tools(records))
        return self._selected_for[1]

    async def call_tool(
        self, name: str, tool_args: dict[str, Any], ctx: RunContext[Any], tool: ToolsetTool[Any]
    ) -> Any:
        prompt = ctx.prompt if isinstance(ctx.prompt, str) else None
        reply = await self.bridge.acall(name, tool_args, key=ctx.run_id, task=prompt)
        if reply.rejected:
            raise ModelRetry(reply.text)
        if not reply.ok:
            raise ToolFailed(reply.text)
        return reply.text


def latest_user_text(ctx: RunContext[Any]) -> str:
    """The text of the latest user prompt in the run's messages (else the run's prompt)."""
    for message in reversed(ctx.messages):
        if not isinstance(message, ModelRequest):
            continue
        for part in reversed(message.parts):
            if isinstance(part, UserPromptPart):
                content = part.content
                if isinstance(content, str):
                    return content
                texts = [item for item in content if isinstance(item, str)]
                if texts:
                    return "\n".join(texts)
    return ctx.prompt if isinstance(ctx.prompt, str) else ""
