"""Query throughput and per-query latency of one index through the Python package — the counterpart of
`cargo run --release -p kgrag --example throughput`, for the overhead of the Python call and the scaling of
Python threads (the GIL is released while Rust searches).

    python examples/python/throughput.py INDEX QUESTIONS.json [--strategies hipporag2] [--threads 1,2,4]
        [--rounds 3] [--new]

QUESTIONS.json is a list of strings, or a HippoRAG question file (`musique.json`: objects with "question").
Every question is asked once first (the strategy's index loaded, its query embedding cached), then each is
asked `rounds` times spread over N threads. With `--new` every timed question is made unseen (a suffix), so
the embedder runs for each. Prints JSON: queries per second, the speed-up over one thread and the median
latency (`p50_us`) per strategy and thread count.
"""

from __future__ import annotations

import argparse
import json
import pathlib
import statistics
import threading
import time
from typing import Dict, List, Tuple

import kgrag


def run(index: kgrag.Index, strategy: str, questions: List[str], threads: int, rounds: int) -> Tuple[float, float]:
    total = len(questions) * rounds
    latencies: List[float] = []
    lock = threading.Lock()

    def work(t: int) -> None:
        mine = []
        for i in range(t, total, threads):
            start = time.perf_counter()
            index.search(questions[i % len(questions)], strategy, 10)
            mine.append((time.perf_counter() - start) * 1e6)
        with lock:
            latencies.extend(mine)

    workers = [threading.Thread(target=work, args=(t,)) for t in range(threads)]
    started = time.perf_counter()
    for w in workers:
        w.start()
    for w in workers:
        w.join()
    secs = time.perf_counter() - started
    return total / secs, statistics.median(latencies)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("index", type=pathlib.Path)
    parser.add_argument("questions", type=pathlib.Path)
    parser.add_argument("--strategies", default="hipporag2")
    parser.add_argument("--threads", default="1,2,4")
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--new", action="store_true", help="every timed question unseen (the embedder runs)")
    args = parser.parse_args()

    raw = json.loads(args.questions.read_text())
    questions = [q if isinstance(q, str) else q["question"] for q in raw]
    index = kgrag.Index.open(args.index)
    report: Dict[str, object] = {"index": str(args.index), "generation": index.generation,
                                 "questions": len(questions), "rounds": args.rounds, "new": args.new}
    for strategy in args.strategies.split(","):
        t = time.perf_counter()
        run(index, strategy, questions, 1, 1)
        warm_s = time.perf_counter() - t
        cells: Dict[str, object] = {}
        single = None
        for n in [int(x) for x in args.threads.split(",")]:
            asked = [f"{q} [{strategy} {n}]" for q in questions] if args.new else questions
            qps, p50 = run(index, strategy, asked, n, 1 if args.new else args.rounds)
            single = single or qps
            cells[str(n)] = {"qps": qps, "speedup": qps / single, "p50_us": p50}
        report[strategy] = {"warm_s": warm_s, "threads": cells}
    print(json.dumps(report, indent=2))


if __name__ == "__main__":
    main()
