"""What the provider adapters share: importing an optional SDK, finding the API key,
one SDK client per event loop, and turning SDK exceptions into ModelError.

Kept apart from the adapters so each of them is only its wire translation.
"""

from __future__ import annotations

import asyncio
import importlib
import json
import os
import threading
import weakref
from collections.abc import Callable, Mapping
from types import ModuleType
from typing import Generic, TypeVar

from ..errors import ModelError, UsageError

#: Sent to servers that need no key (Ollama, vLLM ...): the SDKs insist on one.
PLACEHOLDER_KEY = "no-key"
_MAX_SERVER_TEXT = 1000

C = TypeVar("C")


def import_sdk(module: str, provider: str, extra: str) -> ModuleType:
    """The provider's SDK, or a UsageError that names the extra to install."""
    try:
        return importlib.import_module(module)
    except ImportError as exc:
        raise UsageError(
            f"model provider {provider!r} needs the {module} SDK: pip install 'tooldb[{extra}]'"
            f" ({exc})"
        ) from None


def api_key(
    configured_env: str, default_env: str | None, *, provider: str, required: bool
) -> tuple[str | None, str | None]:
    """The key and the env var it came from.

    A variable named in ``model_api_key_env`` must be set; the provider's default
    variable is only required where the server needs a key (``required``).
    """
    env = configured_env or default_env
    key = os.environ.get(env) if env else None
    if configured_env and not key:
        raise UsageError(
            f"setting model_api_key_env names {configured_env!r}, which is not set in the "
            "environment"
        )
    if required and not key:
        raise UsageError(
            f"model provider {provider!r} needs an API key: set {env} (or point the setting "
            "model_api_key_env at the variable that holds it)"
        )
    return key, env if key else None


class ClientPerLoop(Generic[C]):
    """One SDK client per event loop.

    An async client's connection pool belongs to the loop that opened it, and callers
    may run one ``asyncio.run`` per agent run: a client reused on a later loop would
    hand out connections of a closed one.
    """

    def __init__(self, make: Callable[[], C]) -> None:
        self._make = make
        self._clients: weakref.WeakKeyDictionary[asyncio.AbstractEventLoop, C] = (
            weakref.WeakKeyDictionary()
        )
        self._lock = threading.Lock()

    def get(self) -> C:
        loop = asyncio.get_running_loop()
        with self._lock:
            client = self._clients.get(loop)
            if client is None:
                client = self._clients[loop] = self._make()
            return client

    def pop(self) -> C | None:
        """This loop's client, forgotten (the caller closes it)."""
        with self._lock:
            return self._clients.pop(asyncio.get_running_loop(), None)


def server_text(body: object) -> str:
    """The server's own error message from a decoded error body (OpenAI, Anthropic and
    Ollama shapes), else the body itself, shortened."""
    if isinstance(body, Mapping):
        inner = body.get("error", body)
        if isinstance(inner, Mapping):
            message = inner.get("message")
            kind = inner.get("type") or inner.get("code")
            if isinstance(message, str) and message:
                return _short(f"{message} ({kind})" if isinstance(kind, str) and kind else message)
        elif isinstance(inner, str) and inner:
            return _short(inner)
        return _short(json.dumps(body, ensure_ascii=False, default=str))
    if isinstance(body, str):
        return _short(body.strip())
    return ""


def _short(text: str) -> str:
    return text if len(text) <= _MAX_SERVER_TEXT else text[:_MAX_SERVER_TEXT] + " ..."


def model_error(
    exc: Exception,
    sdk: ModuleType,
    *,
    provider: str,
    model: str,
    base_url: str,
    timeout_s: float,
    key: str | None,
    key_env: str | None,
) -> ModelError:
    """A ModelError naming provider, model, status and the server's text (never the key)."""
    where = f"model provider {provider!r} (model {model!r} at {base_url})"
    status: int | None = getattr(exc, "status_code", None)
    if isinstance(exc, sdk.APIStatusError):
        text = server_text(getattr(exc, "body", None)) or str(exc)
        message = f"{where} answered HTTP {status}: {text}"
        if status in (401, 403):
            source = f"${key_env}" if key_env else "no key (none configured)"
            message += f" [the key sent was from {source}]"
    elif isinstance(exc, sdk.APITimeoutError):
        message = f"{where} did not answer within {timeout_s:g} s"
    elif isinstance(exc, sdk.APIConnectionError):
        cause = exc.__cause__ or exc.__context__
        message = f"{where} could not be reached: {cause or exc}"
    else:
        message = f"{where} failed: {type(exc).__name__}: {exc}"
    if key and key != PLACEHOLDER_KEY:
        message = message.replace(key, "[redacted]")
    return ModelError(message, provider=provider, model=model, status=status)


def unexpected_answer(exc: Exception, *, provider: str, model: str) -> ModelError:
    """A 200 answer whose body does not have the documented shape."""
    return ModelError(
        f"model provider {provider!r} (model {model!r}) sent an answer of an unexpected "
        f"shape: {type(exc).__name__}: {_short(str(exc))}",
        provider=provider,
        model=model,
    )


def parse_arguments(text: str) -> dict[str, object]:
    """Stored arguments as a JSON object; anything else is kept verbatim under ``_raw``
    (a provider that wants an object must still see what the model wrote)."""
    try:
        value = json.loads(text) if text.strip() else {}
    except ValueError:
        return {"_raw": text}
    return value if isinstance(value, dict) else {"_raw": text}
