"""The papers' recorded settings (``setting:`` in each ``methods/<paper>/reported.yaml``) that keep a
difference off rows that are not like with like: every paper records its corpus, retriever and (but
ARENA's given paragraphs) top-k with a source, and TIRESRAG-R1's IRCoT rows record their 2
iterations (probe2/TIRESRAG-R1@a457873 evaluation/src/run_eval.py:454), so our 5-iteration
``ircot`` never gets a difference against them even where everything else matched."""

from __future__ import annotations

import pandas as pd
import pytest

from harness.results.comparable import FIELDS
from leaderboards import views
from leaderboards.reported_sync import registered_files

PAPERS = {"arena", "eval_rar", "r_search", "search_r1", "tiresrag_r1", "when_to_search"}


def test_every_paper_records_its_setting_with_a_source() -> None:
    files = {f.paper: f for f in registered_files()}
    assert set(files) == PAPERS
    for paper, f in files.items():
        assert f.setting.get("source"), paper
        wanted = {"corpus", "retriever"} | ({"top_k"} if paper != "arena" else set())
        assert wanted <= set(f.setting), (paper, f.setting)
        for key, rec in f.settings().items():
            # algorithm and variant make up the training field (harness.results.training_state)
            assert set(rec) - {"source", "algorithm", "variant"} <= set(FIELDS), (paper, key, rec)


def test_tiresrag_ircot_rows_are_recorded_as_two_iterations() -> None:
    settings = views.registered_settings()
    rows = {k: v for k, v in settings.items() if k[0] == "tiresrag_r1" and k[2] == "ircot"}
    assert rows and all(v["prompt"] == "ircot, 2 iterations" for v in rows.values())
    assert all("run_eval.py:454" in v["source"] and v["top_k"] == 5 for v in rows.values())
    assert settings[("tiresrag_r1", *views.PAPER_SETTING)]["top_k"] == 5  # the paper's, not the release's 7


@pytest.mark.parametrize("paper_model", ["Qwen2.5-3B-Instruct"])
def test_our_ircot_never_compares_with_tiresrag_ircot(paper_model) -> None:
    key = next(k for k in views.registered_settings() if k[0] == "tiresrag_r1" and k[2] == "ircot")
    rec = views.registered_settings()[key]
    protocol = {
        "corpus": {"id": rec["corpus"]},
        "retriever": {"kind": rec["retriever"]},
        "top_k": rec["top_k"],
    }
    rows = pd.DataFrame(
        [{"paper": "tiresrag_r1", "setting": key[1], "method": "ircot", "model": paper_model,
          "dataset": "hotpotqa", "metric": "em", "value": 0.2, "source": "s", "note": ""}]
    )  # fmt: skip
    board = views.build_leaderboard(
        pd.DataFrame(
            [{"protocol_id": "x", "method": "ircot", "model": paper_model, "dataset": "hotpotqa", "metric": "em",
              "value": v, "label": "", "run_id": "r", "sample_id": f"q{i}"} for i, v in enumerate([1.0, 0.0])]
        ),
        protocol_id="x", protocol_name="x", metric="em",
    )  # fmt: skip
    # the retriever kind text of this synthetic protocol is the recorded one: only the prompt differs
    t = views.build_reported(rows, {"em": board}, protocol=protocol)
    (row,) = t.to_dict("records")
    assert pd.isna(row["diff"]) and row["differs"] == "prompt ircot, 2 iterations vs ircot"
