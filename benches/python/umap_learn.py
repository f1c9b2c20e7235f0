"""umap-learn on the vectors kgrag's UMAP reduced, for comparison: layout time, trustworthiness, and the
clusters HiRAG's step makes of the layout (BIC-chosen k and cluster sparsity), over several seeds.

Usage: python umap_learn.py DIR [--layers layer0,layer1] [--seeds 0,...,11] [--trust-seeds 2]

DIR/<layer>.npy holds a float32 (N, d) array: the vectors one HiRAG clustering round reduced (kgrag-perf
writes them, with its own figures in DIR/<layer>.ours.json). For each layer and seed, umap-learn runs as
HiRAG's `global_cluster_embeddings` calls it (n_neighbors 15, n_components min(2, N - 2), metric cosine,
the other parameters at umap-learn's defaults), seeded so that a run is repeatable (umap-learn then runs on
one thread, as kgrag's layout does). Its JIT is warmed up first, untimed, on 5,000 random points (above
4,096, so that the approximate-neighbour path it takes on big inputs is compiled too). The layout
is then clustered as HiRAG's `GMM_cluster` does: BIC scan over k = 1 .. min(N, 50) - 1 of full-covariance
mixtures (n_init 5, k-means++, random_state 0, stop once the relative BIC change is under 1e-3), the fit at
the BIC-minimising k, labels {c : p(c | x) > 0.1} (a point with none is in no cluster, as in the reference),
and the sparsity 1 - sum s(s - 1) / (N (N - 1)) over cluster sizes s. Trustworthiness (k = 15, cosine in
the original space) is scikit-learn's, for the first --trust-seeds seeds (it builds N x N matrices).
Prints one JSON object on stdout; warnings go to stderr.
"""
import argparse
import json
import os
import sys
import time
import warnings
from collections import Counter

import numpy as np


def clusters_of(layout, seed=0, max_clusters=50, rel_tol=1e-3, threshold=0.1):
    from sklearn.mixture import GaussianMixture

    n = layout.shape[0]
    best = None
    prev = float("inf")
    bics = []
    for k in range(1, min(n, max_clusters)):
        gm = GaussianMixture(n_components=k, random_state=seed, n_init=5, init_params="k-means++").fit(layout)
        bic = float(gm.bic(layout))
        bics.append((bic, k, gm))
        if abs(prev - bic) / abs(prev) < rel_tol:
            break
        prev = bic
    _, k, gm = min(bics, key=lambda t: (t[0], t[1]))
    proba = gm.predict_proba(layout)
    sizes = Counter()
    for row in proba:
        for c in np.flatnonzero(row > threshold):
            sizes[int(c)] += 1
    shared = sum(s * (s - 1) for s in sizes.values())
    sparsity = 1.0 - shared / (n * (n - 1)) if n > 1 else 1.0
    return k, sparsity


def main():
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("dir")
    p.add_argument("--layers", default="layer0,layer1")
    p.add_argument("--seeds", default="0,1,2,3,4,5,6,7,8,9,10,11")
    p.add_argument("--trust-seeds", type=int, default=2)
    a = p.parse_args()
    warnings.filterwarnings("ignore")
    import umap
    from sklearn.manifold import trustworthiness

    seeds = [int(s) for s in a.seeds.split(",") if s.strip()]
    # The JIT compiles on first use: warm it up on a small input of the same dimension, untimed.
    out = {"umap_learn": umap.__version__, "layers": {}}
    warmed = False
    for name in [l for l in a.layers.split(",") if l.strip()]:
        path = os.path.join(a.dir, f"{name}.npy")
        if not os.path.exists(path):
            print(f"umap_learn.py: {path} is missing, skipping {name}", file=sys.stderr)
            continue
        x = np.ascontiguousarray(np.load(path), dtype=np.float32)
        n = x.shape[0]
        dim = max(1, min(2, n - 2))
        if not warmed:
            rng = np.random.default_rng(0)
            small = rng.standard_normal((5000, x.shape[1])).astype(np.float32)
            umap.UMAP(n_neighbors=15, n_components=2, metric="cosine", random_state=0).fit_transform(small)
            warmed = True
        runs = []
        for i, seed in enumerate(seeds):
            t = time.perf_counter()
            layout = umap.UMAP(n_neighbors=15, n_components=dim, metric="cosine",
                               random_state=seed).fit_transform(x)
            secs = time.perf_counter() - t
            run = {"seed": seed, "secs": secs}
            if i < a.trust_seeds and n > 31:
                run["trustworthiness"] = float(trustworthiness(x, layout, n_neighbors=15, metric="cosine"))
            k, sparsity = clusters_of(np.asarray(layout, dtype=np.float64))
            run["k"] = int(k)
            run["sparsity"] = float(sparsity)
            runs.append(run)
            print(f"umap_learn.py: {name} seed {seed}: {run}", file=sys.stderr)
        ks = [r["k"] for r in runs]
        sp = [r["sparsity"] for r in runs]
        trust = [r["trustworthiness"] for r in runs if "trustworthiness" in r]
        out["layers"][name] = {
            "n": n,
            "runs": runs,
            "k_range": [min(ks), max(ks)],
            "k_median": float(np.median(ks)),
            "sparsity_range": [min(sp), max(sp)],
            "sparsity_median": float(np.median(sp)),
            "trustworthiness_mean": float(np.mean(trust)) if trust else None,
            "secs_min": min(r["secs"] for r in runs),
        }
    out["ms"] = 1e3 * out["layers"]["layer0"]["secs_min"] if "layer0" in out["layers"] else None
    print(json.dumps(out))


if __name__ == "__main__":
    main()
