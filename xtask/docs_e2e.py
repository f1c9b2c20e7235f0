"""End to end: UltraDomain Mix indexed from the PDFs `docs_corpus.py` rendered and from the same text as plain
files, every method offline, then the 130 questions asked of both with every strategy. Reports, per strategy:

- agreement: token-level F1 between the top passages retrieved from the text and from the PDFs (the words of
  the top-k passages of one question as a bag; the mean over the questions);
- citations: of the source sentences found whole in a cited passage (the extractive reader cites the passage
  each of its sentences came from) and in every top passage, the share whose page (from the generator's
  record) lies inside the page range the citation names;
- the build's wall time for both indexes.

Run through `cargo xtask docs-corpus --e2e` (which renders the PDFs and builds the release `kgrag`).
"""

import argparse
import collections
import json
import os
import re
import shutil
import subprocess
import sys
import time
import urllib.request

WORD = re.compile(r"[0-9a-z]+")

STRATEGIES = ["dense", "hipporag2", "hirag", "hirag-local", "hirag-global", "hirag-bridge", "hirag-nobridge", "leanrag"]


def words(text):
    return WORD.findall(text.lower())


def bag_f1(a, b):
    ca, cb = collections.Counter(a), collections.Counter(b)
    common = sum((ca & cb).values())
    if not a and not b:
        return 1.0
    if common == 0:
        return 0.0
    p, r = common / max(1, len(b)), common / max(1, len(a))
    return 2 * p * r / (p + r)


def run(cmd, **kw):
    started = time.time()
    subprocess.run(cmd, check=True, **kw)
    return time.time() - started


class Server:
    """`kgrag serve` on a free port, stopped on exit."""

    def __init__(self, kgrag, index, config):
        self.proc = subprocess.Popen(
            [kgrag, "serve", "--index", index, "--config", config, "--listen", "127.0.0.1:0", "--timeout", "600"],
            stdout=subprocess.PIPE, text=True)
        line = self.proc.stdout.readline()
        urls = [w for w in line.split() if w.startswith("http://")]
        if not urls:
            self.proc.kill()
            raise SystemExit(f"kgrag serve printed no address: {line!r}")
        self.url = urls[0].rstrip("/")

    def post(self, path, body):
        req = urllib.request.Request(self.url + path, data=json.dumps(body).encode(),
                                     headers={"content-type": "application/json"})
        with urllib.request.urlopen(req, timeout=900) as r:
            return json.load(r)

    def close(self):
        self.proc.terminate()
        try:
            self.proc.wait(30)
        except subprocess.TimeoutExpired:
            self.proc.kill()


def ask_all(kgrag, index, config, questions, strategies, top_k):
    server = Server(kgrag, index, config)
    out = []
    started = time.time()
    try:
        for i, q in enumerate(questions):
            r = server.post("/v1/compare", {"question": q, "strategies": strategies, "top_k": top_k, "answer": True})
            out.append({s["strategy"]: s for s in r["results"]})
            if (i + 1) % 10 == 0:
                print(f"  {index}: {i + 1}/{len(questions)} questions ({time.time() - started:.0f} s)", flush=True)
    finally:
        server.close()
    return out, time.time() - started


def page_check(passage, source, truths):
    """(sentences found whole in the passage, of them on a page inside the source's range)."""
    t = truths.get(source.get("file") if source else None)
    if not t or source.get("page") is None:
        return 0, 0
    lo, hi = source["page"], source.get("page_end") or source["page"]
    hay = " " + " ".join(words(passage)) + " "
    found = ok = 0
    for s in t["sentences"]:
        w = words(s["text"])
        if len(w) < 6:
            continue
        if " " + " ".join(w) + " " in hay:
            found += 1
            if lo <= s["page"] and (s.get("page_end") or s["page"]) <= hi:
                ok += 1
    return found, ok


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--kgrag", required=True)
    ap.add_argument("--corpus", required=True, help="the folder docs_corpus.py wrote (manifest.json, *.truth.json)")
    ap.add_argument("--variant", default="two-column", help="which PDFs: one-column, one-column-core, two-column")
    ap.add_argument("--questions", required=True, help="UltraDomain Mix's mix_hi_result_deepseek.jsonl")
    ap.add_argument("--work", required=True)
    ap.add_argument("--top-k", type=int, default=10)
    ap.add_argument("--limit", type=int, default=0, help="questions (0: all)")
    ap.add_argument("--out", required=True)
    a = ap.parse_args()

    with open(os.path.join(a.corpus, "manifest.json"), encoding="utf-8") as f:
        manifest = json.load(f)
    names = manifest["files"] if isinstance(manifest, dict) else manifest
    truths = {}
    for name in names:
        name = name["file"] if isinstance(name, dict) else name
        with open(os.path.join(a.corpus, name + ".truth.json"), encoding="utf-8") as f:
            t = json.load(f)
        if t["format"] == "pdf" and t["variant"] == a.variant and t["source"].startswith("ultradomain"):
            truths[name] = t
    if not truths:
        raise SystemExit(f"no {a.variant} PDFs of UltraDomain in {a.corpus}")
    shutil.rmtree(a.work, ignore_errors=True)
    pdf_dir, text_dir = os.path.join(a.work, "pdf"), os.path.join(a.work, "text")
    os.makedirs(pdf_dir)
    os.makedirs(text_dir)
    for name, t in truths.items():
        shutil.copy(os.path.join(a.corpus, name), pdf_dir)
        with open(os.path.join(text_dir, os.path.splitext(name)[0] + ".txt"), "w", encoding="utf-8") as f:
            f.write(t["expected"])
    config = os.path.join(a.work, "kgrag.toml")
    with open(config, "w", encoding="utf-8") as f:
        # Offline defaults; one cache, so the second build embeds only what the first did not.
        f.write(f'cache_dir = {json.dumps(os.path.join(a.work, "cache"))}\n')
    idx_text, idx_pdf = os.path.join(a.work, "idx-text"), os.path.join(a.work, "idx-pdf")
    print(f"indexing {len(truths)} documents as text, then as PDF ({a.variant})", flush=True)
    build_text = run([a.kgrag, "index", text_dir, "--index", idx_text, "--config", config, "-q"])
    build_pdf = run([a.kgrag, "index", pdf_dir, "--index", idx_pdf, "--config", config, "-q"])
    print(f"built: text {build_text:.0f} s, PDF {build_pdf:.0f} s (the PDF build reuses the text build's cache)", flush=True)

    with open(a.questions, encoding="utf-8") as f:
        questions = [json.loads(line)["query"] for line in f if line.strip()]
    if a.limit:
        questions = questions[: a.limit]
    from_text, t_text = ask_all(a.kgrag, idx_text, config, questions, STRATEGIES, a.top_k)
    from_pdf, t_pdf = ask_all(a.kgrag, idx_pdf, config, questions, STRATEGIES, a.top_k)

    report = {"documents": len(truths), "variant": a.variant, "questions": len(questions), "top_k": a.top_k,
              "build_s": {"text": build_text, "pdf": build_pdf}, "ask_s": {"text": t_text, "pdf": t_pdf},
              "strategies": {}}
    print(f"\n{'strategy':<16} {'agreement':>9} {'≥0.95':>6} {'cited ok':>9} {'cited':>6} {'passages ok':>11} {'with page':>9}")
    for s in STRATEGIES:
        f1s, c_found, c_ok, p_found, p_ok, paged, total = [], 0, 0, 0, 0, 0, 0
        for qa, qb in zip(from_text, from_pdf):
            ra, rb = qa.get(s), qb.get(s)
            if not ra or not rb:
                continue
            ta = [w for p in ra["passages"] for w in words(p["text"])]
            tb = [w for p in rb["passages"] for w in words(p["text"])]
            f1s.append(bag_f1(ta, tb))
            by_chunk = {p["chunk_id"]: p for p in rb["passages"]}
            for c in rb.get("citations") or []:
                p = by_chunk.get(c["chunk_id"])
                if p:
                    f, o = page_check(p["text"], c.get("source"), truths)
                    c_found += f
                    c_ok += o
            for p in rb["passages"]:
                total += 1
                src = p.get("source") or {}
                if src.get("page") is not None:
                    paged += 1
                f, o = page_check(p["text"], src, truths)
                p_found += f
                p_ok += o
        row = {
            "agreement_f1": sum(f1s) / max(1, len(f1s)),
            "questions_at_or_above_0_95": sum(1 for x in f1s if x >= 0.95) / max(1, len(f1s)),
            "cited_sentences": c_found, "cited_sentences_on_cited_pages": c_ok / max(1, c_found),
            "passage_sentences": p_found, "passage_sentences_on_their_pages": p_ok / max(1, p_found),
            "passages_with_page": paged / max(1, total),
        }
        report["strategies"][s] = row
        print(f"{s:<16} {row['agreement_f1']:>9.4f} {row['questions_at_or_above_0_95']:>6.2f} "
              f"{row['cited_sentences_on_cited_pages']:>9.4f} {c_found:>6} {row['passage_sentences_on_their_pages']:>11.4f} "
              f"{row['passages_with_page']:>9.3f}")
    with open(a.out, "w", encoding="utf-8") as f:
        json.dump(report, f, indent=1)
    print(f"\nwritten {a.out}")


if __name__ == "__main__":
    sys.exit(main())
