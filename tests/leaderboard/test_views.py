"""The views the app and ``harness export`` share: exact numbers from the fixture database."""

from __future__ import annotations

import math

import numpy as np
import pandas as pd
import pytest

from harness.errors import ConfigError
from harness.metrics.bootstrap import bootstrap_ci
from leaderboards import queries, views
from leaderboards.passages import lookup, packaged_corpus_for
from leaderboards.schema import LEADERBOARD_COLUMNS, averages_for, order_datasets, order_metrics
from tests.leaderboard.fixtures import EXPECTED_EM, JUDGE_METRIC, MODEL, OTHER_MODEL, TOP5_NAIVE_RAG_EM


@pytest.fixture(scope="module")
def store(fixture_db):
    return queries.open_results(fixture_db.path)


def by_method(frame: pd.DataFrame) -> pd.DataFrame:
    """The rows of the main model, indexed by method."""
    return frame[frame["model"] == MODEL].set_index("method")


def test_protocols_are_listed_separately(store, fixture_db):
    df = queries.protocols(store)
    assert set(df["protocol_id"]) == {fixture_db.protocol.protocol_id, fixture_db.other_protocol.protocol_id}
    assert set(df["protocol_name"]) == {"mini"}


def test_leaderboard_em_values_and_averages(store, fixture_db):
    board = views.leaderboard_from_db(store, fixture_db.protocol.protocol_id, "em")
    assert board.datasets == ["popqa", "hotpotqa", "musique"]  # single-hop first, as the papers
    assert [g.key for g, _ in board.averages] == ["avg_all", "avg_singlehop", "avg_multihop"]
    assert board.score_keys[:4] == ["avg_all", "avg_singlehop", "avg_multihop", "popqa"]  # averages first
    df = by_method(board.frame)
    for method, expected in EXPECTED_EM.items():
        for key, value in expected.items():
            assert df.loc[method, key] == pytest.approx(value, abs=1e-12), (method, key)
    # sorted by avg all, best first; a row without every dataset has none, last
    assert list(zip(board.frame["method"], board.frame["model"], strict=True)) == [
        ("search_r1", MODEL), ("naive_rag", MODEL), ("direct", MODEL), ("direct", OTHER_MODEL),
    ]  # fmt: skip
    assert df.loc["search_r1", "label"] == "untrained policy"
    assert df.loc["direct", "n"] == 12
    qwen = board.frame[board.frame["model"] == OTHER_MODEL].iloc[0]
    assert qwen["popqa"] == 0.25 and qwen["avg_singlehop"] == 0.25 and qwen["n"] == 4
    assert math.isnan(qwen["hotpotqa"]) and math.isnan(qwen["avg_multihop"]) and math.isnan(qwen["avg_all"])


def test_leaderboard_never_mixes_protocols(store, fixture_db):
    other = views.leaderboard_from_db(store, fixture_db.other_protocol.protocol_id, "em")
    assert list(other.frame["method"]) == ["naive_rag"]
    assert other.datasets == ["hotpotqa"]
    assert other.frame.loc[0, "hotpotqa"] == TOP5_NAIVE_RAG_EM
    # the first protocol's naive_rag hotpotqa stays 0.5 (not pooled with the other protocol's 1.0)
    main = by_method(views.leaderboard_from_db(store, fixture_db.protocol.protocol_id, "em").frame)
    assert main.loc["naive_rag", "hotpotqa"] == 0.5
    both = queries.latest_values(store, None, ["em"])
    with pytest.raises(ValueError, match="several protocols"):
        views.build_leaderboard(
            both, protocol_id=fixture_db.protocol.protocol_id, protocol_name="mini", metric="em"
        )


def test_metric_changes_values(store, fixture_db):
    f1 = by_method(views.leaderboard_from_db(store, fixture_db.protocol.protocol_id, "f1").frame)
    assert f1.loc["direct", "hotpotqa"] == pytest.approx((1 + 2 / 3) / 4)
    cover = by_method(views.leaderboard_from_db(store, fixture_db.protocol.protocol_id, "cover_em").frame)
    assert cover.loc["direct", "hotpotqa"] == 0.25  # "lovelace" does not contain "ada lovelace"


def test_judge_metric_is_a_leaderboard_metric(store, fixture_db):
    assert JUDGE_METRIC in queries.metrics_present(store, fixture_db.protocol.protocol_id)
    board = views.leaderboard_from_db(store, fixture_db.protocol.protocol_id, JUDGE_METRIC)
    assert list(board.frame["method"]) == ["direct"] and board.datasets == ["hotpotqa"]
    assert board.frame.loc[0, "hotpotqa"] == 0.5  # the judge accepts "Lovelace"; EM does not


def test_intervals_are_the_bootstrap_of_the_per_question_values(store, fixture_db):
    board = views.leaderboard_from_db(store, fixture_db.protocol.protocol_id, "em")
    df = by_method(board.frame)
    agg = bootstrap_ci([1.0, 1.0, 0.0, 0.0], n_resamples=views.N_RESAMPLES)  # naive_rag hotpotqa, by position
    assert (df.loc["naive_rag", "hotpotqa_lo"], df.loc["naive_rag", "hotpotqa_hi"]) == (agg.lo, agg.hi)
    assert (df.loc["search_r1", "popqa_lo"], df.loc["search_r1", "popqa_hi"]) == (1.0, 1.0)
    for key in board.score_keys:
        for m in df.index:
            assert df.loc[m, f"{key}_lo"] <= df.loc[m, key] <= df.loc[m, f"{key}_hi"]
    assert (
        bootstrap_ci([1.0, 0.0, 0.0, 0.0], n_resamples=views.N_RESAMPLES).hi
        == df.loc["naive_rag", "musique_hi"]
    )


def test_macro_aggregate_weights_datasets_equally():
    a, b = np.array([1.0, 1.0, 1.0, 1.0]), np.array([0.0, 0.0])
    agg = views.macro_aggregate([a, b], n_resamples=200)
    assert agg.mean == 0.5  # not the pooled 4/6
    assert agg.n == 6
    # every pooled value is weighted so that the pooled mean equals the macro mean
    pooled = np.concatenate([a * 6 / (2 * 4), b * 6 / (2 * 2)])
    assert pooled.mean() == pytest.approx(0.5)
    assert agg.lo <= 0.5 <= agg.hi
    assert math.isnan(views.macro_aggregate([a, np.array([])]).mean)


def test_row_missing_a_dataset_has_no_average():
    values = pd.DataFrame(
        {
            "method": ["a", "a", "b"],
            "model": ["m", "m", "m"],
            "label": ["", "", ""],
            "protocol_id": ["p", "p", "p"],
            "protocol_name": ["x", "x", "x"],
            "run_id": ["r1", "r1", "r2"],
            "dataset": ["hotpotqa", "musique", "hotpotqa"],
            "sample_id": ["1", "2", "1"],
            "metric": ["em", "em", "em"],
            "value": [1.0, 0.0, 1.0],
        }
    )
    board = views.build_leaderboard(values, protocol_id="p", protocol_name="x", metric="em", n_resamples=50)
    df = board.frame.set_index("method")
    assert df.loc["a", "avg_multihop"] == 0.5
    assert math.isnan(df.loc["b", "avg_multihop"])
    assert math.isnan(df.loc["b", "musique"])


def test_model_and_method_filters(store, fixture_db):
    values = queries.latest_values(store, fixture_db.protocol.protocol_id, ["em"])
    board = views.build_leaderboard(
        values,
        protocol_id=fixture_db.protocol.protocol_id,
        protocol_name="mini",
        metric="em",
        methods=["direct"],
        n_resamples=50,
    )
    assert list(board.frame["model"]) == [MODEL, OTHER_MODEL]
    qwen = views.build_leaderboard(
        values,
        protocol_id=fixture_db.protocol.protocol_id,
        protocol_name="mini",
        metric="em",
        models=[OTHER_MODEL],
        n_resamples=50,
    )
    assert list(qwen.frame["method"]) == ["direct"] and qwen.datasets == ["popqa"]
    assert [g.key for g, _ in qwen.averages] == ["avg_singlehop"]


def test_columns_follow_the_schema(store, fixture_db):
    board = views.leaderboard_from_db(store, fixture_db.protocol.protocol_id, "em")
    shown = board.display_frame(ci="text")
    assert list(shown.columns[:3]) == ["method", "label", "model"]
    assert list(shown.columns) == [c.key for c in board.columns(ci="text")]
    assert by_method(shown).loc["search_r1", "popqa_ci"] == "[100.0, 100.0]"
    bounds = board.display_frame(ci="bounds")
    assert "popqa_lo" in bounds and "popqa_ci" not in bounds
    assert {c.key for c in LEADERBOARD_COLUMNS if c.filter == "multiselect"} == {"method", "model"}


def test_choose_protocol(store, fixture_db):
    with pytest.raises(ConfigError, match="2 protocols.*never mixed") as e:
        views.choose_protocol(store, None)
    assert fixture_db.other_protocol.protocol_id in str(e.value)
    assert views.choose_protocol(store, fixture_db.protocol.protocol_id) == fixture_db.protocol.protocol_id
    with pytest.raises(ConfigError, match="several ids"):
        views.choose_protocol(store, "mini")
    with pytest.raises(ConfigError, match="no protocol 'nope'"):
        views.choose_protocol(store, "nope")


def test_reported_vs_reproduced(store, fixture_db):
    rep = queries.reported(store)
    boards = views.reported_boards(store, fixture_db.protocol.protocol_id, rep)
    assert set(boards) == {"em"}
    t = views.build_reported(rep, boards).set_index(["method", "dataset"])
    assert t.loc[("naive_rag", "hotpotqa"), "measured"] == 0.5
    assert t.loc[("naive_rag", "hotpotqa"), "diff"] == pytest.approx(0.1)
    assert t.loc[("naive_rag", "avg_multihop"), "measured"] == 0.375
    assert t.loc[("naive_rag", "avg_multihop"), "coverage"] == "hotpotqa, musique (2 of 4)"
    assert math.isnan(t.loc[("search_r1", "hotpotqa"), "measured"])  # paper model Qwen2.5-7B: not measured
    any_model = views.build_reported(rep, boards, match_model=False).set_index(["method", "dataset"])
    assert any_model.loc[("search_r1", "hotpotqa"), "measured"] == 0.75
    assert any_model.loc[("search_r1", "hotpotqa"), "measured_model"] == MODEL


def test_cost_and_pareto(store, fixture_db):
    pid = fixture_db.protocol.protocol_id
    t = views.build_cost(
        queries.latest_values(store, pid, ["em"]), queries.latest_costs(store, pid), metric="em", dataset=None
    )
    assert t[t["model"] == OTHER_MODEL]["accuracy"].isna().all()  # popqa only: no all-datasets accuracy
    assert t[t["model"] == OTHER_MODEL]["pareto_tokens"].tolist() == [""]
    t = by_method(t)
    assert t.loc["direct", "accuracy"] == 0.25
    assert list(t["retrievals"]) == [0.0, 1.0, 1.0]
    assert (
        t.loc["direct", "tokens"] == 55
        and t.loc["naive_rag", "tokens"] == 406
        and t.loc["search_r1", "tokens"] == 535
    )
    assert t["pareto_retrievals"].to_dict() == {"direct": "yes", "naive_rag": "", "search_r1": "yes"}
    assert t["pareto_tokens"].to_dict() == {"direct": "yes", "naive_rag": "yes", "search_r1": "yes"}
    # the packaged model on the in-process backend costs $0 (harness.cost): only the best is optimal
    assert list(t["usd"]) == [0.0, 0.0, 0.0]
    assert t["pareto_usd"].to_dict() == {"direct": "", "naive_rag": "", "search_r1": "yes"}
    one = views.build_cost(
        queries.latest_values(store, pid, ["em"]),
        queries.latest_costs(store, pid),
        metric="em",
        dataset="musique",
    )
    one = by_method(one)
    assert one.loc["search_r1", "accuracy"] == 0.5 and one.loc["search_r1", "n"] == 4


def test_pareto_front_handles_ties_and_nan():
    acc = np.array([0.5, 0.5, 0.7, math.nan, 0.2])
    cost = np.array([1.0, 1.0, 3.0, 0.0, 2.0])
    assert views.pareto_front(acc, cost) == [True, True, True, False, False]


def test_disagreements_between_two_methods(store, fixture_db):
    a, b = fixture_db.run_ids["direct"], fixture_db.run_ids["naive_rag"]
    qa = queries.run_questions(store, a, "hotpotqa")
    qb = queries.run_questions(store, b, "hotpotqa")
    va = queries.metric_values_of_run(store, a, "hotpotqa", "em")
    vb = queries.metric_values_of_run(store, b, "hotpotqa", "em")
    all_q = views.question_table(qa, va, vb, qb)
    assert list(all_q["sample_id"]) == ["hotpotqa-0", "hotpotqa-1", "hotpotqa-2", "hotpotqa-3"]
    dis = views.question_table(qa, va, vb, qb, only_disagreements=True)
    assert list(dis["sample_id"]) == ["hotpotqa-1"]
    assert (dis.loc[0, "a"], dis.loc[0, "b"]) == (0.0, 1.0)
    f1 = views.question_table(
        qa,
        queries.metric_values_of_run(store, a, "hotpotqa", "f1"),
        queries.metric_values_of_run(store, b, "hotpotqa", "f1"),
        qb,
        only_disagreements=True,
    )
    assert list(f1["sample_id"]) == ["hotpotqa-1"]


def test_sample_view_marks_gold_passages_and_reads_packaged_text(store, fixture_db):
    corpus = packaged_corpus_for(queries.protocol_json(store, fixture_db.protocol.protocol_id))
    assert corpus is not None
    s = views.sample_view(store, fixture_db.run_ids["naive_rag"], "hotpotqa", "hotpotqa-0", lookup(corpus))
    assert s.prediction == "Paris" and s.metrics["em"] == 1.0
    assert s.gold_ids == ["closed-000100", "closed-000101"]
    retrieve = s.turns[0]
    assert retrieve.kind == "retrieve" and retrieve.query == "hotpotqa question 0: what is thing 0?"
    assert [p.gold for p in retrieve.passages] == [True, False, True]
    assert [p.score for p in retrieve.passages] == [9.5, 8.0, 7.25]
    first = corpus.get("closed-000100")
    assert retrieve.passages[0].text is not None and retrieve.passages[0].text in first
    assert s.judgements.empty
    judged = views.sample_view(store, fixture_db.run_ids["direct"], "hotpotqa", "hotpotqa-1")
    assert judged.metrics[JUDGE_METRIC] == 1.0 and judged.metrics["em"] == 0.0
    assert judged.judgements[["judge_model", "verdict", "score", "rationale"]].values.tolist() == [
        ["judge-test", "correct", 1.0, "Lovelace names Ada Lovelace."]
    ]
    no_text = views.sample_view(store, fixture_db.run_ids["naive_rag"], "hotpotqa", "hotpotqa-0")
    assert no_text.turns[0].passages[0].title is None
    with pytest.raises(ConfigError, match="no sample"):
        views.sample_view(store, fixture_db.run_ids["naive_rag"], "hotpotqa", "nope")


def test_other_corpus_has_no_packaged_text(fixture_db):
    proto = fixture_db.protocol.with_(corpus={"id": "wiki18", "content_hash": "x" * 64, "n_passages": 3})
    assert packaged_corpus_for(proto.model_dump_json()) is None


def test_schema_orders():
    assert order_datasets(["zeta", "musique", "nq", "hotpotqa"]) == ["nq", "hotpotqa", "musique", "zeta"]
    assert order_metrics(["retrieval_recall@3", "judge@m:1", "f1", "em", "cover_em"]) == [
        "em", "f1", "cover_em", "judge@m:1", "retrieval_recall@3",
    ]  # fmt: skip
    assert [g.key for g, _ in averages_for(["popqa"])] == ["avg_singlehop"]
