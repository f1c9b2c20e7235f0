"""Fixtures of kgrag's Python tests: a corpus we wrote (tests/corpus), an index of it built from Python,
and the `kgrag` binary of the same checkout (`KGRAG_BIN`, set by `cargo xtask python`)."""

from __future__ import annotations

import os
import pathlib
import shutil

import pytest

import kgrag

HERE = pathlib.Path(__file__).resolve().parent
CORPUS = HERE / "corpus"

QUESTIONS = [
    "Which university did the wife of Tomas Ek study at?",
    "Who wrote the libretto of the opera that premiered at the Royal Swedish Opera in 1999?",
    "Where was the glaciologist who led the Tarfala programme born?",
    "Which prize did the librettist of The Salt Bell win?",
    "Who sang Elsa first?",
    "Why is the centre of Kiruna being moved?",
]


@pytest.fixture(scope="session")
def corpus() -> pathlib.Path:
    return CORPUS


@pytest.fixture(scope="session")
def built(tmp_path_factory: pytest.TempPathFactory) -> pathlib.Path:
    """The folder of an index of the corpus with every method, built once through the Python API."""
    path = tmp_path_factory.mktemp("built") / "corpus.kgrag"
    index = kgrag.Index.create(path)
    summary = index.add_files([CORPUS])
    assert summary["documents"] == len(list(CORPUS.glob("*.md")))
    del index
    return path


@pytest.fixture(scope="session")
def index(built: pathlib.Path) -> kgrag.Index:
    return kgrag.Index.open(built)


@pytest.fixture()
def fresh(tmp_path: pathlib.Path) -> kgrag.Index:
    """A new, empty index of its own (dense and HippoRAG 2 only: quick to rebuild after each change)."""
    return kgrag.Index.create(tmp_path / "fresh.kgrag", {"index": {"methods": ["dense", "hipporag2"]}})


@pytest.fixture(scope="session")
def kgrag_bin() -> str:
    """The `kgrag` binary to compare with; the tests that need it skip without `KGRAG_BIN` (`cargo xtask
    python` always sets it)."""
    binary = os.environ.get("KGRAG_BIN") or shutil.which("kgrag")
    if not binary:
        pytest.skip("KGRAG_BIN is not set: run these tests with `cargo xtask python`")
    return binary
