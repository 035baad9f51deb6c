"""The serving baseline ``harness serve-retriever`` is measured against when upstream's own server
cannot run (it needs pyserini and a Java runtime, or a dense model): the shape of Search-R1's
``search_r1/search/retrieval_server.py`` (PeterGriffinJin/Search-R1@a14dc3a) over a harness
retriever. A FastAPI app with one plain synchronous ``POST /retrieve`` handler (a pydantic request
model, ``queries`` searched in one call, a dict reply that FastAPI encodes), started by
``uvicorn.run`` with its defaults as upstream's README installs uvicorn (``pip install uvicorn
fastapi``: h11 and asyncio, pinned here because the harness's own env has httptools, which
uvicorn would otherwise pick): no limits, no reply budget, no turns. The same index then
answers both servers, so only the serving differs.

    python scripts/plain_retrieval_server.py --port 8001            # bm25s over the closed corpus
    python scripts/retriever_load.py http://127.0.0.1:8001 --requests 2000 --threads 16

Used by tests/bench/test_bench_retrieval_server.py and docs/performance.md.
"""

import argparse

from pydantic import BaseModel


class QueryRequest(BaseModel):  # Search-R1's request model (module level: FastAPI resolves it)
    queries: list[str]
    topk: int | None = None
    return_scores: bool = False


def make_app(retriever, default_topk: int = 3):
    from fastapi import FastAPI

    app = FastAPI()

    @app.post("/retrieve")
    def retrieve(request: QueryRequest):
        k = request.topk or default_topk
        found = retriever.search(request.queries, k)
        result = []
        for hits in found:
            docs = [{"id": h.doc_id, "contents": h.contents, "title": h.title, "text": h.text} for h in hits]
            if request.return_scores:
                result.append([{"document": d, "score": h.score} for d, h in zip(docs, hits, strict=True)])
            else:
                result.append(docs)
        return {"result": result}

    return app


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--host", default="127.0.0.1")
    p.add_argument("--port", type=int, default=8001)
    p.add_argument("--retriever", default="bm25s")
    p.add_argument("--topk", type=int, default=3)
    args = p.parse_args(argv)
    import uvicorn

    from harness.retrieval.factory import make_retriever

    retriever = make_retriever(args.retriever, None)
    uvicorn.run(
        make_app(retriever, args.topk),
        host=args.host,
        port=args.port,
        log_level="warning",
        http="h11",
        loop="asyncio",
    )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
