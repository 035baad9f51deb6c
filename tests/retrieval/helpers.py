"""Tiny hand-made corpora for the retrieval tests."""

from __future__ import annotations

import gzip
import json
from pathlib import Path

# Five passages small enough to compute BM25 by hand (see test_bm25.py).
TINY = [
    {"id": "d1", "contents": '"Paris"\nParis is the capital of France.'},
    {"id": "d2", "contents": '"Berlin"\nBerlin is the capital of Germany.'},
    {"id": "d3", "contents": '"Cat"\nThe cat sat on the mat. Cats chase mice.'},
    {
        "id": "d4",
        "contents": '"Python (programming language)"\nPython is a programming language created by Guido van Rossum.',
    },
    {
        "id": "d5",
        "contents": '"France"\nFrance is a country in Europe. Its capital city is Paris, and France has a president.',
    },
]


def write_jsonl(path: Path, rows: list, *, gz: bool = False) -> Path:
    text = "".join((r if isinstance(r, str) else json.dumps(r)) + "\n" for r in rows)
    if gz:
        with gzip.open(path, "wt", encoding="utf-8") as f:
            f.write(text)
    else:
        path.write_text(text, encoding="utf-8")
    return path


class FakeRetriever:
    """Builds a Retriever that returns fixed rankings and counts calls (no index)."""

    @staticmethod
    def make(rankings: dict[str, list[tuple[str, float]]], kind: str = "bm25s", corpus=None):
        from harness.retrieval.base import Retriever
        from harness.retrieval.spec import Bm25sSpec, CorpusSpec, DenseSpec
        from harness.types import Hit

        spec = Bm25sSpec() if kind == "bm25s" else DenseSpec()
        corpus_spec = corpus or CorpusSpec(id="fake", content_hash="f" * 64, n_passages=100)

        class _Fake(Retriever):
            def __init__(self):
                self.calls: list[tuple[list[str], int]] = []

            @property
            def spec(self):
                return spec

            @property
            def index_id(self):
                return f"{kind}-fake"

            @property
            def corpus_spec(self):
                return corpus_spec

            def _search(self, queries, k):
                self.calls.append((list(queries), k))
                return [
                    [Hit(doc_id=d, contents=f'"{d}"\ntext of {d}', score=s) for d, s in rankings.get(q, [])][
                        :k
                    ]
                    for q in queries
                ]

        return _Fake()
