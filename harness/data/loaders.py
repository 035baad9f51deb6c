"""Readers for the QA formats people already have, so the full sets plug in.

Two layers, one implementation each:

* **row converters** turn one parsed row (a dict) of a known format into a :class:`Record`
  (a :class:`~harness.types.QAExample` plus the row's context paragraphs, if any). The build
  script of the packaged data uses the same converters, so there is one parser per format.
* **file readers** stream rows out of a file (JSON Lines, a JSON array, TSV/CSV, parquet, or a
  Hugging Face ``save_to_disk`` directory loaded with ``datasets``), detect the format from the row
  keys, and wrap every problem into a :class:`~harness.errors.DataError` naming the file and line
  (or row, for binary formats).

Formats (``fmt`` names):

==========  ======================================================================================
flashrag    FlashRAG dataset jsonl ``{id, question, golden_answers, metadata}``;
            also Search-R1 parquet, which keeps those columns
hotpotqa    original HotpotQA json (``_id``, ``context`` as ``[[title, [sentences]]]``,
            ``supporting_facts``) and the HF ``hotpot_qa`` row layout (dict-of-lists fields)
2wiki       2WikiMultihopQA json (as HotpotQA plus ``evidences``, ``type``)
musique     MuSiQue jsonl (``paragraphs`` with ``is_supporting``, ``question_decomposition``)
ircot       IRCoT processed jsonl (``question_id``, ``question_text``, ``answers_objects``,
            ``contexts``)
popqa       PopQA rows (``possible_answers`` as a JSON list string or a list), the long-tail
            jsonl (``answers``) and HippoRAG's rows with ``paragraphs``
qa          any rows with ``question`` and ``answer``/``answers`` (NQ-open jsonl, Bamboogle json
            or csv with ``Question``/``Answer``, R1-Searcher eval sets, HF ``nq_open``/``trivia_qa``)
dpr-tsv     NQ-open / TriviaQA DPR files: ``question<TAB>['answer', ...]`` without a header
==========  ======================================================================================
"""

from __future__ import annotations

import ast
import csv
import dataclasses
import io
import json
import re
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from harness.data.context import META_KEY, ContextParagraph, context_meta
from harness.errors import ConfigError, DataError
from harness.types import Evidence, QAExample

FORMATS = ("flashrag", "hotpotqa", "2wiki", "musique", "ircot", "popqa", "qa", "dpr-tsv")


@dataclass(frozen=True)
class Paragraph:
    """A context paragraph of a row (whitespace-normalised title and text)."""

    title: str
    text: str
    supporting: bool = False


@dataclass(frozen=True)
class Record:
    """One converted row: the example and the paragraphs its source ships with it.

    ``reader_context``: the paragraphs are the question's own reader context in the dataset's
    order (HotpotQA / 2Wiki distractor setting, MuSiQue's 20, IRCoT's contexts), which
    :func:`load_file` keeps in ``example.meta["context"]``. False for PopQA's HippoRAG rows, whose
    paragraphs are the gold ones only (they feed the closed corpus, not a reader)."""

    example: QAExample
    context: tuple[Paragraph, ...] = ()
    reader_context: bool = True


class RowError(ValueError):
    """A problem with one row; readers turn it into a DataError naming file and line."""


def normalize_ws(s: str) -> str:
    """Collapse every run of whitespace into one space and strip the ends."""
    return " ".join(s.split())


def fallback_id(dataset: str, split: str, index: int) -> str:
    """The id of a row whose source has none: ``<dataset>-<split>-<index>`` (0-based file order)."""
    return f"{dataset}-{split}-{index}"


# ---------------------------------------------------------------------------------------------
# field helpers


def _get(d: dict[str, Any], *keys: str) -> Any:
    for k in keys:
        if k in d and d[k] is not None:
            return d[k]
    raise RowError(f"missing field {' or '.join(repr(k) for k in keys)}")


def _str_field(d: dict[str, Any], *keys: str) -> str:
    v = _get(d, *keys)
    if not isinstance(v, str):
        raise RowError(f"field {keys[0]!r} must be a string, got {type(v).__name__}")
    v = v.strip()
    if not v:
        raise RowError(f"field {keys[0]!r} is empty")
    return v


def _row_id(d: dict[str, Any], keys: tuple[str, ...], dataset: str, split: str, index: int) -> str:
    for k in keys:
        v = d.get(k)
        if v is not None and str(v).strip():
            if not isinstance(v, str | int):
                raise RowError(f"field {k!r} must be a string or an integer, got {type(v).__name__}")
            return str(v).strip()
    return fallback_id(dataset, split, index)


def clean_answers(values: Any, field: str = "answers") -> tuple[str, ...]:
    """Normalise whitespace, drop duplicates (keeping order) and refuse an empty list."""
    if isinstance(values, str):
        values = [values]
    if not isinstance(values, list | tuple):
        raise RowError(f"field {field!r} must be a list of strings, got {type(values).__name__}")
    out: dict[str, None] = {}
    for v in values:
        if not isinstance(v, str):
            raise RowError(f"field {field!r} must hold strings, got {type(v).__name__} {v!r}")
        v = normalize_ws(v)
        if v:
            out.setdefault(v, None)
    if not out:
        raise RowError(f"empty answers list in field {field!r}")
    return tuple(out)


def _merge_answers(*groups: tuple[str, ...]) -> tuple[str, ...]:
    return tuple(dict.fromkeys(a for g in groups for a in g))


# ---------------------------------------------------------------------------------------------
# row converters: dict -> Record


def flashrag_record(d: dict[str, Any], *, dataset: str, split: str, index: int) -> Record:
    if "choices" in d and d["choices"]:
        raise RowError("multiple-choice rows (with 'choices') are not supported")
    meta = d.get("metadata") or {}
    if not isinstance(meta, dict):
        raise RowError(f"field 'metadata' must be an object, got {type(meta).__name__}")
    ex = QAExample(
        id=_row_id(d, ("id",), dataset, split, index),
        dataset=dataset,
        split=split,
        question=_str_field(d, "question"),
        answers=clean_answers(_get(d, "golden_answers"), "golden_answers"),
        meta=meta,
    )
    return Record(ex)


def _context_paragraphs(ctx: Any) -> list[tuple[str, str]]:
    """HotpotQA/2Wiki context in the original (``[[title, [sent, ...]], ...]``) or HF
    (``{"title": [...], "sentences"|"content": [[...]]}``) layout -> [(title, text)].

    Sentences are joined with one space and whitespace is normalised, which makes the
    IRCoT, HF and original copies of a paragraph identical (see DATA.md)."""
    if isinstance(ctx, dict):
        titles = _get(ctx, "title")
        sents = _get(ctx, "sentences", "content")
        if not isinstance(titles, list) or not isinstance(sents, list) or len(titles) != len(sents):
            raise RowError("field 'context' must hold equally long 'title' and 'sentences' lists")
        pairs = list(zip(titles, sents, strict=True))
    elif isinstance(ctx, list):
        pairs = []
        for item in ctx:
            if not isinstance(item, list | tuple) or len(item) != 2:
                raise RowError("field 'context' must be a list of [title, [sentences]] pairs")
            pairs.append((item[0], item[1]))
    else:
        raise RowError(f"field 'context' must be a list or an object, got {type(ctx).__name__}")
    out = []
    for title, sents in pairs:
        if not isinstance(title, str) or not isinstance(sents, list | str):
            raise RowError("a context entry needs a string title and a list of sentences")
        text = sents if isinstance(sents, str) else " ".join(str(s) for s in sents)
        out.append((normalize_ws(title), normalize_ws(text)))
    return out


def _supporting_facts(sf: Any) -> list[tuple[str, int]]:
    if isinstance(sf, dict):
        titles, sids = _get(sf, "title"), _get(sf, "sent_id")
        if not isinstance(titles, list) or not isinstance(sids, list) or len(titles) != len(sids):
            raise RowError("field 'supporting_facts' must hold equally long 'title' and 'sent_id' lists")
        pairs = list(zip(titles, sids, strict=True))
    elif isinstance(sf, list):
        pairs = []
        for item in sf:
            if not isinstance(item, list | tuple) or len(item) != 2:
                raise RowError("field 'supporting_facts' must be a list of [title, sent_id] pairs")
            pairs.append((item[0], item[1]))
    else:
        raise RowError(f"field 'supporting_facts' must be a list or an object, got {type(sf).__name__}")
    return [(normalize_ws(str(t)), int(i)) for t, i in pairs]


def _evidence_from_titles(titles: list[str], context: list[tuple[str, str]]) -> tuple[Evidence, ...]:
    by_title = dict(reversed(context))  # first paragraph of a title wins
    if context:
        missing = [t for t in titles if t not in by_title]
        if missing:
            raise RowError(f"supporting title(s) {missing} not among the context paragraphs")
    return tuple(Evidence(title=t, text=by_title.get(t)) for t in titles)


def _context_record(d: dict[str, Any], *, dataset: str, split: str, index: int, two_wiki: bool) -> Record:
    context = _context_paragraphs(d["context"]) if d.get("context") is not None else []
    supporting: tuple[Evidence, ...] | None = None
    sf: list[tuple[str, int]] = []
    if d.get("supporting_facts") is not None:
        sf = _supporting_facts(d["supporting_facts"])
        titles = list(dict.fromkeys(t for t, _ in sf))
        supporting = _evidence_from_titles(titles, context)
    meta: dict[str, Any] = {}
    if sf:
        meta["supporting_facts"] = [[t, i] for t, i in sf]
    if not two_wiki and d.get("level"):
        meta["level"] = d["level"]
    if two_wiki and d.get("evidences") is not None:
        ev = d["evidences"]
        if isinstance(ev, dict):  # HF layout {"fact": [...], "relation": [...], "entity": [...]}
            ev = [list(t) for t in zip(*(ev[k] for k in ("fact", "relation", "entity")), strict=True)]
        meta["evidences"] = ev
    qtype = d.get("type") or None
    if two_wiki:
        hops = len(supporting) if supporting else None
    else:
        hops = 2  # HotpotQA questions need exactly two paragraphs by construction
    gold_titles = {e.title for e in supporting or ()}
    ex = QAExample(
        id=_row_id(d, ("_id", "id"), dataset, split, index),
        dataset=dataset,
        split=split,
        question=_str_field(d, "question"),
        answers=clean_answers(_get(d, "answer"), "answer"),
        supporting=supporting,
        hops=hops,
        qtype=qtype,
        meta=meta,
    )
    return Record(ex, tuple(Paragraph(t, x, t in gold_titles) for t, x in context))


def hotpotqa_record(d: dict[str, Any], *, dataset: str, split: str, index: int) -> Record:
    return _context_record(d, dataset=dataset, split=split, index=index, two_wiki=False)


def twowiki_record(d: dict[str, Any], *, dataset: str, split: str, index: int) -> Record:
    return _context_record(d, dataset=dataset, split=split, index=index, two_wiki=True)


_MUSIQUE_KIND = re.compile(r"^(\dhop\d?)__")


def musique_record(d: dict[str, Any], *, dataset: str, split: str, index: int) -> Record:
    if d.get("answerable") is False:
        raise RowError("unanswerable MuSiQue-Full row; use the answerable set (musique_ans_v1.0_*.jsonl)")
    qid = _row_id(d, ("id",), dataset, split, index)
    answers = _merge_answers(
        clean_answers(_get(d, "answer"), "answer"),
        clean_answers(d["answer_aliases"], "answer_aliases") if d.get("answer_aliases") else (),
    )
    paragraphs = d.get("paragraphs") or []
    if not isinstance(paragraphs, list):
        raise RowError("field 'paragraphs' must be a list")
    hop_of: dict[int, int] = {}
    decomposition = d.get("question_decomposition") or []
    for hop, step in enumerate(decomposition):
        if not isinstance(step, dict):
            raise RowError("field 'question_decomposition' must be a list of objects")
        psi = step.get("paragraph_support_idx")
        if psi is not None:
            hop_of.setdefault(int(psi), hop)
    context: list[Paragraph] = []
    gold: list[tuple[int, int, Evidence]] = []
    for pos, p in enumerate(paragraphs):
        if not isinstance(p, dict):
            raise RowError("field 'paragraphs' must be a list of objects")
        title = normalize_ws(str(_get(p, "title")))
        text = normalize_ws(str(_get(p, "paragraph_text", "text")))
        sup = bool(p.get("is_supporting"))
        context.append(Paragraph(title, text, sup))
        if sup:
            idx = int(p.get("idx", pos))
            hop = hop_of.get(idx)
            gold.append((hop if hop is not None else len(paragraphs), pos, Evidence(title, text, hop=hop)))
    m = _MUSIQUE_KIND.match(qid)
    hops = len(decomposition) if decomposition else (int(m.group(1)[0]) if m else None)
    ex = QAExample(
        id=qid,
        dataset=dataset,
        split=split,
        question=_str_field(d, "question"),
        answers=answers,
        supporting=tuple(e for _, _, e in sorted(gold, key=lambda g: g[:2])) if paragraphs else None,
        hops=hops,
        qtype=m.group(1) if m else None,
    )
    return Record(ex, tuple(context))


def ircot_record(d: dict[str, Any], *, dataset: str, split: str, index: int) -> Record:
    objs = _get(d, "answers_objects")
    if not isinstance(objs, list):
        raise RowError("field 'answers_objects' must be a list")
    raw: list[str] = []
    for o in objs:
        if not isinstance(o, dict):
            raise RowError("field 'answers_objects' must be a list of objects")
        raw.extend(o.get("spans") or [])
        if not o.get("spans") and o.get("number"):
            raw.append(str(o["number"]))
    contexts = d.get("contexts") or []
    context = [
        Paragraph(
            normalize_ws(str(_get(c, "title"))),
            normalize_ws(str(_get(c, "paragraph_text"))),
            bool(c.get("is_supporting")),
        )
        for c in contexts
    ]
    gold = tuple(Evidence(p.title, p.text) for p in context if p.supporting)
    ex = QAExample(
        id=_row_id(d, ("question_id", "id"), dataset, split, index),
        dataset=dataset,
        split=split,
        question=_str_field(d, "question_text"),
        answers=clean_answers(raw, "answers_objects"),
        supporting=gold if contexts else None,
        hops=len(gold) if gold else None,
    )
    return Record(ex, tuple(context))


def popqa_record(d: dict[str, Any], *, dataset: str, split: str, index: int) -> Record:
    if d.get("possible_answers") is not None:
        pa = d["possible_answers"]
        if isinstance(pa, str):
            try:
                pa = json.loads(pa)
            except json.JSONDecodeError as e:
                raise RowError(f"field 'possible_answers' is not a JSON list: {e}") from None
        answers = clean_answers(pa, "possible_answers")
    else:
        answers = clean_answers(_get(d, "answers", "possible_answers"), "answers")
    meta: dict[str, Any] = {}
    for key in ("prop", "s_wiki_title", "o_wiki_title"):
        if d.get(key):
            meta[key] = d[key]
    pop = d.get("s_pop", d.get("pop"))
    if pop is not None and str(pop).strip():
        try:
            meta["s_pop"] = int(pop)
        except ValueError:
            raise RowError(f"field 's_pop' must be an integer, got {pop!r}") from None
    paragraphs = d.get("paragraphs")
    context: list[Paragraph] = []
    for p in paragraphs or []:
        context.append(
            Paragraph(
                normalize_ws(str(_get(p, "title"))),
                normalize_ws(str(_get(p, "text", "paragraph_text"))),
                bool(p.get("is_supporting")),
            )
        )
    ex = QAExample(
        id=_row_id(d, ("id",), dataset, split, index),
        dataset=dataset,
        split=split,
        question=_str_field(d, "question"),
        answers=answers,
        supporting=tuple(Evidence(p.title, p.text) for p in context if p.supporting)
        if paragraphs is not None
        else None,
        hops=1,
        qtype=meta.get("prop"),
        meta=meta,
    )
    return Record(ex, tuple(context), reader_context=False)


def qa_record(d: dict[str, Any], *, dataset: str, split: str, index: int) -> Record:
    ans = _get(d, "answers", "answer", "Answer", "golden_answers")
    if isinstance(ans, dict):  # HF trivia_qa: {"value": ..., "aliases": [...]}
        ans = [ans.get("value") or "", *(ans.get("aliases") or [])]
    ex = QAExample(
        id=_row_id(d, ("id", "_id", "question_id"), dataset, split, index),
        dataset=dataset,
        split=split,
        question=_str_field(d, "question", "Question"),
        answers=clean_answers(ans, "answer"),
    )
    return Record(ex)


def dpr_record(cells: list[str], *, dataset: str, split: str, index: int) -> Record:
    """One DPR tsv row: ``[question, "['a', 'b']"]``."""
    if len(cells) < 2:
        raise RowError(f"expected 2 tab-separated columns (question, answers), got {len(cells)}")
    try:
        answers = ast.literal_eval(cells[1])
    except (ValueError, SyntaxError):
        raise RowError(f"answers column is not a Python list literal: {cells[1][:80]!r}") from None
    question = cells[0].strip()
    if not question:
        raise RowError("empty question")
    ex = QAExample(
        id=fallback_id(dataset, split, index),
        dataset=dataset,
        split=split,
        question=question,
        answers=clean_answers(answers),
    )
    return Record(ex)


RowConverter = Callable[..., Record]
CONVERTERS: dict[str, RowConverter] = {
    "flashrag": flashrag_record,
    "hotpotqa": hotpotqa_record,
    "2wiki": twowiki_record,
    "musique": musique_record,
    "ircot": ircot_record,
    "popqa": popqa_record,
    "qa": qa_record,
}


def detect_row_format(keys: set[str] | list[str], dataset: str = "") -> str:
    """The format of a row from its keys (the dataset name breaks the HotpotQA/2Wiki tie)."""
    k = set(keys)
    if "golden_answers" in k:
        return "flashrag"
    if "question_text" in k and "answers_objects" in k:
        return "ircot"
    if "paragraphs" in k and ({"question_decomposition", "answer_aliases", "answerable"} & k):
        return "musique"
    if "possible_answers" in k or ("s_wiki_title" in k and "answers" in k):
        return "popqa"
    if "context" in k or "supporting_facts" in k:
        return "2wiki" if ("evidences" in k or dataset == "2wikimultihopqa") else "hotpotqa"
    if ({"question", "Question"} & k) and ({"answer", "answers", "Answer"} & k):
        return "qa"
    raise RowError(f"unrecognised row layout with keys {sorted(k)}; known formats: {', '.join(FORMATS)}")


# ---------------------------------------------------------------------------------------------
# raw rows out of files


def _decode(path: Path, data: bytes) -> str:
    try:
        return data.decode("utf-8-sig")
    except UnicodeDecodeError as e:
        line = data.count(b"\n", 0, e.start) + 1
        raise DataError(path, f"not UTF-8 (byte {e.start}: {e.reason})", line) from None


def _read_bytes(path: Path) -> bytes:
    try:
        return path.read_bytes()
    except OSError as e:
        raise DataError(path, f"cannot read: {e.strerror}") from None


def iter_jsonl(path: Path) -> Iterator[tuple[int, dict[str, Any]]]:
    """(line number, object) for every non-blank line; bad bytes or JSON name the line."""
    path = Path(path)
    try:
        fh = path.open("rb")
    except OSError as e:
        raise DataError(path, f"cannot read: {e.strerror}") from None
    with fh:
        for no, raw in enumerate(fh, start=1):
            if not raw.strip():
                continue
            try:
                text = raw.decode("utf-8-sig" if no == 1 else "utf-8")
            except UnicodeDecodeError as e:
                raise DataError(path, f"not UTF-8 (byte {e.start} of the line: {e.reason})", no) from None
            try:
                obj = json.loads(text)
            except json.JSONDecodeError as e:
                raise DataError(path, f"bad JSON: {e.msg} (column {e.colno})", no) from None
            if not isinstance(obj, dict):
                raise DataError(path, f"expected a JSON object per line, got {type(obj).__name__}", no)
            yield no, obj


def iter_json(path: Path) -> Iterator[tuple[int | None, dict[str, Any]]]:
    """Rows of a ``.json`` file: a JSON array of objects (or JSON Lines saved as ``.json``, as
    MIGRES and FlashRAG do). Array rows have no line of their own; errors name the item."""
    path = Path(path)
    text = _decode(path, _read_bytes(path))
    try:
        data = json.loads(text)
    except json.JSONDecodeError as e:
        if e.msg == "Extra data" and text.lstrip().startswith("{"):
            yield from iter_jsonl(path)
            return
        raise DataError(path, f"bad JSON: {e.msg} (column {e.colno})", e.lineno) from None
    if isinstance(data, dict):
        for key in ("data", "rows", "examples"):
            if isinstance(data.get(key), list):
                data = data[key]
                break
    if not isinstance(data, list):
        raise DataError(path, f"expected a JSON array of rows, got {type(data).__name__}")
    for i, obj in enumerate(data):
        if not isinstance(obj, dict):
            raise DataError(path, f"item {i}: expected an object, got {type(obj).__name__}")
        yield None, obj


def _csv_text(path: Path) -> tuple[str, str]:
    text = _decode(path, _read_bytes(path))
    first = text.split("\n", 1)[0]
    return text, "\t" if (path.suffix == ".tsv" or "\t" in first) else ","


def _is_dpr_table(path: Path) -> bool:
    text, delim = _csv_text(path)
    first = next(csv.reader(io.StringIO(text.split("\n", 1)[0]), delimiter=delim), [])
    return delim == "\t" and len(first) == 2 and first[1].lstrip().startswith("[")


def iter_table(path: Path) -> Iterator[tuple[int, dict[str, Any]]]:
    """Rows of a csv/tsv file with a header line (tab or comma, decided from the first line)."""
    text, delim = _csv_text(Path(path))
    reader = csv.reader(io.StringIO(text, newline=""), delimiter=delim)
    try:
        header = next(reader)
    except StopIteration:
        return
    header = [h.strip() for h in header]
    for cells in reader:
        if not cells or not any(c.strip() for c in cells):
            continue
        if len(cells) != len(header):
            raise DataError(path, f"expected {len(header)} columns, got {len(cells)}", reader.line_num)
        yield reader.line_num, dict(zip(header, cells, strict=True))


def iter_dpr_tsv(path: Path) -> Iterator[tuple[int, list[str]]]:
    """Rows of a DPR ``question<TAB>answers`` file (no header)."""
    text, _ = _csv_text(Path(path))
    reader = csv.reader(io.StringIO(text, newline=""), delimiter="\t")
    for cells in reader:
        if cells and any(c.strip() for c in cells):
            yield reader.line_num, cells


def load_hf_dir(directory: Path, split: str):
    """The ``datasets.Dataset`` of a ``save_to_disk`` folder: a Dataset folder, or a DatasetDict
    folder and the split ``split`` of it (``validation`` stands for ``dev``). Offline
    (``HF_DATASETS_OFFLINE=1``): nothing is downloaded. A folder ``datasets`` cannot open is one
    :class:`DataError` naming it."""
    import os

    os.environ.setdefault("HF_DATASETS_OFFLINE", "1")
    try:
        import datasets
    except ImportError:
        raise ConfigError(
            f"{directory}: reading a Hugging Face save_to_disk folder needs the datasets library "
            "(pip install datasets)"
        ) from None
    try:
        loaded = datasets.load_from_disk(str(directory))
    except FileNotFoundError as e:
        raise DataError(directory, f"not a Hugging Face save_to_disk folder ({e})") from None
    except (OSError, ValueError, TypeError, KeyError) as e:  # damaged state/info JSON or arrow files
        raise DataError(directory, f"datasets cannot load it ({type(e).__name__}: {e})") from None
    if not isinstance(loaded, datasets.DatasetDict):
        return loaded
    names = [split, *(["validation"] if split == "dev" else [])]
    for name in names:
        if name in loaded:
            return loaded[name]
    raise ConfigError(
        f"{directory}: a Hugging Face DatasetDict with splits {sorted(loaded)}, none named {split!r}"
        f"{' or validation' if split == 'dev' else ''}; point --data-dir at a folder whose "
        f"<dataset>/ sub-folder is the wanted split (saved with save_to_disk)"
    )


def iter_hf_dir(directory: Path, split: str) -> Iterator[tuple[Path, int, dict[str, Any]]]:
    """(arrow file, row index in that file, row) of a ``datasets`` ``save_to_disk`` folder, loaded
    with ``datasets.load_from_disk`` (see :func:`load_hf_dir`), so row errors name the arrow file."""
    import pyarrow as pa

    ds = load_hf_dir(Path(directory), split)
    files = [Path(f["filename"]) for f in ds.cache_files] or [Path(directory)]
    # rows are laid out file after file; a shard's length is its arrow table's row count
    bounds: list[tuple[int, Path]] = []
    if len(files) > 1:
        start = 0
        for f in files:
            try:
                with pa.memory_map(str(f)) as src:
                    n = pa.ipc.open_stream(src).read_all().num_rows
            except (OSError, pa.ArrowInvalid) as e:
                raise DataError(f, f"cannot read the arrow file: {e}") from None
            bounds.append((start, f))
            start += n
    else:
        bounds.append((0, files[0]))
    shard = 0
    try:
        for i, row in enumerate(ds):
            while shard + 1 < len(bounds) and i >= bounds[shard + 1][0]:
                shard += 1
            start, f = bounds[shard]
            yield f, i - start, row
    except (OSError, pa.ArrowInvalid) as e:
        raise DataError(files[shard], f"cannot read the arrow file: {e}") from None


def iter_parquet(path: Path) -> Iterator[tuple[int, dict[str, Any]]]:
    import pyarrow as pa
    import pyarrow.parquet as pq

    try:
        table = pq.read_table(str(path))
    except (OSError, pa.ArrowInvalid) as e:
        raise DataError(path, f"cannot read the parquet file: {e}") from None
    yield from enumerate(table.to_pylist())


# ---------------------------------------------------------------------------------------------
# the public file reader


def detect_file_kind(path: Path) -> str:
    """``hf`` (folder), ``jsonl``, ``json``, ``parquet``, ``dpr-tsv`` or ``table`` (csv/tsv with a header)."""
    path = Path(path)
    if path.is_dir():
        return "hf"
    suffix = path.suffix.lower()
    if suffix == ".jsonl":
        return "jsonl"
    if suffix == ".json":
        return "json"
    if suffix == ".parquet":
        return "parquet"
    if suffix in (".tsv", ".csv", ".txt"):
        return "dpr-tsv" if _is_dpr_table(path) else "table"
    raise ConfigError(
        f"{path}: unknown file type {suffix!r}; expected .jsonl, .json, .parquet, .tsv, .csv or a folder"
    )


def iter_records(path: Path, dataset: str, split: str, fmt: str | None = None) -> Iterator[Record]:
    """Stream :class:`Record` s out of one file or HF folder.

    ``fmt`` (one of :data:`FORMATS`) forces a row format; by default it is detected from the
    first row's keys. Ids missing from the source become ``<dataset>-<split>-<index>``.
    Any malformed row raises :class:`DataError` naming the file and line (or item/row).
    """
    path = Path(path)
    if fmt is not None and fmt not in FORMATS:
        raise ConfigError(f"unknown data format {fmt!r}; known: {', '.join(FORMATS)}")
    if not path.exists():
        raise DataError(path, "no such file or folder")
    kind = detect_file_kind(path)
    if kind == "dpr-tsv" or fmt == "dpr-tsv":
        for index, (no, cells) in enumerate(iter_dpr_tsv(path)):
            try:
                yield dpr_record(cells, dataset=dataset, split=split, index=index)
            except RowError as e:
                raise DataError(path, str(e), no) from None
        return
    # (file, line or None, label for rows without a line, row)
    rows: Iterator[tuple[Path, int | None, str, dict[str, Any]]]
    if kind == "hf":
        rows = ((f, None, f"row {i}", r) for f, i, r in iter_hf_dir(path, split))
    elif kind == "parquet":
        rows = ((path, None, f"row {i}", r) for i, r in iter_parquet(path))
    elif kind == "json":
        rows = ((path, no, f"item {i}", r) for i, (no, r) in enumerate(iter_json(path)))
    else:
        it = iter_jsonl(path) if kind == "jsonl" else iter_table(path)
        rows = ((path, no, "", r) for no, r in it)
    converter: RowConverter | None = CONVERTERS[fmt] if fmt else None
    seen: set[str] = set()
    for index, (where, no, label, row) in enumerate(rows):
        prefix = f"{label}: " if no is None else ""
        try:
            if converter is None:
                converter = CONVERTERS[detect_row_format(row.keys(), dataset)]
            rec = converter(row, dataset=dataset, split=split, index=index)
        except RowError as e:
            raise DataError(where, prefix + str(e), no) from None
        except (TypeError, ValueError, AttributeError, KeyError) as e:
            raise DataError(where, f"{prefix}malformed row ({type(e).__name__}: {e})", no) from None
        if rec.example.id in seen:
            raise DataError(where, f"{prefix}duplicate id {rec.example.id!r}", no)
        seen.add(rec.example.id)
        yield rec


def with_context(rec: Record) -> QAExample:
    """The record's example, with its own reader context (if any) in ``meta["context"]``
    (:mod:`harness.data.context`)."""
    if not (rec.reader_context and rec.context):
        return rec.example
    ctx = context_meta(ContextParagraph(p.title, p.text) for p in rec.context)
    return dataclasses.replace(rec.example, meta={**rec.example.meta, META_KEY: ctx})


def load_file(path: Path, dataset: str, split: str, fmt: str | None = None) -> list[QAExample]:
    """All examples of one file or HF folder, in file order (ids are unique, else an error).
    Rows that ship their own paragraphs (HotpotQA / 2Wiki ``context``, MuSiQue ``paragraphs``,
    IRCoT ``contexts``) keep them, in order, in ``meta["context"]``."""
    out = [with_context(rec) for rec in iter_records(path, dataset, split, fmt)]
    if not out:
        raise DataError(path, "no rows")
    return out
