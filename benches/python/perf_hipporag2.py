"""Cases synonymy_musique, hipporag2_index_musique and hipporag2_query_musique, reference side: HippoRAG 2's
non-LLM steps in numpy + python-igraph, written from our spec (specs/hipporag2.md §4.1-§4.2, §5).

Usage: python perf_hipporag2.py synonymy|index|query DIR [--rounds N]

Inputs (written by `kgrag-perf prepare/embed`): DIR/musique/chunks.json (normalised triples per passage),
texts.json (the embedded texts in index order), vectors.npy (their MiniLM vectors), questions.json and
queries.npy. Prints one JSON object; the check compares with kgrag's output in DIR/out/.

- synonymy: exact k-NN of every phrase with more than 2 ASCII alphanumeric characters (cosine, top 2047
  including itself, ties by row), walked in order: stop at the first neighbour under 0.8 or after 101
  accepted, skip itself and the empty phrase. Check: pairs missing on either side against
  DIR/out/synonymy-ours.txt, and how many of those are not rounding ties at the threshold.
- index: phrase / fact stores from the precomputed vectors, the graph (fact, passage-phrase and synonymy
  edges with the reference weights: per direction the synonymy cosine if that direction's scan accepted it,
  else the fact count, both directions summed, plus 1 for a passage-phrase link), the igraph Graph.
- query: per question (vector precomputed): dense passage and fact scores, min-max normalised; the 5 best
  facts (no LLM filter); phrase seeds (score / chunks of the phrase, averaged), passages at 0.05 x their
  dense score; igraph personalized_pagerank(prpack, damping 0.5); passages by score. p50 per query; check:
  the share of questions whose top 5 equals kgrag's (DIR/out/hipporag2-top5-ours.json).
"""
import argparse
import json
import time

import igraph as ig
import numpy as np

THRESHOLD, KNN_K, MAX_PER_NODE, MIN_ALNUM = 0.8, 2047, 101, 3
LINKING_TOP_K, PASSAGE_WEIGHT, DAMPING = 5, 0.05, 0.5


def load(d):
    with open(f"{d}/musique/chunks.json") as f:
        chunks = json.load(f)
    with open(f"{d}/musique/texts.json") as f:
        texts = json.load(f)
    vectors = np.load(f"{d}/musique/vectors.npy")
    all_texts = texts["passages"] + texts["phrases"] + texts["facts"]
    return chunks, all_texts, vectors


def alnum(s):
    return sum(1 for c in s if c.isascii() and c.isalnum())


def knn_pairs(phrases, x, block=1024):
    """The accepted (from, to, cosine) synonymy pairs, grouped by source in row order."""
    out = []
    rows = [u for u, p in enumerate(phrases) if alnum(p) >= MIN_ALNUM]
    empty = {i for i, p in enumerate(phrases) if p == ""}
    for s in range(0, len(rows), block):
        part = rows[s:s + block]
        sims = x[part] @ x.T
        for r, u in enumerate(part):
            row = sims[r]
            hits = np.flatnonzero(row >= THRESHOLD)
            # descending cosine, ties by row; the k-NN list is the first KNN_K of that order
            hits = hits[np.lexsort((hits, -row[hits]))][:KNN_K]
            accepted = 0
            for v in hits:
                if accepted >= MAX_PER_NODE:
                    break
                if v == u or v in empty:
                    continue
                out.append((u, int(v), float(row[v])))
                accepted += 1
    return out


class Index:
    def __init__(self, chunks, all_texts, vectors):
        row_of = {t: i for i, t in enumerate(all_texts)}
        phrases = sorted({p for c in chunks for s, _, o in c["triples"] for p in (s, o)})
        facts, seen = [], set()
        for c in chunks:
            for t in c["triples"]:
                key = tuple(t)
                if key not in seen:
                    seen.add(key)
                    facts.append(key)
        self.passages = vectors[[row_of[c["text"]] for c in chunks]]
        self.phrase_vectors = vectors[[row_of[p] for p in phrases]]
        self.facts = facts
        self.fact_vectors = vectors[[row_of[f"('{s}', '{p}', '{o}')"] for s, p, o in facts]]
        self.phrases = phrases
        vertex = {p: i for i, p in enumerate(phrases)}
        self.vertex = vertex
        n_ph = len(phrases)
        self.n_phrases = n_ph
        fact_count, context = {}, set()
        sources = [set() for _ in phrases]
        for ci, c in enumerate(chunks):
            linked = set()
            for s, _, o in c["triples"]:
                a, b = vertex[s], vertex[o]
                if a != b:
                    key = (a, b) if a < b else (b, a)
                    fact_count[key] = fact_count.get(key, 0) + 1
                linked.add(a)
                linked.add(b)
            for e in linked:
                sources[e].add(ci)
                context.add((e, n_ph + ci))
        self.chunks_of = [len(s) for s in sources]
        syn = {}
        self.pairs = knn_pairs(phrases, self.phrase_vectors)
        for u, v, cos in self.pairs:
            key = (u, v) if u < v else (v, u)
            slot = syn.setdefault(key, [None, None])
            slot[0 if u < v else 1] = cos
        edges, weights = [], []
        for key in set(fact_count) | set(syn):
            facts_n = float(fact_count.get(key, 0))
            lo, hi = syn.get(key, (None, None))
            w = (facts_n if lo is None else lo) + (facts_n if hi is None else hi)
            if w != 0.0:
                edges.append(key)
                weights.append(w)
        for key in context:
            edges.append(key)
            weights.append(1.0)
        self.n = n_ph + len(chunks)
        self.graph = ig.Graph(n=self.n, edges=edges, directed=False)
        self.graph.es["weight"] = weights

    def query(self, q):
        dpr = min_max(self.passages @ q)
        s = min_max(self.fact_vectors @ q)
        top = np.lexsort((np.arange(len(s)), -s))[:LINKING_TOP_K]
        acc = {}
        for row in top:
            subj, _, obj = self.facts[row]
            for p in (subj, obj):
                v = self.vertex.get(p)
                if v is None:
                    continue
                w = s[row] / max(self.chunks_of[v], 1)
                total, count = acc.get(v, (0.0, 0))
                acc[v] = (total + w, count + 1)
        seeds = sorted(((v, t / c) for v, (t, c) in acc.items()), key=lambda x: (-x[1], x[0]))[:LINKING_TOP_K]
        reset = np.zeros(self.n)
        for v, w in seeds:
            reset[v] += w
        reset[self.n_phrases:] += PASSAGE_WEIGHT * dpr
        reset[~np.isfinite(reset) | (reset < 0)] = 0.0
        total = reset.sum()
        if not seeds or total <= 0:
            return list(np.lexsort((np.arange(len(dpr)), -dpr))[:5])
        scores = np.array(self.graph.personalized_pagerank(
            vertices=None, directed=False, damping=DAMPING, weights="weight", reset=reset / total,
            implementation="prpack"))
        p = scores[self.n_phrases:]
        return [int(i) for i in np.lexsort((np.arange(len(p)), -p))[:5]]


def threshold_ties(x):
    """Unordered phrase pairs whose float64 cosine is within 1e-6 of the threshold: there float32 products
    (BLAS's here, kgrag's there) may round to either side, so such an edge may exist on one side only."""
    x32, x64 = x.astype(np.float32), x.astype(np.float64)
    ties = 0
    for s in range(0, len(x), 2048):
        near = np.nonzero(np.abs(x32[s:s + 2048] @ x32.T - THRESHOLD) <= 1e-4)
        for u, v in zip(near[0] + s, near[1]):
            if u < v and abs(float(x64[u] @ x64[v]) - THRESHOLD) <= 1e-6:
                ties += 1
    return ties


def min_max(x):
    x = np.where(np.isfinite(x), x, 0.0).astype(np.float64)
    lo, hi = x.min(), x.max()
    return (x - lo) / (hi - lo) if hi - lo > 0 else np.ones_like(x)


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("mode", choices=["synonymy", "index", "query"])
    ap.add_argument("dir")
    ap.add_argument("--rounds", type=int, default=3)
    a = ap.parse_args()
    d = a.dir
    chunks, all_texts, vectors = load(d)
    out = {}
    if a.mode == "synonymy":
        with open(f"{d}/musique/texts.json") as f:
            t = json.load(f)
        phrases = t["phrases"]
        x = vectors[len(t["passages"]):len(t["passages"]) + len(phrases)]
        best = float("inf")
        for _ in range(a.rounds):
            start = time.perf_counter()
            pairs = knn_pairs(phrases, x)
            best = min(best, (time.perf_counter() - start) * 1e3)
        ref = {(u, v) for u, v, _ in pairs}
        ours = set()
        with open(f"{d}/out/synonymy-ours.txt") as f:
            for line in f:
                u, v, _ = line.split()
                ours.add((int(u), int(v)))
        # A pair on one side only whose float64 cosine is within 1e-6 of the threshold is a rounding tie:
        # float32 products (BLAS's here, kgrag's dot there) round differently at the last bit.
        x64 = x.astype(np.float64)
        beyond = [(u, v) for u, v in ours ^ ref if abs(float(x64[u] @ x64[v]) - THRESHOLD) > 1e-6]
        out = {"ms": best, "pairs": len(ref), "only_ours": len(ours - ref), "only_ref": len(ref - ours),
               "mismatched": len(ours ^ ref), "mismatched_beyond_rounding": len(beyond)}
    elif a.mode == "index":
        best = float("inf")
        for _ in range(a.rounds):
            start = time.perf_counter()
            index = Index(chunks, all_texts, vectors)
            best = min(best, (time.perf_counter() - start) * 1e3)
        with open(f"{d}/musique/texts.json") as f:
            t = json.load(f)
        x = vectors[len(t["passages"]):len(t["passages"]) + len(t["phrases"])]
        out = {"ms": best, "nodes": index.n, "edges": index.graph.ecount(), "synonymy_pairs": len(index.pairs),
               "threshold_ties": threshold_ties(x)}
    else:
        index = Index(chunks, all_texts, vectors)
        queries = np.load(f"{d}/musique/queries.npy")
        times, tops = [], []
        for r in range(a.rounds):
            for q in queries:
                start = time.perf_counter()
                top = index.query(q)
                times.append((time.perf_counter() - start) * 1e3)
                if r == 0:
                    tops.append(top)
        with open(f"{d}/out/hipporag2-top5-ours.json") as f:
            ours = json.load(f)
        same = sum(1 for a_, b_ in zip(tops, ours) if list(a_) == list(b_))
        times.sort()
        out = {"ms": times[len(times) // 2], "p95_ms": times[int(0.95 * (len(times) - 1))],
               "same_top5": same, "queries": len(tops), "same_top5_share": same / max(len(tops), 1)}
    out["igraph"] = ig.__version__
    out["numpy"] = np.__version__
    print(json.dumps(out))


if __name__ == "__main__":
    main()
