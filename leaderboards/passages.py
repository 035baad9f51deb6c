"""Passage text for the trajectory explorer: the packaged closed corpus, when a protocol uses it."""

from __future__ import annotations

import json

from harness.retrieval.corpus import Corpus


def packaged_corpus_for(protocol_json: str | None) -> Corpus | None:
    """The packaged closed corpus if the protocol's corpus is exactly it (same id and content hash);
    ``None`` for any other corpus (its ids are shown without text)."""
    if not protocol_json:
        return None
    ref = json.loads(protocol_json).get("corpus") or {}
    from harness.data.packaged import closed_corpus_info, closed_corpus_path
    from harness.retrieval.corpus import open_corpus

    info = closed_corpus_info()
    if ref.get("id") != info.id or ref.get("content_hash") != info.content_hash:
        return None
    return open_corpus(closed_corpus_path(), info.id)


def lookup(corpus: Corpus | None):
    """``doc_id -> contents | None`` over ``corpus`` (always None without one)."""

    def get(doc_id: str) -> str | None:
        if corpus is None or doc_id not in corpus:
            return None
        return corpus.get(doc_id)

    return get
