"""Build the packaged QA data and the closed corpus from the raw sources (see DATA.md).

    python scripts/build_data.py                      # reads ../shared/data/raw next to the repo
    python scripts/build_data.py --raw DIR --out DIR

Writes, deterministically (same input, same bytes: gzip -9 with mtime 0, sorted keys of the
manifest, passages numbered in first-seen order):

    harness/data/packaged/<dataset>.jsonl.gz       QAExample.to_dict() rows, one per question
    harness/data/packaged/corpus/closed.jsonl.gz   wiki-18 rows {"id", "contents": "\"Title\"\\ntext"}
    harness/data/packaged/corpus/gold.jsonl.gz     {"dataset", "id", "passage_ids"} per question with gold
    harness/data/packaged/corpus/contexts.jsonl.gz {"dataset", "id", "passage_ids"}: a question's own
                                                   paragraphs (distractor setting), in the dataset's order
    harness/data/packaged/subsets.json             named id lists per dataset (closed, r1searcher500, longtail)
    harness/data/packaged/manifest.json            rows, sha256 (of the uncompressed jsonl) and sources per file

and checks every count against ``EXPECTED_ROWS`` below, the counts DATA.md documents (exits 1 on a mismatch).
The row parsers are the user-facing ones in harness/data/loaders.py.
"""

from __future__ import annotations

import argparse
import dataclasses
import gzip
import hashlib
import io
import json
import sys
from collections.abc import Iterable
from dataclasses import dataclass, field
from pathlib import Path

from harness.data.loaders import Record, iter_json, iter_jsonl, iter_records, normalize_ws, twowiki_record
from harness.retrieval.corpus import row_bytes
from harness.types import QAExample, join_contents, split_contents

REPO = Path(__file__).resolve().parents[1]
DEFAULT_RAW = REPO.parent / "shared" / "data" / "raw"
DEFAULT_OUT = REPO / "harness" / "data" / "packaged"

# Expected counts (as DATA.md documents them); a mismatch fails the build.
EXPECTED_ROWS = {
    "nq": 3610,
    "triviaqa": 11313,
    "popqa": 2140,  # 1,000 HippoRAG + 1,399 long-tail - 259 shared ids (2,125 distinct question texts)
    "hotpotqa": 7405,
    "2wikimultihopqa": 12576,
    "musique": 2417,
    "bamboogle": 125,
}
EXPECTED_CLOSED = {"hotpotqa": 1405, "musique": 292, "2wikimultihopqa": 166, "popqa": 1000}
# Questions that keep their own ordered context (10 paragraphs for HotpotQA / 2Wiki, 20 for MuSiQue;
# a few HotpotQA dev rows ship fewer). PopQA's HippoRAG paragraphs are its two gold paragraphs only,
# not a distractor-setting context, so PopQA has none (Record.reader_context).
EXPECTED_CONTEXTS = {"hotpotqa": 1405, "musique": 292, "2wikimultihopqa": 166}
SPLITS = {
    "nq": "test",
    "triviaqa": "test",
    "popqa": "test",
    "hotpotqa": "dev",
    "2wikimultihopqa": "dev",
    "musique": "dev",
    "bamboogle": "test",
}


# ---------------------------------------------------------------------------------------------
# the closed corpus


@dataclass
class CorpusPool:
    """Passages de-duplicated on (title, whitespace-normalised text), numbered in first-seen order."""

    ids: dict[tuple[str, str], str] = field(default_factory=dict)
    parts: list[tuple[str, int]] = field(default_factory=list)  # (source, new passages), in order

    def start(self, source: str) -> None:
        self.parts.append((source, 0))

    def add(self, title: str, text: str) -> str:
        key = (normalize_ws(title), normalize_ws(text))
        pid = self.ids.get(key)
        if pid is None:
            pid = f"closed-{len(self.ids) + 1:06d}"
            self.ids[key] = pid
            source, n = self.parts[-1]
            self.parts[-1] = (source, n + 1)
        return pid

    def rows(self) -> list[dict[str, str]]:
        return [{"id": pid, "contents": join_contents(t, x)} for (t, x), pid in self.ids.items()]


def with_passage_ids(ex: QAExample, pool: CorpusPool) -> QAExample:
    """Fill each gold Evidence's passage_id from the pool (the paragraph must be in it)."""
    if not ex.supporting:
        return ex
    sup = []
    for e in ex.supporting:
        if e.text is None:
            raise SystemExit(f"{ex.dataset} {ex.id}: gold paragraph {e.title!r} has no text")
        sup.append(dataclasses.replace(e, passage_id=pool.ids[(e.title, e.text)]))
    return dataclasses.replace(ex, supporting=tuple(sup))


def add_context(pool: CorpusPool, records: Iterable[Record]) -> None:
    for rec in records:
        for p in rec.context:
            pool.add(p.title, p.text)


# ---------------------------------------------------------------------------------------------
# sources


def qa_list(path: Path, dataset: str, split: str) -> list[QAExample]:
    """An agentic-rag / R1-Searcher list of {question, answer}, in original order."""
    return [rec.example for rec in iter_records(path, dataset, split, fmt="qa")]


def join_by_question(
    full: list[QAExample], records: list[tuple[str, Record]], *, with_answer: bool
) -> dict[int, list[tuple[str, Record]]]:
    """Map context-bearing records to their row in the full list by question text (plus the
    first answer for MuSiQue, whose list repeats 5 question texts). Ambiguous keys take the
    first row not yet claimed, in list order."""
    index: dict[tuple[str, str], list[int]] = {}
    for i, ex in enumerate(full):
        index.setdefault((ex.question, ex.answers[0] if with_answer else ""), []).append(i)
    claimed: dict[str, int] = {}  # record id -> row
    taken: set[int] = set()
    out: dict[int, list[tuple[str, Record]]] = {}
    for source, rec in records:
        ex = rec.example
        if ex.id in claimed:
            row = claimed[ex.id]
        else:
            rows = index.get((ex.question, ex.answers[0] if with_answer else ""))
            if not rows:
                raise SystemExit(f"{source}: {ex.id} {ex.question!r} is not in the full {ex.dataset} list")
            free = [r for r in rows if r not in taken] or rows
            row = free[0]
            claimed[ex.id] = row
            taken.add(row)
        out.setdefault(row, []).append((source, rec))
    return out


def context_ids(rec: Record, pool: CorpusPool) -> tuple[str, ...]:
    """The record's own paragraphs as closed-corpus ids, in its order (repeats kept as the source has them)."""
    return tuple(pool.ids[(p.title, p.text)] for p in rec.context)


def merge_rows(
    dataset: str,
    split: str,
    full: list[QAExample],
    joined: dict[int, list[tuple[str, Record]]],
    pool: CorpusPool,
) -> tuple[list[QAExample], dict[str, tuple[str, ...]], list[str]]:
    """The full list with context-bearing rows replaced by their richest record; every
    record's paragraphs go into the pool in list order. Returns (examples, each question's own
    context as passage ids (from the record that supplies the row), warnings)."""
    out: list[QAExample] = []
    contexts: dict[str, tuple[str, ...]] = {}
    warnings: list[str] = []
    for i, base in enumerate(full):
        recs = joined.get(i)
        if not recs:
            out.append(base)
            continue
        add_context(pool, (r for _, r in recs))
        primary_rec = next((r for _, r in recs if r.example.qtype), recs[0][1])
        primary = primary_rec.example
        ids = {r.example.id for _, r in recs}
        if len(ids) != 1:
            warnings.append(f"{dataset} row {i}: sources disagree on the id {sorted(ids)}")
        golds = {tuple(e.title for e in r.example.supporting or ()) for _, r in recs}
        if len({tuple(sorted(g)) for g in golds}) != 1:
            warnings.append(f"{dataset} {primary.id}: sources disagree on gold titles {golds}")
        answers = tuple(dict.fromkeys((*base.answers, *(a for _, r in recs for a in r.example.answers))))
        ex = dataclasses.replace(primary, answers=answers, split=split, dataset=dataset)
        out.append(with_passage_ids(ex, pool))
        if primary_rec.reader_context and primary_rec.context:
            contexts[ex.id] = context_ids(primary_rec, pool)
            others = {context_ids(r, pool) for _, r in recs if r.reader_context and r.context}
            if len(others) != 1:
                warnings.append(
                    f"{dataset} {ex.id}: sources disagree on the context ({len(others)} versions)"
                )
    return out, contexts, warnings


@dataclass
class Built:
    examples: dict[str, list[QAExample]] = field(default_factory=dict)
    contexts: dict[str, dict[str, tuple[str, ...]]] = field(default_factory=dict)  # dataset -> id -> ids
    subsets: dict[str, dict[str, list[str]]] = field(default_factory=dict)
    sources: dict[str, list[str]] = field(default_factory=dict)
    warnings: list[str] = field(default_factory=list)


def r1_subset(raw: Path, name: str, full: list[QAExample], with_answer: bool) -> list[str]:
    """R1-Searcher's 500-question subset as ids of the packaged rows (file order)."""
    rows = qa_list(raw / "r1-searcher" / f"{name}_500.jsonl", "r1", "dev")
    index: dict[tuple[str, str], list[int]] = {}
    for i, ex in enumerate(full):
        index.setdefault((ex.question, ex.answers[0] if with_answer else ""), []).append(i)
    taken: list[int] = []
    for ex in rows:
        key = (ex.question, ex.answers[0] if with_answer else "")
        cands = [i for i in index.get(key, []) if i not in taken]
        if not cands:
            raise SystemExit(f"r1-searcher/{name}_500.jsonl: {ex.question!r} not found in the full list")
        taken.append(cands[0])
    return [full[i].id for i in sorted(taken)]


def build(raw: Path) -> tuple[Built, CorpusPool]:
    b = Built()
    pool = CorpusPool()
    ag = raw / "agentic-rag"

    # HotpotQA dev: the full list, enriched by the IRCoT, RPT and MIGRES context samples.
    pool.start("hotpotqa contexts (MIGRES, RPT, IRCoT)")
    full = qa_list(ag / "hotpotqa_test_questions_and_answers.json", "hotpotqa", "dev")
    full = [dataclasses.replace(ex, hops=2) for ex in full]
    recs = [("migres", r) for r in iter_records(raw / "migres/hotpot.jsonl", "hotpotqa", "dev", "hotpotqa")]
    for name in ("dev", "test"):
        recs += [
            ("rpt", r)
            for r in iter_records(raw / f"rpt-hotpotqa/{name}.jsonl", "hotpotqa", "dev", "hotpotqa")
        ]
    recs += [
        ("ircot", r)
        for r in iter_records(raw / "ircot-hotpotqa-sample/dev_subsampled.jsonl", "hotpotqa", "dev", "ircot")
    ]
    exs, b.contexts["hotpotqa"], w = merge_rows(
        "hotpotqa", "dev", full, join_by_question(full, recs, with_answer=False), pool
    )
    b.examples["hotpotqa"], b.warnings = exs, b.warnings + w
    b.subsets["hotpotqa"] = {"r1searcher500": r1_subset(raw, "hotpotqa", exs, False)}
    b.sources["hotpotqa"] = [
        "agentic-rag/hotpotqa_test_questions_and_answers.json",
        "migres/hotpot.jsonl",
        "rpt-hotpotqa/dev.jsonl",
        "rpt-hotpotqa/test.jsonl",
        "ircot-hotpotqa-sample/dev_subsampled.jsonl",
        "r1-searcher/hotpotqa_500.jsonl",
    ]

    # MuSiQue dev (answerable): the full list, enriched by MIGRES and KAG rows with paragraphs.
    pool.start("musique paragraphs (MIGRES, KAG)")
    full = qa_list(ag / "musique_test_questions_and_answers.json", "musique", "dev")
    recs = [("migres", r) for r in iter_records(raw / "migres/musique.jsonl", "musique", "dev", "musique")]
    recs += [("kag", r) for r in iter_records(raw / "kag/musique_qa_100.json", "musique", "dev", "musique")]
    exs, b.contexts["musique"], w = merge_rows(
        "musique", "dev", full, join_by_question(full, recs, with_answer=True), pool
    )
    b.examples["musique"], b.warnings = exs, b.warnings + w
    b.subsets["musique"] = {"r1searcher500": r1_subset(raw, "musique", exs, True)}
    b.sources["musique"] = [
        "agentic-rag/musique_test_questions_and_answers.json",
        "migres/musique.jsonl",
        "kag/musique_qa_100.json",
        "r1-searcher/musique_500.jsonl",
    ]

    # 2WikiMultihopQA dev: the full list, enriched by MIGRES (rows with context only) and KAG.
    pool.start("2wikimultihopqa contexts (MIGRES, KAG)")
    full = qa_list(ag / "2wikimultihop_test_questions_and_answers.json", "2wikimultihopqa", "dev")
    migres = [d for _, d in iter_jsonl(raw / "migres/wikihop.jsonl")]
    dropped = sum(1 for d in migres if not d.get("context"))
    recs = [
        ("migres", twowiki_record(d, dataset="2wikimultihopqa", split="dev", index=i))
        for i, d in enumerate(migres)
        if d.get("context")  # the 36 rows without context are not dev rows
    ]
    recs += [
        ("kag", twowiki_record(d, dataset="2wikimultihopqa", split="dev", index=i))
        for i, (_, d) in enumerate(iter_json(raw / "kag/2wiki_qa_sub.json"))
    ]
    exs, b.contexts["2wikimultihopqa"], w = merge_rows(
        "2wikimultihopqa", "dev", full, join_by_question(full, recs, with_answer=False), pool
    )
    b.examples["2wikimultihopqa"], b.warnings = exs, b.warnings + w
    b.warnings.append(f"2wikimultihopqa: dropped {dropped} MIGRES rows without context (not dev rows)")
    b.subsets["2wikimultihopqa"] = {"r1searcher500": r1_subset(raw, "2wiki", exs, False)}
    b.sources["2wikimultihopqa"] = [
        "agentic-rag/2wikimultihop_test_questions_and_answers.json",
        "migres/wikihop.jsonl",
        "kag/2wiki_qa_sub.json",
        "r1-searcher/2wiki_500.jsonl",
    ]

    # The HippoRAG 2Wiki corpus (contexts of HippoRAG's 1,000-question sample; questions unknown).
    pool.start("hipporag 2wikimultihopqa corpus")
    for _, d in iter_json(raw / "hipporag/2wikimultihopqa_corpus.json"):
        pool.add(d["title"], d["text"])

    # PopQA: HippoRAG's 1,000 rows with gold paragraphs, then the long-tail rows not among them.
    pool.start("popqa paragraphs (HippoRAG)")
    hippo = list(iter_records(raw / "hipporag/popqa.json", "popqa", "test", "popqa"))
    add_context(pool, hippo)
    popqa = [with_passage_ids(r.example, pool) for r in hippo]
    have = {ex.id for ex in popqa}
    longtail = [r.example for r in iter_records(raw / "ctrla/popqa_longtail.jsonl", "popqa", "test", "popqa")]
    popqa += [ex for ex in longtail if ex.id not in have]
    b.examples["popqa"] = popqa
    b.subsets["popqa"] = {"longtail": [ex.id for ex in popqa if ex.id in {x.id for x in longtail}]}
    b.sources["popqa"] = ["hipporag/popqa.json", "ctrla/popqa_longtail.jsonl"]

    # The FlashRAG wiki-18 sample: extra distractors only.
    pool.start("flashrag wiki-18 sample (distractors)")
    for _, d in iter_jsonl(raw / "flashrag/sample_data.jsonl"):
        pool.add(*split_contents(d["contents"]))

    # Sets without gold passages.
    for name, path in (("nq", "topics.nq.test.tsv"), ("triviaqa", "topics.dpr.trivia.test.tsv")):
        b.examples[name] = [r.example for r in iter_records(raw / "anserini-tools" / path, name, "test")]
        b.sources[name] = [f"anserini-tools/{path}"]
    bam = qa_list(ag / "bamboogle_test_questions_and_answers.json", "bamboogle", "test")
    r1 = qa_list(raw / "r1-searcher/bamboogle.jsonl", "bamboogle", "test")
    if [(e.question, e.answers) for e in bam] != [(e.question, e.answers) for e in r1]:
        b.warnings.append("bamboogle: agentic-rag and r1-searcher copies differ")
    b.examples["bamboogle"] = bam
    b.sources["bamboogle"] = [
        "agentic-rag/bamboogle_test_questions_and_answers.json",
        "r1-searcher/bamboogle.jsonl",
    ]

    for name, exs in b.examples.items():
        closed = [ex.id for ex in exs if ex.supporting and all(e.passage_id for e in ex.supporting)]
        if closed:
            b.subsets.setdefault(name, {})["closed"] = closed
    return b, pool


# ---------------------------------------------------------------------------------------------
# output


def jsonl_bytes(rows: Iterable[dict]) -> bytes:
    buf = io.StringIO()
    for r in rows:
        buf.write(json.dumps(r, ensure_ascii=False, separators=(",", ":")))
        buf.write("\n")
    return buf.getvalue().encode("utf-8")


def write_gz(path: Path, data: bytes) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    with (
        path.open("wb") as f,
        gzip.GzipFile(filename="", mode="wb", fileobj=f, compresslevel=9, mtime=0) as gz,
    ):
        gz.write(data)


def entry(rows: int, data: bytes, sources: list[str], **extra: object) -> dict[str, object]:
    return {"rows": rows, "sha256": hashlib.sha256(data).hexdigest(), "sources": sources, **extra}


def write(b: Built, pool: CorpusPool, out: Path) -> dict[str, dict[str, object]]:
    files: dict[str, dict[str, object]] = {}
    for name in SPLITS:
        exs = b.examples[name]
        data = jsonl_bytes(ex.to_dict() for ex in exs)
        write_gz(out / f"{name}.jsonl.gz", data)
        files[f"{name}.jsonl.gz"] = entry(len(exs), data, b.sources[name], dataset=name, split=SPLITS[name])
    corpus_rows = pool.rows()
    data = jsonl_bytes(corpus_rows)
    content = hashlib.sha256()  # the retrieval content hash (harness/retrieval/corpus.py)
    for r in corpus_rows:
        content.update(row_bytes(r["id"], r["contents"]))
    write_gz(out / "corpus/closed.jsonl.gz", data)
    parts, first = [], 1
    for source, n in pool.parts:
        parts.append(
            {
                "source": source,
                "passages": n,
                "first_id": f"closed-{first:06d}",
                "last_id": f"closed-{first + n - 1:06d}",
            }
        )
        first += n
    files["corpus/closed.jsonl.gz"] = entry(
        len(corpus_rows),
        data,
        [
            "ircot-hotpotqa-sample/dev_subsampled.jsonl",
            "rpt-hotpotqa/dev.jsonl",
            "rpt-hotpotqa/test.jsonl",
            "migres/hotpot.jsonl",
            "migres/musique.jsonl",
            "kag/musique_qa_100.json",
            "migres/wikihop.jsonl",
            "kag/2wiki_qa_sub.json",
            "hipporag/2wikimultihopqa_corpus.json",
            "hipporag/popqa.json",
            "flashrag/sample_data.jsonl",
        ],
        parts=parts,
        corpus_id="closed",
        content_hash=content.hexdigest(),
    )
    gold = [
        {"dataset": name, "id": ex.id, "passage_ids": ex.gold_passage_ids}
        for name in SPLITS
        for ex in b.examples[name]
        if ex.gold_passage_ids
    ]
    data = jsonl_bytes(gold)
    write_gz(out / "corpus/gold.jsonl.gz", data)
    files["corpus/gold.jsonl.gz"] = entry(len(gold), data, ["derived: gold Evidence of the dataset files"])
    contexts = [
        {"dataset": name, "id": ex.id, "passage_ids": list(b.contexts[name][ex.id])}
        for name in SPLITS
        for ex in b.examples[name]
        if ex.id in b.contexts.get(name, {})
    ]
    data = jsonl_bytes(contexts)
    write_gz(out / "corpus/contexts.jsonl.gz", data)
    files["corpus/contexts.jsonl.gz"] = entry(
        len(contexts),
        data,
        [
            "migres/hotpot.jsonl",
            "rpt-hotpotqa/dev.jsonl",
            "rpt-hotpotqa/test.jsonl",
            "ircot-hotpotqa-sample/dev_subsampled.jsonl",
            "migres/musique.jsonl",
            "kag/musique_qa_100.json",
            "migres/wikihop.jsonl",
            "kag/2wiki_qa_sub.json",
        ],
        counts={name: len(b.contexts[name]) for name in SPLITS if b.contexts.get(name)},
    )
    subsets = {name: dict(sorted(b.subsets[name].items())) for name in SPLITS if name in b.subsets}
    data = (json.dumps(subsets, indent=1, sort_keys=False) + "\n").encode()
    (out / "subsets.json").write_bytes(data)
    n_ids = sum(len(v) for s in subsets.values() for v in s.values())
    files["subsets.json"] = entry(
        n_ids, data, ["derived", "r1-searcher/*_500.jsonl", "ctrla/popqa_longtail.jsonl"]
    )
    manifest = {"format": 1, "files": files}
    (out / "manifest.json").write_text(json.dumps(manifest, indent=1, sort_keys=True) + "\n")
    for pkg in (out, out / "corpus"):
        init = pkg / "__init__.py"
        if not init.exists():
            init.write_text('"""Packaged data files (built by scripts/build_data.py)."""\n')
    return files


def check(b: Built) -> list[str]:
    errors = []
    for name, n in EXPECTED_ROWS.items():
        got = len(b.examples[name])
        if got != n:
            errors.append(f"{name}: {got} rows, expected {n}")
    for name, n in EXPECTED_CLOSED.items():
        got = len(b.subsets.get(name, {}).get("closed", []))
        if got != n:
            errors.append(f"{name}: {got} questions with gold passages in the closed corpus, expected {n}")
    for name in ("hotpotqa", "2wikimultihopqa", "musique"):
        got = len(b.subsets[name]["r1searcher500"])
        if got != 500:
            errors.append(f"{name}: r1searcher500 subset has {got} ids")
    for name, n in EXPECTED_CONTEXTS.items():
        got = len(b.contexts.get(name, {}))
        if got != n:
            errors.append(f"{name}: {got} questions with their own context, expected {n}")
    for name, ctx in b.contexts.items():
        closed = set(b.subsets.get(name, {}).get("closed", []))
        if set(ctx) != closed:
            errors.append(f"{name}: the questions with a context are not the closed subset")
        for ex in b.examples[name]:
            if ex.id in ctx and not set(ex.gold_passage_ids) <= set(ctx[ex.id]):
                errors.append(f"{name} {ex.id}: a gold passage is not among the question's own context")
    for name, exs in b.examples.items():
        ids = [ex.id for ex in exs]
        if len(set(ids)) != len(ids):
            errors.append(f"{name}: duplicate ids")
    return errors


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--raw", type=Path, default=DEFAULT_RAW, help=f"raw sources (default {DEFAULT_RAW})")
    ap.add_argument("--out", type=Path, default=DEFAULT_OUT, help=f"output folder (default {DEFAULT_OUT})")
    args = ap.parse_args(argv)
    if not args.raw.is_dir():
        print(f"error: {args.raw} is not a folder; pass --raw", file=sys.stderr)
        return 2
    b, pool = build(args.raw)
    files = write(b, pool, args.out)
    for w in b.warnings:
        print(f"note: {w}")
    print(f"{'file':32} {'rows':>7} {'closed':>7} {'gold':>6} {'MB':>6}")
    for name, meta in files.items():
        ds = meta.get("dataset")
        closed = len(b.subsets.get(str(ds), {}).get("closed", [])) if ds else ""
        gold = sum(1 for ex in b.examples[str(ds)] if ex.supporting) if ds else ""
        size = (args.out / name).stat().st_size / 2**20
        print(f"{name:32} {meta['rows']:>7,} {closed!s:>7} {gold!s:>6} {size:6.2f}")
    for p in pool.parts:
        print(f"  corpus part: {p[0]}: {p[1]:,} new passages")
    total = sum(f.stat().st_size for f in args.out.rglob("*") if f.is_file() and "__pycache__" not in f.parts)
    print(f"packaged folder: {total / 2**20:.2f} MB")
    errors = check(b)
    for e in errors:
        print(f"error: {e}", file=sys.stderr)
    return 1 if errors else 0


if __name__ == "__main__":
    sys.exit(main())
