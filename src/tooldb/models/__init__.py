"""Models: the protocol the agent loop talks to, and ``load_model("provider:model")``.

Providers are optional extras imported only when asked for, so the core installs
without any SDK: ``openai`` (any OpenAI-compatible chat-completions server: OpenAI,
vLLM, Ollama, llama.cpp, LM Studio ... via a base URL) and ``anthropic``.
``ollama``, ``vllm``, ``lmstudio`` and ``llamacpp`` are the openai provider with
that server's usual local base URL. ``python:module:function`` is the Model that
``function()`` returns (a scripted or function model a worker process can build from a
string: tests, benchmarks, an application's own model).
"""

from __future__ import annotations

from typing import TYPE_CHECKING, cast

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
PROVIDERS = ("openai", "anthropic", "python", *LOCAL_SERVERS)

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
    if provider == "python":
        return _python_model(spec, name)
    raise UsageError(f"unknown model provider {provider!r} in {spec!r}: use one of {PROVIDERS}")


def _python_model(spec: str, target: str) -> Model:
    """``python:module:function``: the model ``function()`` builds."""
    import importlib

    module_name, sep, function_name = target.partition(":")
    if not sep or not module_name or not function_name:
        raise UsageError(f"model {spec!r} must look like python:module:function")
    try:
        factory = getattr(importlib.import_module(module_name), function_name)
    except (ImportError, AttributeError) as exc:
        raise UsageError(f"model {spec!r}: cannot load {target!r} ({exc})") from exc
    model = factory()
    if not callable(getattr(model, "complete", None)) or not isinstance(
        getattr(model, "id", None), str
    ):
        raise UsageError(f"model {spec!r}: {target}() returned {type(model).__name__}, not a Model")
    return cast("Model", model)
