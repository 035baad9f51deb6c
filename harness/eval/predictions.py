"""Read and score a predictions file with the harness metrics (``harness score``).

Accepted input, detected from the first non-blank byte:

- **JSON Lines** (one object per line; blank lines are skipped), each row with
  ``id`` and/or ``question``, the prediction as ``prediction`` or ``pred`` (or FlashRAG's
  ``output.pred``), and the gold aliases as ``golden_answers`` or ``answers`` (a non-empty list of
  strings).
- **A JSON array** of such objects: FlashRAG's ``intermediate_data.json`` (items with
  ``golden_answers`` and ``output.pred``).

Retrieval metrics need more fields, read only when such a metric is requested:
``retrieved_ids`` (or the ``id`` of each entry of FlashRAG's ``output.retrieval_result``) and
``gold_ids`` for ``retrieval_recall@k`` / ``evidence_recall``; ``retrieved_docs`` (or the
``contents`` of each ``output.retrieval_result`` entry) for ``answer_recall@k``.

Every row is validated before anything is computed or written; a bad row raises ``DataError``
naming the file and line (or item). ``--per-sample`` output goes to a temporary file in the target
directory and is renamed into place only when complete.
"""

from __future__ import annotations

import json
import os
import tempfile
from collections.abc import Callable, Iterable, Iterator, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, NamedTuple, NoReturn

import orjson

from harness.errors import ConfigError, DataError
from harness.metrics.answer import GoldMemo, score_many
from harness.metrics.bootstrap import Aggregate, bootstrap_columns
from harness.metrics.registry import DEFAULT_METRICS, Metric, resolve_metrics

PREDICTION_KEYS = ("prediction", "pred", "output.pred")
GOLD_KEYS = ("golden_answers", "answers")
_MISSING = object()


class PredictionRow(NamedTuple):
    """One validated input row. ``line`` is the 1-based line (JSON Lines) or item (JSON array).
    A NamedTuple, not a frozen dataclass: immutable as well, and made three times faster (a frozen
    dataclass sets each field through ``object.__setattr__``: 0.33 s of 100,000 rows)."""

    line: int
    prediction: str
    golds: tuple[str, ...]
    id: str | None = None
    question: str | None = None
    retrieved_ids: tuple[str, ...] | None = None
    gold_ids: tuple[str, ...] | None = None
    retrieved_docs: tuple[str, ...] | None = None


@dataclass(frozen=True)
class PredictionsFile:
    path: str
    is_array: bool  # True for a JSON array (rows are numbered by item), False for JSON Lines
    rows: list[PredictionRow]

    @property
    def unit(self) -> str:
        return "item" if self.is_array else "line"


@dataclass(frozen=True)
class ScoreReport:
    """Per-metric aggregates and per-sample values (``values[name][i]`` scores ``rows[i]``)."""

    path: str
    metrics: tuple[Metric, ...]
    aggregates: dict[str, Aggregate]
    values: dict[str, list[float]]
    n_resamples: int
    alpha: float
    seed: int
    file: PredictionsFile = field(repr=False)

    @property
    def n(self) -> int:
        return len(next(iter(self.values.values()), []))

    def to_dict(self) -> dict[str, Any]:
        return {
            "file": self.path,
            "n": self.n,
            "metrics": {m.name: self.aggregates[m.name].to_dict() for m in self.metrics},
            "metric_versions": {m.name: m.version for m in self.metrics},
            "interval": {
                "method": "percentile bootstrap",
                "confidence": 1 - self.alpha,
                "n_resamples": self.n_resamples,
                "seed": self.seed,
            },
        }


# --------------------------------------------------------------------------- reading


class _RowError(Exception):
    """A problem in one row; turned into a DataError with the file and line by the reader."""


def _lookup(obj: dict[str, Any], dotted: str) -> Any:
    cur: Any = obj
    for part in dotted.split("."):
        if not isinstance(cur, dict) or part not in cur:
            return _MISSING
        cur = cur[part]
    return cur


def _one_of(obj: dict[str, Any], keys: Sequence[str], what: str) -> Any:
    """``(key, value)`` of the one field of ``keys`` that ``obj`` has (several only if all equal)."""
    first: Any = _MISSING
    for k in keys:  # the common row has one of them: a plain loop, the full list only for an error
        v = _lookup(obj, k) if "." in k else obj.get(k, _MISSING)
        if v is _MISSING:
            continue
        if first is _MISSING:
            first = (k, v)
        elif v != first[1]:
            _one_of_error(obj, keys, what)
    if first is _MISSING:
        _one_of_error(obj, keys, what)
    return first


def _one_of_error(obj: dict[str, Any], keys: Sequence[str], what: str) -> NoReturn:
    """The refusal :func:`_one_of` found: none of ``keys`` present, or two present that differ
    (named with every key present)."""
    found = [k for k in keys if (_lookup(obj, k) if "." in k else obj.get(k, _MISSING)) is not _MISSING]
    if not found:
        raise _RowError(f"missing {what}: expected one of the fields {', '.join(keys)}")
    raise _RowError(f"ambiguous {what}: fields {' and '.join(found)} are both present and differ")


def _str_list(value: Any, key: str, *, allow_empty: bool) -> tuple[str, ...]:
    if not isinstance(value, list):
        raise _RowError(f"field {key!r} must be a list of strings, got {type(value).__name__}")
    for i, v in enumerate(value):
        if not isinstance(v, str):
            raise _RowError(f"field {key!r}: element {i} must be a string, got {type(v).__name__}")
    if not value and not allow_empty:
        raise _RowError(f"field {key!r} is an empty list: every question needs at least one gold answer")
    return tuple(value)


def _flashrag_retrieval(obj: dict[str, Any], attr: str) -> tuple[str, ...] | object:
    result = _lookup(obj, "output.retrieval_result")
    if result is _MISSING:
        return _MISSING
    if not isinstance(result, list):
        raise _RowError("field 'output.retrieval_result' must be a list of documents")
    out = []
    for i, doc in enumerate(result):
        if not isinstance(doc, dict) or not isinstance(doc.get(attr), str):
            raise _RowError(f"output.retrieval_result[{i}] has no string field {attr!r}")
        out.append(doc[attr])
    return tuple(out)


def _parse_row(obj: Any, line: int, needs: frozenset[str]) -> PredictionRow:
    if not isinstance(obj, dict):
        raise _RowError(f"expected a JSON object, got {type(obj).__name__}")
    rid = obj.get("id")
    question = obj.get("question")
    if rid is None and question is None:
        raise _RowError("missing field 'id' or 'question' (one is needed to identify the row)")
    if rid is not None and not isinstance(rid, str | int):
        raise _RowError(f"field 'id' must be a string or integer, got {type(rid).__name__}")
    if question is not None and not isinstance(question, str):
        raise _RowError(f"field 'question' must be a string, got {type(question).__name__}")
    pkey, pred = _one_of(obj, PREDICTION_KEYS, "prediction")
    if not isinstance(pred, str):
        raise _RowError(
            f'field {pkey!r} must be a string, got {type(pred).__name__} (write "" for no answer)'
        )
    gkey, gval = _one_of(obj, GOLD_KEYS, "gold answers")
    golds = _str_list(gval, gkey, allow_empty=False)

    retrieved_ids = gold_ids = retrieved_docs = None
    if "retrieved_ids" in needs:
        v = obj.get("retrieved_ids", _MISSING)
        if v is _MISSING:
            v = _flashrag_retrieval(obj, "id")
            if v is _MISSING:
                raise _RowError("missing field 'retrieved_ids' (needed by a retrieval metric)")
        retrieved_ids = v if isinstance(v, tuple) else _str_list(v, "retrieved_ids", allow_empty=True)
    if "gold_ids" in needs:
        if "gold_ids" not in obj:
            raise _RowError("missing field 'gold_ids' (gold passage ids, needed by a retrieval metric)")
        gold_ids = _str_list(obj["gold_ids"], "gold_ids", allow_empty=False)
    if "retrieved_docs" in needs:
        v = obj.get("retrieved_docs", _MISSING)
        if v is _MISSING:
            v = _flashrag_retrieval(obj, "contents")
            if v is _MISSING:
                raise _RowError("missing field 'retrieved_docs' (document texts, needed by answer_recall@k)")
        retrieved_docs = v if isinstance(v, tuple) else _str_list(v, "retrieved_docs", allow_empty=True)
    return PredictionRow(
        line=line,
        prediction=pred,
        golds=golds,
        id=None if rid is None else str(rid),
        question=question,
        retrieved_ids=retrieved_ids,
        gold_ids=gold_ids,
        retrieved_docs=retrieved_docs,
    )


def _needed_fields(metrics: Sequence[Metric]) -> frozenset[str]:
    return frozenset(f for m in metrics for f in m.inputs) - {"prediction", "golds"}


def read_predictions(path: str | os.PathLike[str], needs: frozenset[str] = frozenset()) -> PredictionsFile:
    """Read and validate every row of a predictions file (JSON Lines or a JSON array).

    ``needs`` names the optional fields that must be present (``retrieved_ids``, ``gold_ids``,
    ``retrieved_docs``). Raises ``DataError`` naming the file and line on the first bad row.
    """
    p = str(path)
    try:
        data = Path(p).read_bytes()
    except FileNotFoundError:
        raise DataError(p, "no such file") from None
    except IsADirectoryError:
        raise DataError(p, "is a directory, expected a predictions file") from None
    if data.startswith(b"\xef\xbb\xbf"):
        data = data[3:]  # a UTF-8 byte-order mark is valid UTF-8, not content
    if data.lstrip()[:1] == b"[":
        rows = _read_array(p, data, needs)
        is_array = True
    else:
        rows = _read_jsonl(p, data, needs)
        is_array = False
    if not rows:
        raise DataError(p, "no predictions in file")
    _refuse_duplicate_ids(p, rows, "item" if is_array else "line")
    return PredictionsFile(path=p, is_array=is_array, rows=rows)


def _refuse_duplicate_ids(path: str, rows: Sequence[PredictionRow], unit: str) -> None:
    """Two rows with the same ``id`` would be scored twice (or one would hide the other): refused,
    naming the id and the lines (items) it is on."""
    seen: dict[str, list[int]] = {}
    for row in rows:
        if row.id is not None:
            seen.setdefault(str(row.id), []).append(row.line)
    _refuse_duplicates(path, seen, unit)


def _refuse_duplicates(path: str, seen: dict[str, list[int]], unit: str) -> None:
    """The refusal of :func:`_refuse_duplicate_ids`, from ``id -> lines``."""
    dups = [(rid, lines) for rid, lines in seen.items() if len(lines) > 1]
    if dups:
        rid, lines = dups[0]
        more = f" ({len(dups) - 1} more duplicated id(s))" if len(dups) > 1 else ""
        raise DataError(
            path,
            f"duplicate id {rid!r} on {unit}s {', '.join(map(str, lines))}{more}; each row needs its own id",
        )


_TOO_DEEP = (
    "JSON nested too deeply to read (beyond Python's recursion limit); a prediction row is one flat object"
)


def _jsonl_rows(path: str, lines: Iterable[bytes], needs: frozenset[str]) -> Iterator[PredictionRow]:
    """The rows of JSON Lines ``lines`` (bytes, with or without their newline), one at a time."""
    for lineno, raw in enumerate(lines, start=1):
        try:  # orjson: several times faster than json; a line it refuses is read again below
            obj = orjson.loads(raw)
        except orjson.JSONDecodeError:
            obj = _read_line(path, raw, lineno)  # json's reading, error or value (NaN, huge integers)
            if obj is _MISSING:
                continue
        try:
            yield _parse_row(obj, lineno, needs)
        except _RowError as e:
            raise DataError(path, str(e), lineno) from None


def _read_line(path: str, raw: bytes, lineno: int) -> Any:
    """One JSON Lines line read with ``json``: its value, ``_MISSING`` for a blank line, or a
    one-line DataError naming the file and line."""
    try:
        text = raw.decode("utf-8")
    except UnicodeDecodeError as e:
        raise DataError(path, f"not valid UTF-8 ({e.reason} at byte {e.start} of the line)", lineno) from None
    if not text.strip():
        return _MISSING
    try:
        return json.loads(text)
    except json.JSONDecodeError as e:
        raise DataError(path, f"invalid JSON: {e.msg} at column {e.colno}", lineno) from None
    except ValueError as e:  # an integer of more than 4,300 digits (Python's conversion limit)
        raise DataError(path, f"unreadable JSON number ({e})", lineno) from None
    except RecursionError:
        raise DataError(path, _TOO_DEEP, lineno) from None


def _read_jsonl(path: str, data: bytes, needs: frozenset[str]) -> list[PredictionRow]:
    return list(_jsonl_rows(path, data.split(b"\n"), needs))


def _read_array(path: str, data: bytes, needs: frozenset[str]) -> list[PredictionRow]:
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError as e:
        line = data[: e.start].count(b"\n") + 1
        raise DataError(path, f"not valid UTF-8 ({e.reason})", line) from None
    try:
        items = json.loads(text)
    except json.JSONDecodeError as e:
        raise DataError(path, f"invalid JSON: {e.msg} at column {e.colno}", e.lineno) from None
    except ValueError as e:  # an integer of more than 4,300 digits (Python's conversion limit)
        raise DataError(path, f"unreadable JSON number ({e})") from None
    except RecursionError:
        raise DataError(path, _TOO_DEEP) from None
    if not isinstance(items, list):
        raise DataError(path, "expected a JSON array of prediction objects")
    rows = []
    for i, obj in enumerate(items, start=1):
        try:
            rows.append(_parse_row(obj, i, needs))
        except _RowError as e:
            raise DataError(path, f"item {i} of the JSON array: {e}") from None
    return rows


# --------------------------------------------------------------------------- scoring


_BLOCK = 2048  # rows scored together (answer metrics: a block's strings are normalised at once)
# and at most this many characters of predictions a block: a block's strings and their normalised
# copies are held at once, so long predictions (6 KB a row) would hold 2048 x 6 KB x 3
_BLOCK_CHARS = 2**19


def _blocks(rows: Iterable[PredictionRow]) -> Iterator[list[PredictionRow]]:
    """``rows`` in blocks of at most :data:`_BLOCK` rows and, but for a single longer row,
    :data:`_BLOCK_CHARS` characters of predictions."""
    block: list[PredictionRow] = []
    chars = 0
    for row in rows:
        chars += len(row.prediction)
        if block and chars > _BLOCK_CHARS:
            yield block
            block, chars = [], len(row.prediction)
        block.append(row)
        if len(block) == _BLOCK:
            yield block
            block, chars = [], 0
    if block:
        yield block


def _block_scorer(metrics: Sequence[Metric]) -> Callable[[Sequence[PredictionRow]], list[list[float]]]:
    """One function computing every metric for a block of rows: the answer metrics through
    :func:`~harness.metrics.answer.score_many` (one shared GoldMemo: each distinct gold string is
    normalised once), the others row by row."""
    answer_fns = [m.pair_fn for m in metrics if m.pair_fn is not None]
    others = [(j, m.fn, m.inputs) for j, m in enumerate(metrics) if m.pair_fn is None]
    memo = GoldMemo()

    def score(rows: Sequence[PredictionRow]) -> list[list[float]]:
        if answer_fns:
            out = score_many([r.prediction for r in rows], [r.golds for r in rows], answer_fns, memo)
        else:
            out = [[] for _ in rows]
        for j, fn, (a, b) in others:
            for row, values in zip(rows, out, strict=True):
                values.insert(j, fn(getattr(row, a), getattr(row, b)))
        return out

    return score


def score_predictions(
    pf: PredictionsFile,
    metrics: Sequence[Metric],
    *,
    n_resamples: int = 1000,
    alpha: float = 0.05,
    seed: int = 0,
) -> ScoreReport:
    """Compute every metric for every row, and a bootstrap interval per metric."""
    per_row = _block_scorer(metrics)(pf.rows)
    values = {m.name: [v[j] for v in per_row] for j, m in enumerate(metrics)}
    return _report(pf, metrics, values, n_resamples=n_resamples, alpha=alpha, seed=seed)


def _report(
    pf: PredictionsFile,
    metrics: Sequence[Metric],
    values: dict[str, list[float]],
    *,
    n_resamples: int,
    alpha: float,
    seed: int,
) -> ScoreReport:
    """The report of ``values`` (per metric, per row), with their bootstrap intervals."""
    aggregates = bootstrap_columns(values, n_resamples=n_resamples, alpha=alpha, seed=seed)
    return ScoreReport(
        path=pf.path,
        metrics=tuple(metrics),
        aggregates=aggregates,
        values=values,
        n_resamples=n_resamples,
        alpha=alpha,
        seed=seed,
        file=pf,
    )


def _per_sample_line(row: PredictionRow, unit: str, metrics: dict[str, float]) -> str:
    """One line of ``--per-sample``: where the row is, its id, question, prediction, golds, metrics."""
    rec: dict[str, Any] = {unit: row.line}
    if row.id is not None:
        rec["id"] = row.id
    if row.question is not None:
        rec["question"] = row.question
    rec["prediction"] = row.prediction
    rec["golden_answers"] = list(row.golds)
    rec["metrics"] = metrics
    return json.dumps(rec, ensure_ascii=False) + "\n"


def write_per_sample(report: ScoreReport, out: str | os.PathLike[str]) -> None:
    """One JSON line per input row with every metric; written to a temp file, then renamed."""
    out_path = Path(out)
    unit = report.file.unit
    names = [m.name for m in report.metrics]
    parent = out_path.parent if str(out_path.parent) else Path(".")
    if not parent.is_dir():
        raise DataError(str(out_path), f"directory {str(parent)!r} does not exist")
    fd, tmp = tempfile.mkstemp(prefix=f".{out_path.name}.", suffix=".tmp", dir=parent)
    try:
        with os.fdopen(fd, "w", encoding="utf-8") as f:
            for i, row in enumerate(report.file.rows):
                f.write(_per_sample_line(row, unit, {n: report.values[n][i] for n in names}))
        os.replace(tmp, out_path)
    except BaseException:
        if os.path.exists(tmp):
            os.unlink(tmp)
        raise


def score_file(
    path: str | os.PathLike[str],
    metric_names: Sequence[str] = DEFAULT_METRICS,
    *,
    per_sample: str | os.PathLike[str] | None = None,
    n_resamples: int = 1000,
    alpha: float = 0.05,
    seed: int = 0,
) -> ScoreReport:
    """Validate, score and (optionally) write per-sample results for one predictions file."""
    metrics = resolve_metrics(metric_names)
    if per_sample is not None and os.path.abspath(per_sample) == os.path.abspath(path):
        raise ConfigError(f"--per-sample {per_sample} would overwrite the input file")
    if _first_byte(str(path)) != b"[":  # JSON Lines: streamed, a row at a time
        return _score_jsonl(str(path), metrics, per_sample, n_resamples=n_resamples, alpha=alpha, seed=seed)
    pf = read_predictions(path, _needed_fields(metrics))  # a JSON array is one document: read whole
    report = score_predictions(pf, metrics, n_resamples=n_resamples, alpha=alpha, seed=seed)
    if per_sample is not None:
        write_per_sample(report, per_sample)
    return report


def _first_byte(path: str) -> bytes:
    """The first byte of ``path`` after a byte-order mark and whitespace (b'' for an empty file)."""
    try:
        with open(path, "rb") as f:
            head = f.read(3)
            if head != b"\xef\xbb\xbf":
                f.seek(0)
            while chunk := f.read(65536):
                stripped = chunk.lstrip()
                if stripped:
                    return stripped[:1]
    except FileNotFoundError:
        raise DataError(path, "no such file") from None
    except IsADirectoryError:
        raise DataError(path, "is a directory, expected a predictions file") from None
    return b""


def _lines(f: Any) -> Iterator[bytes]:
    """The lines of a binary file, the first without its UTF-8 byte-order mark."""
    for i, line in enumerate(f):
        yield line[3:] if i == 0 and line.startswith(b"\xef\xbb\xbf") else line


def _score_jsonl(
    path: str,
    metrics: Sequence[Metric],
    per_sample: str | os.PathLike[str] | None,
    *,
    n_resamples: int,
    alpha: float,
    seed: int,
) -> ScoreReport:
    """Score a JSON Lines file in one pass, a row at a time: what stays in memory is the metric
    values (one float per row and metric; 0 and 1, most of them, shared) and the ids (for the
    duplicate check), never the file or its rows (issue 45: a 1 GB file peaked at 3 GB). Per-sample
    lines are written as the rows are scored, to a temporary file renamed at the end."""
    scorer = _block_scorer(metrics)
    names = [m.name for m in metrics]
    values: dict[str, list[float]] = {n: [] for n in names}
    columns = [values[n] for n in names]
    shared = {0.0: 0.0, 1.0: 1.0}
    ids: dict[str, list[int]] = {}
    out = tmp = None
    if per_sample is not None:
        out_path = Path(per_sample)
        parent = out_path.parent if str(out_path.parent) else Path(".")
        if not parent.is_dir():
            raise DataError(str(out_path), f"directory {str(parent)!r} does not exist")
        fd, tmp = tempfile.mkstemp(prefix=f".{out_path.name}.", suffix=".tmp", dir=parent)
        out = os.fdopen(fd, "w", encoding="utf-8")
    try:
        with open(path, "rb") as f:
            rows_iter = _jsonl_rows(path, _lines(f), _needed_fields(metrics))
            for block in _blocks(rows_iter):
                for row, scores in zip(block, scorer(block), strict=True):
                    for col, v in zip(columns, scores, strict=True):
                        col.append(shared.get(v, v))
                    if row.id is not None:
                        ids.setdefault(row.id, []).append(row.line)
                    if out is not None:
                        out.write(_per_sample_line(row, "line", dict(zip(names, scores, strict=True))))
        if not columns[0]:
            raise DataError(path, "no predictions in file")
        _refuse_duplicates(path, ids, "line")
        if out is not None:
            assert tmp is not None and per_sample is not None  # set together above
            out.close()
            os.replace(tmp, per_sample)
    except BaseException:
        if out is not None:
            out.close()
            if tmp is not None and os.path.exists(tmp):
                os.unlink(tmp)
        raise
    streamed = PredictionsFile(path=path, is_array=False, rows=[])  # the rows are not kept
    return _report(streamed, metrics, values, n_resamples=n_resamples, alpha=alpha, seed=seed)
