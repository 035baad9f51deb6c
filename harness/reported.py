"""Published numbers of the paper methods, as data: one :class:`Table` per paper table, written as
the paper prints it (one line per table row), turned into ``harness.store.ReportedRow`` records.

Conventions for every paper:

- ``dataset`` is one of our dataset names (nq, triviaqa, popqa, hotpotqa, 2wikimultihopqa, musique,
  bamboogle) or an average column: ``avg`` (all seven sets), ``avg_multihop``, ``avg_singlehop``.
- ``metric`` is our metric name (``em``, ``f1``); an average over EM *and* F1 values (R-Search's
  "Avg." columns) is ``em_f1_mean``.
- ``value`` is a fraction in [0, 1] (papers printing percentages are scaled by 1/100).
- ``setting`` names the table and the row's variant (it is part of the store's primary key, so
  the same method appearing in two tables gives two rows); ``source`` cites paper, version and table;
  ``note`` holds the paper's own row label and any erratum.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from harness.store import ReportedRow


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


@dataclass(frozen=True)
class Table:
    paper: str
    source: str  # e.g. "arXiv 2503.09516v5, Table 2"
    table: str  # e.g. "Table 2"
    columns: tuple[tuple[str, str], ...]  # (dataset, metric) per value
    rows_: tuple[Row, ...]
    scale: float = 1.0  # 0.01 for tables printed in percent
    decimals: int = 4  # rounding after scaling (removes float noise of x / 100)

    def __post_init__(self) -> None:
        for r in self.rows_:
            if len(r.values) != len(self.columns):
                raise ValueError(
                    f"{self.paper} {self.table}: row {r.label or r.method!r} has {len(r.values)} values "
                    f"for {len(self.columns)} columns"
                )
            unknown = set(r.cell_notes) - {f"{d}/{m}" for d, m in self.columns}
            if unknown:
                raise ValueError(f"{self.paper} {self.table}: cell notes for unknown cells {sorted(unknown)}")

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


SEVEN = ("nq", "triviaqa", "popqa", "hotpotqa", "2wikimultihopqa", "musique", "bamboogle")
EM_SEVEN_AVG: tuple[tuple[str, str], ...] = (*((d, "em") for d in SEVEN), ("avg", "em"))
"""The column layout of Search-R1's and Eval-RAR's EM tables: seven sets, then their unweighted mean."""
