"""One comparability rule (harness.results.comparable) in the reported view: ours against a paper
row gets a difference only when the row's recorded setting matches the run on corpus, retriever,
top-k, prompt variant, model, metric variant and training state. Changing any one field, in the run
or in the paper row, removes the difference and names the field. The committed showcase with its
model relabelled as a paper's backbone (``Qwen2.5-3B-Instruct``) gets no difference at all, with the
reasons named (corpus, retriever; trained vs untrained)."""

from __future__ import annotations

import math
import shutil
from pathlib import Path

import duckdb
import pandas as pd
import pytest

from harness.results.comparable import FIELDS, Setting, not_comparable, setting_differs
from harness.results.queries import open_results
from leaderboards import views
from leaderboards.export import build_view

ROOT = Path(__file__).resolve().parents[2]
SHOWCASE = ROOT / "results" / "showcase-2026-11-24.duckdb"

PROTOCOL = {"corpus": {"id": "c"}, "retriever": {"kind": "bm25s"}, "top_k": 3}
MATCHING = {"corpus": "c", "retriever": "bm25s", "top_k": 3, "prompt": "naive_rag", "training": "none"}


def _paper_rows(model: str = "M", metric: str = "em") -> pd.DataFrame:
    return pd.DataFrame(
        [
            {"paper": "p", "setting": "T1", "method": "naive_rag", "model": model, "dataset": "hotpotqa",
             "metric": metric, "value": 0.40, "source": "P, T1", "note": ""},
        ]
    )  # fmt: skip


def _boards(metric: str = "em", model: str = "M") -> dict[str, views.Leaderboard]:
    rows = [
        {"protocol_id": "x", "method": "naive_rag", "model": model, "dataset": "hotpotqa", "metric": metric,
         "value": v, "label": "", "run_id": "r", "sample_id": f"q{i}"}
        for i, v in enumerate([1.0, 0.0, 1.0, 1.0])
    ]  # fmt: skip
    return {
        metric: views.build_leaderboard(pd.DataFrame(rows), protocol_id="x", protocol_name="x", metric=metric)
    }


def _row(*, recorded: dict | None = None, protocol: dict | None = None, **kw) -> pd.Series:
    rows = _paper_rows(kw.get("paper_model", "M"), kw.get("paper_metric", "em"))
    rec = {("p", "T1", "naive_rag", kw.get("paper_model", "M")): MATCHING if recorded is None else recorded}
    t = views.build_reported(
        rows,
        _boards(kw.get("our_metric", "em"), kw.get("our_model", "M")),
        protocol=protocol or PROTOCOL,
        recorded=rec,
    )
    return t[t["dataset"] == "hotpotqa"].iloc[0]


def test_the_matching_setting_gets_a_difference() -> None:
    row = _row()
    assert row["diff"] == pytest.approx(0.75 - 0.40) and row["differs"] == ""


@pytest.mark.parametrize(
    ("change", "reason"),
    [
        ({"recorded": {**MATCHING, "corpus": "wiki18"}}, "corpus wiki18 vs c"),
        ({"protocol": {**PROTOCOL, "corpus": {"id": "wiki18"}}}, "corpus c vs wiki18"),
        ({"recorded": {**MATCHING, "retriever": "dense e5-base-v2 Flat"}}, "retriever dense e5-base-v2 Flat vs bm25s"),
        ({"protocol": {**PROTOCOL, "retriever": {"kind": "pyserini"}}}, "retriever bm25s vs pyserini"),
        ({"recorded": {**MATCHING, "top_k": 5}}, "top-k 5 vs 3"),
        ({"protocol": {**PROTOCOL, "top_k": 7}}, "top-k 3 vs 7"),
        ({"recorded": {**MATCHING, "prompt": "naive_rag, FlashRAG template"}}, "prompt naive_rag, FlashRAG template vs naive_rag"),
        ({"recorded": {k: v for k, v in MATCHING.items() if k != "prompt"}}, "prompt not recorded"),
        # what the paper states about its prompt stands for "not recorded", and follows a prompt that differs
        ({"recorded": {**{k: v for k, v in MATCHING.items() if k != "prompt"}, "prompt_note": "not given (P §4)"}},
         "prompt not given (P §4)"),
        ({"recorded": {**MATCHING, "prompt": "naive_rag_flashrag", "prompt_note": "the whole reply scored (P §4)"}},
         "prompt naive_rag_flashrag vs naive_rag: the whole reply scored (P §4)"),
        ({"paper_model": "Qwen2.5-7B-Instruct"}, "model Qwen2.5-7B-Instruct vs M"),
        ({"our_model": "Other-1B"}, "model M vs Other-1B"),
        ({"recorded": {**MATCHING, "training": "trained"}}, "training trained (algorithm not recorded) vs none"),
    ],
)  # fmt: skip
def test_each_field_that_differs_removes_the_difference_and_is_named(change, reason) -> None:
    row = _row(**change)
    assert math.isnan(row["diff"]) and not math.isnan(row["measured"])  # both numbers, no difference
    assert reason in row["differs"].split("; ")
    (pivot,) = views.reported_pivots(pd.DataFrame([row]))
    assert pivot.frame.iloc[0]["differs"].startswith("not comparable: " + reason.split(" ")[0])


def test_a_metric_variant_our_runs_did_not_compute_is_not_compared() -> None:
    row = _row(paper_metric="f1_squad", our_metric="f1")  # R-Search's F1 has no yes/no rule: not our f1
    assert math.isnan(row["diff"]) and "metric f1_squad not computed by our runs" in row["differs"]


@pytest.mark.parametrize("field", FIELDS)
def test_setting_differs_names_each_field(field) -> None:
    base = Setting(corpus="c", retriever="r", top_k=3, prompt="p", model="M", metric="em", training="none")
    assert setting_differs(base, base) == []
    other = {"top_k": 5, "model": "Other"}.get(field, "x")
    (reason,) = setting_differs(base.replace(**{field: other}), base)
    assert reason.startswith({"top_k": "top-k"}.get(field, field))
    assert not_comparable([reason]) == f"not comparable: {reason.split(' ')[0]}"
    (unrecorded,) = setting_differs(base.replace(**{field: None}), base)
    assert unrecorded.endswith("not recorded")


def test_model_names_compare_without_org_and_case() -> None:
    a = Setting(model="Qwen/Qwen2.5-3B-Instruct")
    assert setting_differs(a, Setting(model="qwen2.5-3b-instruct"), ("model",)) == []


@pytest.fixture(scope="module")
def relabelled(tmp_path_factory) -> Path:
    """A copy of the showcase with our model renamed to the backbone of Search-R1's 3B rows."""
    copy = tmp_path_factory.mktemp("relabel") / "showcase.duckdb"
    shutil.copyfile(SHOWCASE, copy)
    con = duckdb.connect(str(copy))
    try:
        con.execute("UPDATE runs SET model = 'Qwen2.5-3B-Instruct'")
    finally:
        con.close()
    return copy


def test_the_relabelled_showcase_gets_no_difference_with_the_reasons_named(relabelled) -> None:
    view = build_view(open_results(relabelled), "reported", paper="search_r1")
    t = view.frame
    mine = t[t["measured_model"] == "Qwen2.5-3B-Instruct"]
    assert len(mine) > 20 and mine["diff"].isna().all()  # no Δ anywhere
    ircot = mine[(mine["method"] == "ircot") & (mine["dataset"] == "popqa") & (mine["setting"] == "Table 2")]
    ircot = ircot[ircot["model"] == "Qwen2.5-3B-Instruct"].iloc[0]
    assert (ircot["reported"], ircot["measured"]) == (
        pytest.approx(0.20),
        pytest.approx(0.80),
    )  # both numbers
    assert (
        "corpus wiki18 vs closed" in ircot["differs"]
        and "retriever dense e5-base-v2 Flat vs bm25s" in ircot["differs"]
    )
    sr1 = mine[
        (mine["method"] == "search_r1")
        & (mine["setting"] == "Table 2")
        & (mine["model"] == "Qwen2.5-3B-Instruct")
    ]
    assert (
        "training trained (ppo) vs untrained" in sr1.iloc[0]["differs"]
    )  # our untrained policy vs PPO-trained
    md = "\n".join(line for line in views.reported_pivots(t)[0].frame["differs"])
    assert "not comparable: corpus, retriever" in md
    measured = {"ircot": {"Qwen2.5-3B-Instruct"}, "search_r1": {"Qwen2.5-3B-Instruct"}}
    assert views.no_comparison_reason(t, measured).startswith(
        "No row of ours is comparable with this paper's: their recorded settings differ in corpus, retriever"
    )
    text = "\n".join(p.caption for p in view.tables)
    assert "Protocol differs: corpus wiki18 vs closed; retriever dense e5-base-v2 Flat vs bm25s" in text


def test_every_trained_paper_row_names_its_algorithm():
    """A trained row of any registered ``reported.yaml`` records what trained it (``algorithm``,
    with a source), so that a trained run compares only with rows of its own algorithm; a row
    whose paper does not say records ``unstated`` (it then compares with no run)."""
    from harness.results.comparable import paper_setting
    from leaderboards.reported_sync import registered_files

    trained, missing = 0, []
    for f in registered_files():
        for t in f.tables:
            for (setting, method, model), rec in t.settings().items():
                rec = {**f.setting, **rec}
                s = paper_setting(paper=f.paper, method=method, model=model, metric="em", recorded=rec)
                if not str(s.training).startswith("trained"):
                    continue
                trained += 1
                if "algorithm not recorded" in str(s.training) or not rec.get("source"):
                    missing.append(f"{f.paper} {setting} {method} {model}")
    assert trained > 100 and not missing, missing
