"""Times one scikit-learn GMM+BIC clustering "layer" on a matrix, for comparison with kgrag's Rust one.

Usage: python gmm_sklearn.py MATRIX.npy [--max-clusters 50] [--n-init 5] [--max-iter 100] [--tol 1e-3]
           [--reg-covar 1e-6] [--rel-tol 1e-3] [--seed 0] [--threshold 0.1] [--rounds 1]

MATRIX.npy holds a float64 (N, d) array (the PCA-reduced entity embeddings). A layer is a BIC scan over
k = 1 .. min(N, max_clusters) - 1 with full-covariance GaussianMixture fits (stopping early once the relative
BIC change drops below --rel-tol), then the scan's fit at the BIC-minimising k (a refit with the same seed is
identical, so it is reused, as kgrag does) and soft labels
{c : p(c | x) > threshold} (argmax when empty). Prints one JSON object on stdout; warnings go to stderr.
"""
import argparse
import json
import os
import sys
import time
import warnings

import numpy as np
import sklearn
from sklearn.exceptions import ConvergenceWarning
from sklearn.mixture import GaussianMixture


def make_gmm(k, a):
    return GaussianMixture(n_components=k, covariance_type="full", n_init=a.n_init, max_iter=a.max_iter,
                           tol=a.tol, reg_covar=a.reg_covar, init_params="k-means++", random_state=a.seed)


def layer(x, a):
    """One complete layer: BIC scan, final fit, soft labels. Returns (ks, bics, best_k, gm or None, labels)."""
    n = x.shape[0]
    ks, bics = [], []
    if n <= 1:
        return ks, bics, 1, None, [[0] for _ in range(n)]
    models = []
    for k in range(1, min(n, a.max_clusters)):
        gm = make_gmm(k, a).fit(x)
        bic = float(gm.bic(x))
        ks.append(k)
        bics.append(bic)
        models.append(gm)
        if len(bics) >= 2 and abs(bics[-2] - bic) / abs(bics[-2]) < a.rel_tol:
            break
    best = int(np.argmin(bics))  # argmin returns the first (smallest k) on ties
    best_k = ks[best]
    # A refit with best_k and the same random_state gives the same model: reuse the scan's fit, as kgrag does.
    gm = models[best]
    proba = gm.predict_proba(x)
    labels = []
    for row in proba:
        cs = np.flatnonzero(row > a.threshold).tolist()
        labels.append(cs if cs else [int(np.argmax(row))])
    return ks, bics, best_k, gm, labels


def main():
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("matrix")
    p.add_argument("--max-clusters", type=int, default=50)
    p.add_argument("--n-init", type=int, default=5)
    p.add_argument("--max-iter", type=int, default=100)
    p.add_argument("--tol", type=float, default=1e-3)
    p.add_argument("--reg-covar", type=float, default=1e-6)
    p.add_argument("--rel-tol", type=float, default=1e-3)
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--threshold", type=float, default=0.1)
    p.add_argument("--rounds", type=int, default=1)
    a = p.parse_args()
    warnings.filterwarnings("ignore", category=ConvergenceWarning)

    x = np.load(a.matrix)
    if x.ndim != 2:
        sys.exit(f"{a.matrix}: expected a 2-D array, got shape {x.shape}")
    if x.dtype != np.float64 or not x.flags.c_contiguous:
        print(f"warning: converting {x.dtype} array to C-order float64", file=sys.stderr)
        x = np.ascontiguousarray(x, dtype=np.float64)

    secs = []
    for _ in range(max(1, a.rounds)):
        t = time.perf_counter()
        ks, bics, best_k, gm, labels = layer(x, a)
        secs.append(time.perf_counter() - t)

    sizes = [0] * best_k
    for cs in labels:
        for c in cs:
            sizes[c] += 1
    out = {
        "n": int(x.shape[0]), "d": int(x.shape[1]), "ks": ks, "bics": bics, "best_k": best_k,
        "secs": secs, "secs_min": min(secs),
        "mean_log_likelihood": float(gm.score(x)) if gm is not None else None,
        "cluster_sizes": sorted(sizes, reverse=True),
        "cpus": os.cpu_count(), "sklearn": sklearn.__version__, "numpy": np.__version__,
    }
    print(json.dumps(out))


if __name__ == "__main__":
    main()
