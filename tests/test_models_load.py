"""``load_model("provider:model")``: which adapter, which base URL, which key, and the
clear errors for bad strings, missing keys and missing SDKs."""

from __future__ import annotations

import sys

import pytest

from tooldb import Settings
from tooldb.errors import UsageError
from tooldb.models import LOCAL_SERVERS, Model, load_model
from tooldb.models.anthropic import AnthropicModel
from tooldb.models.openai import OpenAIModel


@pytest.fixture(autouse=True)
def _no_provider_env(monkeypatch: pytest.MonkeyPatch) -> None:
    for name in ("OPENAI_API_KEY", "OPENAI_BASE_URL", "ANTHROPIC_API_KEY", "ANTHROPIC_BASE_URL"):
        monkeypatch.delenv(name, raising=False)


def test_openai(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("OPENAI_API_KEY", "sk-live")
    model = load_model("openai:gpt-4o-mini", Settings(model_timeout_s=7, model_max_retries=1))
    assert isinstance(model, OpenAIModel) and isinstance(model, Model)
    assert model.id == "openai:gpt-4o-mini" and model.name == "gpt-4o-mini"
    assert model.base_url == "https://api.openai.com/v1"
    assert (model.timeout_s, model.max_retries, model.max_tokens) == (7, 1, 4096)
    assert model.max_tokens_field == "max_completion_tokens"
    assert "sk-live" not in repr(model)


def test_openai_base_url_from_the_environment(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("OPENAI_BASE_URL", "http://gpu-box:8000/v1/")
    model = load_model("openai:mistral")
    assert isinstance(model, OpenAIModel) and model.base_url == "http://gpu-box:8000/v1"


def test_openai_itself_needs_a_key() -> None:
    with pytest.raises(UsageError, match=r"'openai' needs an API key: set OPENAI_API_KEY"):
        load_model("openai:gpt-4o-mini")


def test_a_named_key_variable_must_be_set(monkeypatch: pytest.MonkeyPatch) -> None:
    settings = Settings(model_api_key_env="GROQ_API_KEY", model_base_url="http://x/v1")
    monkeypatch.delenv("GROQ_API_KEY", raising=False)
    with pytest.raises(UsageError, match="model_api_key_env names 'GROQ_API_KEY', which is not"):
        load_model("openai:llama-3.3-70b", settings)
    monkeypatch.setenv("GROQ_API_KEY", "gsk-1")
    assert isinstance(load_model("openai:llama-3.3-70b", settings), OpenAIModel)


@pytest.mark.parametrize("provider", sorted(LOCAL_SERVERS))
def test_local_servers_need_no_key(provider: str, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("OPENAI_API_KEY", "sk-live")  # never sent to a local server
    model = load_model(f"{provider}:qwen3:8b")  # the model name may hold a colon
    assert isinstance(model, OpenAIModel)
    assert model.id == f"{provider}:qwen3:8b" and model.name == "qwen3:8b"
    assert model.base_url == LOCAL_SERVERS[provider].rstrip("/")
    assert model.max_tokens_field == "max_tokens"
    assert model._key == "no-key"


def test_a_base_url_setting_wins_over_the_local_default() -> None:
    model = load_model("ollama:qwen3", Settings(model_base_url="http://10.0.0.5:11434/v1"))
    assert isinstance(model, OpenAIModel) and model.base_url == "http://10.0.0.5:11434/v1"


def test_anthropic(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("ANTHROPIC_API_KEY", "sk-ant-1")
    model = load_model("anthropic:claude-haiku-4-5", Settings(model_max_tokens=1024))
    assert isinstance(model, AnthropicModel) and isinstance(model, Model)
    assert model.id == "anthropic:claude-haiku-4-5" and model.max_tokens == 1024
    assert model.base_url == "https://api.anthropic.com"


def test_anthropic_needs_a_key() -> None:
    with pytest.raises(UsageError, match=r"'anthropic' needs an API key: set ANTHROPIC_API_KEY"):
        load_model("anthropic:claude-haiku-4-5")


@pytest.mark.parametrize(
    ("spec", "error"),
    [
        ("mistral:large", r"unknown model provider 'mistral'"),
        ("gpt-4o", r"must look like provider:model"),
        ("openai:", r"must look like provider:model"),
        ("", r"must look like provider:model"),
    ],
)
def test_bad_model_strings(spec: str, error: str) -> None:
    with pytest.raises(UsageError, match=error):
        load_model(spec)


@pytest.mark.parametrize(
    ("spec", "sdk", "extra"),
    [
        ("openai:gpt-4o-mini", "openai", "openai"),
        ("ollama:qwen3", "openai", "openai"),
        ("anthropic:claude-haiku-4-5", "anthropic", "anthropic"),
    ],
)
def test_a_missing_sdk_names_the_extra(
    spec: str, sdk: str, extra: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("OPENAI_API_KEY", "sk-1")
    monkeypatch.setenv("ANTHROPIC_API_KEY", "sk-ant-1")
    monkeypatch.setitem(sys.modules, sdk, None)  # makes `import sdk` raise ImportError
    with pytest.raises(UsageError, match=rf"needs the {sdk} SDK: pip install 'tooldb\[{extra}\]'"):
        load_model(spec)


def test_a_python_model_spec_builds_the_model_its_function_returns() -> None:
    model = load_model("python:tooldb.workers.testing:plan_model")
    assert model.id == "python:plan"
    for spec, problem in (
        ("python:tooldb.workers.testing", "must look like python:module:function"),
        ("python:tooldb.no_such_module:f", "cannot load"),
        ("python:tooldb.workers.testing:no_such_function", "cannot load"),
        ("python:tooldb.workers.testing:tick", "not a Model"),
    ):
        with pytest.raises(UsageError, match=problem):
            load_model(spec)
