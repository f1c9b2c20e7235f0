"""Index a folder once, ask questions, and print each strategy's top passages side by side.

    pip install ./crates/python
    python examples/python/compare_methods.py ~/notes "Who founded Acme?" "Where is Acme based?"

With no arguments it indexes the small corpus of the Python tests (crates/python/tests/corpus) and asks two
questions about it. The index is kept in `--index` (default: a folder in the system's temporary folder) and
reused when it already holds the folder's documents.
"""

from __future__ import annotations

import argparse
import pathlib
import shutil
import tempfile
import textwrap
from typing import Dict, List

import kgrag

HERE = pathlib.Path(__file__).resolve().parent
DEFAULT_FOLDER = HERE.parent.parent / "crates" / "python" / "tests" / "corpus"
DEFAULT_QUESTIONS = [
    "Which university did the wife of Tomas Ek study at?",
    "Who wrote the libretto of the opera that premiered at the Royal Swedish Opera in 1999?",
]
STRATEGIES = ["dense", "hipporag2", "hirag", "leanrag"]


def open_index(folder: pathlib.Path, path: pathlib.Path, rebuild: bool) -> kgrag.Index:
    """The index of `folder` in `path`: opened when it exists (unless `rebuild`), else built."""
    if path.exists() and not rebuild:
        try:
            return kgrag.Index.open(path)
        except kgrag.IndexStateError:
            pass  # half-made or from another version: build it again
    if path.exists():
        shutil.rmtree(path)
    index = kgrag.Index.create(path, progress=True)
    summary = index.add_files([folder])
    print(f"indexed {summary['documents']} documents ({summary['chunks']} chunks) into {path}")
    return index


def cell(hit: kgrag.Hit, width: int) -> str:
    label = f"{hit.document_id or hit.chunk_id} {hit.score:.3f}"
    return textwrap.shorten(label, width=width, placeholder="…").ljust(width)


def compare(index: kgrag.Index, question: str, strategies: List[str], top_k: int, width: int) -> None:
    results: Dict[str, List[kgrag.Hit]] = {s: index.search(question, s, top_k) for s in strategies}
    print(f"\nQ: {question}")
    print("rank  " + " | ".join(s.ljust(width) for s in strategies))
    print("----  " + "-+-".join("-" * width for _ in strategies))
    for rank in range(top_k):
        cells = [cell(results[s][rank], width) if rank < len(results[s]) else " " * width for s in strategies]
        print(f"{rank + 1:>4}  " + " | ".join(cells))
    for s in strategies:
        answer = index.answer(question, s, top_k)
        text = textwrap.shorten(answer.answer or "(no reader)", width=100, placeholder="…")
        print(f"  {s:<10} {answer.context.tokens:>6} context tokens  {answer.retrieve_ms:7.1f} ms  {text}")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("folder", nargs="?", type=pathlib.Path, default=DEFAULT_FOLDER)
    parser.add_argument("questions", nargs="*", default=None)
    parser.add_argument("--index", type=pathlib.Path, default=None, help="where the index lives")
    parser.add_argument("--rebuild", action="store_true", help="build the index again")
    parser.add_argument("--strategies", default=",".join(STRATEGIES))
    parser.add_argument("--top-k", type=int, default=5)
    parser.add_argument("--width", type=int, default=24, help="characters per column")
    args = parser.parse_args()

    folder = args.folder.expanduser()
    path = args.index or pathlib.Path(tempfile.gettempdir()) / f"kgrag-compare-{folder.resolve().name}"
    index = open_index(folder, path, args.rebuild)
    strategies = [s for s in args.strategies.split(",") if s]
    unknown = [s for s in strategies if s not in index.strategies()]
    if unknown:
        raise SystemExit(f"not in this index: {', '.join(unknown)}; it has {', '.join(index.strategies())}")
    for question in args.questions or DEFAULT_QUESTIONS:
        compare(index, question, strategies, args.top_k, args.width)


if __name__ == "__main__":
    main()
