"""Measures kgrag's document readers on a corpus `docs_corpus.py` made, beside the Python readers RAG
pipelines use (pypdf, pdfminer.six; pypdfium2 — PDFium, the native library `pdfium-render` would bind).

For every file with a `.truth.json`:
- text fidelity: token F1 of the extracted text against the source, in reading order (tokens: lower-case
  words; matched tokens are those of difflib's longest matching blocks, so text read out of order loses),
  and the order-blind bag-of-tokens F1 beside it;
- boilerplate removed: the share of running headers, footers, page numbers, navigation, banners and the
  like (the truth's `boilerplate` lines) that do not come out as lines of the text;
- page attribution (kgrag only): the share of source sentences whose chunk (as the configured chunker cuts
  the text) has a page range holding the page the sentence was put on;
- speed: pages (slides, sheets, chapters; a web page is one) per second on one core, the reader's own time
  (kgrag's `read_secs`, every file read in one `kgrag read` process as a folder is; the Python readers
  timed in this process; best of --repeat runs).

Usage: python docs_measure.py --corpus DIR --kgrag target/release/kgrag [--out report.json] [--repeat 3]
"""

import argparse
import difflib
import json
import os
import re
import subprocess
import sys
import time

WORD = re.compile(r"\w+", re.UNICODE)


def tokens(text):
    return [t.lower() for t in WORD.findall(text)]


def f1_ordered(got, want):
    a, b = tokens(got), tokens(want)
    if not a or not b:
        return 0.0, 0.0, 0.0
    sm = difflib.SequenceMatcher(None, a, b, autojunk=False)
    matched = sum(m.size for m in sm.get_matching_blocks())
    p, r = matched / len(a), matched / len(b)
    return (2 * p * r / (p + r) if p + r else 0.0), p, r


def f1_bag(got, want):
    from collections import Counter

    a, b = Counter(tokens(got)), Counter(tokens(want))
    common = sum((a & b).values())
    if not common:
        return 0.0
    p, r = common / sum(a.values()), common / sum(b.values())
    return 2 * p * r / (p + r)


def norm_line(s):
    return " ".join(s.replace("|", " ").split()).strip(" -#").lower()


def boilerplate_removed(text, boiler):
    if not boiler:
        return None
    lines = {norm_line(line) for line in text.splitlines()}
    kept = sum(1 for b in boiler if norm_line(b) in lines)
    return 1.0 - kept / len(boiler)


def attribution(doc, sentences):
    """Share of sentences (with a page) found in a chunk whose page range holds their page. Sentences are
    looked for in order (from where the previous one was found), by their first 24 words."""
    text = doc["text"].encode("utf-8")
    chunks = doc["chunks"]
    hits = total = 0
    cursor = 0
    for s in sentences:
        page = s.get("page")
        if not page:
            continue
        total += 1
        words = [w.strip(".,;:!?\"'()[]") for w in s["text"].split()[:24]]
        words = [w for w in words if w]
        if not words:
            continue
        pattern = re.compile(rb"\W+".join(re.escape(w.encode("utf-8")) for w in words))
        m = pattern.search(text, cursor) or pattern.search(text)
        if not m:
            continue
        cursor = m.start()
        at = m.start()
        for c in chunks:
            if c["start"] <= at < c["end"] and c.get("page") and c["page"] <= page <= (c.get("page_end") or c["page"]):
                hits += 1
                break
    return (hits / total) if total else None, total


def kgrag_read_all(binary, paths, repeat):
    """Every path read by `kgrag read` in one process (as a folder is indexed: the process warm after
    its first file, which is read once more at the start for that), `repeat` times; per path the run
    with the shortest reading time, or the error."""
    best, errors = {}, {}
    if not paths:
        return best, errors
    for _ in range(repeat):
        out = subprocess.run([binary, "read", "--json", "-q", paths[0], *paths],
                             capture_output=True, text=True)
        if out.returncode != 0:
            for p in paths:
                errors[p] = out.stderr.strip()
            return best, errors
        for doc in json.loads(out.stdout):
            path = doc["path"]
            if "error" in doc:
                errors[path] = doc["error"]
            elif path not in best or doc["read_secs"] < best[path]["read_secs"]:
                best[path] = doc
    return best, errors


def timed(fn, repeat):
    best, out = None, None
    for _ in range(repeat):
        t = time.perf_counter()
        out = fn()
        dt = time.perf_counter() - t
        best = dt if best is None else min(best, dt)
    return out, best


def pypdf_text(path):
    import pypdf

    r = pypdf.PdfReader(path)
    return "\n".join(p.extract_text() or "" for p in r.pages)


def pdfminer_text(path):
    from pdfminer.high_level import extract_text

    return extract_text(path)


def pdfium_text(path):
    import pypdfium2 as pdfium

    pdf = pdfium.PdfDocument(path)
    out = []
    for i in range(len(pdf)):
        out.append(pdf[i].get_textpage().get_text_range())
    pdf.close()
    return "\n".join(out)


PEERS = {"pypdf": pypdf_text, "pdfminer.six": pdfminer_text, "pypdfium2": pdfium_text}


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--corpus", required=True)
    ap.add_argument("--kgrag", required=True)
    ap.add_argument("--out")
    ap.add_argument("--repeat", type=int, default=3)
    ap.add_argument("--peers", default="pypdf,pdfminer.six,pypdfium2")
    ap.add_argument("--only", default="", help="formats to measure (comma-separated)")
    args = ap.parse_args()
    peers = [p for p in args.peers.split(",") if p]
    only = set(f for f in args.only.split(",") if f)
    rows = []
    truths = []
    for name in sorted(f for f in os.listdir(args.corpus) if f.endswith(".truth.json")):
        with open(os.path.join(args.corpus, name), encoding="utf-8") as f:
            truth = json.load(f)
        if not only or truth["format"] in only:
            truths.append(truth)
    read, read_errors = kgrag_read_all(
        args.kgrag, [os.path.join(args.corpus, t["file"]) for t in truths], args.repeat)
    for truth in truths:
        fmt = truth["format"]
        path = os.path.join(args.corpus, truth["file"])
        doc, err = read.get(path), read_errors.get(path)
        if doc is None and err is None:
            err = "not read"
        row = {"file": truth["file"], "format": fmt, "variant": truth["variant"], "units": truth["units"]}
        if err:
            row["kgrag"] = {"error": err}
            rows.append(row)
            print(f"{truth['file']}: kgrag error: {err}", file=sys.stderr)
            continue
        f1, p, r = f1_ordered(doc["text"], truth["expected"])
        att, n_sent = attribution(doc, truth["sentences"])
        units = doc.get("units") or truth["units"] or 1
        row["kgrag"] = {
            "f1": f1, "precision": p, "recall": r, "bag_f1": f1_bag(doc["text"], truth["expected"]),
            "boilerplate_removed": boilerplate_removed(doc["text"], truth["boilerplate"]),
            "attribution": att, "sentences": n_sent,
            "secs": doc["read_secs"], "units_per_sec": units / max(doc["read_secs"], 1e-9),
        }
        if fmt == "pdf":
            for peer in peers:
                try:
                    text, secs = timed(lambda: PEERS[peer](path), args.repeat)
                except Exception as e:  # a peer that fails on a file is reported, not fatal
                    row[peer] = {"error": str(e)}
                    continue
                pf1, pp, pr = f1_ordered(text, truth["expected"])
                row[peer] = {
                    "f1": pf1, "precision": pp, "recall": pr, "bag_f1": f1_bag(text, truth["expected"]),
                    "boilerplate_removed": boilerplate_removed(text, truth["boilerplate"]),
                    "secs": secs, "units_per_sec": units / max(secs, 1e-9),
                }
        rows.append(row)
        print(f"{truth['file']}: F1 {f1:.4f} attribution {att} ({doc['read_secs']*1e3:.1f} ms)", file=sys.stderr)
    summary = summarize(rows, peers)
    print(render(summary, peers))
    if args.out:
        with open(args.out, "w", encoding="utf-8") as f:
            json.dump({"files": rows, "summary": summary}, f, indent=1)


def summarize(rows, peers):
    groups = {}
    for r in rows:
        key = r["format"] if r["format"] != "pdf" else f"pdf ({r['variant']})"
        groups.setdefault(key, []).append(r)
    out = {}
    for key, rs in sorted(groups.items()):
        entry = {"files": len(rs)}
        for reader in ["kgrag"] + peers:
            got = [r[reader] for r in rs if reader in r and "error" not in r[reader]]
            errors = sum(1 for r in rs if reader in r and "error" in r[reader])
            if not got and not errors:
                continue
            # A web page is one unit.
            units = sum(max(r["units"], 1) for r in rs if reader in r and "error" not in r[reader])
            secs = sum(g["secs"] for g in got)
            def mean(k):
                v = [g[k] for g in got if g.get(k) is not None]
                return sum(v) / len(v) if v else None
            sent = sum(g.get("sentences", 0) for g in got)
            att = [g["attribution"] * g["sentences"] for g in got if g.get("attribution") is not None]
            entry[reader] = {
                "f1": mean("f1"), "bag_f1": mean("bag_f1"), "boilerplate_removed": mean("boilerplate_removed"),
                "attribution": (sum(att) / sent) if att and sent else None,
                "units": units, "units_per_sec": units / secs if secs else None, "errors": errors,
            }
        out[key] = entry
    return out


def render(summary, peers):
    fmt = lambda v, d=3: "—" if v is None else f"{v:.{d}f}"
    lines = ["| format | files | reader | F1 (ordered) | F1 (bag) | boilerplate removed | page attribution | units/s (1 core) |",
             "| --- | ---: | --- | ---: | ---: | ---: | ---: | ---: |"]
    for key, e in summary.items():
        for reader in ["kgrag"] + peers:
            if reader not in e:
                continue
            x = e[reader]
            lines.append(f"| {key} | {e['files']} | {reader} | {fmt(x['f1'], 4)} | {fmt(x['bag_f1'], 4)} | "
                         f"{fmt(x['boilerplate_removed'])} | {fmt(x['attribution'], 4)} | {fmt(x['units_per_sec'], 0)} |")
    return "\n".join(lines)


if __name__ == "__main__":
    main()
