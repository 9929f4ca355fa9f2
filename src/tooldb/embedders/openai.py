"""Any OpenAI-compatible ``POST /embeddings`` endpoint (OpenAI, vLLM, Ollama, LM Studio...).

Spoken over plain httpx: the wire format is small and stable, and this keeps the
``openai`` SDK optional for embeddings.
"""

from __future__ import annotations

import os
from typing import Any

import numpy as np

from ..errors import ModelError, UsageError
from . import Vectors, normalise

DEFAULT_URL = "https://api.openai.com/v1"
BATCH = 256


class OpenAIEmbedder:
    def __init__(
        self,
        model: str,
        *,
        url: str | None = None,
        api_key_env: str = "OPENAI_API_KEY",
        timeout_s: float = 60.0,
    ) -> None:
        if not model:
            raise UsageError(
                "embedder 'openai:MODEL' needs a model name, e.g. openai:text-embedding-3-small"
            )
        self.model = model
        self.url = (url or os.environ.get("OPENAI_BASE_URL") or DEFAULT_URL).rstrip("/")
        self.api_key_env = api_key_env
        self.timeout_s = timeout_s
        self.id = f"openai:{model}"
        self.dim = 0  # learned from the first answer

    def embed(self, texts: list[str]) -> Vectors:
        rows: list[list[float]] = []
        for start in range(0, len(texts), BATCH):
            rows.extend(self._request(texts[start : start + BATCH]))
        if not rows:
            return np.zeros((0, self.dim), dtype=np.float32)
        matrix = normalise(np.asarray(rows, dtype=np.float32))
        self.dim = int(matrix.shape[1])
        return matrix

    def _request(self, batch: list[str]) -> list[list[float]]:
        import httpx

        headers = {"Content-Type": "application/json"}
        key = os.environ.get(self.api_key_env)
        if key:
            headers["Authorization"] = f"Bearer {key}"
        body = {"model": self.model, "input": batch, "encoding_format": "float"}
        try:
            response = httpx.post(
                f"{self.url}/embeddings", json=body, headers=headers, timeout=self.timeout_s
            )
        except httpx.HTTPError as exc:
            raise ModelError(f"embeddings endpoint {self.url} failed: {exc}") from exc
        if response.status_code != 200:
            raise ModelError(
                f"embeddings endpoint {self.url} answered {response.status_code}: "
                f"{response.text[:300]}"
            )
        return _vectors(response.json(), len(batch), self.url)


def _vectors(payload: Any, expected: int, url: str) -> list[list[float]]:
    try:
        items = sorted(payload["data"], key=lambda item: item["index"])
        vectors = [list(map(float, item["embedding"])) for item in items]
    except (KeyError, TypeError, ValueError) as exc:
        raise ModelError(f"embeddings endpoint {url} sent an unexpected body: {exc!r}") from None
    if len(vectors) != expected or len({len(v) for v in vectors}) != 1:
        raise ModelError(
            f"embeddings endpoint {url} sent {len(vectors)} vectors of mixed or wrong size "
            f"for {expected} inputs"
        )
    return vectors
