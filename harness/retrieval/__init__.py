"""Corpora, retrievers (bm25s, pyserini, dense, hybrid), the result cache and the retrieval server.

Entry points (import the module you need; nothing heavy is imported here):

- ``harness.retrieval.factory.make_retriever(spec="bm25s", corpus=None, mode="auto", cache=False)``
  and ``default_retriever()``: any retriever by preset name, JSON spec or server URL.
- ``harness.retrieval.base``: the ``Retriever`` interface, ``EmptyQueryError``, ``is_blank_query``.
- ``harness.retrieval.corpus``: ``open_corpus(path)`` -> ``Corpus``; ``corpus_spec(path)``.
- ``harness.retrieval.cache``: ``ResultCache``, ``CachedRetriever``.
- ``harness.retrieval.server.create_app`` / ``harness.retrieval.client.RetrievalClient``.
- ``harness.retrieval.evaluate.recall_at_ks``: recall of gold passages at k.
"""
