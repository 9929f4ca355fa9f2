"""Models: the protocol the agent loop talks to, and ``load_model("provider:model")``.

Providers are optional extras imported only when asked for, so the core installs
without any SDK: ``openai`` (any OpenAI-compatible chat-completions server: OpenAI,
vLLM, Ollama, llama.cpp, LM Studio ... via a base URL) and ``anthropic``.
``ollama``, ``vllm``, ``lmstudio`` and ``llamacpp`` are the openai provider with
that server's usual local base URL.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from ..errors import UsageError
from .base import Message, Model, ModelTurn, StopReason, ToolCall, ToolChoice, ToolSchema, Usage
from .test import FunctionModel, ScriptedModel, call

if TYPE_CHECKING:
    from ..settings import Settings

__all__ = [
    "FunctionModel",
    "Message",
    "Model",
    "ModelTurn",
    "ScriptedModel",
    "StopReason",
    "ToolCall",
    "ToolChoice",
    "ToolSchema",
    "Usage",
    "call",
    "load_model",
    "register_model",
    "unregister_model",
]

#: OpenAI-compatible local servers and their default base URLs.
LOCAL_SERVERS = {
    "ollama": "http://127.0.0.1:11434/v1",
    "vllm": "http://127.0.0.1:8000/v1",
    "lmstudio": "http://127.0.0.1:1234/v1",
    "llamacpp": "http://127.0.0.1:8080/v1",
}
PROVIDERS = ("openai", "anthropic", *LOCAL_SERVERS)

#: Model objects registered under a ``provider:model`` name (``register_model``).
_REGISTERED: dict[str, Model] = {}


def register_model(spec: str, model: Model) -> None:
    """Make ``load_model(spec)`` return this object: how a test (or an application
    with a model of its own) gives a registered agent, whose definition names its model
    by a string, a ScriptedModel, a FunctionModel or any Model implementation."""
    provider, sep, name = spec.partition(":")
    if not sep or not provider or not name:
        raise UsageError(f"model name {spec!r} must look like provider:model")
    _REGISTERED[spec] = model


def unregister_model(spec: str) -> None:
    _REGISTERED.pop(spec, None)


def load_model(spec: str, settings: Settings | None = None) -> Model:
    """The model named ``provider:model`` (e.g. ``openai:gpt-4o-mini``,
    ``anthropic:claude-sonnet-4-5``, ``ollama:qwen3``), configured from settings."""
    from ..settings import Settings

    settings = settings or Settings()
    registered = _REGISTERED.get(spec)
    if registered is not None:
        return registered
    provider, sep, name = spec.partition(":")
    if not sep or not name:
        raise UsageError(f"model {spec!r} must look like provider:model (providers: {PROVIDERS})")
    if provider == "anthropic":
        from .anthropic import AnthropicModel

        return AnthropicModel.from_settings(name, settings)
    if provider == "openai" or provider in LOCAL_SERVERS:
        from .openai import OpenAIModel

        return OpenAIModel.from_settings(
            name, settings, provider=provider, default_base_url=LOCAL_SERVERS.get(provider)
        )
    raise UsageError(f"unknown model provider {provider!r} in {spec!r}: use one of {PROVIDERS}")
