"""Agreement with a paper's number is an equivalence test (harness.results.agreement): at n = 10 a
paper number 20 points away never reads "agrees", and the summary counts agree / differ /
inconclusive."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest

from harness.metrics.bootstrap import wilson_ci
from harness.results.agreement import AGREES, DIFFERS, INCONCLUSIVE, MARGIN, agreement, power
from leaderboards import views

PROTOCOL = {"corpus": {"id": "c"}, "retriever": {"kind": "bm25s"}, "top_k": 3}
MATCHING = {"corpus": "c", "retriever": "bm25s", "top_k": 3, "prompt": "naive_rag", "training": "none"}


def _ci(k: int, n: int) -> tuple[float, float]:
    a = wilson_ci(np.r_[np.ones(k), np.zeros(n - k)])
    return a.lo, a.hi


@pytest.mark.parametrize("k", range(11))
def test_at_n10_a_paper_number_20_points_away_never_agrees(k) -> None:
    lo, hi = _ci(k, 10)
    for paper in (k / 10 - 0.2, k / 10 + 0.2):
        if 0 <= paper <= 1:
            v = agreement(paper, lo, hi)
            assert v is not None and v.verdict in (INCONCLUSIVE, DIFFERS)
    assert power(lo, hi) == 0.0  # at n = 10 nothing can agree: the interval is wider than the margin


def test_fixed_cases() -> None:
    lo, hi = _ci(6, 10)  # 60.0 [31.3, 83.2]
    assert agreement(0.40, lo, hi).verdict == INCONCLUSIVE  # inside the interval: not agreement
    assert agreement(0.90, lo, hi).verdict == DIFFERS
    lo, hi = _ci(1000, 2000)  # 50.0 [47.8, 52.2]
    v = agreement(0.50, lo, hi)
    assert v.verdict == AGREES and 0.9 < v.power < 1.0
    assert agreement(0.46, lo, hi).verdict == DIFFERS  # 52.2 is more than 5 points above 46
    # 47.5 is outside our interval, yet the whole interval is within 5 points of it: equivalent
    assert lo > 0.475 and hi < 0.475 + MARGIN and agreement(0.475, lo, hi).verdict == AGREES
    assert agreement(float("nan"), lo, hi) is None
    assert agreement(3.0, 1.0, 2.0, fraction=False).verdict == DIFFERS  # a count: no margin
    assert agreement(1.5, 1.0, 2.0, fraction=False).verdict == INCONCLUSIVE


def test_the_reported_view_and_its_summary_count_the_verdicts() -> None:
    values = [1.0, 0.0, 1.0, 1.0, 0.0, 1.0, 0.0, 1.0, 1.0, 0.0]  # 6 of 10
    rows = [
        {"protocol_id": "x", "method": "naive_rag", "model": "M", "dataset": d, "metric": "em",
         "value": v, "label": "", "run_id": "r", "sample_id": f"q{i}"}
        for d in ("hotpotqa", "popqa") for i, v in enumerate(values)
    ]  # fmt: skip
    board = views.build_leaderboard(pd.DataFrame(rows), protocol_id="x", protocol_name="x", metric="em")
    paper = pd.DataFrame(
        [
            {"paper": "p", "setting": "T1", "method": "naive_rag", "model": "M", "dataset": d, "metric": "em",
             "value": v, "source": "P, T1", "note": ""}
            for d, v in (("hotpotqa", 0.40), ("popqa", 0.95))
        ]
    )  # fmt: skip
    t = views.build_reported(
        paper, {"em": board}, protocol=PROTOCOL, recorded={("p", "T1", "naive_rag", "M"): MATCHING}
    )
    by = t.set_index("dataset")
    assert by.loc["hotpotqa", "agreement"] == INCONCLUSIVE and by.loc["popqa", "agreement"] == DIFFERS
    assert by.loc["hotpotqa", "power"] == 0.0 and by.loc["hotpotqa", "unit"] == "fraction"
    s = views.reported_summary(t).iloc[0]
    assert (s["compared"], s["agree"], s["differ"], s["inconclusive"]) == (2, 0, 1, 1)
    (pivot,) = views.reported_pivots(t)
    html = views.pivot_html(pivot)
    assert "? inconclusive" in html and "✗ differs" in html and "✓ agrees" not in html
    assert "(inconclusive)" in pivot.frame.iloc[0]["hotpotqa"]
