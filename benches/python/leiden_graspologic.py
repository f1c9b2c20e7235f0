"""Times graspologic-native's hierarchical_leiden on an edge list, for comparison with kgrag's Rust one.

Usage: python leiden_graspologic.py DIR [--max-cluster-size 10] [--seed 3735928559] [--rounds 1]

DIR/edges.txt: first line the node count, then one "a b weight" line per edge. Writes DIR/graspologic_level0.txt
("node cluster" per line, the level-0 partition) and prints one JSON object on stdout (seconds per round, the
number of records, levels and level-0 clusters). HiRAG's settings: max_cluster_size 10, seed 0xDEADBEEF,
resolution 1.0, randomness 0.001, one iteration, modularity.
"""
import argparse
import json
import time

import graspologic_native as gn


def main():
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("dir")
    p.add_argument("--max-cluster-size", type=int, default=10)
    p.add_argument("--seed", type=int, default=0xDEADBEEF)
    p.add_argument("--rounds", type=int, default=1)
    a = p.parse_args()
    with open(f"{a.dir}/edges.txt") as f:
        next(f)
        edges = []
        for line in f:
            s, t, w = line.split()
            edges.append((s, t, float(w)))
    secs = []
    records = None
    for _ in range(max(1, a.rounds)):
        t = time.perf_counter()
        records = gn.hierarchical_leiden(edges, starting_communities=None, resolution=1.0, randomness=0.001,
                                         iterations=1, use_modularity=True,
                                         max_cluster_size=a.max_cluster_size, seed=a.seed)
        secs.append(time.perf_counter() - t)
    level0 = {}
    levels = 0
    for r in records:
        levels = max(levels, r.level + 1)
        if r.level == 0:
            level0[r.node] = r.cluster
    with open(f"{a.dir}/graspologic_level0.txt", "w") as f:
        for node, cluster in level0.items():
            f.write(f"{node} {cluster}\n")
    print(json.dumps({"secs": secs, "secs_min": min(secs), "records": len(records), "levels": levels,
                      "level0_clusters": len(set(level0.values())), "edges": len(edges)}))


if __name__ == "__main__":
    main()
