"""tooldb over HTTP: ``tooldb serve`` runs a REST API under ``/api/`` and a dashboard
at ``/`` (docs/http-api.md, docs/dashboard.md). An interface, like the CLI: it drives
the registry's public API and imports nothing above it."""

from __future__ import annotations

from .app import ServerConfig, create_app
from .auth import Principal, Scope, create_key

__all__ = ["Principal", "Scope", "ServerConfig", "create_app", "create_key"]
