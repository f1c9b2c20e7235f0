"""A LlamaIndex retriever over a kgrag index (``pip install 'kgrag[llamaindex]'``).

>>> from kgrag.llama_index import KgragRetriever
>>> retriever = KgragRetriever(kgrag.Index.open("notes.kgrag"), strategy="hirag", top_k=5)
>>> nodes = retriever.retrieve("Who founded Acme?")   # NodeWithScore, best first

Each node is a ``TextNode`` whose ``id_`` is the chunk id and whose ``metadata`` holds ``rank``,
``chunk_id``, ``document_id``, ``documents`` and ``strategy``; the score is the strategy's.
"""

from __future__ import annotations

import asyncio
from typing import Any, List, Optional

try:
    from llama_index.core.retrievers import BaseRetriever
    from llama_index.core.schema import NodeWithScore, QueryBundle, TextNode
except ImportError as e:  # pragma: no cover - depends on the environment
    raise ImportError(
        "kgrag.llama_index needs llama-index-core: pip install 'kgrag[llamaindex]'"
    ) from e

from ._native import Hit, Index

__all__ = ["KgragRetriever"]


class KgragRetriever(BaseRetriever):
    """Retrieves passages from a :class:`kgrag.Index` with one of its strategies."""

    def __init__(
        self,
        index: Index,
        strategy: Optional[str] = None,
        top_k: Optional[int] = None,
        **kwargs: Any,
    ) -> None:
        self._index = index
        self._strategy = strategy
        self._top_k = top_k
        super().__init__(**kwargs)

    def _node(self, hit: Hit) -> NodeWithScore:
        metadata = {
            "rank": hit.rank,
            "chunk_id": hit.chunk_id,
            "document_id": hit.document_id,
            "documents": list(hit.documents),
            "strategy": self._strategy or self._index.default_strategy,
        }
        node = TextNode(
            id_=hit.chunk_id,
            text=hit.text,
            metadata=metadata,
            # Bookkeeping, not passage text: kept out of what synthesizers and embedders read.
            excluded_llm_metadata_keys=list(metadata),
            excluded_embed_metadata_keys=list(metadata),
        )
        return NodeWithScore(node=node, score=hit.score)

    def _search(self, query: str) -> List[NodeWithScore]:
        return [self._node(h) for h in self._index.search(query, self._strategy, self._top_k)]

    def _retrieve(self, query_bundle: QueryBundle) -> List[NodeWithScore]:
        return self._search(query_bundle.query_str)

    async def _aretrieve(self, query_bundle: QueryBundle) -> List[NodeWithScore]:
        # The search releases the GIL: a worker thread keeps the event loop free.
        return await asyncio.to_thread(self._search, query_bundle.query_str)
