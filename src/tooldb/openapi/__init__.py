"""OpenAPI 3.0/3.1 documents imported as ``http`` tools (``importer.py``), their
schemas turned into JSON Schema 2020-12 (``schema.py``). Imported lazily by the
registry: ``import tooldb`` does not load it."""

from __future__ import annotations

from .importer import OpenAPIImport, SkippedOperation, read_openapi

__all__ = ["OpenAPIImport", "SkippedOperation", "read_openapi"]
