"""The data shipped inside the package (built by ``scripts/build_data.py``; see DATA.md).

Files under ``harness/data/packaged/``: one ``<dataset>.jsonl.gz`` per QA set, the closed corpus
``corpus/closed.jsonl.gz`` (wiki-18 rows), ``corpus/gold.jsonl.gz`` (gold passage ids per
question), ``corpus/contexts.jsonl.gz`` (each HotpotQA / 2Wiki / MuSiQue question's own ordered
paragraphs as closed-corpus ids), ``subsets.json`` (named id lists) and ``manifest.json`` (rows,
sha256, sources). Everything parsed here is cached per process.

A packaged example with its own context carries it in ``meta["context"]``
(:mod:`harness.data.context`); the contexts file and the closed-corpus paragraphs it names are
read only when a dataset that has contexts is first loaded.
"""

from __future__ import annotations

import gzip
import json
from collections.abc import Iterator
from dataclasses import dataclass
from functools import cache
from importlib import resources
from pathlib import Path

from harness.data.context import META_KEY, ContextParagraph, context_meta
from harness.errors import ConfigError, DataError
from harness.types import QAExample, split_contents

PACKAGE = "harness.data.packaged"
REBUILD = "rebuild it with `python scripts/build_data.py`"


@dataclass(frozen=True)
class CorpusPart:
    """A contiguous id range of the closed corpus and the source that first contributed it."""

    source: str
    passages: int
    first_id: str
    last_id: str


@dataclass(frozen=True)
class CorpusInfo:
    """The closed corpus as a protocol pins it. ``content_hash`` is the retrieval content hash
    (sha256 over ``[id, contents]`` rows, see harness/retrieval/corpus.py), recorded at build time."""

    id: str
    content_hash: str
    n_passages: int


@dataclass(frozen=True)
class PackagedFile:
    path: str  # relative to the packaged folder
    rows: int
    sha256: str  # of the uncompressed content
    sources: tuple[str, ...]  # relative to the raw data folder
    dataset: str | None = None
    split: str | None = None
    parts: tuple[CorpusPart, ...] = ()
    content_hash: str | None = None  # corpus files only


@dataclass(frozen=True)
class Manifest:
    files: tuple[PackagedFile, ...]

    def file(self, path: str) -> PackagedFile:
        for f in self.files:
            if f.path == path:
                return f
        raise DataError(packaged_dir() / "manifest.json", f"no entry for {path!r}; {REBUILD}")

    def dataset_file(self, dataset: str) -> PackagedFile:
        return self.file(f"{dataset}.jsonl.gz")


def packaged_dir() -> Path:
    """The folder of the packaged files (a real folder: the package must not be zipped)."""
    return Path(str(resources.files(PACKAGE)))


def _existing(rel: str) -> Path:
    p = packaged_dir() / rel
    if not p.is_file():
        raise DataError(p, f"packaged file missing; {REBUILD}")
    return p


def dataset_path(dataset: str) -> Path:
    return _existing(f"{dataset}.jsonl.gz")


def closed_corpus_path() -> Path:
    """The closed corpus: gzip wiki-18 jsonl ``{"id": "closed-000001", "contents": "\\"Title\\"\\ntext"}``."""
    return _existing("corpus/closed.jsonl.gz")


def closed_corpus_info() -> CorpusInfo:
    """Id (``closed``), retrieval content hash and size of the closed corpus, from the manifest."""
    f = manifest().file("corpus/closed.jsonl.gz")
    if f.content_hash is None:
        raise DataError(packaged_dir() / "manifest.json", f"no content_hash for the closed corpus; {REBUILD}")
    return CorpusInfo(id="closed", content_hash=f.content_hash, n_passages=f.rows)


def gold_path() -> Path:
    return _existing("corpus/gold.jsonl.gz")


def contexts_path() -> Path:
    """``{"dataset", "id", "passage_ids"}`` per question with its own context, in the dataset's order."""
    return _existing("corpus/contexts.jsonl.gz")


@cache
def manifest() -> Manifest:
    path = _existing("manifest.json")
    try:
        raw = json.loads(path.read_text())
        files = tuple(
            PackagedFile(
                path=name,
                rows=int(m["rows"]),
                sha256=m["sha256"],
                sources=tuple(m["sources"]),
                dataset=m.get("dataset"),
                split=m.get("split"),
                parts=tuple(CorpusPart(**p) for p in m.get("parts", ())),
                content_hash=m.get("content_hash"),
            )
            for name, m in sorted(raw["files"].items())
        )
    except (json.JSONDecodeError, KeyError, TypeError, ValueError) as e:
        raise DataError(path, f"malformed manifest ({e}); {REBUILD}") from None
    return Manifest(files)


def iter_gz_jsonl(path: Path) -> Iterator[tuple[int, dict]]:
    """(line, object) of a gzip jsonl file; a bad line names the file and line."""
    try:
        with gzip.open(path, "rt", encoding="utf-8") as fh:
            for no, line in enumerate(fh, start=1):
                try:
                    yield no, json.loads(line)
                except json.JSONDecodeError as e:
                    raise DataError(path, f"bad JSON: {e.msg}", no) from None
    except (OSError, EOFError, UnicodeDecodeError) as e:
        raise DataError(path, f"cannot read ({e}); {REBUILD}") from None


@cache
def _packaged_examples(dataset: str) -> tuple[QAExample, ...]:
    path = dataset_path(dataset)
    contexts = context_map().get(dataset, {})
    paragraphs = context_paragraphs() if contexts else {}
    out = []
    for no, d in iter_gz_jsonl(path):
        try:
            ex = QAExample.from_dict(d)
        except (KeyError, TypeError) as e:
            raise DataError(path, f"malformed row ({e}); {REBUILD}", no) from None
        ids = contexts.get(ex.id)
        if ids is not None:
            ex.meta[META_KEY] = context_meta(paragraphs[i] for i in ids)
        out.append(ex)
    return tuple(out)


def packaged_examples(dataset: str) -> list[QAExample]:
    """The packaged rows of one dataset (canonical name), parsed once per process."""
    return list(_packaged_examples(dataset))


@cache
def gold_map() -> dict[tuple[str, str], tuple[str, ...]]:
    """(dataset, question id) -> gold passage ids in the closed corpus (multi-hop sets and PopQA)."""
    return {(d["dataset"], d["id"]): tuple(d["passage_ids"]) for _, d in iter_gz_jsonl(gold_path())}


@cache
def context_map() -> dict[str, dict[str, tuple[str, ...]]]:
    """dataset -> question id -> its own paragraphs as closed-corpus ids, in the dataset's order
    (HotpotQA, 2WikiMultihopQA and MuSiQue questions whose sources ship their context)."""
    out: dict[str, dict[str, tuple[str, ...]]] = {}
    for _, d in iter_gz_jsonl(contexts_path()):
        out.setdefault(d["dataset"], {})[d["id"]] = tuple(d["passage_ids"])
    return out


@cache
def context_paragraphs() -> dict[str, ContextParagraph]:
    """The closed-corpus paragraphs that some question's context names, by passage id. Passage
    ``closed-N`` is line N of the corpus, so only the lines up to the largest such id are parsed."""
    wanted = {pid for ds in context_map().values() for ids in ds.values() for pid in ids}
    if not wanted:
        return {}
    last = max(int(pid.rsplit("-", 1)[1]) for pid in wanted)
    path = closed_corpus_path()
    out: dict[str, ContextParagraph] = {}
    for no, d in iter_gz_jsonl(path):
        if no > last:
            break
        if d["id"] in wanted:
            out[d["id"]] = ContextParagraph(*split_contents(d["contents"]), passage_id=d["id"])
    missing = wanted - out.keys()
    if missing:
        raise DataError(path, f"{len(missing)} context passages missing (e.g. {min(missing)}); {REBUILD}")
    return out


@dataclass(frozen=True)
class Subset:
    """A named list of question ids of one packaged dataset (order = the dataset's order)."""

    dataset: str
    name: str
    ids: tuple[str, ...]


SUBSET_DESCRIPTIONS = {
    "all": "every packaged question",
    "closed": "questions whose gold passages are all in the closed corpus",
    "r1searcher500": "R1-Searcher's 500-question evaluation subset",
    "longtail": "PopQA long tail (subject popularity < 100), as Self-RAG and CRAG evaluate",
}


@cache
def subsets() -> tuple[Subset, ...]:
    """Every packaged subset (``closed``, ``r1searcher500``, ``longtail``) of every dataset."""
    path = _existing("subsets.json")
    try:
        raw = json.loads(path.read_text())
        return tuple(Subset(ds, name, tuple(ids)) for ds, s in raw.items() for name, ids in s.items())
    except (json.JSONDecodeError, AttributeError) as e:
        raise DataError(path, f"malformed subsets file ({e}); {REBUILD}") from None


def subset_names(dataset: str) -> list[str]:
    return [s.name for s in subsets() if s.dataset == dataset]


def get_subset(dataset: str, name: str) -> Subset:
    for s in subsets():
        if s.dataset == dataset and s.name == name:
            return s
    known = ", ".join(["all", *subset_names(dataset)])
    raise ConfigError(f"dataset {dataset!r} has no subset {name!r}; known: {known}")


def iter_closed_corpus() -> Iterator[tuple[str, str]]:
    """(passage id, wiki-18 contents) of every closed-corpus passage, in id order."""
    for _, d in iter_gz_jsonl(closed_corpus_path()):
        yield d["id"], d["contents"]
