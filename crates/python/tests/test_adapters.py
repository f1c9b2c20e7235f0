"""The LangChain and LlamaIndex retrievers return what `Index.search` returns."""

from __future__ import annotations

import asyncio

import kgrag
from conftest import QUESTIONS


def test_langchain_retriever_returns_the_searched_passages(index: kgrag.Index) -> None:
    from langchain_core.documents import Document
    from langchain_core.retrievers import BaseRetriever

    from kgrag.langchain import KgragRetriever

    for strategy in ["hipporag2", "hirag", "leanrag", None]:
        retriever = KgragRetriever(index=index, strategy=strategy, top_k=4)
        assert isinstance(retriever, BaseRetriever)
        for question in QUESTIONS[:2]:
            hits = index.search(question, strategy, 4)
            docs = retriever.invoke(question)
            assert all(isinstance(d, Document) for d in docs)
            assert [d.page_content for d in docs] == [h.text for h in hits]
            assert [d.id for d in docs] == [h.chunk_id for h in hits]
            assert [d.metadata["score"] for d in docs] == [h.score for h in hits]
            assert [d.metadata["document_id"] for d in docs] == [h.document_id for h in hits]
            assert {d.metadata["strategy"] for d in docs} == {strategy or index.default_strategy}
            adocs = asyncio.run(retriever.ainvoke(question))
            assert [d.id for d in adocs] == [d.id for d in docs]


def test_llama_index_retriever_returns_the_searched_passages(index: kgrag.Index) -> None:
    from llama_index.core.retrievers import BaseRetriever
    from llama_index.core.schema import NodeWithScore, TextNode

    from kgrag.llama_index import KgragRetriever

    for strategy in ["hipporag2", "hirag-bridge", "dense"]:
        retriever = KgragRetriever(index, strategy=strategy, top_k=3)
        assert isinstance(retriever, BaseRetriever)
        for question in QUESTIONS[2:4]:
            hits = index.search(question, strategy, 3)
            nodes = retriever.retrieve(question)
            assert all(isinstance(n, NodeWithScore) and isinstance(n.node, TextNode) for n in nodes)
            assert [n.node.get_content() for n in nodes] == [h.text for h in hits]
            assert [n.node.node_id for n in nodes] == [h.chunk_id for h in hits]
            assert [n.score for n in nodes] == [h.score for h in hits]
            assert [n.node.metadata["documents"] for n in nodes] == [h.documents for h in hits]
            anodes = asyncio.run(retriever.aretrieve(question))
            assert [n.node.node_id for n in anodes] == [n.node.node_id for n in nodes]
