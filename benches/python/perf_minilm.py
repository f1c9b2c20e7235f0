"""Case embed_musique, reference side: a plain numpy forward pass of all-MiniLM-L6-v2 (BERT, 6 layers, 12
heads, mean pooling, L2 normalisation) from the model's own safetensors and tokenizer.json.

Usage: python perf_minilm.py DIR MODEL_DIR [--batch 32] [--max-tokens 256]

Embeds DIR/musique/texts.json (passages, phrases, facts, in that order) the way sentence-transformers
batches: word pieces truncated at --max-tokens, texts sorted by length, batches of --batch padded to their
longest text, padding masked out of attention and pooling. Tokenisation is timed with the forward pass.
Compares with kgrag's vectors (DIR/musique/vectors.npy) and prints one JSON object: ms, texts,
texts_per_s, tokens, max_abs_diff.
"""
import argparse
import json
import struct
import time

import numpy as np
from scipy.special import erf
from tokenizers import Tokenizer


def load_safetensors(path):
    with open(path, "rb") as f:
        n = struct.unpack("<Q", f.read(8))[0]
        header = json.loads(f.read(n))
        data = f.read()
    out = {}
    for name, meta in header.items():
        if name == "__metadata__" or meta["dtype"] != "F32":
            continue
        a, b = meta["data_offsets"]
        out[name] = np.frombuffer(data[a:b], dtype="<f4").reshape(meta["shape"])
    return out


class MiniLM:
    def __init__(self, model_dir, layers=6, heads=12, eps=1e-12):
        w = load_safetensors(f"{model_dir}/model.safetensors")
        self.eps = eps
        self.heads = heads
        self.word = w["embeddings.word_embeddings.weight"]
        self.pos = w["embeddings.position_embeddings.weight"]
        self.typ = w["embeddings.token_type_embeddings.weight"][0]
        self.ln0 = (w["embeddings.LayerNorm.weight"], w["embeddings.LayerNorm.bias"])
        t = lambda m: np.ascontiguousarray(m.T)  # noqa: E731  (x @ W.T as a contiguous x @ Wt)
        self.layers = []
        for i in range(layers):
            p = f"encoder.layer.{i}."
            qkv = np.concatenate([w[p + f"attention.self.{n}.weight"] for n in ("query", "key", "value")])
            qkv_b = np.concatenate([w[p + f"attention.self.{n}.bias"] for n in ("query", "key", "value")])
            self.layers.append(dict(
                qkv=t(qkv), qkv_b=qkv_b,
                o=t(w[p + "attention.output.dense.weight"]), o_b=w[p + "attention.output.dense.bias"],
                ln1=(w[p + "attention.output.LayerNorm.weight"], w[p + "attention.output.LayerNorm.bias"]),
                i=t(w[p + "intermediate.dense.weight"]), i_b=w[p + "intermediate.dense.bias"],
                out=t(w[p + "output.dense.weight"]), out_b=w[p + "output.dense.bias"],
                ln2=(w[p + "output.LayerNorm.weight"], w[p + "output.LayerNorm.bias"]),
            ))

    def norm(self, x, wb):
        mu = x.mean(-1, keepdims=True)
        xc = x - mu
        var = (xc * xc).mean(-1, keepdims=True)
        return xc / np.sqrt(var + self.eps) * wb[0] + wb[1]

    def forward(self, ids, mask):
        b, n = ids.shape
        h_dim = self.word.shape[1]
        hd = h_dim // self.heads
        h = self.word[ids] + self.pos[:n][None] + self.typ
        h = self.norm(h, self.ln0)
        bias = ((1.0 - mask) * np.float32(-1e30))[:, None, None, :].astype(np.float32)
        scale = np.float32(1.0 / np.sqrt(hd))
        for L in self.layers:
            qkv = h @ L["qkv"] + L["qkv_b"]
            qkv = qkv.reshape(b, n, 3, self.heads, hd).transpose(2, 0, 3, 1, 4)
            q, k, v = qkv[0], qkv[1], qkv[2]
            s = (q @ k.transpose(0, 1, 3, 2)) * scale + bias
            s = np.exp(s - s.max(-1, keepdims=True))
            s /= s.sum(-1, keepdims=True)
            ctx = (s @ v).transpose(0, 2, 1, 3).reshape(b, n, h_dim)
            h = self.norm(ctx @ L["o"] + L["o_b"] + h, L["ln1"])
            x = h @ L["i"] + L["i_b"]
            x = 0.5 * x * (1.0 + erf(x * np.float32(1.0 / np.sqrt(2.0))))
            h = self.norm(x.astype(np.float32) @ L["out"] + L["out_b"] + h, L["ln2"])
        m = mask[:, :, None]
        pooled = (h * m).sum(1) / np.maximum(m.sum(1), 1e-9)
        return pooled / np.maximum(np.linalg.norm(pooled, axis=1, keepdims=True), 1e-12)


def batches(ids, batch):
    """sentence-transformers' batching of word-piece lists `ids`: sorted by length, batches of `batch`
    padded to their longest text. Yields (positions in `ids`, ids int64, mask float32 of 0/1)."""
    order = sorted(range(len(ids)), key=lambda i: -len(ids[i]))
    for s in range(0, len(order), batch):
        part = order[s:s + batch]
        n = max(len(ids[i]) for i in part)
        a = np.zeros((len(part), n), dtype=np.int64)
        m = np.zeros((len(part), n), dtype=np.float32)
        for r, i in enumerate(part):
            a[r, :len(ids[i])] = ids[i]
            m[r, :len(ids[i])] = 1.0
        yield part, a, m


def embed(model, tok, texts, batch):
    ids = [e.ids for e in tok.encode_batch(texts)]
    out = np.zeros((len(texts), model.word.shape[1]), dtype=np.float32)
    for part, a, m in batches(ids, batch):
        out[part] = model.forward(a, m)
    return out, sum(len(x) for x in ids)


def main():
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("dir")
    p.add_argument("model_dir")
    p.add_argument("--batch", type=int, default=32)
    p.add_argument("--max-tokens", type=int, default=256)
    a = p.parse_args()
    with open(f"{a.dir}/musique/texts.json") as f:
        t = json.load(f)
    texts = t["passages"] + t["phrases"] + t["facts"]
    model = MiniLM(a.model_dir)
    tok = Tokenizer.from_file(f"{a.model_dir}/tokenizer.json")
    tok.no_padding()
    tok.enable_truncation(a.max_tokens)
    start = time.perf_counter()
    vectors, tokens = embed(model, tok, texts, a.batch)
    ms = (time.perf_counter() - start) * 1e3
    ours = np.load(f"{a.dir}/musique/vectors.npy")
    diff = float(np.abs(ours - vectors).max()) if ours.shape == vectors.shape else None
    print(json.dumps({"ms": ms, "texts": len(texts), "texts_per_s": len(texts) / (ms / 1e3),
                      "tokens": tokens, "max_abs_diff": diff, "numpy": np.__version__}))


if __name__ == "__main__":
    main()
