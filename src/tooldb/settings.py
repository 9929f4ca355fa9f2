"""Configuration: defaults, overridden by a TOML file, overridden by ``TOOLDB_*`` env vars.

The file is ``$TOOLDB_CONFIG`` or ``config.toml`` in the user config directory,
with top-level keys named like the fields below (``url``, ``default_timeout_s``...).
"""

from __future__ import annotations

import os
import tomllib
from dataclasses import dataclass, fields, replace
from pathlib import Path
from typing import Any

import platformdirs

from .errors import UsageError

APP_NAME = "tooldb"


def default_data_dir() -> Path:
    """Where the default SQLite registry lives (``$TOOLDB_HOME`` wins)."""
    home = os.environ.get("TOOLDB_HOME")
    return Path(home) if home else Path(platformdirs.user_data_dir(APP_NAME))


def default_url() -> str:
    return f"sqlite:///{default_data_dir() / 'registry.db'}"


@dataclass(frozen=True)
class Settings:
    """Every knob tooldb reads; one immutable object passed down explicitly."""

    url: str | None = None
    tenant: str = "default"
    default_timeout_s: float = 30.0
    record_calls: bool = True
    record_output_chars: int = 4096
    sqlite_busy_timeout_s: float = 60.0
    #: auto (local MiniLM if installed, else none), local, hash[:DIM], openai:MODEL, none.
    embedder: str = "auto"
    embedder_url: str = ""
    embedder_api_key_env: str = "OPENAI_API_KEY"
    #: Selection: relevance fusion weights (dense + lexical), then performance terms.
    select_dense_weight: float = 0.6
    select_lexical_weight: float = 0.4
    select_success_weight: float = 0.3
    select_latency_weight: float = 0.05
    #: Pseudo-calls of prior belief in a new tool's success (smoothing), and that belief.
    select_prior_calls: float = 5.0
    select_prior_success: float = 0.9
    #: A tool this slow (average ms) gets half the latency score.
    select_latency_ref_ms: float = 1000.0
    record_decisions: bool = True

    @property
    def resolved_url(self) -> str:
        return self.url or default_url()

    @classmethod
    def load(cls, **overrides: Any) -> Settings:
        """Defaults < config file < environment < explicit overrides (None ignored)."""
        settings = cls()
        settings = settings._merge(_read_config_file(), "config file")
        settings = settings._merge(_read_env(), "environment")
        return settings._merge({k: v for k, v in overrides.items() if v is not None}, "argument")

    def _merge(self, values: dict[str, Any], source: str) -> Settings:
        known = {f.name: f for f in fields(self)}
        changes: dict[str, Any] = {}
        for key, raw in values.items():
            if key not in known:
                raise UsageError(f"unknown setting {key!r} from {source}")
            changes[key] = _coerce(key, raw, type(getattr(self, key)), source)
        return replace(self, **changes)


def _coerce(key: str, raw: Any, kind: type, source: str) -> Any:
    if key == "url" or kind is str:
        return str(raw)
    try:
        if kind is bool and isinstance(raw, str):
            lowered = raw.strip().lower()
            if lowered not in {"1", "0", "true", "false", "yes", "no", "on", "off"}:
                raise ValueError(raw)
            return lowered in {"1", "true", "yes", "on"}
        return kind(raw)
    except (TypeError, ValueError):
        raise UsageError(
            f"setting {key!r} from {source} must be {kind.__name__}, got {raw!r}"
        ) from None


def _read_config_file() -> dict[str, Any]:
    explicit = os.environ.get("TOOLDB_CONFIG")
    path = (
        Path(explicit) if explicit else Path(platformdirs.user_config_dir(APP_NAME)) / "config.toml"
    )
    if not path.is_file():
        if explicit:
            raise UsageError(f"TOOLDB_CONFIG points to {path}, which is not a file")
        return {}
    try:
        return tomllib.loads(path.read_text())
    except tomllib.TOMLDecodeError as exc:
        raise UsageError(f"config file {path} is not valid TOML: {exc}") from None


_ENV_KEYS = {
    "TOOLDB_URL": "url",
    "TOOLDB_TENANT": "tenant",
    "TOOLDB_DEFAULT_TIMEOUT": "default_timeout_s",
    "TOOLDB_RECORD_CALLS": "record_calls",
    "TOOLDB_RECORD_OUTPUT_CHARS": "record_output_chars",
    "TOOLDB_EMBEDDER": "embedder",
    "TOOLDB_EMBEDDER_URL": "embedder_url",
    "TOOLDB_RECORD_DECISIONS": "record_decisions",
}


def _read_env() -> dict[str, Any]:
    return {key: os.environ[env] for env, key in _ENV_KEYS.items() if os.environ.get(env)}
