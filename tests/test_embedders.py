"""Embedders: the bundled MiniLM (offline), the hashing stand-in, and an OpenAI-compatible
endpoint served for real on 127.0.0.1 in the documented wire format."""

from __future__ import annotations

import json
import threading
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from tooldb import ModelError, UsageError
from tooldb.embedders import local_available, open_embedder, resolve_name


def test_bundled_minilm_gives_unit_vectors_that_capture_meaning() -> None:
    assert local_available()
    embedder = open_embedder("local")
    assert embedder is not None and embedder.id == "local:all-MiniLM-L6-v2"
    vectors = embedder.embed(
        ["Weather forecast for a city", "Will it rain in Paris tomorrow?", "Resize an image"]
    )
    assert vectors.shape == (3, 384) and vectors.dtype == np.float32
    assert np.allclose(np.linalg.norm(vectors, axis=1), 1.0, atol=1e-5)
    # No shared words, same meaning: closer than the unrelated tool.
    assert float(vectors[0] @ vectors[1]) > float(vectors[2] @ vectors[1]) + 0.2
    assert embedder.embed([]).shape == (0, 384)
    assert resolve_name("auto") == "local"


REFERENCE = Path(__file__).parent / "fixtures" / "minilm_reference.json"


def test_onnx_minilm_matches_sentence_transformers_reference() -> None:
    """Vectors torch + sentence-transformers produced for these texts (written once,
    so this test needs no torch): same model id, same numbers, one batch or one by one
    (padding to the batch's longest text changes nothing)."""
    reference = json.loads(REFERENCE.read_text())
    expected = np.array(reference["vectors"], dtype=np.float32)
    embedder = open_embedder("local")
    assert embedder is not None
    together = embedder.embed(reference["texts"])
    assert np.abs(together - expected).max() < 1e-5
    alone = np.vstack([embedder.embed([text]) for text in reference["texts"]])
    assert np.abs(alone - expected).max() < 1e-5


def test_int8_variant_has_its_own_id_and_stays_close() -> None:
    reference = json.loads(REFERENCE.read_text())
    expected = np.array(reference["vectors"], dtype=np.float32)
    embedder = open_embedder("LOCAL-INT8")
    assert embedder is not None and embedder.id == "local:all-MiniLM-L6-v2-int8"
    vectors = embedder.embed(reference["texts"])
    assert np.allclose(np.linalg.norm(vectors, axis=1), 1.0, atol=1e-5)
    cosines = np.sum(vectors * expected, axis=1)
    assert cosines.min() > 0.97  # quantised weights: close, not equal


def test_the_graph_is_built_once_and_cached_atomically(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from tooldb.embedders import local

    monkeypatch.setenv("TOOLDB_CACHE_DIR", str(tmp_path / "cache"))
    monkeypatch.setattr(local, "_SESSIONS", {})
    first = local.LocalEmbedder().embed(["hello"])
    files = sorted(p.name for p in (tmp_path / "cache").iterdir())
    assert len(files) == 1 and files[0].endswith(".onnx")  # no temporary file left
    monkeypatch.setattr(local, "_SESSIONS", {})
    monkeypatch.setattr(local, "_write_atomically", _must_not_build)  # served from the cache
    again = local.LocalEmbedder().embed(["hello"])
    assert np.array_equal(first, again)
    assert local.LocalEmbedder().describe()["precision"] == "fp32"


def _must_not_build(*_: object) -> None:
    raise AssertionError("the cached graph should have been used")


def test_hash_embedder_is_deterministic_and_shape_checked() -> None:
    embedder = open_embedder("hash:64")
    assert embedder is not None and embedder.id == "hash:64"
    first, second = embedder.embed(["get weather"]), embedder.embed(["get weather"])
    assert first.shape == (1, 64) and np.array_equal(first, second)
    assert embedder.embed([""]).tolist() == [[0.0] * 64]  # nothing to hash: a zero vector
    for bad in ("hash:3", "hash:abc", "word2vec", "openai:"):
        with pytest.raises(UsageError):
            open_embedder(bad)
    assert open_embedder("none") is None


class _EmbeddingsAPI(BaseHTTPRequestHandler):
    """POST /v1/embeddings as the OpenAI API documents it (data[].embedding, .index)."""

    requests: list[dict[str, Any]] = []
    mode = "ok"

    def do_POST(self) -> None:
        body = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
        type(self).requests.append({"path": self.path, "auth": self.headers.get("Authorization"),
                                    "body": body})  # fmt: skip
        if self.mode == "error":
            return self._send(429, {"error": {"message": "Rate limit reached", "type": "requests"}})
        if self.mode == "garbage":
            return self._send(200, {"object": "list", "data": [{"nothing": True}]})
        data = [
            {"object": "embedding", "index": i, "embedding": [float(len(text)), 1.0, 0.0]}
            for i, text in enumerate(body["input"])
        ]
        data.reverse()  # the index, not the order, says which input a vector belongs to
        usage = {"prompt_tokens": 3, "total_tokens": 3}
        self._send(200, {"object": "list", "data": data, "model": body["model"], "usage": usage})

    def _send(self, status: int, payload: dict[str, Any]) -> None:
        raw = json.dumps(payload).encode()
        self.send_response(status)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(raw)))
        self.end_headers()
        self.wfile.write(raw)

    def log_message(self, *_args: object) -> None:
        return


@pytest.fixture
def api() -> Iterator[str]:
    _EmbeddingsAPI.requests, _EmbeddingsAPI.mode = [], "ok"
    server = ThreadingHTTPServer(("127.0.0.1", 0), _EmbeddingsAPI)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    yield f"http://127.0.0.1:{server.server_address[1]}/v1"
    server.shutdown()
    server.server_close()


def test_openai_compatible_endpoint(api: str, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("TEST_EMBED_KEY", "sk-test")
    embedder = open_embedder("openai:text-embedding-3-small", url=api, api_key_env="TEST_EMBED_KEY")
    assert embedder is not None and embedder.id == "openai:text-embedding-3-small"
    vectors = embedder.embed(["a", "abcd"])
    assert vectors.shape == (2, 3) and embedder.dim == 3
    expected = np.array([[1.0, 1.0, 0.0], [4.0, 1.0, 0.0]], dtype=np.float32)
    expected /= np.linalg.norm(expected, axis=1, keepdims=True)
    assert np.allclose(vectors, expected)
    request = _EmbeddingsAPI.requests[0]
    assert request["path"] == "/v1/embeddings" and request["auth"] == "Bearer sk-test"
    assert request["body"] == {"model": "text-embedding-3-small", "input": ["a", "abcd"],
                               "encoding_format": "float"}  # fmt: skip


def test_openai_endpoint_failures_are_model_errors(api: str) -> None:
    embedder = open_embedder("openai:m", url=api)
    assert embedder is not None
    _EmbeddingsAPI.mode = "error"
    with pytest.raises(ModelError, match=r"429.*Rate limit"):
        embedder.embed(["x"])
    _EmbeddingsAPI.mode = "garbage"
    with pytest.raises(ModelError, match="unexpected body"):
        embedder.embed(["x"])
    unreachable = open_embedder("openai:m", url="http://127.0.0.1:9/v1")
    assert unreachable is not None
    with pytest.raises(ModelError, match="failed"):
        unreachable.embed(["x"])


def test_registration_survives_an_embedder_that_is_down(sqlite_url: str) -> None:
    import tooldb
    from tooldb import Settings

    down = Settings(url=sqlite_url, embedder="openai:m", embedder_url="http://127.0.0.1:9/v1")
    with tooldb.open(sqlite_url, settings=down) as registry:
        registry.add_module("tooldb.examples.basic")
        assert registry.embedding_error and "127.0.0.1:9" in registry.embedding_error
        assert registry.get("slugify").version == 1  # registered all the same
    with tooldb.open(sqlite_url, settings=Settings(url=sqlite_url, embedder="hash")) as registry:
        assert registry.embed() == len(registry.list())  # picked up later, nothing lost
