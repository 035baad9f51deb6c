"""Reported vs reproduced compares like with like (issue #18): every reported row names the metric
variant it used, and the reported view compares it only with that variant. R-Search's F1 has no
yes/no rule (QingFei1/R-Search@ecba08d src/eval/utils.py:62-78), so its rows are ``f1_squad`` (and
its "Avg." is ``em_f1_squad_mean``); a row whose metric our runs did not compute says so."""

from __future__ import annotations

import json
import math

import pandas as pd
import pytest

from leaderboards import views
from leaderboards.schema import COUNT_METRICS, EXTRA_GLOSSARY

MODEL = "Qwen2.5-3B-Instruct"
PROTO = "p0"


def _released() -> dict:
    """R-Search's released evaluation protocol: our trained r_search run under it matches the
    paper's rows on every setting field."""
    return views.paper_protocol("r_search")


def _as_released() -> dict:
    """R-Search's rows as if recorded under its released protocol's corpus and retriever (they were
    not: its HotpotQA is from an IRCoT corpus), so that only the metric variant is tested here."""
    return {
        ("r_search", *views.PAPER_SETTING): {
            "corpus": "closed",
            "retriever": "bm25s",
            "top_k": 5,
            "algorithm": "grpo",
        }
    }


def _r_search_rows() -> pd.DataFrame:
    from methods.r_search.method import RSearch

    rows = [r for r in RSearch().reported() if r.method == "r_search" and r.model == MODEL]
    cols = ["paper", "method", "model", "dataset", "metric", "value", "source", "setting", "note"]
    return pd.DataFrame([[getattr(r, c) for c in cols] for r in rows], columns=cols)


def _boards(per_metric: dict[str, list[float]]) -> dict[str, views.Leaderboard]:
    """Our r_search run on hotpotqa (two questions), one leaderboard per metric."""
    recs = [
        {
            "protocol_id": PROTO,
            "method": "r_search",
            "model": MODEL,
            "dataset": "hotpotqa",
            "metric": m,
            "value": v,
            "label": "",
            "run_id": "r1",
            "sample_id": str(i),
        }
        for m, vals in per_metric.items()
        for i, v in enumerate(vals)
    ]
    values = pd.DataFrame(recs)
    return {
        m: views.build_leaderboard(
            values,
            protocol_id=PROTO,
            protocol_name="t",
            metric=m,
            n_resamples=10,
            # a trained checkpoint run under its backbone's name: its record says what trained it
            records={"r1": {"checkpoint_sha256": "00", "trained_by": "grpo"}},
        )
        for m in per_metric
    }


def test_r_search_rows_name_f1_squad_not_f1():
    rep = _r_search_rows()
    assert {"em", "f1_squad", "em_f1_squad_mean"} == set(rep["metric"])


def test_the_reported_view_shows_r_search_rows_against_f1_squad():
    rep = _r_search_rows()
    # our f1 (yes/no rule) and f1_squad differ on the second question: 0.0 vs 0.8
    boards = _boards({"em": [1.0, 0.0], "f1": [1.0, 0.0], "f1_squad": [1.0, 0.8]})
    t = views.build_reported(rep, boards, protocol=_released(), recorded=_as_released())
    t = t.set_index(["setting", "dataset", "metric"])
    row = t.loc[("Table 2", "hotpotqa", "f1_squad")]
    assert row["measured"] == pytest.approx(0.9)  # f1_squad, never f1's 0.5
    assert row["diff"] == pytest.approx(0.9 - row["reported"])
    assert ("Table 2", "hotpotqa", "f1") not in t.index
    # the block average is the mean of em and f1_squad (over our one set: no difference, coverage named)
    avg = t.loc[("Table 2", "avg_multihop", "em_f1_squad_mean")]
    assert avg["measured"] == pytest.approx((0.5 + 0.9) / 2) and math.isnan(avg["diff"])
    pivots = {(p.setting, p.metric) for p in views.reported_pivots(t.reset_index())}
    assert ("Table 2", "f1_squad") in pivots and ("Table 2", "f1") not in pivots


def test_a_metric_our_runs_did_not_compute_is_flagged_not_compared():
    rep = _r_search_rows()
    boards = _boards({"em": [1.0, 0.0], "f1": [1.0, 0.0]})  # a run without f1_squad
    t = views.build_reported(rep, boards, protocol=_released(), recorded=_as_released())
    t = t.set_index(["setting", "dataset", "metric"])
    row = t.loc[("Table 2", "hotpotqa", "f1_squad")]
    assert math.isnan(row["measured"]) and math.isnan(row["diff"])
    assert row["differs"] == "metric f1_squad not computed by our runs (missing: f1_squad)"
    avg = t.loc[("Table 2", "avg_multihop", "em_f1_squad_mean")]
    assert "metric em_f1_squad_mean not computed by our runs (missing: f1_squad)" in avg["differs"]
    # the em rows still compare
    assert t.loc[("Table 2", "hotpotqa", "em"), "measured"] == 0.5
    # the pivot shows the flag in the row's "differs" column
    (piv,) = [
        p for p in views.reported_pivots(t.reset_index()) if (p.setting, p.metric) == ("Table 2", "f1_squad")
    ]
    assert "metric f1_squad not computed" in piv.frame.iloc[0]["differs"]
    # a method that did not run at all is not flagged (nothing was computed for it)
    t2 = views.build_reported(rep, {}).set_index(["setting", "dataset", "metric"])
    assert t2.loc[("Table 2", "hotpotqa", "f1_squad"), "differs"] == ""


def test_every_reported_row_names_a_known_metric_variant():
    """A reported row's metric is a registered metric, a composite of registered metrics, a count,
    a judge metric or a paper-specific count; never an unnamed "F1" that could be any variant."""
    from harness.metrics.registry import METRICS
    from leaderboards.reported_sync import registered_reported

    known = set(METRICS.names()) | set(views.COMPOSITE_METRICS) | set(COUNT_METRICS)
    paper_counts = {"n_correct", "n_incorrect"}  # TIRESRAG-R1 Table 1 (trajectory counts)
    for parts in views.COMPOSITE_METRICS.values():
        assert set(parts) <= set(METRICS.names())
    assert set(views.COMPOSITE_METRICS) <= set(EXTRA_GLOSSARY)
    for paper, rows in registered_reported().items():
        for r in rows:
            assert r.metric in known | paper_counts or r.metric.startswith("judge@"), (paper, r.metric)


def test_a_papers_numbers_are_compared_with_its_released_protocol():
    """The paper's numbers came from its released evaluation: the protocol differences name its
    top-k (TIRESRAG-R1's released evaluation hard-codes top-7; its harness protocol uses 5)."""
    from harness.eval.protocol import preset

    assert views.paper_protocol("tiresrag_r1")["name"] == "tiresrag_r1-released"
    assert views.paper_protocol("r_search")["name"] == "r_search-released"
    assert views.paper_protocol("search_r1")["name"] == "searchr1"  # no released variant: as before
    ours = json.loads(preset("tiresrag_r1-eval").model_dump_json())
    assert views.protocol_differences(views.paper_protocol("tiresrag_r1"), ours) == ["top-k 7 vs 5"]
