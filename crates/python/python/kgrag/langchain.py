"""A LangChain retriever over a kgrag index (``pip install 'kgrag[langchain]'``).

>>> from kgrag.langchain import KgragRetriever
>>> retriever = KgragRetriever(index=kgrag.Index.open("notes.kgrag"), strategy="hipporag2", top_k=5)
>>> docs = retriever.invoke("Who founded Acme?")   # langchain_core Documents, best first

Each document's ``page_content`` is the passage, its ``id`` the chunk id, and its ``metadata`` holds
``score``, ``rank``, ``chunk_id``, ``document_id``, ``documents`` and ``strategy``.
"""

from __future__ import annotations

import asyncio
from typing import List, Optional

try:
    from langchain_core.callbacks import (
        AsyncCallbackManagerForRetrieverRun,
        CallbackManagerForRetrieverRun,
    )
    from langchain_core.documents import Document
    from langchain_core.retrievers import BaseRetriever
    from pydantic import ConfigDict
except ImportError as e:  # pragma: no cover - depends on the environment
    raise ImportError(
        "kgrag.langchain needs langchain-core: pip install 'kgrag[langchain]'"
    ) from e

from ._native import Hit, Index

__all__ = ["KgragRetriever"]


class KgragRetriever(BaseRetriever):
    """Retrieves passages from a :class:`kgrag.Index` with one of its strategies."""

    model_config = ConfigDict(arbitrary_types_allowed=True)

    index: Index
    """The index."""
    strategy: Optional[str] = None
    """The strategy (``None``: the index's configured one)."""
    top_k: Optional[int] = None
    """How many passages (``None``: the index's configured ``retriever.top_k``)."""

    def _document(self, hit: Hit, strategy: str) -> Document:
        return Document(
            id=hit.chunk_id,
            page_content=hit.text,
            metadata={
                "score": hit.score,
                "rank": hit.rank,
                "chunk_id": hit.chunk_id,
                "document_id": hit.document_id,
                "documents": list(hit.documents),
                "strategy": strategy,
            },
        )

    def _search(self, query: str) -> List[Document]:
        hits = self.index.search(query, self.strategy, self.top_k)
        strategy = self.strategy or self.index.default_strategy
        return [self._document(h, strategy) for h in hits]

    def _get_relevant_documents(
        self, query: str, *, run_manager: CallbackManagerForRetrieverRun
    ) -> List[Document]:
        return self._search(query)

    async def _aget_relevant_documents(
        self, query: str, *, run_manager: AsyncCallbackManagerForRetrieverRun
    ) -> List[Document]:
        # The search releases the GIL: a worker thread keeps the event loop free.
        return await asyncio.to_thread(self._search, query)
