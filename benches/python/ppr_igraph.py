"""Times python-igraph's personalized_pagerank(implementation="prpack") on a graph exported by
benches/ppr.rs, and checks its scores against kgrag's.

Usage: python ppr_igraph.py DIR [--json]   (DIR holds edges.txt, resets.txt, scores.txt)
Prints `igraph_ms_per_query <ms>` (mean over every reset, 5 rounds, damping 0.5, undirected, weighted:
HippoRAG 2's call) and `max_abs_diff <x>` against kgrag's scores.
"""
import json
import sys
import time

import igraph as ig


def main(d):
    with open(f"{d}/edges.txt") as f:
        n = int(f.readline())
        edges, weights = [], []
        for line in f:
            a, b, w = line.split()
            edges.append((int(a), int(b)))
            weights.append(float(w))
    with open(f"{d}/resets.txt") as f:
        resets = [[float(x) for x in line.split()] for line in f if line.strip()]
    with open(f"{d}/scores.txt") as f:
        ours = [[float(x) for x in line.split()] for line in f if line.strip()]
    g = ig.Graph(n=n, edges=edges, directed=False)
    g.es["weight"] = weights
    results = []
    rounds = 5
    t = time.perf_counter()
    for _ in range(rounds):
        results = [
            g.personalized_pagerank(
                vertices=None, directed=False, damping=0.5, weights="weight", reset=r,
                implementation="prpack",
            )
            for r in resets
        ]
    ms = (time.perf_counter() - t) * 1e3 / (rounds * len(resets))
    diff = max(abs(a - b) for res, mine in zip(results, ours) for a, b in zip(res, mine))
    if len(sys.argv) > 2 and sys.argv[2] == "--json":
        print(json.dumps({"ms": ms, "max_abs_diff": diff, "igraph": ig.__version__, "rounds": rounds}))
        return
    print(f"igraph_version {ig.__version__}")
    print(f"igraph_ms_per_query {ms:.4f}")
    print(f"max_abs_diff {diff:.3e}")


if __name__ == "__main__":
    main(sys.argv[1])
