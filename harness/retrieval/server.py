"""HTTP retrieval server speaking Search-R1's ``POST /retrieve``, with ReCall/FlashRAG adapters.

Search-R1 (``search_r1/search/retrieval_server.py``; also verl's search tool, verl-tool, SkyRL)::

    POST /retrieve  {"queries": ["q1", ...], "topk": 3, "return_scores": true}
    ->  {"result": [[{"document": {"id", "contents", "title", "text"}, "score": 12.3}, ...], ...]}

``topk`` null, absent or 0 falls back to the server's ``--topk``; ``queries: []`` is answered
``{"result": []}`` and a blank query gets an empty hit list, as upstream (its client sends both:
a turn where no rollout searched, and ``<search> </search>``). With ``return_scores: false`` each
query's list holds the documents themselves (``[[{"id", "contents", "title", "text"}, ...]]``),
which is what Search-R1's code intends (its own BM25 server fails in that case). A document's keys
extend upstream's wiki-18 row (``id``, ``contents``) in its order, and ``title``/``text`` are
split from ``contents`` as upstream's Lucene branch splits them; the JSON bytes are FastAPI's, as
upstream's (tests/retrieval/test_searchr1_conformance.py pins all of this).

ReCall / FlashRAG (``/search``, ``/batch_search``)::

    POST /search        {"query": "q", "top_n": 3, "return_score": false}  -> [doc, ...]
                        with return_score: true                           -> [[doc, ...], [score, ...]]
    POST /batch_search  {"query": ["q1", ...], "top_n": 3, "return_score": false} -> [[doc, ...], ...]
                        with return_score: true            -> [[[doc, ...], ...], [[score, ...], ...]]

where ``doc`` is ``{"id", "contents"}``; ``top_n`` absent falls back to ``--topk``.

``GET /health`` describes what is served, so a client can pin it in its protocol: the retriever
kind and spec (its settings), the index id, the corpus (id, content hash, passage count), the
default top-k and the limits. Bad requests (wrong JSON types; on ``/search`` and ``/batch_search``
also no queries or a blank query) get a 4xx
JSON ``{"detail": "..."}``; a failing search gets a 500 JSON with the message; the server stays up.

**Limits** (:class:`ServerLimits`, ``harness serve-retriever --help``; see docs/retrieval-server.md):
a body over ``max_body_bytes`` gets 413; more than ``max_queries`` queries, a query longer than
``max_query_chars`` characters, ``topk`` above ``max_topk`` or ``queries x topk`` above
``max_hits`` get 422; a reply over ``max_reply_bytes`` gets 413, checked before the search
(queries x topk x the corpus's 90th-percentile passage size), again once an eighth of the queries
is searched (their bytes projected over the whole request), and on the bytes while the reply is
built; each with a one-line JSON reason naming the limit. A client must send a whole
request (headers and body) within ``read_timeout_s`` of connecting or of its previous response,
otherwise it gets 408 and the connection is closed (uvicorn alone only times out idle keep-alive
connections, so a client sending headers byte by byte, or nothing, would hold one forever). A
request line and headers over 16 KiB get 431 (:data:`harness.serving.MAX_HEAD_BYTES`); beyond
``max_connections`` open connections the one that has waited longest for a request is closed
(408), so slow clients cannot take every connection.

**Work** runs off the event loop, on a bounded thread pool (FastAPI's; ``/retrieve``'s own,
:func:`_route_threads`). Searches take turns in arrival order (:class:`FifoSemaphore`; one at a
time, or ``--search-threads`` for a retriever whose search is thread-safe: pyserini gets
:data:`AUTO_SEARCH_THREADS`), :data:`CHUNK_HITS` hits per turn, each
turn searching and rendering its queries' JSON (the bytes FastAPI would render): a large request
holds others back by one turn, not its whole length, and its reply is held once, as its pieces,
and sent piece by piece.
"""

from __future__ import annotations

import asyncio
import functools
import json
import socket
import threading
from collections import deque
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from typing import Any

import orjson
from pydantic import BaseModel, ConfigDict, Field, StrictBool, StrictInt, StrictStr

from harness.errors import ConfigError, HarnessError
from harness.retrieval.base import Retriever, is_blank_query
from harness.serving import BodyLimit, HttpLimits, uvicorn_config
from harness.types import Hit


class RetrieveRequest(BaseModel):
    """Search-R1's ``QueryRequest`` field for field, with pydantic's default (lax) types as upstream
    (``PeterGriffinJin/Search-R1@a14dc3a:search_r1/search/retrieval_server.py``): ``topk`` ``"3"``
    or ``3.0`` is 3, ``return_scores`` ``"true"`` or ``1`` is true; a query must be a string."""

    model_config = ConfigDict(extra="ignore")
    queries: list[str]
    topk: int | None = None
    return_scores: bool = False


class ReCallSearchRequest(BaseModel):
    model_config = ConfigDict(extra="ignore")
    query: StrictStr
    top_n: StrictInt | None = None
    return_score: StrictBool = False


class ReCallBatchRequest(BaseModel):
    model_config = ConfigDict(extra="ignore")
    query: list[StrictStr]
    top_n: StrictInt | None = None
    return_score: StrictBool = False


class BadRequest(Exception):
    def __init__(self, message: str, status: int = 400):
        super().__init__(message)
        self.message = message
        self.status = status


def title_text_document(hit: Hit) -> dict[str, str]:
    """A hit as ``/retrieve`` returns it: id, ``contents`` (title line + text) and the two parts."""
    return {"id": hit.doc_id, "contents": hit.contents, "title": hit.title, "text": hit.text}


def recall_document(hit: Hit) -> dict[str, str]:
    return {"id": hit.doc_id, "contents": hit.contents}


def _format_errors(errors: list[Any]) -> str:
    parts = []
    for e in errors[:5]:
        loc = ".".join(str(x) for x in e.get("loc", ()) if x != "body")
        parts.append(f"{loc or 'body'}: {e.get('msg', 'invalid')}")
    return "invalid request: " + "; ".join(parts)


class ServerLimits(HttpLimits):
    """What one request may ask of the server. The defaults fit Search-R1-style training, which
    sends every active rollout's query in one request (512 prompts x 5 samples = 2,560 queries,
    top-3) with room to spare, and keep one reply under ~40 MB of JSON. The connection limits
    (body bytes, read timeout, keep-alive, connections) are :class:`harness.serving.HttpLimits`'."""

    max_queries: int = Field(4096, ge=1)  # 422 above (per request)
    max_query_chars: int = Field(4096, ge=1)  # 422 above (per query)
    max_topk: int = Field(1000, ge=1)  # 422 above
    max_hits: int = Field(20_000, ge=1)  # 422 when len(queries) x topk is above
    max_reply_bytes: int = Field(32 * 2**20, ge=1)  # 413 when the reply is (or is estimated) larger


class FifoSemaphore:
    """A semaphore that admits waiters in arrival order. ``threading.Semaphore`` does not: a thread
    that releases and acquires again at once overtakes the waiting ones, so a large request split
    into turns would still hold a small one back until it ends."""

    def __init__(self, n: int):
        self._lock = threading.Lock()
        self._free = n
        self._waiters: deque[threading.Lock] = deque()

    def __enter__(self) -> None:
        with self._lock:
            if self._free and not self._waiters:
                self._free -= 1
                return
            turn = threading.Lock()
            turn.acquire()
            self._waiters.append(turn)
        turn.acquire()  # released by __exit__ of the holder: its place is handed over

    def __exit__(self, *exc: object) -> None:
        with self._lock:
            if self._waiters:
                self._waiters.popleft().release()
            else:
                self._free += 1


CHUNK_HITS = 256  # hits searched and rendered per task: what another request may wait behind
# once this fraction (1/PROJECT_AFTER) of a request's queries is searched, a reply whose bytes so far
# project past max_reply_bytes is refused at once rather than after searching up to the budget
PROJECT_AFTER = 8
SMALL_REPLY_BYTES = 2**20  # sent in one piece; larger ones piece by piece
TRIM_AFTER_BYTES = 8 * 2**20  # after a reply this large, hand freed heap pages back to the OS


def _corpus_of(retriever: Retriever):
    """The :class:`harness.retrieval.corpus.Corpus` a retriever reads passages from, if any (through
    the result cache and a hybrid's sparse side)."""
    for name in ("corpus", "inner", "sparse"):
        found = getattr(retriever, name, None)
        if found is None:
            continue
        if hasattr(found, "contents_sizes"):
            return found
        if isinstance(found, Retriever):
            return _corpus_of(found)
    return None


def thread_safe_search(retriever: Retriever) -> bool:
    """Whether ``retriever`` (through the result cache) may search on several threads at once:
    a retriever says so with a true ``thread_safe_search`` attribute (pyserini's does)."""
    inner = getattr(retriever, "inner", None)
    if isinstance(inner, Retriever):
        return thread_safe_search(inner)
    return bool(getattr(retriever, "thread_safe_search", False))


AUTO_SEARCH_THREADS = 4  # for a thread-safe retriever when --search-threads is not given


def passage_bytes_estimate(retriever: Retriever, *, quantile: float = 0.9, sample: int = 100_000) -> int:
    """Bytes of one passage for the reply budget's check before a search: the ``quantile`` of the
    corpus's passage sizes (a seeded sample of ``sample`` rows; hits run longer than the mean
    passage), or :data:`UNKNOWN_PASSAGE_BYTES` when the retriever has no local corpus."""
    import numpy as np

    corpus = _corpus_of(retriever)
    if corpus is None or len(corpus) == 0:
        return UNKNOWN_PASSAGE_BYTES
    n = len(corpus)
    rows = np.arange(n) if n <= sample else np.random.default_rng(0).choice(n, sample, replace=False)
    return max(1, int(np.quantile(corpus.contents_sizes(rows), quantile)))


UNKNOWN_PASSAGE_BYTES = 1024  # a wiki-18 passage is ~600 bytes
HIT_OVERHEAD_BYTES = 96  # keys, id, score and punctuation of one hit


def _render_items(items: list) -> bytes:
    """The JSON of ``items`` without its brackets, as FastAPI's JSONResponse renders it (compact,
    UTF-8, no NaN), so that ``b"[" + b",".join(parts) + b"]"`` equals the rendering of the whole."""
    return json.dumps(items, ensure_ascii=False, allow_nan=False, indent=None, separators=(",", ":")).encode(
        "utf-8"
    )[1:-1]


def _trim_heap() -> None:
    """Return freed heap pages to the OS (glibc ``malloc_trim``): the pieces of a large reply are
    freed but glibc keeps the pages of its arenas, so RSS would stay at the reply's peak."""
    import ctypes
    import ctypes.util

    name = ctypes.util.find_library("c")
    if name is None:
        return
    libc = ctypes.CDLL(name)
    if hasattr(libc, "malloc_trim"):
        libc.malloc_trim(0)


Render = Callable[[list[list[Hit]]], tuple[bytes, Any]]  # hits per query -> (JSON piece, extra)


class _Searcher:
    """What the routes of :func:`create_app` share: the retriever, the limits a request is checked
    against, and the turns its searches take (see :func:`create_app`). Each route method returns
    the reply's pieces (bytes in order) or raises :class:`BadRequest`."""

    def __init__(
        self,
        retriever: Retriever,
        *,
        default_topk: int,
        limits: ServerLimits,
        chunk_hits: int,
        search_threads: int | None,
    ):
        if not 1 <= default_topk <= limits.max_topk:
            raise ConfigError(
                f"the default topk must be between 1 and max_topk ({limits.max_topk}), got {default_topk}"
            )
        safe = thread_safe_search(retriever)
        if search_threads is None:
            search_threads = AUTO_SEARCH_THREADS if safe else 1
        if search_threads < 1 or (search_threads > 1 and not safe):
            raise ConfigError(
                f"--search-threads {search_threads}: the {retriever.name} retriever searches on one thread "
                "only (1); more than 1 needs a thread-safe retriever (pyserini)"
            )
        self.retriever = retriever
        self.default_topk = default_topk
        self.limits = limits
        self.chunk_hits = chunk_hits
        self.search_threads = search_threads
        self.turns = FifoSemaphore(search_threads)
        self.passage_bytes = passage_bytes_estimate(retriever)

    def check(self, queries: list[str], topk: int | None, what: str, k_name: str, copies: int) -> int:
        """The top-k to search with, or a :class:`BadRequest` naming the limit it breaks."""
        limits, max_topk = self.limits, self.limits.max_topk
        if not queries:
            raise BadRequest(f"'{what}' must be a non-empty list of strings")
        if len(queries) > limits.max_queries:
            raise BadRequest(
                f"too many queries ({len(queries)}); at most {limits.max_queries} per request (max_queries)",
                422,
            )
        long = [i for i, q in enumerate(queries) if len(q) > limits.max_query_chars]
        if long:
            raise BadRequest(
                f"query at position(s) {long[:10]} of '{what}' is longer than {limits.max_query_chars} "
                f"characters (max_query_chars; the first has {len(queries[long[0]])})",
                422,
            )
        blank = [i for i, q in enumerate(queries) if is_blank_query(q)]
        if blank:
            raise BadRequest(f"empty query at position(s) {blank[:10]} of '{what}'", 422)
        k = self.default_topk if topk is None else topk
        if not 1 <= k <= max_topk:
            raise BadRequest(f"'{k_name}' must be between 1 and {max_topk}, got {k}", 422)
        if len(queries) * k > limits.max_hits:
            raise BadRequest(
                f"{len(queries)} queries x {k_name} {k} = {len(queries) * k} hits is over the server's "
                f"limit of {limits.max_hits} per reply (max_hits); split the request",
                422,
            )
        per_hit = copies * self.passage_bytes + HIT_OVERHEAD_BYTES
        estimate = len(queries) * k * per_hit
        if estimate > limits.max_reply_bytes:
            raise BadRequest(
                f"{len(queries)} queries x {k_name} {k} x ~{per_hit} bytes per hit = ~{estimate} bytes of "
                f"reply is over the server's budget of {limits.max_reply_bytes} bytes (max_reply_bytes); "
                "send fewer queries or a smaller top-k",
                413,
            )
        return k

    def _search(self, chunk: list[str], k: int, render: Render) -> tuple[bytes, Any]:
        """One task: search the non-blank queries of ``chunk`` at ``k`` (a blank one finds nothing)
        and render the chunk's hit lists."""
        asked = [i for i, q in enumerate(chunk) if not is_blank_query(q)]
        found = self.retriever.search([chunk[i] for i in asked], k) if asked else []
        per_query: list[list[Hit]] = [[] for _ in chunk]
        for i, hits in zip(asked, found, strict=True):
            per_query[i] = hits
        return render(per_query)

    def build(self, queries: list[str], k: int, render: Render) -> tuple[list[bytes], list]:
        """Search ``queries`` at ``k`` in tasks of ``chunk_hits`` hits, each in its turn; each
        task renders its queries (``render(hits_per_query) -> (bytes, extra)``). Returns the
        pieces and the extras, or a 413 once the pieces pass ``max_reply_bytes``."""
        step = max(1, self.chunk_hits // k)
        parts: list[bytes] = []
        extras: list = []
        size = 0
        for start in range(0, len(queries), step):
            with self.turns:  # in arrival order, search_threads at once
                part, extra = self._search(queries[start : start + step], k, render)
            size += len(part) + 1
            try:
                self._check_size(size, min(start + step, len(queries)), len(queries), k)
            except BadRequest:
                parts.clear()
                raise
            parts.append(part)
            extras.append(extra)
        return parts, extras

    def _check_size(self, size: int, done: int, n: int, k: int) -> None:
        """A 413 when the ``size`` bytes of the first ``done`` of ``n`` queries' replies pass the
        budget, or (once 1/:data:`PROJECT_AFTER` of them is searched) project past it."""
        budget = self.limits.max_reply_bytes
        if size > budget:
            raise BadRequest(
                f"the reply to {n} queries at top-{k} passed the server's budget of "
                f"{budget} bytes (max_reply_bytes) after {done} queries; "
                "send fewer queries or a smaller top-k",
                413,
            )
        projected = size * n // done
        if done < n and done * PROJECT_AFTER >= n and projected > budget:
            # the hits found so far say the whole reply will not fit: stop searching now
            raise BadRequest(
                f"the reply to {n} queries at top-{k} is projected at ~{projected} bytes from "
                f"its first {done} queries ({size} bytes), over the server's budget of "
                f"{budget} bytes (max_reply_bytes); send fewer queries or a smaller top-k",
                413,
            )

    def retrieve(self, req: RetrieveRequest) -> list[bytes]:
        """Search-R1's ``/retrieve`` reply."""
        # as upstream: topk 0 or null is the server's default, no queries is an empty result, and a
        # blank query (Search-R1's client sends `<search> </search>` as "") finds nothing
        asked = [q for q in req.queries if not is_blank_query(q)]
        if not asked:
            return [b'{"result":[', _render_items([[] for _ in req.queries]), b"]}"]
        k = self.check(asked, req.topk or None, "queries", "topk", copies=2)
        parts, _ = self.build(req.queries, k, functools.partial(_retrieve_rows, scores=req.return_scores))
        return [b'{"result":[', *_joined(parts), b"]}"]

    def search(self, req: ReCallSearchRequest) -> list[bytes]:
        """ReCall's ``/search`` reply."""
        k = self.check([req.query], req.top_n, "query", "top_n", copies=1)
        parts, _ = self.build([req.query], k, functools.partial(_search_docs, scores=req.return_score))
        return parts

    def batch_search(self, req: ReCallBatchRequest) -> list[bytes]:
        """ReCall's ``/batch_search`` reply."""
        k = self.check(req.query, req.top_n, "query", "top_n", copies=1)
        parts, extras = self.build(req.query, k, _batch_docs)
        if not req.return_score:
            return [b"[", *_joined(parts), b"]"]
        scores = _render_items([s for extra in extras for s in extra])
        return [b"[[", *_joined(parts), b"],[", scores, b"]]"]


def _retrieve_rows(per_query: list[list[Hit]], *, scores: bool) -> tuple[bytes, None]:
    """``/retrieve``'s hit lists: ``{"document", "score"}`` items with ``scores``, else the documents."""
    if scores:
        rows = [[{"document": title_text_document(h), "score": h.score} for h in hits] for hits in per_query]
    else:
        rows = [[title_text_document(h) for h in hits] for hits in per_query]
    return _render_items(rows), None


def _search_docs(per_query: list[list[Hit]], *, scores: bool) -> tuple[bytes, None]:
    """``/search``'s one hit list: the documents, with ``scores`` as ``[docs, scores]``."""
    (hits,) = per_query
    docs = [recall_document(h) for h in hits]
    return _render_items([[docs, [h.score for h in hits]] if scores else docs]), None


def _batch_docs(per_query: list[list[Hit]]) -> tuple[bytes, list[list[float]]]:
    """``/batch_search``'s document lists, and their scores as the extra."""
    docs = [[recall_document(h) for h in hits] for hits in per_query]
    return _render_items(docs), [[h.score for h in hits] for hits in per_query]


def _joined(parts: list[bytes]) -> list[bytes]:
    """``parts`` interleaved with commas (no copy of the parts)."""
    out: list[bytes] = []
    for i, p in enumerate(parts):
        if i:
            out.append(b",")
        out.append(p)
    parts.clear()
    return out


def _respond(pieces: list[bytes]) -> Any:
    """Send ``pieces`` (the reply's bytes in order) with their total length, each dropped once sent."""
    from fastapi.responses import Response, StreamingResponse

    length = sum(len(p) for p in pieces)
    if length <= SMALL_REPLY_BYTES:
        return Response(b"".join(pieces), media_type="application/json")

    async def body():
        while pieces:
            yield pieces.pop(0)
        if length >= TRIM_AFTER_BYTES:
            _trim_heap()

    return StreamingResponse(body(), media_type="application/json", headers={"content-length": str(length)})


async def _invalid(_: Any, exc: Any) -> Any:
    from fastapi.responses import JSONResponse

    return JSONResponse(status_code=422, content={"detail": _format_errors(list(exc.errors()))})


async def _bad(_: Any, exc: BadRequest) -> Any:
    from fastapi.responses import JSONResponse

    return JSONResponse(status_code=exc.status, content={"detail": exc.message})


async def _harness(_: Any, exc: HarnessError) -> Any:
    from fastapi.responses import JSONResponse

    return JSONResponse(status_code=500, content={"detail": f"retrieval failed: {exc}"})


async def _crash(_: Any, exc: Exception) -> Any:
    from fastapi.responses import JSONResponse

    return JSONResponse(status_code=500, content={"detail": f"retrieval failed: {type(exc).__name__}: {exc}"})


class _FastRetrieve:
    """ASGI middleware answering ``POST /retrieve`` (a JSON body) without FastAPI's routing, body
    parsing and dependency machinery, which were most of a one-query request's CPU: the body is
    read with orjson and validated by :class:`RetrieveRequest` as FastAPI would (pydantic's Python
    mode on the parsed object), searched through the same :class:`_Searcher` on a thread pool
    (:func:`_route_threads`), and answered with the same bytes and the same error replies. A body
    that orjson or the model refuses goes on to FastAPI, so its 422 (and its wording) is FastAPI's,
    as before. Sits
    inside :class:`~harness.serving.BodyLimit`, so the body limit applies first, and ahead of the
    app's middleware stack (:func:`_app_class`)."""

    def __init__(self, app: Any, searcher: _Searcher):
        self.app = app
        self.searcher = searcher

    async def __call__(self, scope: Any, receive: Any, send: Any) -> None:
        # the app sends only its HTTP requests to /retrieve here (RetrievalApp.__call__)
        if not (scope["method"] == "POST" and _json_content(scope)):
            await self.app(scope, receive, send)
            return
        from pydantic import ValidationError

        from harness.serving import replay_body

        chunks = []
        while True:
            message = await receive()
            if message["type"] == "http.disconnect":
                return
            chunks.append(message.get("body", b""))
            if not message.get("more_body", False):
                break
        body = b"".join(chunks)
        try:
            req = RetrieveRequest.model_validate(orjson.loads(body))
        except (orjson.JSONDecodeError, ValidationError):
            await self.app(scope, replay_body(body, receive), send)  # FastAPI's own 422
            return
        try:
            # off the event loop, as FastAPI runs a route: searching on the loop instead used less CPU
            # a request (1.53x against 1.24x less than the plain handler) but answered fewer
            # requests a second on a busy machine (0.84x against 1.39x, load 12-15): one thread
            # against many. A plain executor, not Starlette's run_in_threadpool: anyio's hand-off
            # (its capacity limiter, run-vars and cancel scopes) was a fifth of the event loop's
            # time under 16 clients (py-spy, GIL held)
            loop = asyncio.get_running_loop()
            response = _respond(await loop.run_in_executor(_route_threads(), self.searcher.retrieve, req))
        except BadRequest as e:
            response = await _bad(None, e)
        except HarnessError as e:
            response = await _harness(None, e)
        except Exception as e:  # noqa: BLE001 -- as the app's catch-all handler: a 500 with the message
            response = await _crash(None, e)
        await response(scope, receive, send)


@functools.cache
def _route_threads() -> ThreadPoolExecutor:
    """The threads ``POST /retrieve`` requests are answered on, one pool a process: as many as
    Starlette's thread pool (anyio's default of 40), so a long request searching turn by turn
    (:class:`FifoSemaphore`) holds one of them and the requests behind it still reach their turn."""
    return ThreadPoolExecutor(max_workers=40, thread_name_prefix="retrieve")


@functools.cache
def _app_class() -> type:
    """FastAPI with ``POST /retrieve`` answered ahead of its middleware stack (made here, not at import:
    FastAPI is imported when an app is). The stack (Starlette's error middleware, FastAPI's
    telemetry and body-limit middleware, ours) was 6% of the event loop's time under 16 clients
    (py-spy, GIL held); ``fast_retrieve`` catches its own errors as the app's handlers would."""
    from fastapi import FastAPI

    class RetrievalApp(FastAPI):
        fast_retrieve: Any = None

        async def __call__(self, scope: Any, receive: Any, send: Any) -> None:
            if self.fast_retrieve is not None and scope["type"] == "http" and scope["path"] == "/retrieve":
                await self.fast_retrieve(scope, receive, send)
            else:
                await super().__call__(scope, receive, send)

    return RetrievalApp


def _json_content(scope: Any) -> bool:
    """Whether the request says its body is JSON, as FastAPI decides before it parses a body."""
    for name, value in scope["headers"]:
        if name == b"content-type":
            media = value.split(b";", 1)[0].strip().lower()
            return media == b"application/json" or (
                media.startswith(b"application/") and media.endswith(b"+json")
            )
    return False


def create_app(
    retriever: Retriever,
    *,
    default_topk: int = 3,
    limits: ServerLimits | None = None,
    chunk_hits: int = CHUNK_HITS,
    search_threads: int | None = None,
):
    """A FastAPI app serving ``retriever`` within ``limits``.

    Searches run off the event loop on ``search_threads`` worker threads (default: 1, or
    :data:`AUTO_SEARCH_THREADS` for a retriever that declares ``thread_safe_search``), ``chunk_hits`` hits (queries x topk) per task, each task searching and rendering
    its queries' JSON: a large request is many tasks queued one after another, so another request
    waits behind one task, not the whole request, and the event loop only moves bytes. A reply is
    counted while it is built and refused with 413 when it passes ``max_reply_bytes``; a complete
    one is sent piece by piece with its length, each piece dropped once sent."""
    from fastapi import FastAPI
    from fastapi.exceptions import RequestValidationError
    from fastapi.responses import Response

    limits = limits or ServerLimits()
    searcher = _Searcher(
        retriever,
        default_topk=default_topk,
        limits=limits,
        chunk_hits=chunk_hits,
        search_threads=search_threads,
    )
    app = _app_class()(title="rar-harness retrieval server", version="1")
    body_limit: dict[str, Any] = {
        "max_bytes": limits.max_body_bytes,
        "flag": "max_body_bytes",
        "advice": "send fewer or shorter queries",
    }
    app.add_middleware(BodyLimit, **body_limit)
    # /retrieve before Starlette's middleware stack: the body limit, then the fast path, which hands
    # what it does not answer to the whole app (its stack and routes, the body limit again)
    app.fast_retrieve = BodyLimit(
        _FastRetrieve(functools.partial(FastAPI.__call__, app), searcher), **body_limit
    )
    app.state.passage_bytes = searcher.passage_bytes
    app.state.search_threads = searcher.search_threads
    app.add_exception_handler(RequestValidationError, _invalid)
    app.add_exception_handler(BadRequest, _bad)
    app.add_exception_handler(HarnessError, _harness)
    app.add_exception_handler(Exception, _crash)

    @app.get("/health")
    def health() -> dict[str, Any]:
        return describe(retriever, default_topk=default_topk, limits=limits)

    # response_model=None: the replies are built by hand (``_respond``); with it left to FastAPI, the
    # return annotation (a string under ``from __future__ import annotations``, of a type imported
    # in this function) made /openapi.json a 500, so /docs could not load (issue 61)
    @app.post("/retrieve", response_model=None)
    def retrieve(req: RetrieveRequest) -> Response:
        return _respond(searcher.retrieve(req))

    @app.post("/search", response_model=None)
    def search(req: ReCallSearchRequest) -> Response:
        return _respond(searcher.search(req))

    @app.post("/batch_search", response_model=None)
    def batch_search(req: ReCallBatchRequest) -> Response:
        return _respond(searcher.batch_search(req))

    return app


def describe(retriever: Retriever, *, default_topk: int, limits: ServerLimits) -> dict[str, Any]:
    """The ``GET /health`` answer: what is served (retriever kind and settings, index id, corpus id,
    content hash and size) and how (default top-k, limits)."""
    corpus = retriever.corpus_spec
    return {
        "status": "ok",
        "retriever": retriever.name,
        "index_id": retriever.index_id,
        "spec": retriever.spec.model_dump(mode="json"),
        "corpus": corpus.model_dump(mode="json") if corpus is not None else None,
        "default_topk": default_topk,
        "max_topk": limits.max_topk,
        "limits": limits.model_dump(mode="json"),
    }


def bind(host: str, port: int) -> socket.socket:
    """A listening TCP socket on ``host:port`` (port 0: any free port), or one :class:`ConfigError`."""
    if isinstance(port, bool) or not isinstance(port, int) or not 0 <= port <= 65535:
        raise ConfigError(f"--port must be an integer between 0 and 65535, got {port!r}")
    try:
        infos = socket.getaddrinfo(host, port, type=socket.SOCK_STREAM, flags=socket.AI_PASSIVE)
    except socket.gaierror as e:
        raise ConfigError(f"--host {host!r}: cannot resolve it ({e.strerror})") from None
    family, kind, proto, _, address = infos[0]
    # with the protocol number (IPPROTO_TCP) the accepted connections carry it too, and asyncio sets
    # TCP_NODELAY only on those: with proto 0 every reply waited for the client's delayed ACK (~40 ms)
    sock = socket.socket(family, kind, proto)
    try:
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        sock.bind(address)
        sock.listen(2048)
    except OSError as e:
        sock.close()
        raise ConfigError(f"cannot listen on {host}:{port}: {e.strerror or e}") from None
    sock.set_inheritable(True)
    return sock


def serve(app, limits: ServerLimits, sock: socket.socket) -> None:
    """Serve ``app`` on the already bound ``sock`` until interrupted."""
    import uvicorn

    host, port = sock.getsockname()[:2]
    uvicorn.Server(uvicorn_config(app, limits, host=host, port=port)).run(sockets=[sock])
