"""The cost page's seconds per question (a paused batch is flagged) and its money text (issue 36)."""

from __future__ import annotations

import math

import pandas as pd
import pytest

from leaderboards import views


def _costs(batches: list[tuple[str, float, int]]) -> pd.DataFrame:
    """Rows as ``queries.latest_costs`` gives them: every question of a batch has the batch's
    wall time over its size (``harness.eval.runner``)."""
    rows = []
    for run, sec, n in batches:
        for i in range(n):
            rows.append({"method": run.split("-")[0], "model": "m", "run_id": run, "dataset": "d",
                         "sample_id": f"{sec}-{i}", "seconds": sec})  # fmt: skip
    return pd.DataFrame(rows)


def test_a_paused_batch_is_flagged_and_left_out_of_the_typical_mean():
    # naive_rag of the showcase: one batch of 8 at 108.0 s/q (paused ~13 min), the rest ~9 s/q
    costs = _costs([("naive-1", 107.99, 8), ("naive-1", 9.24, 8), ("naive-1", 8.91, 8)])
    [row] = views.timing_table(costs, dataset=None).to_dict("records")
    assert row["seconds"] == pytest.approx((8 * 107.99 + 8 * 9.24 + 8 * 8.91) / 24)
    assert row["seconds_median"] == pytest.approx(9.24)
    assert row["seconds_typical"] == pytest.approx((9.24 + 8.91) / 2)
    assert row["timing"].startswith("1 batch (8 q) at up to 108.0 s/q, over 3× the median 9.2")
    assert row["flagged"] == "1 batch, 8 q"  # the table cell


def test_a_warm_up_batch_is_not_a_pause():
    # direct of the showcase: the first batch 3.7 s/q (the model warming up), then 0.9: 22 s in all
    costs = _costs([("direct-1", 3.74, 8), ("direct-1", 0.93, 8), ("direct-1", 0.84, 8)])
    [row] = views.timing_table(costs, dataset=None).to_dict("records")
    assert row["timing"] == row["flagged"] == "" and row["seconds_typical"] == row["seconds"]


def test_steady_rows_have_no_flag_and_a_dataset_scope_filters():
    costs = _costs([("sure-1", 44.0, 8), ("sure-1", 41.0, 8)])
    costs.loc[costs.index[8:], "dataset"] = "e"
    t = views.timing_table(costs, dataset="e")
    assert t["seconds"].tolist() == [41.0] and t["timing"].tolist() == [""]


@pytest.mark.parametrize(
    ("usd", "text"),
    [
        (0.0, "free (local)"),
        (math.nan, "unknown (no price)"),
        (0.00042, "$0.00042"),
        (0.0123, "$0.012"),
        (1.5, "$1.50"),
        (1234.5, "$1,234.50"),
        (3e-6, "$0.0000030"),
    ],
)
def test_usd_text(usd, text):
    assert views.usd_text(usd) == text
