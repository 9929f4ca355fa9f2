"""Arguments from a task's plain text, without a model (kept for its importers): the
extraction lives in the ``extraction`` package."""

from __future__ import annotations

from .extraction import Extraction, extract_arguments

__all__ = ["Extraction", "extract_arguments"]
