"""``harness export``: the app's views as CSV, Parquet, Markdown or LaTeX (same queries, same numbers).

CSV and Parquet are data: fractions (0.5, not 50), numeric interval bounds
(``<column>_lo``/``<column>_hi``), every column. Markdown and LaTeX are paper tables: the
leaderboard as methods x datasets in % with one decimal, readable dataset names, rows grouped by
method type (prompt baselines, untrained policies, trained), the best of each column in bold and
the cells a paired test does not separate from it marked (the app's ``≈``; a dagger in LaTeX:
:meth:`leaderboards.views.Leaderboard.best_and_ties`), averages last (as
the papers print "Avg."), n and the interval method in the caption above the table; the
reported view as one pivot per paper table (``reported / ours / difference`` in the paper's unit);
the cost view with readable units.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Literal

import pandas as pd

from harness.errors import ConfigError
from harness.results.agreement import MARGIN
from harness.results.tables import markdown_table, md_cell
from leaderboards import EXPORT_FORMATS, EXPORT_VIEWS, queries, views
from leaderboards.schema import COST_COLUMNS, REPORTED_COLUMNS, Column, dataset_label, metric_label

ViewName = Literal["leaderboard", "reported", "cost"]
Format = Literal["csv", "parquet", "markdown", "latex"]
VIEWS = EXPORT_VIEWS
FORMATS = EXPORT_FORMATS
TYPE_GROUPS = {
    "prompt baseline": "Prompt baselines",
    "untrained policy": "Untrained policies",
    "trained": "Trained",
}


@dataclass(frozen=True)
class PaperTable:
    """A table for a paper: header, groups of rows (title, rows of cell texts), bold cells
    ``(group, row, column)``, tied cells (not separated from the bold one by the paired test: the
    app's ``≈``),
    a caption and a label (a LaTeX label, a slug)."""

    header: list[str]
    groups: list[tuple[str, list[list[str]]]]
    bold: set[tuple[int, int, int]] = field(default_factory=set)
    caption: str = ""
    tied: set[tuple[int, int, int]] = field(default_factory=set)
    label: str = ""
    notes: dict[tuple[int, int, int], str] = field(default_factory=dict)
    """Text after a cell in markdown only (the leaderboard's ``p 0.250`` against the best)."""


@dataclass(frozen=True)
class ExportedView:
    title: str
    frame: pd.DataFrame
    columns: list[Column]
    tables: list[PaperTable] = field(default_factory=list)  # the markdown / LaTeX rendering


def build_view(
    store,
    view: str,
    *,
    protocol: str | None = None,
    metric: str | None = None,
    dataset: str | None = None,
    include_partial: bool = False,
    intervals: bool = False,
    paper: str | None = None,
    holm: bool = False,
) -> ExportedView:
    """The named view of one protocol (``protocol``: an id or unique name; default the only one).
    ``metric`` is matched case-insensitively by id or label (``EM``, ``cover-EM``); default the
    protocol's primary metric. ``intervals``: the paper table's cells carry their 95% interval.
    ``holm``: the leaderboard's ties with Holm's correction across each column's rows.
    ``paper`` (reported view): one paper's tables only (:func:`views.resolve_paper`)."""
    if view not in VIEWS:
        raise ConfigError(f"unknown view {view!r}; choose one of {', '.join(VIEWS)}")
    if view == "reported" and protocol is None and queries.protocols(store).empty:
        return _reported_view(store, None, "no runs yet", paper)  # the published numbers alone
    pid = views.choose_protocol(store, protocol)
    name = views.protocol_name(store, pid)
    if view == "reported":
        return _reported_view(store, pid, f"ours under protocol {name} ({pid})", paper)
    if metric is None:  # the leaderboard and cost views: the protocol's primary metric
        stored = views.ordered_metrics(store, pid, include_partial=include_partial)
        metric = stored[0] if stored else "em"
    if view == "leaderboard":
        metric = views.resolve_metric(store, pid, metric, include_partial=include_partial)
        board = views.leaderboard_from_db(store, pid, metric, include_partial=include_partial)
        paired, paired_cols = board.paired_frame(holm=holm)
        frame = pd.concat([board.display_frame(ci="bounds"), paired], axis=1)
        return ExportedView(
            f"Leaderboard · {metric_label(metric)} · protocol {name} ({pid})",
            frame,
            [*board.columns(ci="bounds"), *paired_cols],
            [leaderboard_table(board, intervals=intervals, holm=holm)],
        )
    metric = views.resolve_metric(store, pid, metric, include_partial=include_partial)
    values = queries.latest_values(store, pid, [metric], complete_only=not include_partial)
    if dataset is not None:  # a typo is an error naming the stored datasets, not an empty table
        from harness.choices import check_choice

        check_choice(f"dataset under protocol {name} ({pid})", dataset, values["dataset"].unique())
    table = views.build_cost(
        values,
        queries.latest_costs(store, pid, complete_only=not include_partial),
        metric=metric,
        dataset=dataset,
    )
    scope = dataset or "all datasets"
    return ExportedView(
        f"Cost and efficiency · {metric_label(metric)} · {scope} · protocol {name} ({pid})",
        table,
        list(COST_COLUMNS),
        [cost_table(table)],
    )


def _reported_view(store, pid: str | None, scope: str, paper: str | None = None) -> ExportedView:
    """Published numbers (the database's, else the registered papers') beside ours under ``pid``;
    ``paper``: that paper's rows only."""
    import json

    from leaderboards.reported_sync import reported_frame

    rep = reported_frame(store)
    if paper is not None:
        paper = views.resolve_paper(sorted(set(rep["paper"])), paper)
        rep = rep[rep["paper"] == paper]
        scope = f"{paper} · {scope}"
    raw = queries.protocol_json(store, pid) if pid else None
    boards, samples = views.reported_data(store, pid, rep) if pid else ({}, {})
    table = views.build_reported(rep, boards, protocol=json.loads(raw) if raw else None, samples=samples)
    return ExportedView(
        f"Reported vs reproduced · {scope}",
        table,
        list(REPORTED_COLUMNS),
        [
            summary_table(views.reported_summary(table)),
            *(pivot_table(p) for p in views.reported_pivots(table)),
        ],
    )


def summary_table(summary: pd.DataFrame) -> PaperTable:
    """The cross-paper summary that opens the reported view (:func:`views.reported_summary`)."""
    header = [views.SUMMARY_LABELS[c] for c in views.SUMMARY_COLUMNS]
    rows = [[str(r[c]) for c in views.SUMMARY_COLUMNS] for r in summary.to_dict("records")]
    caption = (
        "Across the papers: each paper's rows as printed; those with a number of ours; those with a comparable "
        "one (the row's recorded setting matches our run on corpus, retriever, top-k, prompt variant, model, "
        "metric variant and training state); the comparable numbers, and how many agree (our 95% interval "
        f"within ±{100 * MARGIN:.0f} points of the paper's number: an equivalence test), differ (the paper's "
        "number outside our interval) or are inconclusive (neither: too few questions to tell)."
    )
    return PaperTable(header, [("", rows)], set(), caption, label="tab:reported-summary")


def leaderboard_table(board: views.Leaderboard, *, intervals: bool = False, holm: bool = False) -> PaperTable:
    """Methods x datasets (averages last) in % with one decimal, grouped by method type, the best
    of each column in bold, the rows the paired test does not separate from it marked (``holm``:
    Holm-corrected across the column's rows); with ``intervals``, each cell is ``score [lo, hi]``
    (95%)."""
    keys = [*board.datasets, *(g.key for g, _ in board.averages)]
    header = ["Method", "Model", *(_avg_header(board, k) for k in keys)]
    frame = board.frame.reset_index(drop=True)
    marks = {k: board.best_and_ties(k, holm=holm) for k in keys}
    paired, _ = board.paired_frame(holm=holm)
    groups, bold, tied, notes = [], set(), set(), {}
    order = [t for t in TYPE_GROUPS if t in set(frame["type"])] + sorted(
        set(frame["type"]) - set(TYPE_GROUPS)
    )
    for gi, t in enumerate(order):
        rows = []
        for ri, (pos, r) in enumerate(frame[frame["type"] == t].iterrows()):
            partial = str(r.get("status", "complete")) != "complete"
            cells = [str(r["method"]) + (" (partial)" if partial else ""), str(r["model"])]
            for ci, k in enumerate(keys):
                if intervals:
                    cells.append(board.cell_text(k, r))
                else:
                    cells.append("" if pd.isna(r[k]) else f"{100 * r[k]:.1f}")
                if pos in marks[k][0]:
                    bold.add((gi, ri, ci + 2))
                elif pos in marks[k][1]:
                    tied.add((gi, ri, ci + 2))
                p = paired.loc[pos, f"{k}_p"]
                n = paired.loc[pos, f"{k}_n"]
                extra = ["" if pd.isna(p) else "p <0.001" if p < 0.001 else f"p {p:.3f}"]
                extra.append(f"n={int(n)}" if partial and n is not None and not pd.isna(n) else "")
                if any(extra) and cells[-1]:
                    notes[(gi, ri, ci + 2)] = ", ".join(x for x in extra if x)
            rows.append(cells)
        groups.append((TYPE_GROUPS.get(t, t), rows))
    lo, hi = (
        min(board.n_range(d)[0] for d in board.datasets),
        max(board.n_range(d)[1] for d in board.datasets),
    )
    n = f"{lo}" if lo == hi else f"{lo}-{hi}"
    caption = (
        f"{metric_label(board.metric)} (%) under protocol {board.protocol_name} ({board.protocol_id}); "
        f"n = {n} questions per dataset; best in bold (none where every score is equal); "
        f"{TIE_MARK_TEXT}: {views.tie_rule(board.binary, holm=holm)} "
        "Averages are unweighted means over the datasets named, given only for rows with all of them."
    )
    if intervals:
        how = (
            "every value is 0 or 1, so Wilson score per dataset and stratified Agresti-Coull for averages"
            if board.binary
            else "percentile bootstrap over questions, seed 0; averages weight datasets equally"
        )
        caption += f" In brackets: 95% intervals ({how})."
    if any(str(x) != "complete" for x in frame.get("status", [])):
        caption += (
            " (partial): a run that did not finish; its best and ties are decided on the questions it "
            "shares with the other row, and its n is in its cells."
        )
    if notes:
        caption += " In markdown, p: the paired test against the column's best row."
    label = f"tab:{board.protocol_name}-{board.metric}".replace("_", "-").replace(" ", "-")
    return PaperTable(header, groups, bold, caption, tied=tied, label=label, notes=notes)


def _avg_header(board: views.Leaderboard, key: str) -> str:
    for g, m in board.averages:
        if g.key == key:
            total = len(g.datasets) if g.datasets else len(m)
            return f"{dataset_label(key)} ({len(m)}/{total})"
    return dataset_label(key)


def pivot_table(p: views.ReportedPivot) -> PaperTable:
    """One paper table: a row per paper row and model of ours, a cell ``reported / ours [lo, hi]
    n=N / difference`` (the paper's number alone for a dataset we did not run), the paper's
    averages as the paper's, the shared-sets average last; the caption (above the table in both
    formats) says so and carries a ``\\label``."""
    header = ["Method", "Model (paper)", "Model (ours)", *p.labels, "Differs"]
    rows = [
        [
            str(r["method"]),
            str(r["model"]),
            str(r["ours"]),
            *(str(r[d]) for d in p.datasets),
            str(r["differs"]),
        ]
        for r in p.frame.to_dict("records")
    ]
    unit = "%, difference in percentage points" if p.unit in ("fraction", "%") else "as printed"
    differs = f" Protocol differs: {p.protocol_differs}." if p.protocol_differs else ""
    shared = f" Avg. (shared sets): the mean over {p.shared}, both sides." if p.shared else ""
    caption = (
        f"{p.paper} · {p.title} · {p.source}. Cell: reported / ours [95% interval] n=questions / "
        f"ours - reported ({unit}); one number: the paper's, for a dataset we did not run. A difference "
        f"only where the row's recorded setting matches ours on corpus, retriever, top-k, prompt variant, "
        f"model, metric variant and training state, over the same datasets (else Differs: not comparable, "
        f"and why). Avg. (paper): the paper's own average, never compared with ours.{shared}{differs}"
    )
    slug = f"{p.paper}-{p.setting}-{p.metric}".lower()
    label = "tab:reported-" + "".join(ch if ch.isalnum() else "-" for ch in slug).strip("-")
    return PaperTable(header, [("", rows)], set(), caption, label=label)


def cost_table(table: pd.DataFrame) -> PaperTable:
    header = [
        "Method",
        "Model",
        "Accuracy (%)",
        "Answered (%)",
        "Retrievals/q",
        "Tokens/q",
        "Tokens/correct",
        "$/q",
        "$/correct",
        "n",
        "Coverage",
    ]
    rows = []
    for _, r in table.iterrows():
        rows.append(
            [
                str(r["method"]),
                str(r["model"]),
                _num(100 * r["accuracy"], 1),
                _num(100 * r["answered"], 1),
                _num(r["retrievals"], 2),
                _num(r["tokens"], 0),
                _num(r["tokens_per_correct"], 0),
                "" if pd.isna(r["usd"]) else f"{r['usd']:.6f}",
                "" if pd.isna(r["usd_per_correct"]) else f"{r['usd_per_correct']:.6f}",
                str(int(r["n"])),
                str(r["coverage"]),
            ]
        )
    return PaperTable(header, [("", rows)], set(), "Means per question; $ empty when a price is unknown.")


def _num(v: float, digits: int) -> str:
    return "" if v is None or pd.isna(v) else f"{v:.{digits}f}"


def to_markdown(df: pd.DataFrame, columns: list[Column] | None = None, *, digits: int = 4) -> str:
    """A GitHub markdown table of a frame as it is (headers are the declared labels when given)."""
    return markdown_table(df, {c.key: c.label for c in columns or []}, digits=digits)


TIE_MARK = "≈"  # the app's mark (leaderboards/app_pages/leaderboard.py)
TIE_MARK_TEXT = "≈ (LaTeX: a dagger)"
LATEX_TIE_MARK = r"$^{\dagger}$"


def paper_markdown(t: PaperTable) -> str:
    """A paper table as GitHub markdown, its caption above it: group titles as italic rows, bold
    best cells, tied cells marked ``≈`` as in the app."""
    lines = [
        "| " + " | ".join(md_cell(h) for h in t.header) + " |",
        "|" + "|".join("---" for _ in t.header) + "|",
    ]
    for gi, (title, rows) in enumerate(t.groups):
        if title:
            lines.append("| " + " | ".join([f"*{title}*", *([""] * (len(t.header) - 1))]) + " |")
        for ri, row in enumerate(rows):
            cells = [
                f"**{c}**"
                if (gi, ri, ci) in t.bold and c
                else f"{md_cell(c)} {TIE_MARK}"
                if (gi, ri, ci) in t.tied and c
                else md_cell(c)
                for ci, c in enumerate(row)
            ]
            cells = [
                f"{c} ({md_cell(t.notes[(gi, ri, ci)])})" if (gi, ri, ci) in t.notes else c
                for ci, c in enumerate(cells)
            ]
            lines.append("| " + " | ".join(cells) + " |")
    text = "\n".join(lines) + "\n"
    return f"{t.caption}\n\n{text}" if t.caption else text


_LATEX_ESCAPES = {"\\": r"\textbackslash{}", "&": r"\&", "%": r"\%", "$": r"\$", "#": r"\#", "_": r"\_",
                  "{": r"\{", "}": r"\}", "~": r"\textasciitilde{}", "^": r"\textasciicircum{}"}  # fmt: skip


def latex_escape(s: str) -> str:
    return "".join(_LATEX_ESCAPES.get(ch, ch) for ch in s)


def paper_latex(t: PaperTable) -> str:
    """A paper table as a booktabs table (``\\usepackage{booktabs,graphicx}``), its caption and
    ``\\label`` above it: group titles as ``\\multicolumn`` rows between ``\\midrule``s, bold best
    cells, tied cells with a dagger. Wider than 6 columns it is a ``table*`` (both columns of a
    two-column paper) scaled to ``\\textwidth``; otherwise a ``table`` scaled to ``\\columnwidth``
    when needed (``\\resizebox`` only shrinks wide content)."""
    n = len(t.header)
    wide = n > 6
    env = "table*" if wide else "table"
    width = r"\textwidth" if wide else r"\columnwidth"
    lines = [rf"\begin{{{env}}}[t]", r"\centering", r"\small"]
    if t.caption:
        lines.append(rf"\caption{{{latex_escape(t.caption).replace(TIE_MARK_TEXT, LATEX_TIE_MARK)}}}")
    if t.label:
        lines.append(rf"\label{{{t.label}}}")
    lines += [
        rf"\resizebox{{\ifdim\width>{width}{width}\else\width\fi}}{{!}}{{%",
        r"\begin{tabular}{ll" + "r" * (n - 2) + "}",
        r"\toprule",
        " & ".join(latex_escape(h) for h in t.header) + r" \\",
    ]
    for gi, (title, rows) in enumerate(t.groups):
        lines.append(r"\midrule")
        if title:
            lines.append(rf"\multicolumn{{{n}}}{{l}}{{\textit{{{latex_escape(title)}}}}} \\")
        for ri, row in enumerate(rows):
            cells = [
                rf"\textbf{{{latex_escape(c)}}}"
                if (gi, ri, ci) in t.bold and c
                else latex_escape(c) + LATEX_TIE_MARK
                if (gi, ri, ci) in t.tied and c
                else latex_escape(c)
                for ci, c in enumerate(row)
            ]
            lines.append(" & ".join(cells) + r" \\")
    lines += [r"\bottomrule", r"\end{tabular}}", rf"\end{{{env}}}"]
    return "\n".join(lines) + "\n"


def write(exported: ExportedView, fmt: str, out: Path | None) -> str | None:
    """Write the view; returns the text when ``out`` is None and the format is markdown or latex."""
    if fmt not in FORMATS:
        raise ConfigError(f"unknown format {fmt!r}; choose one of {', '.join(FORMATS)}")
    df = exported.frame
    if fmt in ("markdown", "latex"):
        if fmt == "markdown":
            body = "\n".join(paper_markdown(t) for t in exported.tables)
            text = f"**{exported.title}**\n\n{body}"
        else:
            body = "\n".join(paper_latex(t) for t in exported.tables)
            text = f"% {exported.title}\n{body}"
        if out is None:
            return text
        out.parent.mkdir(parents=True, exist_ok=True)
        out.write_text(text)
        return None
    if out is None:
        raise ConfigError(f"--format {fmt} writes a file: give --out PATH")
    out.parent.mkdir(parents=True, exist_ok=True)
    if fmt == "csv":
        df.to_csv(out, index=False)
    else:
        df.to_parquet(out, index=False)
    return None
