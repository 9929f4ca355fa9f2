"""The one error tree of tooldb.

Every failure a caller can act on is a ``ToolDBError``; the CLI is the only place
where these become exit codes (usage errors 2, tool/agent failures 1)::

    ToolDBError
    ├── UsageError            bad input from the caller (exit 2)
    │   ├── NotFound          no such tool/skill/agent/call in this tenant
    │   ├── ToolDisabled      the tool exists but is disabled
    │   ├── ArgumentError     arguments do not bind to the schema (retryable:
    │   │                     its text is written to be read by a model)
    │   └── DefinitionError   a tool definition or manifest is invalid
    ├── ExecutionError        the tool ran and failed (exit 1)
    │   └── ToolTimeout       the tool exceeded its timeout and was stopped
    ├── ModelError            a model provider failed
    └── StoreError            the store is unreachable, locked or out of date
"""

from __future__ import annotations

from typing import Any


class ToolDBError(Exception):
    """Base of every error tooldb raises on purpose."""

    exit_code: int = 1


class UsageError(ToolDBError):
    """The caller asked for something that cannot be done as asked."""

    exit_code = 2


class NotFound(UsageError):
    """No such object in this tenant (other tenants are invisible by design)."""


class ToolDisabled(UsageError):
    """The tool exists in this tenant but is disabled."""


class DefinitionError(UsageError):
    """A tool definition, manifest or schema is invalid."""


class ArgumentError(UsageError):
    """Arguments do not match the tool's schema.

    Retryable: the message names the tool, the parameter, the expected type and
    what was given, so a model can correct its call.
    """

    retryable = True

    def __init__(
        self,
        message: str,
        *,
        tool: str | None = None,
        parameter: str | None = None,
        expected: str | None = None,
        given: Any = None,
        problems: list[str] | None = None,
    ) -> None:
        super().__init__(message)
        self.tool = tool
        self.parameter = parameter
        self.expected = expected
        self.given = given
        self.problems = problems or [message]


class ExecutionError(ToolDBError):
    """The tool ran and failed."""


class ToolTimeout(ExecutionError):
    """The tool exceeded its timeout and was stopped."""


class ModelError(ToolDBError):
    """A model provider failed or answered something unusable.

    ``status`` is the HTTP status the provider answered (None when there was no
    answer: connection failure, timeout, or a body that made no sense).
    """

    def __init__(
        self,
        message: str,
        *,
        provider: str | None = None,
        model: str | None = None,
        status: int | None = None,
    ) -> None:
        super().__init__(message)
        self.provider = provider
        self.model = model
        self.status = status


class StoreError(ToolDBError):
    """The store cannot be used: unreachable, locked, or its schema is out of date."""
