"""A :class:`Retriever` backed by a retrieval server speaking Search-R1's ``POST /retrieve``.

Works against ``harness serve-retriever`` and any Search-R1-compatible server. Connection errors,
timeouts and 5xx answers are retried with exponential backoff; 4xx answers are not (the request
is wrong). Every error is a :class:`ServerError` naming the URL. The spec and index id come from
``GET /health`` (a ``harness serve-retriever`` extension), so results can be cached and stored
with the protocol; for a server without ``/health`` (404) the spec is ``RemoteSpec(url)`` and the
index id is ``remote-<url>``, the URL redacted (``harness.secrets.redact``: both are stored).

Hits are mapped to the corpus's passage ids (:class:`PassageIds`): Search-R1's own server returns
hits without an ``id`` (a Lucene index with stored documents) or with its row number as the id
(its corpus mode), never ours.
"""

from __future__ import annotations

import hashlib
import logging
import threading
import time
from typing import TYPE_CHECKING, Any
from urllib.parse import urlsplit, urlunsplit

from pydantic import BaseModel, ConfigDict, TypeAdapter, ValidationError

from harness.errors import ServerError
from harness.retrieval.base import Retriever
from harness.retrieval.spec import CorpusSpec, RetrieverSpec
from harness.secrets import join_url, redact
from harness.types import UNMAPPED_ID_PREFIX, Hit, join_contents

if TYPE_CHECKING:
    from harness.retrieval.corpus import Corpus

log = logging.getLogger("harness.retrieval")


def _text_key(contents: str) -> bytes:
    return hashlib.sha1(contents.encode("utf-8")).digest()[:12]


class PassageIds:
    """The corpus passage id of a hit a remote server returned, from what the hit carries.

    In order: the hit's ``id`` when it is a corpus id whose text is the hit's text; the hit's ``id``
    read as a row number of the corpus (0-based, Search-R1's scheme) when that row's text is the
    hit's text (so a server over our corpus in our order maps without being told, and one in
    another order is never mis-mapped); the passage whose text (``contents``) is exactly the
    hit's (a hash table built once, on the first hit that needs it; passages with the same text
    map to the first one); the hit's ``id`` when it is a corpus id (a server that formats the
    text differently). Otherwise the hit is unmapped: its id becomes
    ``UNMAPPED_ID_PREFIX + <hash of its text>`` and the caller says so once."""

    def __init__(self, corpus: Corpus):
        self.corpus = corpus
        self._by_text: dict[bytes, str] | None = None
        self._lock = threading.Lock()

    def _text_index(self) -> dict[bytes, str]:
        with self._lock:
            if self._by_text is None:
                log.info(
                    "mapping remote hits to %s's passage ids by their text: hashing its %d passages once",
                    self.corpus.spec.id,
                    len(self.corpus),
                )
                by_text: dict[bytes, str] = {}
                for batch in self.corpus.iter_batches(4096):
                    for doc_id, contents in zip(batch.ids, batch.contents, strict=True):
                        by_text.setdefault(_text_key(contents), doc_id)
                self._by_text = by_text
            return self._by_text

    def resolve(self, raw_id: str | None, contents: str) -> str | None:
        c = self.corpus
        row = c.row_of(raw_id) if raw_id is not None else None
        if row is not None and c.contents_at(row) == contents:
            return raw_id
        as_row = int(raw_id) if raw_id is not None and raw_id.isascii() and raw_id.isdigit() else None
        if as_row is not None and as_row < len(c) and c.contents_at(as_row) == contents:
            return c.id_at(as_row)
        found = self._text_index().get(_text_key(contents))
        if found is not None:
            return found
        return raw_id if row is not None else None


def unmapped_id(contents: str) -> str:
    return UNMAPPED_ID_PREFIX + _text_key(contents).hex()


class RemoteSpec(BaseModel):
    """The spec of a server that does not describe itself."""

    model_config = ConfigDict(frozen=True, extra="forbid")
    kind: str = "remote"
    url: str


class HTTPStatusError(ServerError):
    """The server answered with a 4xx status."""

    def __init__(self, message: str, status: int):
        super().__init__(message)
        self.status = status


class RetrievalClient(Retriever):
    def __init__(
        self,
        url: str,
        *,
        timeout: float = 60.0,
        connect_timeout: float = 5.0,
        retries: int = 3,
        backoff: float = 0.5,
        corpus: Corpus | None = None,
    ):
        """``corpus``: the corpus whose passage ids hits are mapped to (:class:`PassageIds`); without
        it a hit's ``id`` is taken as is, and a hit without one is unmapped."""
        import httpx

        parts = urlsplit(url)  # the path ends in /retrieve or not; a query (?token=) is kept
        self.base_url = urlunsplit(parts._replace(path=parts.path.rstrip("/").removesuffix("/retrieve")))
        self.shown_url = redact(self.base_url)  # the URL as messages show it
        self.retries = retries
        self.backoff = backoff
        self._http = httpx.Client(timeout=httpx.Timeout(timeout, connect=connect_timeout))
        self._info: dict[str, Any] | None = None
        self._ids = PassageIds(corpus) if corpus is not None else None
        self._unmapped_said = False

    def __repr__(self) -> str:
        return f"RetrievalClient({self.shown_url!r})"

    def _request(self, method: str, path: str, payload: Any = None) -> Any:
        import httpx

        url, shown = join_url(self.base_url, path), redact(join_url(self.base_url, path))
        last = ""
        for attempt in range(self.retries + 1):
            if attempt:
                time.sleep(self.backoff * 2 ** (attempt - 1))
            try:
                resp = self._http.request(method, url, json=payload)
            except httpx.TimeoutException as e:
                last = f"timed out ({type(e).__name__})"
                continue
            except httpx.TransportError as e:
                last = f"{type(e).__name__}: {e}"
                continue
            if resp.status_code >= 500:
                last = f"HTTP {resp.status_code}: {_detail(resp)}"
                continue
            if resp.status_code >= 400:
                raise HTTPStatusError(
                    f"{shown} rejected the request: HTTP {resp.status_code}: {_detail(resp)}",
                    resp.status_code,
                )
            try:
                return resp.json()
            except ValueError:
                raise ServerError(f"{shown} answered with invalid JSON: {resp.text[:200]!r}") from None
        raise ServerError(f"retrieval server {shown} failed after {self.retries + 1} attempt(s): {last}")

    def info(self) -> dict[str, Any]:
        """The server's ``/health`` answer (fetched once); ``{}`` if the server has no ``/health``.

        An unreachable server raises :class:`ServerError` (never a made-up identity)."""
        if self._info is None:
            try:
                info = self._request("GET", "/health")
            except HTTPStatusError as e:
                if e.status != 404:
                    raise
                info = {}
            self._info = info if isinstance(info, dict) else {}
        return self._info

    @property
    def spec(self) -> BaseModel:
        raw = self.info().get("spec")
        if raw is None:
            return RemoteSpec(url=self.shown_url)  # specs are stored: never a credential
        try:
            return TypeAdapter(RetrieverSpec).validate_python(raw)
        except ValidationError as e:
            raise ServerError(
                f"{redact(join_url(self.base_url, 'health'))}: unknown retriever spec {raw!r} ({e.errors()[0]['msg']})"
            ) from None

    @property
    def index_id(self) -> str:
        # the cache's key (and a protocol's record): the URL redacted, as every stored text
        return str(self.info().get("index_id") or f"remote-{self.shown_url}")

    @property
    def corpus_spec(self) -> CorpusSpec | None:
        raw = self.info().get("corpus")
        if raw is None:
            return None
        try:
            return CorpusSpec.model_validate(raw)
        except ValidationError:
            raise ServerError(
                f"{redact(join_url(self.base_url, 'health'))}: malformed corpus description {raw!r}"
            ) from None

    def _search(self, queries: list[str], k: int) -> list[list[Hit]]:
        url = redact(join_url(self.base_url, "retrieve"))  # as messages show it
        body = self._request("POST", "/retrieve", {"queries": queries, "topk": k, "return_scores": True})
        result = body.get("result") if isinstance(body, dict) else None
        if not isinstance(result, list) or len(result) != len(queries):
            raise ServerError(f"{url} answered without a 'result' list of {len(queries)} entries")
        out = []
        for per_query in result:
            hits = []
            for item in per_query:
                try:
                    doc, score = item["document"], float(item["score"])
                    contents = doc.get("contents")
                    if contents is None:
                        contents = join_contents(doc["title"], doc["text"])
                    if not isinstance(contents, str):
                        raise TypeError("'contents' is not a string")
                    raw_id = None if doc.get("id") is None else str(doc["id"])
                except (KeyError, TypeError, ValueError) as e:
                    raise ServerError(
                        f"{url} answered with a malformed hit {str(item)[:200]} ({e})"
                    ) from None
                doc_id = self._ids.resolve(raw_id, contents) if self._ids is not None else raw_id
                if doc_id is None:
                    doc_id = unmapped_id(contents)
                    self._say_unmapped(raw_id, contents)
                hits.append(Hit(doc_id=doc_id, contents=contents, score=score))
            out.append(hits)
        return out

    def _say_unmapped(self, raw_id: str | None, contents: str) -> None:
        if self._unmapped_said:
            return
        self._unmapped_said = True
        where = (
            f"of corpus {self._ids.corpus.spec.id!r}" if self._ids is not None else "(no corpus was given)"
        )
        log.warning(
            "retrieval server %s returned a passage that is no passage %s (id %r, text %r): its text is stored, "
            "and retrieval metrics are not computed for the questions that retrieved such passages; "
            "serve the protocol's corpus (harness index --export-row-ids) or pass --corpus",
            self.shown_url,
            where,
            raw_id,
            contents[:60],
        )

    def close(self) -> None:
        self._http.close()


def _detail(resp) -> str:
    try:
        body = resp.json()
    except ValueError:
        return resp.text[:300]
    if isinstance(body, dict) and "detail" in body:
        return str(body["detail"])
    return str(body)[:300]
