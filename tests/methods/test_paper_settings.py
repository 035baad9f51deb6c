"""The papers' recorded settings (``setting:`` in each ``methods/<paper>/reported.yaml``) that keep a
difference off rows that are not like with like: every paper records its corpus, retriever and (but
ARENA's given paragraphs) top-k with a source, and TIRESRAG-R1's IRCoT rows record their 2
iterations (probe2/TIRESRAG-R1@a457873 evaluation/src/run_eval.py:454), so our 5-iteration
``ircot`` never gets a difference against them even where everything else matched."""

from __future__ import annotations

import re

import pandas as pd
import pytest

from harness.results.comparable import FIELDS, Setting, paper_setting, setting_differs
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
            assert set(rec) - {"source", "algorithm", "variant", "prompt_note"} <= set(FIELDS), (
                paper,
                key,
                rec,
            )


def test_tiresrag_ircot_rows_are_recorded_as_two_iterations() -> None:
    settings = views.registered_settings()
    rows = {k: v for k, v in settings.items() if k[0] == "tiresrag_r1" and k[2] == "ircot"}
    assert rows and all(v["prompt"] == "ircot, 2 iterations" for v in rows.values())
    assert all("run_eval.py:454" in v["source"] and v["top_k"] == 5 for v in rows.values())
    assert settings[("tiresrag_r1", *views.PAPER_SETTING)]["top_k"] == 5  # the paper's, not the release's 7


@pytest.mark.parametrize("paper_model", ["Qwen2.5-3B-Instruct"])
def test_our_ircot_never_compares_with_tiresrag_ircot(paper_model) -> None:
    key = next(
        k
        for k in views.registered_settings()
        if k[0] == "tiresrag_r1" and k[2] == "ircot" and k[3] == paper_model
    )
    # the retriever kind text of this synthetic protocol is the recorded one: only the prompt differs
    row = _reported_case(key, "ircot", "ircot", [1.0, 0.0], 0.2)
    assert pd.isna(row["diff"]) and row["differs"] == (
        "prompt ircot, 2 iterations vs ircot: FlashRAG's, which scores the whole chain when no answer "
        "is marked (TIRESRAG-R1 App. C.3)"
    )


def test_every_baseline_row_records_its_prompt_or_what_the_paper_states() -> None:
    """A paper row of a method other than the paper's own records the prompt variant (with a source)
    or what the paper states about it (``prompt_note``, ending in its source): the reason shown is
    that statement, never the generic "prompt not recorded"."""
    checked = 0
    for f in registered_files():
        for (table, method, model), rec in f.settings().items():
            if method == f.paper:
                continue
            checked += 1
            where = (f.paper, table, method, model)
            assert "prompt" in rec or "prompt_note" in rec, where
            assert rec.get("source") or re.search(r"\(.*\S.*\)$", str(rec.get("prompt_note", ""))), where
            theirs = paper_setting(paper=f.paper, method=method, model=model, metric="em", recorded=rec)
            for ours in ("direct", "naive_rag", "no_such_prompt"):
                (reason,) = setting_differs(theirs, Setting(prompt=ours), ("prompt",)) or ("",)
                assert "not recorded" not in reason, (where, reason)
    assert checked == 134  # every baseline row of the six files (a method and model once per table)


def test_eval_rar_naive_rag_row_is_search_r1s_rag_row() -> None:
    """Eval-RAR copied its "Naive RAG" row from Search-R1 Table 2 (Eval-RAR §4.1): the same numbers
    as Search-R1's RAG row, so it is filed under the same method and prompt (search_r1_rag)."""
    rows = {f.paper: f.rows() for f in registered_files()}
    eval_rar = {(r.dataset, r.value) for r in rows["eval_rar"] if r.method == "search_r1_rag"}
    search_r1 = {
        (r.dataset, r.value)
        for r in rows["search_r1"]
        if r.method == "search_r1_rag" and r.model == "Qwen2.5-3B-Instruct" and r.setting == "Table 2"
    }
    assert len(eval_rar) == 8 and eval_rar == search_r1
    assert not [r for r in rows["eval_rar"] if r.method == "naive_rag"]
    settings = views.registered_settings()
    assert (
        settings[("eval_rar", "Table 1", "search_r1_rag", "Qwen2.5-3B-Instruct")]["prompt"] == "search_r1_rag"
    )


R_SEARCH_RAG = ("r_search", "Table 2", "naive_rag", "Qwen2.5-3B-Instruct")


def _reported_case(
    key: tuple[str, str, str, str],
    paper_method: str,
    our_method: str,
    values: list[float],
    paper_value: float,
) -> dict:
    """The reported view's row for one HotpotQA EM row of paper ``key`` (its registered setting,
    filed under ``paper_method``) against our run of ``our_method`` scoring ``values`` on its
    questions, under a protocol matching the row's corpus, retriever and top-k."""
    paper, setting, _, model = key
    rec = views.registered_settings()[key]
    protocol = {
        "corpus": {"id": rec["corpus"]},
        "retriever": {"kind": rec["retriever"]},
        "top_k": rec["top_k"],
    }
    rows = pd.DataFrame(
        [{"paper": paper, "setting": setting, "method": paper_method, "model": model,
          "dataset": "hotpotqa", "metric": "em", "value": paper_value, "source": "s", "note": ""}]
    )  # fmt: skip
    board = views.build_leaderboard(
        pd.DataFrame(
            [{"protocol_id": "x", "method": our_method, "model": model, "dataset": "hotpotqa",
              "metric": "em", "value": v, "label": "", "run_id": "r", "sample_id": f"q{i}"}
             for i, v in enumerate(values)]
        ),
        protocol_id="x", protocol_name="x", metric="em",
    )  # fmt: skip
    # filed under another method, the row takes the key's setting; else build_reported's own lookup
    recorded = None if paper_method == key[2] else {(paper, setting, paper_method, model): rec}
    (row,) = views.build_reported(rows, {"em": board}, protocol=protocol, recorded=recorded).to_dict(
        "records"
    )
    return row


def _flashrag_case(our_method: str, paper_method: str) -> dict:
    """R-Search's Vanilla RAG row (run with FlashRAG, R-Search §4.2) filed under ``paper_method``,
    against our run of ``our_method`` under a protocol matching the row's corpus, retriever, top-k."""
    return _reported_case(R_SEARCH_RAG, paper_method, our_method, [1.0, 0.0, 0.0, 1.0], 0.34)


def test_a_flashrag_baseline_row_and_our_first_line_run_get_no_difference_with_the_scoring_named() -> None:
    """R-Search's RAG row is FlashRAG's pipeline, which scores the whole reply; our naive_rag, the
    same prompt, takes the first line: no difference, and the reason says so."""
    rec = views.registered_settings()[R_SEARCH_RAG]
    assert rec["prompt"] == "naive_rag_flashrag" and "R-Search §4.2" in rec["prompt_note"]
    row = _flashrag_case("naive_rag", "naive_rag")
    assert pd.isna(row["diff"]) and row["measured"] == 0.5
    assert row["differs"] == (
        "prompt naive_rag_flashrag vs naive_rag: run with FlashRAG, which scores the whole reply; "
        "naive_rag takes the first line (R-Search §4.2)"
    )


def test_the_same_setting_and_our_flashrag_run_get_a_difference() -> None:
    """The same recorded setting against our run of naive_rag_flashrag (FlashRAG's prompt, the
    whole reply scored) under the matching corpus, retriever and top-k: like with like."""
    row = _flashrag_case("naive_rag_flashrag", "naive_rag_flashrag")
    assert row["differs"] == "" and row["diff"] == pytest.approx(0.5 - 0.34)
