"""The retriever interface every backend implements (bm25s, pyserini, dense, hybrid, remote).

``search(queries, k)`` returns, for each query, at most ``k`` hits, best first. Behaviour common to
all backends lives here so it cannot drift:

- ``k`` must be an integer >= 1, otherwise :class:`ConfigError`.
- A blank query (empty or whitespace only) is an error, never a silent empty result:
  :class:`EmptyQueryError` is raised before anything is searched, and names the positions of the
  blank queries in the batch. Callers that must tolerate blank queries (the rollout engine, when a
  model emits ``<search> </search>``) check :func:`is_blank_query` first and record a status for
  those queries; the server answers them with a 422.
- A query that matches nothing returns fewer hits (possibly none): sparse retrievers only return
  passages that share at least one term with the query, as Lucene does.
"""

from __future__ import annotations

import hashlib
import json
from abc import ABC, abstractmethod
from collections.abc import Sequence

from pydantic import BaseModel

from harness.errors import ConfigError, HarnessError
from harness.retrieval.spec import CorpusSpec
from harness.types import Hit


class EmptyQueryError(HarnessError):
    """One or more queries of a batch are blank."""

    def __init__(self, positions: Sequence[int]):
        self.positions = list(positions)
        where = ", ".join(map(str, self.positions[:10])) + (" ..." if len(self.positions) > 10 else "")
        super().__init__(
            f"empty search query at position(s) {where} of the batch; "
            "a query must contain at least one non-space character"
        )


def is_blank_query(query: str) -> bool:
    return not query.strip()


def check_search_args(queries: Sequence[str], k: int) -> None:
    if isinstance(queries, str):
        raise ConfigError("search() takes a list of queries, not a single string")
    if isinstance(k, bool) or not isinstance(k, int) or k < 1:
        raise ConfigError(f"k must be an integer >= 1, got {k!r}")
    bad_types = [i for i, q in enumerate(queries) if not isinstance(q, str)]
    if bad_types:
        raise ConfigError(f"queries must be strings; position(s) {bad_types[:10]} are not")
    blank = [i for i, q in enumerate(queries) if is_blank_query(q)]
    if blank:
        raise EmptyQueryError(blank)


def make_index_id(corpus: CorpusSpec, spec: BaseModel) -> str:
    """A stable id of (corpus content, retriever settings): ``<kind>-<16 hex>``.

    The corpus name is not part of it (the same content under another name shares indexes).
    """
    payload = {
        "corpus_hash": corpus.content_hash,
        "n_passages": corpus.n_passages,
        "spec": spec.model_dump(mode="json"),
    }
    digest = hashlib.sha256(json.dumps(payload, sort_keys=True).encode()).hexdigest()[:16]
    kind = getattr(spec, "kind", "index")
    return f"{kind}-{digest}"


def spec_json(spec: BaseModel) -> str:
    """Canonical JSON of a spec (sorted keys), e.g. for the results store."""
    return json.dumps(spec.model_dump(mode="json"), sort_keys=True)


class Retriever(ABC):
    """Search a corpus. Subclasses implement :meth:`_search`; :meth:`search` validates first."""

    @property
    @abstractmethod
    def spec(self) -> BaseModel:
        """The retriever's settings (one of the models in :mod:`harness.retrieval.spec`)."""

    @property
    @abstractmethod
    def index_id(self) -> str:
        """Stable hash of corpus content hash + spec; the result-cache key."""

    @property
    def corpus_spec(self) -> CorpusSpec | None:
        """The corpus searched, when known."""
        return None

    @property
    def name(self) -> str:
        return str(getattr(self.spec, "kind", type(self).__name__))

    def search(self, queries: Sequence[str], k: int) -> list[list[Hit]]:
        """For each query, at most ``k`` hits, best first (see the module docstring for errors)."""
        check_search_args(queries, k)
        if not queries:
            return []
        return self._search(list(queries), k)

    @abstractmethod
    def _search(self, queries: list[str], k: int) -> list[list[Hit]]:
        """Search validated, non-blank queries."""

    def close(self) -> None:  # noqa: B027 - optional hook
        """Release resources (JVM searchers, files, HTTP connections)."""

    def __enter__(self) -> Retriever:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()
