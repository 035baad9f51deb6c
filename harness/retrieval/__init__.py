"""Corpora, retrievers (bm25s, pyserini, dense, hybrid), the result cache and the retrieval server."""
