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
``max_hits`` get 422; each with a one-line JSON reason naming the limit. A client must send a whole
request (headers and body) within ``read_timeout_s`` of connecting or of its previous response,
otherwise it gets 408 and the connection is closed (uvicorn alone only times out idle keep-alive
connections, so a client sending headers byte by byte, or nothing, would hold one forever). Request
headers are bounded by h11 (16 KiB) and open connections by ``max_connections`` (503 beyond).
"""

from __future__ import annotations

import json
import socket
import threading
from typing import Any

from pydantic import BaseModel, ConfigDict, Field, StrictBool, StrictInt, StrictStr

from harness.errors import ConfigError, HarnessError
from harness.retrieval.base import Retriever, is_blank_query
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


class ServerLimits(BaseModel):
    """What one request may ask of the server. The defaults fit Search-R1-style training, which
    sends every active rollout's query in one request (512 prompts x 5 samples = 2,560 queries,
    top-3) with room to spare, and keep one reply under ~40 MB of JSON."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    max_body_bytes: int = Field(4 * 2**20, ge=1)  # 413 above
    max_queries: int = Field(4096, ge=1)  # 422 above (per request)
    max_query_chars: int = Field(4096, ge=1)  # 422 above (per query)
    max_topk: int = Field(1000, ge=1)  # 422 above
    max_hits: int = Field(20_000, ge=1)  # 422 when len(queries) x topk is above
    read_timeout_s: float = Field(30.0, gt=0)  # 408 and close when a request takes longer to arrive
    keep_alive_s: int = Field(5, ge=1)  # an idle keep-alive connection is closed after this
    max_connections: int = Field(256, ge=1)  # 503 beyond (uvicorn's limit_concurrency)


def _reason(status: int, message: str) -> tuple[int, list[tuple[bytes, bytes]], bytes]:
    body = json.dumps({"detail": message}).encode()
    headers = [(b"content-type", b"application/json"), (b"content-length", str(len(body)).encode())]
    return status, headers, body


class BodyLimit:
    """ASGI middleware: read the whole body first, refusing more than ``max_bytes`` with 413.

    An oversized body is read to its end and dropped (constant memory) so the client, which sends
    its whole body before it reads the answer, gets the 413 instead of a reset connection; how
    long that may take is bounded by the read timeout."""

    def __init__(self, app, max_bytes: int):
        self.app = app
        self.max_bytes = max_bytes

    async def __call__(self, scope, receive, send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        declared = dict(scope.get("headers") or []).get(b"content-length")
        too_big = declared is not None and declared.isdigit() and int(declared) > self.max_bytes
        chunks: list[bytes] = []
        size = 0
        while True:
            message = await receive()
            if message["type"] == "http.disconnect":
                return
            chunk = message.get("body", b"")
            size += len(chunk)
            too_big = too_big or size > self.max_bytes
            if not too_big:
                chunks.append(chunk)
            else:
                chunks.clear()
            if not message.get("more_body", False):
                break
        if too_big:
            status, headers, body = _reason(
                413,
                f"request body of {declared.decode() if declared else size} bytes is over the server's "
                f"limit of {self.max_bytes} bytes (max_body_bytes); send fewer or shorter queries",
            )
            await send({"type": "http.response.start", "status": status, "headers": headers})
            await send({"type": "http.response.body", "body": body})
            return
        data = b"".join(chunks)
        replayed = False

        async def replay():
            nonlocal replayed
            if not replayed:
                replayed = True
                return {"type": "http.request", "body": data, "more_body": False}
            return await receive()

        await self.app(scope, replay, send)


def create_app(retriever: Retriever, *, default_topk: int = 3, limits: ServerLimits | None = None):
    """A FastAPI app serving ``retriever`` within ``limits``. Searches are serialised (one at a time)."""
    from fastapi import FastAPI, Request
    from fastapi.exceptions import RequestValidationError
    from fastapi.responses import JSONResponse

    limits = limits or ServerLimits()
    max_topk = limits.max_topk
    if not 1 <= default_topk <= max_topk:
        raise ConfigError(f"the default topk must be between 1 and max_topk ({max_topk}), got {default_topk}")
    app = FastAPI(title="rar-harness retrieval server", version="1")
    app.add_middleware(BodyLimit, max_bytes=limits.max_body_bytes)
    lock = threading.Lock()

    @app.exception_handler(RequestValidationError)
    async def _invalid(_: Request, exc: RequestValidationError) -> JSONResponse:
        return JSONResponse(status_code=422, content={"detail": _format_errors(list(exc.errors()))})

    @app.exception_handler(BadRequest)
    async def _bad(_: Request, exc: BadRequest) -> JSONResponse:
        return JSONResponse(status_code=exc.status, content={"detail": exc.message})

    @app.exception_handler(HarnessError)
    async def _harness(_: Request, exc: HarnessError) -> JSONResponse:
        return JSONResponse(status_code=500, content={"detail": f"retrieval failed: {exc}"})

    @app.exception_handler(Exception)
    async def _crash(_: Request, exc: Exception) -> JSONResponse:
        return JSONResponse(
            status_code=500, content={"detail": f"retrieval failed: {type(exc).__name__}: {exc}"}
        )

    def run(queries: list[str], topk: int | None, what: str, k_name: str) -> list[list[Hit]]:
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
        k = default_topk if topk is None else topk
        if not 1 <= k <= max_topk:
            raise BadRequest(f"'{k_name}' must be between 1 and {max_topk}, got {k}", 422)
        if len(queries) * k > limits.max_hits:
            raise BadRequest(
                f"{len(queries)} queries x {k_name} {k} = {len(queries) * k} hits is over the server's "
                f"limit of {limits.max_hits} per reply (max_hits); split the request",
                422,
            )
        with lock:
            return retriever.search(queries, k)

    @app.get("/health")
    def health() -> dict[str, Any]:
        return describe(retriever, default_topk=default_topk, limits=limits)

    @app.post("/retrieve")
    def retrieve(req: RetrieveRequest) -> dict[str, Any]:
        # as upstream: topk 0 or null is the server's default, no queries is an empty result, and a
        # blank query (Search-R1's client sends `<search> </search>` as "") finds nothing
        topk = req.topk or None
        asked = [i for i, q in enumerate(req.queries) if not is_blank_query(q)]
        found = run([req.queries[i] for i in asked], topk, "queries", "topk") if asked else []
        results: list[list[Hit]] = [[] for _ in req.queries]
        for i, hits in zip(asked, found, strict=True):
            results[i] = hits
        if req.return_scores:
            return {
                "result": [
                    [{"document": title_text_document(h), "score": h.score} for h in hits] for hits in results
                ]
            }
        return {"result": [[title_text_document(h) for h in hits] for hits in results]}

    @app.post("/search")
    def search(req: ReCallSearchRequest) -> Any:
        hits = run([req.query], req.top_n, "query", "top_n")[0]
        docs = [recall_document(h) for h in hits]
        return [docs, [h.score for h in hits]] if req.return_score else docs

    @app.post("/batch_search")
    def batch_search(req: ReCallBatchRequest) -> Any:
        results = run(req.query, req.top_n, "query", "top_n")
        docs = [[recall_document(h) for h in hits] for hits in results]
        return [docs, [[h.score for h in hits] for hits in results]] if req.return_score else docs

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


def read_timeout_protocol(read_timeout_s: float):
    """uvicorn's h11 protocol with a request read timeout.

    A timer starts when a connection opens and again after every response; it stops when a whole
    request (headers and body) has arrived. When it fires the client gets a 408 with a JSON reason
    and the connection is closed. uvicorn's own ``timeout_keep_alive`` does not cover this: it
    only runs between requests and is cancelled by the first byte received.
    """
    import h11
    from uvicorn.protocols.http.h11_impl import H11Protocol

    class ReadTimeoutH11Protocol(H11Protocol):
        _read_timer = None

        def connection_made(self, transport) -> None:  # type: ignore[override]
            super().connection_made(transport)
            self._arm_read_timer()

        def connection_lost(self, exc: Exception | None) -> None:
            self._cancel_read_timer()
            super().connection_lost(exc)

        def handle_events(self) -> None:
            super().handle_events()
            if self.conn.their_state not in (h11.IDLE, h11.SEND_BODY):  # the request is in (or the end)
                self._cancel_read_timer()

        def on_response_complete(self) -> None:
            if not self.transport.is_closing():
                self._arm_read_timer()  # before super(): it may handle a pipelined request at once
            super().on_response_complete()

        def _arm_read_timer(self) -> None:
            self._cancel_read_timer()
            self._read_timer = self.loop.call_later(read_timeout_s, self._read_timed_out)

        def _cancel_read_timer(self) -> None:
            if self._read_timer is not None:
                self._read_timer.cancel()
                self._read_timer = None

        def _read_timed_out(self) -> None:
            self._read_timer = None
            if self.transport.is_closing():
                return
            cycle = self.cycle
            if cycle is None or cycle.response_complete or not cycle.response_started:
                status, headers, body = _reason(
                    408, f"request not received within {read_timeout_s:g} s (read_timeout_s)"
                )
                head = b"".join(k + b": " + v + b"\r\n" for k, v in headers)
                self.transport.write(
                    b"HTTP/1.1 408 Request Timeout\r\n" + head + b"connection: close\r\n\r\n" + body
                )
            self.transport.close()

    return ReadTimeoutH11Protocol


def uvicorn_config(
    app, limits: ServerLimits, *, host: str = "127.0.0.1", port: int = 0, log_level: str = "warning"
):
    """The uvicorn config the server runs with: h11 with the read timeout, keep-alive and
    connection limits from ``limits``, no access log."""
    import uvicorn

    return uvicorn.Config(
        app,
        host=host,
        port=port,
        http=read_timeout_protocol(limits.read_timeout_s),
        timeout_keep_alive=limits.keep_alive_s,
        limit_concurrency=limits.max_connections,
        log_level=log_level,
        access_log=False,
    )


def bind(host: str, port: int) -> socket.socket:
    """A listening TCP socket on ``host:port`` (port 0: any free port), or one :class:`ConfigError`."""
    if isinstance(port, bool) or not isinstance(port, int) or not 0 <= port <= 65535:
        raise ConfigError(f"--port must be an integer between 0 and 65535, got {port!r}")
    try:
        infos = socket.getaddrinfo(host, port, type=socket.SOCK_STREAM, flags=socket.AI_PASSIVE)
    except socket.gaierror as e:
        raise ConfigError(f"--host {host!r}: cannot resolve it ({e.strerror})") from None
    family, _, _, _, address = infos[0]
    sock = socket.socket(family, socket.SOCK_STREAM)
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
