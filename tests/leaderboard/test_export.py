"""``harness export``: the app's views in files, round-tripped."""

from __future__ import annotations

import re

import pandas as pd
import pytest

from harness.cli import main
from leaderboards import views
from leaderboards.export import build_view, to_markdown
from leaderboards.queries import open_results


def _board(fixture_db, metric="em"):
    return views.leaderboard_from_db(open_results(fixture_db.path), fixture_db.protocol.protocol_id, metric)


def _exported(board) -> pd.DataFrame:
    """What the data exports hold: the board's frame and, per column, n, p against the best, tie, best."""
    return pd.concat([board.display_frame(ci="bounds"), board.paired_frame()[0]], axis=1)


def test_csv_round_trip(fixture_db, tmp_path):
    out = tmp_path / "lb.csv"
    pid = fixture_db.protocol.protocol_id
    assert (
        main(
            ["export", "--format", "csv", "--protocol", pid, "--db", str(fixture_db.path), "--out", str(out)]
        )
        == 0
    )
    back = pd.read_csv(out, keep_default_na=False, na_values=[""])
    expected = _exported(_board(fixture_db))
    assert list(back.columns) == list(expected.columns)
    assert {"hotpotqa_n", "hotpotqa_p", "hotpotqa_tie", "hotpotqa_best", "status"} <= set(back.columns)
    naive = back.set_index("method").loc["naive_rag"]
    assert (naive["hotpotqa_n"], naive["hotpotqa_tie"], naive["hotpotqa_best"]) == (4, True, False)
    assert naive["hotpotqa_p"] == pytest.approx(1.0)  # 2 of 4 vs search_r1's 3 of 4: one discordant pair
    assert list(back["method"]) == ["search_r1", "naive_rag", "direct", "direct"]
    for col in expected.columns:
        if expected[col].dtype.kind == "f":
            assert back[col].to_numpy() == pytest.approx(
                expected[col].to_numpy(), rel=1e-12, abs=1e-12, nan_ok=True
            ), col
    assert back.set_index("method").loc["naive_rag", "avg_all"] == 0.5


def test_parquet_round_trip_is_exact(fixture_db, tmp_path):
    out = tmp_path / "lb.parquet"
    pid = fixture_db.protocol.protocol_id
    args = [
        "export",
        "--format",
        "parquet",
        "--metric",
        "f1",
        "--protocol",
        pid,
        "--db",
        str(fixture_db.path),
    ]
    assert main([*args, "--out", str(out)]) == 0
    pd.testing.assert_frame_equal(pd.read_parquet(out), _exported(_board(fixture_db, "f1")))


def test_markdown_is_a_paper_table(fixture_db, capsys):
    pid = fixture_db.protocol.protocol_id
    args = ["export", "--format", "markdown", "--protocol", pid, "--db", str(fixture_db.path)]
    assert main([*args, "--metric", "EM"]) == 0  # the label works, case-insensitively
    text = capsys.readouterr().out
    assert text.startswith(f"**Leaderboard · EM · protocol mini ({pid})**")
    lines = text.splitlines()
    assert (
        "| Method | Model | PopQA | HotpotQA | MuSiQue | Avg. (3/3) | Avg. single-hop (1/3) | Avg. multi-hop (2/4) |"
        in lines
    )
    table = lines[lines.index("| *Prompt baselines* |  |  |  |  |  |  |  |") :]
    # ≈: the paired test does not separate the row from the column's best (4 questions cannot)
    assert (
        table[1]
        == "| naive_rag | smollm2-135m-instruct | 75.0 ≈ (p 1.000) | 50.0 ≈ (p 1.000) | 25.0 ≈ (p 1.000) "
        "| 50.0 ≈ (p 0.250) | 75.0 ≈ (p 1.000) | 37.5 ≈ (p 0.500) |"
    )
    # no average over fewer sets
    assert table[3] == "| direct | qwen-test | 25.0 ≈ (p 0.250) |  |  |  | 25.0 ≈ (p 0.250) |  |"
    assert table[4] == "| *Untrained policies* |  |  |  |  |  |  |  |"
    assert table[5] == (
        "| search_r1 | smollm2-135m-instruct | **100.0** | **75.0** | **50.0** | **75.0** | **100.0** | **62.5** |"
    )
    assert "n = 4 questions per dataset; best in bold" in text
    assert main([*args, "--metric", "em"]) == 0 and capsys.readouterr().out == text
    assert main(args) == 0 and capsys.readouterr().out == text  # default: the protocol's primary metric


def test_markdown_with_intervals_puts_each_score_and_its_interval_in_one_cell(fixture_db, capsys):
    from scipy.stats import binomtest

    pid = fixture_db.protocol.protocol_id
    args = ["export", "--format", "markdown", "--protocol", pid, "--db", str(fixture_db.path)]
    assert main([*args, "--intervals"]) == 0
    text = capsys.readouterr().out
    row = next(line for line in text.splitlines() if line.startswith("| naive_rag |"))
    ci = binomtest(3, 4).proportion_ci(confidence_level=0.95, method="wilson")  # PopQA: 3 of 4
    assert row.split(" | ")[2] == f"75.0 [{100 * ci.low:.1f}, {100 * ci.high:.1f}] ≈ (p 1.000)"
    assert "In brackets: 95% intervals (every value is 0 or 1, so Wilson score per dataset" in text
    assert main([*args, "--metric", "f1", "--intervals"]) == 0
    assert "percentile bootstrap over questions" in capsys.readouterr().out


def test_latex_export(fixture_db, capsys):
    pid = fixture_db.protocol.protocol_id
    args = [
        "export",
        "--format",
        "latex",
        "--metric",
        "Cover-EM",
        "--protocol",
        pid,
        "--db",
        str(fixture_db.path),
    ]
    assert main(args) == 0
    tex = capsys.readouterr().out
    assert r"\begin{tabular}{llrrrrrr}" in tex and r"\toprule" in tex and r"\bottomrule" in tex
    assert r"\multicolumn{8}{l}{\textit{Prompt baselines}} \\" in tex
    assert r"search\_r1 & smollm2-135m-instruct & \textbf{100.0} & \textbf{75.0}" in tex
    assert r"cover-EM (\%)" in tex


def test_latex_escapes():
    from leaderboards.export import latex_escape

    assert latex_escape("search_r1 & 50% #1") == r"search\_r1 \& 50\% \#1"


def test_cost_and_reported_views(fixture_db, tmp_path):
    store = open_results(fixture_db.path)
    pid = fixture_db.protocol.protocol_id
    cost = build_view(store, "cost", protocol=pid, metric="em")
    assert cost.frame.set_index("method").loc["search_r1", "tokens"] == 535 + 110 * 3 / 12
    assert len(cost.frame) == 4
    rep = build_view(store, "reported", protocol=pid)
    ours = rep.frame[rep.frame["paper"] == "search_r1"].set_index(["method", "dataset"])
    assert ours.loc[("naive_rag", "hotpotqa"), "measured"] == 0.5
    assert {"eval_rar", "r_search", "when_to_search"} <= set(rep.frame["paper"])  # from the package
    out = tmp_path / "rep.md"
    args = [
        "export",
        "--format",
        "markdown",
        "--view",
        "reported",
        "--protocol",
        pid,
        "--db",
        str(fixture_db.path),
    ]
    assert main([*args, "--out", str(out)]) == 0
    text = out.read_text()
    assert "| Method | Model (paper) | Model (ours) | HotpotQA | Differs |" in text
    # the fixture's rows are under the papers' settings, ours under mini: both numbers, no difference,
    # and what is not comparable
    assert (
        "| search_r1 | smollm2-135m-instruct | smollm2-135m-instruct | 2.9 / 1 [0.51, 1] n=4 / — | "
        "not comparable: corpus, retriever, top-k, prompt, training (prompt not recorded; "
        "training trained (algorithm not recorded) vs untrained) |"
    ) in text
    assert (
        "Protocol differs: corpus kilt-2019 vs closed; retriever dense bge-large-en-v1.5 vs bm25s; top-k 5 vs 3."
        in text
    )  # once per table, not per row
    # the paper's averages hold the paper's numbers only (never ours over other datasets)
    assert (
        "| 40.0 / 50.0 [15.0, 85.0] n=4 / — | 35.0 | 30.0 | not comparable: corpus, retriever, prompt" in text
    )


def test_reported_export_on_a_fresh_database(tmp_path, capsys):
    """No `harness leaderboard` ever ran on it: the registered papers' numbers come from the package."""
    from harness.results.store import Store
    from tests.leaderboard import fixtures

    db = tmp_path / "fresh.duckdb"
    store = Store(db)
    empty = tmp_path / "empty.csv"  # no run at all: the published numbers alone
    assert (
        main(["export", "--format", "csv", "--view", "reported", "--db", str(db), "--out", str(empty)]) == 0
    )
    alone = pd.read_csv(empty)
    assert len(alone) > 2000 and alone["measured"].isna().all()
    proto = fixtures.preset("mini")
    store.create_run(fixtures._run_record("r1", "search_r1", proto))
    store.add_samples("r1", fixtures._samples("search_r1", {"hotpotqa": "c0"}, proto, False))
    store.finish_run("r1", "complete", 1.0)
    out = tmp_path / "rep.csv"
    assert main(["export", "--format", "csv", "--view", "reported", "--db", str(db), "--out", str(out)]) == 0
    back = pd.read_csv(out)
    assert {"search_r1", "tiresrag_r1", "r_search"} <= set(back["paper"])
    counts = back[(back["paper"] == "tiresrag_r1") & (back["metric"] == "n_retrievals")]
    assert len(counts) and set(counts["unit"]) == {"count"}
    assert main(["export", "--format", "markdown", "--view", "reported", "--db", str(db)]) == 0
    assert "Table 5 · n_retrievals (raw counts)" in capsys.readouterr().out


def test_export_refuses_to_mix_protocols(fixture_db, capsys):
    assert main(["export", "--format", "markdown", "--db", str(fixture_db.path)]) == 2
    err = capsys.readouterr().err
    assert "holds runs of 2 protocols, which are never mixed" in err
    assert fixture_db.other_protocol.protocol_id in err


def test_export_errors(fixture_db, tmp_path, capsys):
    pid = fixture_db.protocol.protocol_id
    assert main(["export", "--format", "csv", "--protocol", pid, "--db", str(fixture_db.path)]) == 2
    assert "--format csv writes a file: give --out PATH" in capsys.readouterr().err
    assert (
        main(
            [
                "export",
                "--format",
                "csv",
                "--protocol",
                pid,
                "--metric",
                "nope",
                "--db",
                str(fixture_db.path),
                "--out",
                str(tmp_path / "x"),
            ]
        )
        == 2
    )
    assert "no values of metric 'nope'" in capsys.readouterr().err
    assert (
        main(
            ["export", "--format", "csv", "--db", str(tmp_path / "none.duckdb"), "--out", str(tmp_path / "x")]
        )
        == 2
    )
    assert "no results database here" in capsys.readouterr().err


def test_markdown_escapes_cells():
    df = pd.DataFrame({"a": ["x|y"], "b": [float("nan")], "c": [0.5]})
    assert to_markdown(df) == "| a | b | c |\n|---|---|---|\n| x\\|y |  | 0.5000 |\n"


def _marked_cells(text: str, mark: str, *, sep: str, end: str) -> set[tuple[str, int]]:
    """(method, column index) of the cells carrying ``mark`` in a markdown or LaTeX table."""
    out = set()
    for line in text.splitlines():
        cells = [c.strip() for c in line.strip().strip("|").removesuffix(end).split(sep)]
        if len(cells) < 3 or cells[0].startswith(("*", "Method", "\\")):
            continue
        cells = [re.sub(r" \(p [^)]*\)$", "", c) for c in cells]  # markdown's p against the best
        out |= {(cells[0].replace("\\_", "_"), ci) for ci, c in enumerate(cells) if c.endswith(mark)}
    return out


@pytest.mark.parametrize("intervals", [False, True])
def test_exports_mark_the_cells_the_app_marks_as_tied(intervals):
    """The app marks a cell the paired test does not separate from the column's best with ≈
    (board.best_and_ties);
    the markdown export marks exactly those cells ≈ and the LaTeX export with a dagger. Over the
    showcase database naive_rag's PopQA score (60.0) is tied with ircot's best (80.0)."""
    from pathlib import Path

    from leaderboards.export import LATEX_TIE_MARK, leaderboard_table, paper_latex, paper_markdown

    db = Path(__file__).resolve().parents[2] / "results" / "showcase-2026-11-24.duckdb"
    store = open_results(db)
    board = views.leaderboard_from_db(store, views.choose_protocol(store, "mini"), "em")
    keys = [*board.datasets, *(g.key for g, _ in board.averages)]
    frame = board.frame.reset_index(drop=True)
    expected = {
        (frame.loc[i, "method"], ci + 2) for ci, k in enumerate(keys) for i in board.best_and_ties(k)[1]
    }
    assert ("naive_rag", 2) in expected  # PopQA
    t = leaderboard_table(board, intervals=intervals)
    assert _marked_cells(paper_markdown(t), " ≈", sep=" | ", end="") == expected
    assert _marked_cells(paper_latex(t), LATEX_TIE_MARK, sep=" & ", end=r"\\") == expected
    tex = paper_latex(t)
    assert (
        r"\begin{table*}" in tex
        and r"\label{tab:" in tex
        and tex.index(r"\caption") < tex.index(r"\begin{tabular}")
    )


def test_a_dataset_typo_is_one_line_naming_the_near_miss(fixture_db, tmp_path, capsys):
    out = tmp_path / "cost.csv"
    pid = fixture_db.protocol.protocol_id
    argv = ["export", "--view", "cost", "--dataset", "hotpot", "--format", "csv", "--protocol", pid]
    assert main([*argv, "--db", str(fixture_db.path), "--out", str(out)]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "unknown dataset under protocol" in err
    assert "'hotpot' (did you mean hotpotqa?); known: hotpotqa, musique, popqa" in err
    assert not out.exists()


def test_an_empty_result_is_an_error_unless_asked_for(fixture_db, tmp_path, capsys, monkeypatch):
    from leaderboards import export

    empty = export.ExportedView("Cost and efficiency · EM · hotpotqa", pd.DataFrame(), [], [])
    monkeypatch.setattr(export, "build_view", lambda *a, **k: empty)
    out = tmp_path / "cost.csv"
    argv = ["export", "--view", "cost", "--format", "csv", "--db", str(fixture_db.path), "--out", str(out)]
    assert main(argv) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "no rows" in err and "--allow-empty" in err and not out.exists()
    assert main([*argv, "--allow-empty"]) == 0 and out.exists()
