"""``harness.results.summary`` beyond the table's intervals (tests/leaderboard/test_run_summary.py):
the reference counts of a reader, summed on its ``Avg.`` row, and the prefix-reuse lines."""

from __future__ import annotations

import pandas as pd

from harness.results import summary as summary_module
from harness.results.summary import AVG, prefill_lines, run_summary
from tests.judge.helpers import QA, make_run, new_store


def test_references_are_per_dataset_and_summed_on_the_average_row(tmp_path, monkeypatch):
    store = new_store(tmp_path)
    ids = [
        make_run(store, QA[:4], run_id="r1", method="reader", dataset="d1"),
        make_run(store, QA[4:10], run_id="r2", method="reader", dataset="d2"),
    ]
    refs = pd.DataFrame(
        {
            "method": ["reader", "reader"],
            "dataset": ["d1", "d2"],
            "own_refs": [4, 1],
            "substitute_refs": [0, 5],
        }
    )
    monkeypatch.setattr(summary_module, "reference_sources", lambda store, run_ids: refs)
    df = run_summary(store, ids, "em", references=True).set_index("dataset")
    assert list(df.index) == ["d1", "d2", AVG]
    assert df[["own_refs", "substitute_refs"]].to_dict("index") == {
        "d1": {"own_refs": 4, "substitute_refs": 0},
        "d2": {"own_refs": 1, "substitute_refs": 5},
        AVG: {"own_refs": 5, "substitute_refs": 5},
    }
    assert "own_refs" not in run_summary(store, ids, "em").columns  # only when asked


def test_prefill_lines_say_what_the_prefix_cache_saved(monkeypatch):
    rows = pd.DataFrame({"method": ["m1", "m2"], "prompt_tokens": [260, 0], "prefill_tokens": [130, 0]})
    monkeypatch.setattr(summary_module.queries, "prefill_summary", lambda store, run_ids: rows)
    assert prefill_lines(None, ["a"]) == [  # type: ignore[arg-type]
        "m1: 260 prompt tokens, 130 prefilled (50% saved by prefix reuse)",
        "m2: 0 prompt tokens, 0 prefilled (0% saved by prefix reuse)",
    ]
