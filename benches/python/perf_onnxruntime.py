"""Case embed_musique, ONNX Runtime side: all-MiniLM-L6-v2 as an ONNX graph run by onnxruntime on the CPU,
in fp32 and dynamically quantised to int8.

Usage: python perf_onnxruntime.py DIR MODEL_DIR [--batch 32] [--max-tokens 256] [--threads 2]
       [--variants fp32,int8] [--rounds 1] [--save-vectors]

The graph is written here with onnx.helper (opset 17) from MODEL_DIR/model.safetensors and config.json, in
the form exporters give BERT: inputs input_ids and attention_mask (int64, [batch, seq], both axes dynamic);
embeddings (word Gather + position Slice + token type 0) and LayerNormalization; per layer Q, K and V as
MatMul against the transposed weight + Add, scores divided by sqrt(head size) plus (1 - mask) * -1e30,
Softmax, the output projection, residual Add and LayerNormalization, then the GELU MLP with Erf. Mean
pooling over the mask and L2 normalisation are in the graph too: its output sentence_embedding is
[batch, hidden]. ONNX shape inference fills value_info as exporters do (without it ORT does not fuse
SkipLayerNormalization). Cached as DIR/onnx/minilm-fp32.onnx. DIR/onnx/minilm-int8.onnx is
quantize_dynamic(fp32, int8, weight_type=QInt8) with its defaults otherwise: symmetric int8 weights per
tensor, uint8 activations quantised at run time, every MatMul with a constant weight and the word-embedding
Gather quantised. sentence-transformers' int8 exports (model_qint8_<isa>.onnx, through optimum's
AutoQuantizationConfig.<isa>(is_static=False)) differ: weights per channel, MatMul only, the embedding
tables left in fp32; per tensor costs this model accuracy (mean cosine to fp32 about 0.96 on MuSiQue texts,
0.993 per channel, at the same speed). fastembed's all-MiniLM-L6-v2 (Qdrant/all-MiniLM-L6-v2-onnx) is an
fp32 model.onnx. Building and quantising are not timed.

Texts, tokenisation and batching are perf_minilm.py's: DIR/musique/texts.json (passages, phrases, facts),
word pieces truncated at --max-tokens, sorted by length, batches of --batch padded to their longest text.
One InferenceSession per variant (CPUExecutionProvider, ORT_ENABLE_ALL, --threads intra-op threads, one
inter-op thread); tokenisation is timed with the forward passes, the best of --rounds kept per variant.
Compares with kgrag's vectors (DIR/musique/vectors.npy) and with ORT's fp32 vectors, and prints one JSON
object: onnxruntime, threads, texts, tokens, per variant ms, texts_per_s, cos_to_ours (mean, min, p1) and
max_abs_diff_to_ours (fp32) or cos_to_fp32 (int8), and ms (fp32's).
"""
import argparse
import json
import os
import sys
import time

import numpy as np
import onnx
import onnxruntime as ort
from onnx import TensorProto, helper, numpy_helper
from onnxruntime.quantization import QuantType, quantize_dynamic
from tokenizers import Tokenizer

from perf_minilm import batches, load_safetensors

OPSET = 17


def log(msg):
    print(msg, file=sys.stderr, flush=True)


class Graph:
    """Nodes and initializers, with generated tensor names."""

    def __init__(self):
        self.nodes, self.inits, self.count = [], [], 0

    def const(self, name, value, dtype=np.float32):
        self.inits.append(numpy_helper.from_array(np.asarray(value, dtype=dtype), name))
        return name

    def ints(self, name, values):
        return self.const(name, values, np.int64)

    def op(self, op_type, *inputs, **attrs):
        self.count += 1
        out = f"{op_type}_{self.count}"
        self.nodes.append(helper.make_node(op_type, list(inputs), [out], name=out, **attrs))
        return out

    def linear(self, x, w, prefix):
        """x @ W.T + b, W [out, in] stored transposed as the MatMul's constant input."""
        wt = self.const(prefix + ".weight_t", np.ascontiguousarray(w[prefix + ".weight"].T))
        return self.op("Add", self.op("MatMul", x, wt), self.const(prefix + ".bias", w[prefix + ".bias"]))

    def norm(self, x, w, prefix, eps):
        return self.op("LayerNormalization", x, self.const(prefix + ".weight", w[prefix + ".weight"]),
                       self.const(prefix + ".bias", w[prefix + ".bias"]), axis=-1, epsilon=eps)


def build_model(model_dir):
    """all-MiniLM-L6-v2 as an ONNX ModelProto: sentence embeddings, mean pooled and L2 normalised."""
    with open(f"{model_dir}/config.json") as f:
        cfg = json.load(f)
    w = load_safetensors(f"{model_dir}/model.safetensors")
    hidden, heads, eps = cfg["hidden_size"], cfg["num_attention_heads"], cfg["layer_norm_eps"]
    head = hidden // heads
    g = Graph()
    zero, axis1, axis2 = g.ints("zero", [0]), g.ints("axis_1", [1]), g.ints("axis_2", [2])
    split_heads = g.ints("split_heads", [0, 0, heads, head])
    merge_heads = g.ints("merge_heads", [0, 0, hidden])
    one, half, sqrt2 = g.const("one", 1.0), g.const("half", 0.5), g.const("sqrt2", np.sqrt(2.0))
    sqrt_head, minus_big = g.const("sqrt_head", np.sqrt(head)), g.const("minus_big", -1e30)

    word = g.const("embeddings.word", w["embeddings.word_embeddings.weight"])
    position = g.const("embeddings.position", w["embeddings.position_embeddings.weight"])
    token_type = g.const("embeddings.token_type_0", w["embeddings.token_type_embeddings.weight"][0])
    seq = g.op("Shape", "input_ids", start=1, end=2)
    h = g.op("Add", g.op("Gather", word, "input_ids"), g.op("Slice", position, zero, seq, zero))
    h = g.norm(g.op("Add", h, token_type), w, "embeddings.LayerNorm", eps)
    mask = g.op("Cast", "attention_mask", to=TensorProto.FLOAT)
    bias = g.op("Unsqueeze", g.op("Mul", g.op("Sub", one, mask), minus_big), g.ints("axes_1_2", [1, 2]))

    for i in range(cfg["num_hidden_layers"]):
        p = f"encoder.layer.{i}."
        q, k, v = (g.op("Reshape", g.linear(h, w, p + f"attention.self.{n}"), split_heads)
                   for n in ("query", "key", "value"))
        q = g.op("Transpose", q, perm=[0, 2, 1, 3])
        k = g.op("Transpose", k, perm=[0, 2, 3, 1])
        v = g.op("Transpose", v, perm=[0, 2, 1, 3])
        s = g.op("Add", g.op("Div", g.op("MatMul", q, k), sqrt_head), bias)
        ctx = g.op("MatMul", g.op("Softmax", s, axis=-1), v)
        ctx = g.op("Reshape", g.op("Transpose", ctx, perm=[0, 2, 1, 3]), merge_heads)
        h = g.norm(g.op("Add", g.linear(ctx, w, p + "attention.output.dense"), h), w,
                   p + "attention.output.LayerNorm", eps)
        x = g.linear(h, w, p + "intermediate.dense")
        x = g.op("Mul", g.op("Mul", x, g.op("Add", g.op("Erf", g.op("Div", x, sqrt2)), one)), half)
        h = g.norm(g.op("Add", g.linear(x, w, p + "output.dense"), h), w, p + "output.LayerNorm", eps)

    m = g.op("Unsqueeze", mask, axis2)
    pooled = g.op("ReduceSum", g.op("Mul", h, m), axis1, keepdims=0)
    count = g.op("Max", g.op("ReduceSum", m, axis1, keepdims=0), g.const("min_count", 1e-9))
    pooled = g.op("Div", pooled, count)
    length = g.op("Sqrt", g.op("ReduceSum", g.op("Mul", pooled, pooled), axis1, keepdims=1))
    out = g.op("Div", pooled, g.op("Max", length, g.const("min_norm", 1e-12)))
    g.nodes.append(helper.make_node("Identity", [out], ["sentence_embedding"], name="output"))

    inputs = [helper.make_tensor_value_info(n, TensorProto.INT64, ["batch", "seq"])
              for n in ("input_ids", "attention_mask")]
    output = helper.make_tensor_value_info("sentence_embedding", TensorProto.FLOAT, ["batch", hidden])
    graph = helper.make_graph(g.nodes, "all-MiniLM-L6-v2", inputs, [output], g.inits)
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", OPSET)], producer_name="kgrag")
    model.ir_version = 8
    onnx.checker.check_model(model)
    return onnx.shape_inference.infer_shapes(model)


def model_file(onnx_dir, model_dir, variant):
    """The cached model file of a variant, built (fp32) or quantised from fp32 (int8) when missing."""
    path = f"{onnx_dir}/minilm-{variant}.onnx"
    if os.path.exists(path):
        return path
    os.makedirs(onnx_dir, exist_ok=True)
    tmp = path + ".tmp"
    if variant == "fp32":
        log(f"building {path}")
        onnx.save(build_model(model_dir), tmp)
    else:
        log(f"quantising {path}")
        quantize_dynamic(model_file(onnx_dir, model_dir, "fp32"), tmp, weight_type=QuantType.QInt8)
    os.replace(tmp, path)
    return path


def session(path, threads):
    opts = ort.SessionOptions()
    opts.intra_op_num_threads = threads
    opts.inter_op_num_threads = 1
    opts.graph_optimization_level = ort.GraphOptimizationLevel.ORT_ENABLE_ALL
    return ort.InferenceSession(path, sess_options=opts, providers=["CPUExecutionProvider"])


def embed(sess, tok, texts, batch):
    """perf_minilm's tokenisation and batches, each through the session: (vectors, word pieces)."""
    ids = [e.ids for e in tok.encode_batch(texts)]
    out = None
    for part, a, m in batches(ids, batch):
        v = sess.run(None, {"input_ids": a, "attention_mask": m.astype(np.int64)})[0]
        if out is None:
            out = np.zeros((len(texts), v.shape[1]), dtype=np.float32)
        out[part] = v
    return out, sum(len(x) for x in ids)


def cosines(a, b):
    """Per-row cosine of a to b: mean, min and 1st percentile; None unless the shapes agree."""
    if a is None or b is None or a.shape != b.shape:
        return None
    a, b = a.astype(np.float64), b.astype(np.float64)
    cos = (a * b).sum(1) / np.maximum(np.linalg.norm(a, axis=1) * np.linalg.norm(b, axis=1), 1e-300)
    return {"mean": float(cos.mean()), "min": float(cos.min()), "p1": float(np.percentile(cos, 1))}


def main():
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("dir")
    p.add_argument("model_dir")
    p.add_argument("--batch", type=int, default=32)
    p.add_argument("--max-tokens", type=int, default=256)
    p.add_argument("--threads", type=int, default=2)
    p.add_argument("--variants", default="fp32,int8")
    p.add_argument("--rounds", type=int, default=1)
    p.add_argument("--save-vectors", action="store_true", help="write DIR/onnx/<variant>-vectors.npy")
    a = p.parse_args()
    variants = a.variants.split(",")
    if not variants or any(v not in ("fp32", "int8") for v in variants):
        p.error("--variants: a comma-separated subset of fp32,int8")

    with open(f"{a.dir}/musique/texts.json") as f:
        t = json.load(f)
    texts = t["passages"] + t["phrases"] + t["facts"]
    tok = Tokenizer.from_file(f"{a.model_dir}/tokenizer.json")
    tok.no_padding()
    tok.enable_truncation(a.max_tokens)
    onnx_dir = f"{a.dir}/onnx"
    sessions = {v: session(model_file(onnx_dir, a.model_dir, v), a.threads) for v in variants}

    best, vectors, tokens = {}, {}, 0
    for r in range(a.rounds):
        for v in variants:
            start = time.perf_counter()
            vectors[v], tokens = embed(sessions[v], tok, texts, a.batch)
            ms = (time.perf_counter() - start) * 1e3
            best[v] = min(ms, best.get(v, ms))
            log(f"round {r + 1}/{a.rounds} {v}: {ms:.0f} ms")
    if a.save_vectors:
        for v in variants:
            np.save(f"{onnx_dir}/{v}-vectors.npy", vectors[v])

    ours_path = f"{a.dir}/musique/vectors.npy"
    ours = np.load(ours_path) if os.path.exists(ours_path) else None
    fp32 = vectors.get("fp32")
    result = {"onnxruntime": ort.__version__, "threads": a.threads, "texts": len(texts), "tokens": tokens}
    for v in variants:
        entry = {"ms": best[v], "texts_per_s": len(texts) / (best[v] / 1e3),
                 "cos_to_ours": cosines(vectors[v], ours)}
        if v == "fp32":
            same = ours is not None and ours.shape == fp32.shape
            entry["max_abs_diff_to_ours"] = float(np.abs(ours - fp32).max()) if same else None
        else:
            entry["cos_to_fp32"] = cosines(vectors[v], fp32)
        result[v] = entry
    result["ms"] = best.get("fp32")
    print(json.dumps(result))


if __name__ == "__main__":
    main()
