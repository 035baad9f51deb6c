"""HTTP retrieval server speaking Search-R1's ``POST /retrieve``, with ReCall/FlashRAG adapters.

Search-R1 (``search_r1/search/retrieval_server.py``; also verl's search tool, verl-tool, SkyRL)::

    POST /retrieve  {"queries": ["q1", ...], "topk": 3, "return_scores": true}
    ->  {"result": [[{"document": {"id", "contents", "title", "text"}, "score": 12.3}, ...], ...]}

``topk`` null or absent falls back to the server's ``--topk``. With ``return_scores: false`` each
query's list holds the documents themselves (``[[{"id", "contents", "title", "text"}, ...]]``),
which is what Search-R1's code intends (its own server fails in that case).

ReCall / FlashRAG (``/search``, ``/batch_search``)::

    POST /search        {"query": "q", "top_n": 3, "return_score": false}  -> [doc, ...]
                        with return_score: true                           -> [[doc, ...], [score, ...]]
    POST /batch_search  {"query": ["q1", ...], "top_n": 3, "return_score": false} -> [[doc, ...], ...]
                        with return_score: true            -> [[[doc, ...], ...], [[score, ...], ...]]

where ``doc`` is ``{"id", "contents"}``; ``top_n`` absent falls back to ``--topk``.

``GET /health`` reports the retriever, its spec, index id and corpus. Bad requests (no queries, a
blank query, ``topk`` < 1 or above ``max_topk``, wrong JSON types) get a 4xx JSON
``{"detail": "..."}``; a failing search gets a 500 JSON with the message; the server stays up.
"""

from __future__ import annotations

import threading
from typing import Any

from pydantic import BaseModel, ConfigDict, StrictBool, StrictInt, StrictStr

from harness.errors import HarnessError
from harness.retrieval.base import Retriever, is_blank_query
from harness.types import Hit


class RetrieveRequest(BaseModel):
    model_config = ConfigDict(extra="ignore")
    queries: list[StrictStr]
    topk: StrictInt | None = None
    return_scores: StrictBool = False


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


def search_r1_document(hit: Hit) -> dict[str, str]:
    return {"id": hit.doc_id, "contents": hit.contents, "title": hit.title, "text": hit.text}


def recall_document(hit: Hit) -> dict[str, str]:
    return {"id": hit.doc_id, "contents": hit.contents}


def _format_errors(errors: list[Any]) -> str:
    parts = []
    for e in errors[:5]:
        loc = ".".join(str(x) for x in e.get("loc", ()) if x != "body")
        parts.append(f"{loc or 'body'}: {e.get('msg', 'invalid')}")
    return "invalid request: " + "; ".join(parts)


def create_app(
    retriever: Retriever, *, default_topk: int = 3, max_topk: int = 1000, max_queries: int = 10_000
):
    """A FastAPI app serving ``retriever``. Searches are serialised (one at a time)."""
    from fastapi import FastAPI, Request
    from fastapi.exceptions import RequestValidationError
    from fastapi.responses import JSONResponse

    if not 1 <= default_topk <= max_topk:
        raise ValueError(f"default_topk must be in 1..{max_topk}")
    app = FastAPI(title="rar-harness retrieval server", version="1")
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
        if len(queries) > max_queries:
            raise BadRequest(f"too many queries ({len(queries)}); at most {max_queries} per request", 413)
        blank = [i for i, q in enumerate(queries) if is_blank_query(q)]
        if blank:
            raise BadRequest(f"empty query at position(s) {blank[:10]} of '{what}'", 422)
        k = default_topk if topk is None else topk
        if not 1 <= k <= max_topk:
            raise BadRequest(f"'{k_name}' must be between 1 and {max_topk}, got {k}", 422)
        with lock:
            return retriever.search(queries, k)

    @app.get("/health")
    def health() -> dict[str, Any]:
        corpus = retriever.corpus_spec
        return {
            "status": "ok",
            "retriever": retriever.name,
            "index_id": retriever.index_id,
            "spec": retriever.spec.model_dump(mode="json"),
            "corpus": corpus.model_dump(mode="json") if corpus is not None else None,
            "default_topk": default_topk,
            "max_topk": max_topk,
        }

    @app.post("/retrieve")
    def retrieve(req: RetrieveRequest) -> dict[str, Any]:
        results = run(req.queries, req.topk, "queries", "topk")
        if req.return_scores:
            return {
                "result": [
                    [{"document": search_r1_document(h), "score": h.score} for h in hits] for hits in results
                ]
            }
        return {"result": [[search_r1_document(h) for h in hits] for hits in results]}

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
