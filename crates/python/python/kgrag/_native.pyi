"""Type stubs of kgrag's native module (the Rust extension behind ``kgrag``)."""

import os
import pathlib
from typing import Any, Dict, Iterable, Iterator, List, Optional, Sequence, Union

from typing_extensions import final

_Config = Union[Dict[str, Any], str, "os.PathLike[str]", None]
_Path = Union[str, "os.PathLike[str]"]
_Document = Union[str, Dict[str, Optional[str]]]

__version__: str
STRATEGIES: List[str]

@final
class Source:
    """Where a passage came from: its document, file, pages and section."""

    @property
    def document(self) -> str:
        """The document's id."""
    @property
    def file(self) -> Optional[str]:
        """The file it was read from (its path in the folder indexed)."""
    @property
    def format(self) -> Optional[str]:
        """The file's format (``pdf``, ``docx``, …)."""
    @property
    def unit(self) -> Optional[str]:
        """What its pages are: ``page``, ``slide``, ``sheet`` or ``chapter``."""
    @property
    def page(self) -> Optional[int]:
        """The first page (slide, sheet, chapter) the passage spans."""
    @property
    def page_end(self) -> Optional[int]:
        """The last page it spans."""
    @property
    def section(self) -> Optional[str]:
        """The heading of its section."""
    @property
    def original(self) -> bool:
        """Whether the index keeps the original file."""
    @property
    def label(self) -> str:
        """The citation as people read it: ``report.pdf p. 12–13 § 2.3 Methods``."""
    def to_dict(self) -> Dict[str, Any]: ...

@final
class Citation:
    """A source an answer cites as ``[number]``."""

    @property
    def number(self) -> int: ...
    @property
    def chunk_id(self) -> str: ...
    @property
    def source(self) -> Optional[Source]: ...
    def to_dict(self) -> Dict[str, Any]: ...

@final
class Hit:
    """One ranked passage."""

    @property
    def rank(self) -> int:
        """Rank, from 1."""
    @property
    def chunk_id(self) -> str:
        """The chunk's id."""
    @property
    def document_id(self) -> Optional[str]:
        """The id of the (first) document holding the chunk."""
    @property
    def documents(self) -> List[str]:
        """The ids of every document holding the chunk."""
    @property
    def score(self) -> float:
        """The strategy's score."""
    @property
    def text(self) -> str:
        """The chunk's text."""
    @property
    def source(self) -> Optional[Source]:
        """Where it came from (``None`` for documents given as text)."""
    def to_dict(self) -> Dict[str, Any]:
        """The hit as a dict."""

@final
class Context:
    """What a strategy retrieved for a question."""

    @property
    def strategy(self) -> str: ...
    @property
    def question(self) -> str: ...
    @property
    def text(self) -> str:
        """The context as rendered for the reader's prompt."""
    @property
    def tokens(self) -> int:
        """Tokens of ``text``."""
    @property
    def passages(self) -> List[Hit]: ...
    @property
    def entities(self) -> List[str]:
        """Names of the entities in the context."""
    @property
    def paths(self) -> List[List[str]]:
        """Reasoning paths as entity names (HiRAG's bridge, LeanRAG)."""
    @property
    def stats(self) -> Dict[str, float]: ...
    def to_dict(self) -> Dict[str, Any]:
        """The full retrieval output as a dict."""

@final
class Answer:
    """An answer with the passages and context it was read from."""

    @property
    def strategy(self) -> str: ...
    @property
    def question(self) -> str: ...
    @property
    def answer(self) -> Optional[str]:
        """The reader's answer (``None`` with ``reader = "none"``), citing its sources as ``[n]``."""
    @property
    def citations(self) -> List[Citation]:
        """The sources the answer cites."""
    @property
    def dropped_citations(self) -> int:
        """Citation marks that named no source (removed from the answer)."""
    @property
    def first_token_ms(self) -> Optional[float]:
        """Milliseconds to the model's first token."""
    @property
    def passages(self) -> List[Hit]: ...
    @property
    def context(self) -> Context: ...
    @property
    def retrieve_ms(self) -> float: ...
    @property
    def answer_ms(self) -> float: ...
    @property
    def generation(self) -> int: ...
    def to_dict(self) -> Dict[str, Any]: ...

@final
class AnswerStream:
    """An answer being read: iterate it for the reader's text as it is generated."""

    def __iter__(self) -> "AnswerStream": ...
    def __next__(self) -> str: ...
    @property
    def answer(self) -> Optional[Answer]:
        """The finished answer, once the stream is exhausted."""

@final
class Index:
    """A kgrag index in a folder."""

    @staticmethod
    def create(path: _Path, config: _Config = None, *, progress: bool = False) -> "Index":
        """A new, empty index in the folder ``path``."""
    @staticmethod
    def open(path: _Path, config: _Config = None, *, progress: bool = False) -> "Index":
        """The index in the folder ``path``."""
    @property
    def path(self) -> pathlib.Path:
        """The index's folder."""
    @property
    def default_strategy(self) -> str:
        """The strategy a query without one uses (``retriever.strategy``)."""
    @property
    def generation(self) -> int:
        """The committed generation queries are answered from."""
    def add(self, documents: Iterable[_Document]) -> Dict[str, Any]:
        """Adds documents and commits them; returns ``{"documents", "chunks", "skipped", "generation"}``."""
    def add_files(
        self,
        paths: Sequence[_Path],
        include: Optional[Sequence[str]] = None,
        exclude: Optional[Sequence[str]] = None,
    ) -> Dict[str, Any]:
        """Adds the documents of files or folders (PDF, Office, HTML, EPUB, text, …) and commits them."""
    def delete(self, ids: Union[str, Iterable[str]]) -> Dict[str, Any]:
        """Deletes documents by id and commits."""
    def search(
        self, question: str, strategy: Optional[str] = None, top_k: Optional[int] = None
    ) -> List[Hit]:
        """The ``top_k`` passages ``strategy`` ranks highest for ``question``."""
    def context(
        self, question: str, strategy: Optional[str] = None, top_k: Optional[int] = None
    ) -> Context:
        """What ``strategy`` retrieves for ``question``."""
    def answer(
        self, question: str, strategy: Optional[str] = None, top_k: Optional[int] = None
    ) -> Answer:
        """Retrieves with ``strategy`` and reads the answer."""
    def answer_stream(
        self, question: str, strategy: Optional[str] = None, top_k: Optional[int] = None
    ) -> AnswerStream:
        """Retrieves with ``strategy`` and streams the reader's answer."""
    def stats(self) -> Dict[str, Any]:
        """What ``kgrag stats --json`` prints."""
    def strategies(self) -> List[str]:
        """The strategies this index answers with."""
    def documents(self) -> List[Dict[str, Any]]:
        """The documents in the index."""
    def __len__(self) -> int: ...

def bench(
    dataset: Optional[str] = None,
    methods: Optional[Sequence[str]] = None,
    out: Optional[str] = None,
    config: _Config = None,
    *,
    limit: Optional[int] = None,
    docs: Optional[int] = None,
    question_corpus: bool = False,
    data_dir: Optional[str] = None,
    progress: bool = False,
) -> Dict[str, Any]: ...
def _provide_asset(name: str, path: _Path) -> None: ...
