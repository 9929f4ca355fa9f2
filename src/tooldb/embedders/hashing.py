"""A deterministic embedder with no model: hashed words and character trigrams.

It captures shared vocabulary, not meaning, so it is a stand-in for tests and
for installations without the ``local`` extra, never a quality choice.
"""

from __future__ import annotations

import functools
import hashlib
import re

import numpy as np

from . import Vectors, normalise

_WORD = re.compile(r"\w+", re.UNICODE)


class HashEmbedder:
    def __init__(self, dim: int = 256) -> None:
        self.dim = dim
        self.id = f"hash:{dim}"

    def embed(self, texts: list[str]) -> Vectors:
        matrix = np.zeros((len(texts), self.dim), dtype=np.float32)
        for row, text in enumerate(texts):
            for feature, weight in self._features(text[:100_000]):
                value = _feature_hash(feature)
                sign = 1.0 if value & 1 else -1.0
                matrix[row, (value >> 1) % self.dim] += sign * weight
        return normalise(matrix)

    @staticmethod
    def _features(text: str) -> list[tuple[str, float]]:
        words = [w.lower() for w in _WORD.findall(text)]
        features = [(f"w:{w}", 1.0) for w in words]
        for word in words:
            padded = f"#{word}#"
            features.extend((f"c:{padded[i : i + 3]}", 0.3) for i in range(len(padded) - 2))
        return features


@functools.lru_cache(maxsize=1 << 18)
def _feature_hash(feature: str) -> int:
    """Words and trigrams repeat across tools: hash each once (same values as ever)."""
    digest = hashlib.blake2b(feature.encode("utf-8", "surrogatepass"), digest_size=8)
    return int.from_bytes(digest.digest(), "little")
