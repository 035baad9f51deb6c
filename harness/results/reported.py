"""Published numbers of the paper methods, as data: each paper's ``methods/<paper>/reported.yaml``
holds one entry per printed table, read by :func:`load_reported` into ``harness.results.store.ReportedRow``
records.

Conventions for every paper:

- ``dataset`` is one of our dataset names (nq, triviaqa, popqa, hotpotqa, 2wikimultihopqa, musique,
  bamboogle) or an average column: ``avg`` (all seven sets), ``avg_multihop``, ``avg_singlehop``.
- ``metric`` is our name of the exact metric variant the paper used (``em``, ``f1`` with the yes/no
  rule, ``f1_squad`` without it, ``cover_em``, a judge metric, ...); an average over EM *and* F1
  values is a composite (``em_f1_mean``, ``em_f1_squad_mean``: R-Search's "Avg." columns;
  ``leaderboards.views.COMPOSITE_METRICS``). The reported view compares a row only with the variant
  it names.
- ``value`` is a fraction in [0, 1] (papers printing percentages are scaled by 1/100).
- ``setting`` names the table and the row's variant (it is part of the store's primary key, so
  the same method appearing in two tables gives two rows); ``source`` cites paper, version and table;
  ``note`` holds the paper's own row label and any erratum.

The file format (``reported.yaml``; an illustration, not ARENA's real numbers)::

    paper: arena
    judges:                 # optional: a column metric named here is that judge's metric name,
      LJ: {model: gpt-4o-2024-11-20, prompt: arena}   # judge@<model>:<hash of the registered prompt>
    tables:
      - table: Table 3
        source: ARENA (Ren et al. 2025), arXiv 2505.13258, Table 3   # stored beside every value
        scale: 0.01         # optional (default 1): 0.01 for a table printed in percent
        columns: [hotpotqa/em, hotpotqa/f1, hotpotqa/LJ]            # dataset/metric per value
        rows:
          - method: arena   # our method name
            model: Qwen2.5-7B-Instruct
            variant: w/o X  # optional: the row's variant, appended to the setting ("Table 3: w/o X")
            label: ARENA-Qwen-7B          # optional: the paper's row label
            note: trained by us           # optional: where the row comes from, errata
            values: [62.8, 76.2, null]    # as printed, in column order; null = an empty cell
            cell_notes: {hotpotqa/f1: "76.0 in Table 4"}   # optional: provenance of single values
            setting: {top_k: 5, source: "run_eval.py:454"}  # optional: overrides the table's setting

The file, a table and a row may record the setting its numbers were produced under, for the comparability
rule (:mod:`harness.results.comparable`): ``setting: {corpus, retriever, top_k, prompt, prompt_note,
training, algorithm, variant, source}`` (``algorithm`` and ``variant``: what trained a trained row, e.g.
``grpo`` and ``w/o retrieved-token masking``; a trained run compares only with rows of its own), every key optional, a row's keys overriding its table's and a table's the file's;
``source`` says where the
setting is stated. ``prompt`` is the prompt variant as our method name when the row's prompt and
answer extraction are exactly one of ours (``search_r1_rag``, ``naive_rag_flashrag``), else a
few words naming the paper's (``ircot, 2 iterations``). ``prompt_note`` says what the paper (or
its released code) states about a baseline row's prompt, ending in its source in parentheses:
``not given (ARENA, arXiv 2505.13258 §4.3)``, ``the authors' own, not released (TIRESRAG-R1
App. C.3)``; it is the reason shown where the row has no ``prompt`` ("prompt not given (...)"
instead of "prompt not recorded"), and follows a recorded prompt that differs from ours. Every
row of a method other than the paper's own (a baseline row) records one of the two. What is not recorded comes from the paper's registered protocol (corpus,
retriever, top-k) and :func:`harness.results.comparable.paper_setting`'s defaults.

A stored note is ``paper label: <label>; <note>; <cell note>`` (empty parts left out); a value is
``round(printed * scale, decimals)`` (``decimals`` optional, default 4).

The schema is checked with pydantic (unknown keys, wrong types, non-finite numbers), duplicate YAML
keys are refused (PyYAML would keep the last one silently), and every error is one line naming the
file, its line, the table and the row.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Annotated, Any, Literal

from pydantic import AllowInfNan, BaseModel, ConfigDict, Strict, ValidationError, field_validator

from harness.errors import DataError, HarnessError
from harness.results.store import ReportedRow


class TableError(ValueError):
    """A table whose rows do not fit its columns; ``row`` is the offending row's index."""

    def __init__(self, message: str, row: int | None = None):
        super().__init__(message)
        self.row = row


@dataclass(frozen=True)
class Row:
    """One printed table row: our method name, the backbone, the values in column order (``None``
    for a cell the paper leaves empty), the row's variant, the paper's label, per-cell notes."""

    method: str
    model: str
    values: tuple[float | None, ...]
    variant: str = ""
    label: str = ""
    note: str = ""
    cell_notes: dict[str, str] = field(default_factory=dict)  # "dataset/metric" -> note
    setting: dict[str, object] = field(default_factory=dict)  # the row's own recorded setting


@dataclass(frozen=True)
class Table:
    paper: str
    source: str  # e.g. "arXiv 2503.09516v5, Table 2"
    table: str  # e.g. "Table 2"
    columns: tuple[tuple[str, str], ...]  # (dataset, metric) per value
    rows_: tuple[Row, ...]
    scale: float = 1.0  # 0.01 for tables printed in percent
    decimals: int = 4  # rounding after scaling (removes float noise of x / 100)
    setting: dict[str, object] = field(default_factory=dict)  # the table's recorded setting

    def settings(self) -> dict[tuple[str, str, str], dict[str, object]]:
        """``(setting name, method, model) -> recorded setting`` (the table's, then the row's keys;
        ``source`` joined when both give one), as :meth:`rows` names the setting."""
        out = {}
        for r in self.rows_:
            name = f"{self.table}: {r.variant}" if r.variant else self.table
            out[(name, r.method, r.model)] = _merge(self.setting, r.setting)
        return out

    def __post_init__(self) -> None:
        cells = {f"{d}/{m}" for d, m in self.columns}
        for i, r in enumerate(self.rows_):
            name = repr(r.label or r.method)
            if len(r.values) != len(self.columns):
                raise TableError(
                    f"{self.paper} {self.table}: row {name} has {len(r.values)} values "
                    f"for {len(self.columns)} columns",
                    row=i,
                )
            unknown = set(r.cell_notes) - cells
            if unknown:
                raise TableError(
                    f"{self.paper} {self.table}: row {name} has cell notes for unknown cells "
                    f"{sorted(unknown)}",
                    row=i,
                )

    def rows(self) -> list[ReportedRow]:
        out = []
        for r in self.rows_:
            setting = f"{self.table}: {r.variant}" if r.variant else self.table
            for (dataset, metric), v in zip(self.columns, r.values, strict=True):
                if v is None:
                    continue
                notes = [
                    f"paper label: {r.label}" if r.label else "",
                    r.note,
                    r.cell_notes.get(f"{dataset}/{metric}", ""),
                ]
                out.append(
                    ReportedRow(
                        paper=self.paper,
                        method=r.method,
                        model=r.model,
                        dataset=dataset,
                        metric=metric,
                        value=round(v * self.scale, self.decimals),
                        source=self.source,
                        setting=setting,
                        note="; ".join(n for n in notes if n),
                    )
                )
        return out


# --- the file format --------------------------------------------------------------------------

_Str = Annotated[str, Strict()]
_CITED = re.compile(r".*\S.*\(.*\S.*\)", re.DOTALL)  # words, then "(source)" at the end
_Number = Annotated[float, Strict(), AllowInfNan(False)]  # strict: a quoted "0.5" or a bool is refused


class _Spec(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)


class _JudgeSpec(_Spec):
    model: _Str
    prompt: _Str  # a registered judge prompt (``harness.judge.prompts.get_prompt``)


class _SettingSpec(_Spec):
    corpus: _Str | None = None
    retriever: _Str | None = None
    top_k: Annotated[int, Strict()] | None = None
    prompt: _Str | None = None
    prompt_note: _Str | None = None  # what the paper states about the prompt, ending in "(source)"
    training: Literal["none", "untrained", "trained"] | None = None
    algorithm: _Str | None = None  # a trained row's RL algorithm (ppo, grpo, ...; lower case)
    variant: _Str | None = None  # a trained row's recipe variant (w/o retrieved-token masking)
    source: _Str | None = None

    @field_validator("prompt_note")
    @classmethod
    def _cites(cls, note: str | None) -> str | None:
        if note is not None and not _CITED.fullmatch(note.strip()):
            raise ValueError(
                f"prompt_note {note!r} must say what the paper states and end with its source in "
                "parentheses, e.g. 'not given (ARENA §4.3)'"
            )
        return note


class _RowSpec(_Spec):
    method: _Str
    model: _Str
    values: list[_Number | None]
    variant: _Str = ""
    label: _Str = ""
    note: _Str = ""
    cell_notes: dict[_Str, _Str] = {}
    setting: _SettingSpec | None = None


class _TableSpec(_Spec):
    table: _Str
    source: _Str
    columns: list[_Str]
    rows: list[_RowSpec]
    scale: _Number = 1.0
    decimals: Annotated[int, Strict()] = 4
    setting: _SettingSpec | None = None


class _FileSpec(_Spec):
    paper: _Str
    judges: dict[_Str, _JudgeSpec] = {}
    setting: _SettingSpec | None = None  # every table's, unless a table or row says otherwise
    tables: list[_TableSpec]


@dataclass(frozen=True)
class ReportedFile:
    """A parsed ``reported.yaml``: the paper, its judge metric names by alias, its tables."""

    path: Path
    paper: str
    metrics: dict[str, str]  # judge alias -> judge@<model>:<prompt hash>
    tables: tuple[Table, ...]
    setting: dict[str, object] = field(default_factory=dict)  # the file's: every table's by default

    def rows(self) -> list[ReportedRow]:
        return [row for t in self.tables for row in t.rows()]

    def settings(self) -> dict[tuple[str, str, str], dict[str, object]]:
        """``(setting name, method, model) -> recorded setting`` over every table."""
        return {k: v for t in self.tables for k, v in t.settings().items()}


_METRIC = re.compile(r"[a-z][a-z0-9_]*")
_DATASET = re.compile(r"[a-z0-9][a-z0-9_]*")


def _loader() -> type:
    import yaml

    base = getattr(yaml, "CSafeLoader", yaml.SafeLoader)

    class _NoDuplicates(base):  # type: ignore[misc,valid-type]
        def construct_mapping(self, node, deep=False):
            seen = set()
            for key_node, _ in node.value:
                key = self.construct_object(key_node, deep=True)
                if key in seen:
                    raise yaml.constructor.ConstructorError(
                        None, None, f"duplicate key {key!r}", key_node.start_mark
                    )
                seen.add(key)
            return super().construct_mapping(node, deep=deep)

    return _NoDuplicates


def _line_of(text: str, loc: tuple[Any, ...]) -> int | None:
    """The 1-based line of the YAML node at ``loc`` (keys and indices), or of its deepest parent."""
    import yaml

    node = yaml.compose(text, Loader=_loader())
    line = None
    for key in loc:
        if node is None:
            break
        line = node.start_mark.line + 1
        if isinstance(node, yaml.MappingNode):
            node = next((v for k, v in node.value if k.value == key), None)
        elif isinstance(node, yaml.SequenceNode) and isinstance(key, int) and key < len(node.value):
            node = node.value[key]
        else:
            node = None
    return node.start_mark.line + 1 if node is not None else line


def _where(raw: Any, loc: tuple[Any, ...]) -> str:
    """``Table 3, row 2 ('CoT'), values.4`` for a location inside the raw file."""
    parts, rest = [], list(loc)
    if len(rest) >= 2 and rest[0] == "tables" and isinstance(rest[1], int):
        t = _get(raw, ("tables", rest[1]))
        parts.append(str(t.get("table")) if isinstance(t, dict) and "table" in t else f"table {rest[1] + 1}")
        rest = rest[2:]
        if len(rest) >= 2 and rest[0] == "rows" and isinstance(rest[1], int):
            r = _get(t, ("rows", rest[1]))
            name = (r.get("label") or r.get("method")) if isinstance(r, dict) else None
            parts.append(f"row {rest[1] + 1}" + (f" ({name!r})" if name else ""))
            rest = rest[2:]
    if rest:
        parts.append(".".join(str(x) for x in rest))
    return ", ".join(parts) or "top level"


def _get(obj: Any, loc: tuple[Any, ...]) -> Any:
    for key in loc:
        try:
            obj = obj[key]
        except (KeyError, IndexError, TypeError):
            return None
    return obj


def _column(
    path: Path, text: str, raw: Any, loc: tuple[Any, ...], cell: str, metrics: dict[str, str]
) -> tuple[str, str]:
    """``"dataset/metric"`` -> (dataset, metric), a judge alias resolved to its metric name."""
    dataset, slash, metric = cell.partition("/")
    if not slash or not _DATASET.fullmatch(dataset) or not (metric in metrics or _METRIC.fullmatch(metric)):
        raise DataError(
            path,
            f"{_where(raw, loc)}: {cell!r} is not 'dataset/metric' (lower-case names, or a metric alias "
            f"declared under 'judges': {sorted(metrics)})",
            line=_line_of(text, loc),
        )
    return dataset, metrics.get(metric, metric)


def read_reported(path: str | Path, *, prompt_hash: Callable[[str], str]) -> ReportedFile:
    """Parse and check one ``reported.yaml``; every problem is a one-line :class:`DataError`.
    ``prompt_hash``: a registered judge prompt's id -> its hash (``harness.judge.prompts.prompt_hash``,
    passed in by the caller: the judge is a layer above the results), raising a
    :class:`HarnessError` for an unknown prompt."""
    import yaml

    path = Path(path)
    try:
        text = path.read_text(encoding="utf-8")
    except OSError as e:
        raise DataError(path, f"cannot read the reported-numbers file: {e.strerror}") from e
    try:
        raw = yaml.load(text, Loader=_loader())
    except yaml.YAMLError as e:
        mark = getattr(e, "problem_mark", None)
        problem = getattr(e, "problem", None) or str(e).splitlines()[0]
        raise DataError(path, f"not valid YAML: {problem}", line=mark.line + 1 if mark else None) from e
    try:
        spec = _FileSpec.model_validate(raw)
    except ValidationError as e:
        err = e.errors()[0]
        loc = tuple(err["loc"])
        more = f" (and {e.error_count() - 1} more)" if e.error_count() > 1 else ""
        raise DataError(path, f"{_where(raw, loc)}: {err['msg']}{more}", line=_line_of(text, loc)) from e

    metrics = {}
    for alias, j in spec.judges.items():
        try:
            hashed = prompt_hash(j.prompt)
        except HarnessError as e:
            raise DataError(path, f"judges.{alias}: {e}", line=_line_of(text, ("judges", alias))) from e
        # the name harness.judge.core.Judge.metric_name gives the same judge's scores
        metrics[alias] = f"judge@{j.model}:{hashed}"

    tables = []
    for ti, t in enumerate(spec.tables):
        columns = tuple(
            _column(path, text, raw, ("tables", ti, "columns", ci), c, metrics)
            for ci, c in enumerate(t.columns)
        )
        rows = []
        for ri, r in enumerate(t.rows):
            cell_notes = {}
            for key, note in r.cell_notes.items():
                d, m = _column(path, text, raw, ("tables", ti, "rows", ri, "cell_notes", key), key, metrics)
                cell_notes[f"{d}/{m}"] = note
            rows.append(
                Row(
                    r.method,
                    r.model,
                    tuple(r.values),
                    r.variant,
                    r.label,
                    r.note,
                    cell_notes,
                    _setting(r.setting),
                )
            )
        try:
            tables.append(
                Table(
                    spec.paper,
                    t.source,
                    t.table,
                    columns,
                    tuple(rows),
                    t.scale,
                    t.decimals,
                    _merge(_setting(spec.setting), _setting(t.setting)),
                )
            )
        except TableError as e:
            loc = ("tables", ti) if e.row is None else ("tables", ti, "rows", e.row)
            raise DataError(path, str(e), line=_line_of(text, loc)) from e
    names = [t.table for t in tables]
    if len(set(names)) != len(names):
        dup = next(n for n in names if names.count(n) > 1)
        raise DataError(path, f"table {dup!r} appears twice")
    return ReportedFile(path, spec.paper, metrics, tuple(tables), _setting(spec.setting))


def _setting(spec: _SettingSpec | None) -> dict[str, object]:
    return {} if spec is None else {k: v for k, v in spec.model_dump().items() if v is not None}


def _merge(base: dict[str, object], over: dict[str, object]) -> dict[str, object]:
    """``over``'s keys over ``base``'s; both sources kept."""
    out = {**base, **over}
    sources = [str(x["source"]) for x in (base, over) if x.get("source")]
    if sources:
        out["source"] = "; ".join(dict.fromkeys(sources))
    return out


def load_reported(path: str | Path, *, prompt_hash: Callable[[str], str]) -> list[ReportedRow]:
    """Every published number in one ``reported.yaml``, in file order (tables, rows, columns)."""
    return read_reported(path, prompt_hash=prompt_hash).rows()
