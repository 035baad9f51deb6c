"""The views the app and ``harness export`` share: exact numbers from the fixture database."""

from __future__ import annotations

import json
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


def test_binary_metrics_get_wilson_intervals(store, fixture_db):
    board = views.leaderboard_from_db(store, fixture_db.protocol.protocol_id, "em")
    assert board.binary
    df = by_method(board.frame)
    # 2 of 4 (naive_rag hotpotqa): Wilson [0.150, 0.850]; 0 of 4 (direct musique): [0, 0.490], not [0, 0]
    assert (df.loc["naive_rag", "hotpotqa_lo"], df.loc["naive_rag", "hotpotqa_hi"]) == pytest.approx(
        (0.15003, 0.84997), abs=1e-5
    )
    assert df.loc["direct", "musique_lo"] == 0.0
    assert df.loc["direct", "musique_hi"] == pytest.approx(0.48990, abs=1e-5)
    assert df.loc["search_r1", "popqa_lo"] == pytest.approx(0.51010, abs=1e-5)  # 4 of 4 is not [1, 1]
    for key in board.score_keys:
        for m in df.index:
            assert df.loc[m, f"{key}_lo"] <= df.loc[m, key] <= df.loc[m, f"{key}_hi"]


def test_wilson_for_zero_of_three():
    agg = views.dataset_aggregate(np.zeros(3), binary=True)
    assert (agg.mean, agg.lo) == (0.0, 0.0) and agg.hi == pytest.approx(0.561497, abs=1e-6)  # z^2 / (3 + z^2)
    boot = views.dataset_aggregate(np.zeros(3))
    assert (boot.lo, boot.hi) == (0.0, 0.0)  # what the percentile bootstrap says


def test_non_binary_metrics_keep_the_bootstrap(store, fixture_db):
    board = views.leaderboard_from_db(store, fixture_db.protocol.protocol_id, "f1")
    assert not board.binary
    df = by_method(board.frame)
    agg = bootstrap_ci([1.0, 2 / 3, 0.0, 0.0], n_resamples=views.N_RESAMPLES)  # direct hotpotqa, by position
    assert (df.loc["direct", "hotpotqa_lo"], df.loc["direct", "hotpotqa_hi"]) == (agg.lo, agg.hi)


def test_stratified_binary_average_interval():
    a, b = np.array([1.0, 1.0, 0.0, 0.0]), np.array([0.0, 0.0, 0.0, 0.0])
    agg = views.macro_aggregate([a, b], binary=True)
    assert agg.mean == 0.25 and agg.n == 8
    # one success and one failure added per dataset (2 of each over D = 2): 3/6 and 1/6;
    # var = (0.5 * 0.5 / 6 + (1/6) * (5/6) / 6) / 4, centre (0.5 + 1/6) / 2
    half = views.Z95 * math.sqrt((0.25 / 6 + (5 / 36) / 6) / 4)
    assert (agg.lo, agg.hi) == pytest.approx((1 / 3 - half, 1 / 3 + half))


@pytest.mark.parametrize("d", [2, 4, 7])
@pytest.mark.parametrize("n", [1, 4, 50])
def test_a_binary_average_interval_contains_its_score(d, n):
    """With two successes and two failures added to every dataset, four datasets of 4 of 4 gave
    100 with [60, 90]; spread over the datasets, every interval holds its own score."""
    rng = np.random.default_rng(d * 100 + n)
    cases = [[np.ones(n)] * d, [np.zeros(n)] * d, [np.ones(n)] * (d - 1) + [np.zeros(n)]]
    cases += [[(rng.random(n) < rng.random()).astype(float) for _ in range(d)] for _ in range(50)]
    for per_dataset in cases:
        agg = views.macro_aggregate(per_dataset, binary=True)
        assert agg.lo <= agg.mean <= agg.hi, (agg, [v.sum() for v in per_dataset])


def test_best_and_ties(store, fixture_db):
    board = views.leaderboard_from_db(store, fixture_db.protocol.protocol_id, "em")
    best, ties = board.best_and_ties("hotpotqa")
    methods = list(board.frame["method"])
    assert [methods[i] for i in best] == ["search_r1"]
    # search_r1 3/4 against naive_rag 2/4 and direct 1/4: at most 2 discordant pairs, McNemar p >= 0.5
    assert sorted(methods[i] for i in ties) == ["direct", "naive_rag"]


def test_headers_carry_coverage_and_n(store, fixture_db):
    board = views.leaderboard_from_db(store, fixture_db.protocol.protocol_id, "em")
    assert board.header("avg_multihop") == "avg multi-hop · 2/4 sets · n=8"
    assert board.header("avg_singlehop") == "avg single-hop · 1/3 sets · n=4"
    assert board.header("popqa") == "PopQA · n=4"
    assert board.header("avg_all") == "avg all · 3/3 sets · n=12"


def test_row_columns(store, fixture_db):
    df = by_method(views.leaderboard_from_db(store, fixture_db.protocol.protocol_id, "em").frame)
    assert df["type"].to_dict() == {
        "search_r1": "untrained policy", "naive_rag": "prompt baseline", "direct": "prompt baseline",
    }  # fmt: skip
    assert set(df["size"]) == {"135M"}
    assert df.loc["naive_rag", "retriever"] == "bm25s" and df.loc["naive_rag", "top_k"] == 3
    assert df.loc["direct", "retriever"] == "—" and pd.isna(df.loc["direct", "top_k"])
    assert df.loc["search_r1", "paper"] == "https://arxiv.org/abs/2503.09516"
    # search_r1's question 0 of each dataset starts with an invalid action: 9 of 12 valid
    assert df.loc["search_r1", "valid_format"] == 0.75 and df.loc["search_r1", "answered"] == 1.0
    assert set(df["status"]) == {"complete"}


def test_partial_runs_are_left_out_or_marked(tmp_path):
    from tests.leaderboard import fixtures

    db = fixtures.build(tmp_path / "partial.duckdb", partial=True)
    store = queries.open_results(db.path)
    pid = db.protocol.protocol_id
    board = views.leaderboard_from_db(store, pid, "em")
    assert "ircot" not in set(board.frame["method"])
    with_partial = views.leaderboard_from_db(store, pid, "em", include_partial=True)
    ircot = with_partial.frame.set_index("method").loc["ircot"]
    assert ircot["status"] == "partial: ircot-fixture-killed interrupted"
    assert ircot["n"] == 2 and ircot["hotpotqa"] == 1.0  # the failed question is not scored ...
    assert ircot["errors"] == 1 and ircot["answered"] == pytest.approx(2 / 3)  # ... but counted
    costs = queries.latest_costs(store, pid)
    assert "hotpotqa-2" not in set(costs[costs["run_id"] == "ircot-fixture-killed"]["sample_id"])
    assert pd.isna(ircot["avg_all"]) and pd.isna(ircot["avg_multihop"])  # never an average over fewer sets


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
    assert list(shown.columns[:6]) == ["method", "type", "label", "model", "size", "avg_all_text"]
    assert list(shown.columns) == [c.key for c in board.columns(ci="text")]
    assert by_method(shown).loc["naive_rag", "hotpotqa_text"] == "50.0 [15.0, 85.0]"
    assert by_method(shown).loc["search_r1", "popqa_text"] == "100.0 [51.0, 100.0]"
    bounds = board.display_frame(ci="bounds")
    assert "popqa_lo" in bounds and "popqa_text" not in bounds
    assert {c.key for c in LEADERBOARD_COLUMNS if c.filter == "multiselect"} == {"method", "model", "type"}


def test_choose_protocol(store, fixture_db):
    with pytest.raises(ConfigError, match="2 protocols.*never mixed") as e:
        views.choose_protocol(store, None)
    assert fixture_db.other_protocol.protocol_id in str(e.value)
    assert views.choose_protocol(store, fixture_db.protocol.protocol_id) == fixture_db.protocol.protocol_id
    with pytest.raises(ConfigError, match="no protocol 'nope'"):
        views.choose_protocol(store, "nope")


def test_a_protocol_name_several_ids_share_is_the_newest_or_a_list_with_dates(tmp_path, caplog):
    """Issue 61: after the README's main job the results held two `mini` ids and the README's own
    `--protocol mini` was refused. The name now stands for the id run last (said on stderr); only
    when the newest runs are equally new are the ids listed, with their dates."""
    import duckdb

    from tests.leaderboard import fixtures

    db = fixtures.build(tmp_path / "r.duckdb")
    store = queries.open_results(db.path)
    ids = queries.protocols(store)
    mini = ids[ids["protocol_name"] == "mini"]
    assert len(mini) == 2 and mini.iloc[0]["last"] > mini.iloc[1]["last"]  # newest first
    with caplog.at_level("WARNING"):
        assert views.choose_protocol(store, "mini") == mini.iloc[0]["protocol_id"]
    assert (
        f"protocol name 'mini' has 2 ids in {db.path}; using the one run last, {mini.iloc[0]['protocol_id']}"
        in caplog.text
    )
    with duckdb.connect(str(db.path)) as con:
        con.execute("UPDATE runs SET started_at = TIMESTAMP '2026-11-28 12:00:00'")
    with pytest.raises(ConfigError) as e:
        views.choose_protocol(store, "mini")
    a, b = sorted(mini["protocol_id"])
    listed = str(e.value).split("give the id: ", 1)[1]
    assert sorted(listed.split("; ")) == [
        f"{a} (last run 2026-11-28 12:00)",
        f"{b} (last run 2026-11-28 12:00)",
    ]


def _fixture_setting(fixture_db) -> tuple[dict, dict]:
    """The fixture's protocol (as JSON) and recorded settings that put the fixture's paper rows
    under it: the same corpus, retriever, top-k, prompt and training state as our runs."""
    proto = json.loads(fixture_db.protocol.model_dump_json())
    same = {"corpus": "closed", "retriever": "bm25s", "top_k": 3}
    recorded = {
        ("search_r1", "Table 2", "naive_rag", MODEL): {**same, "prompt": "naive_rag"},
        ("search_r1", "Table 2", "search_r1", "Qwen2.5-7B"): {**same, "training": "untrained"},
        ("tiresrag_r1", "Table 5", "search_r1", MODEL): {
            **same,
            "prompt": "search_r1",
            "training": "untrained",
        },
    }
    return proto, recorded


def test_reported_vs_reproduced(store, fixture_db):
    rep = queries.reported(store)
    boards = views.reported_boards(store, fixture_db.protocol.protocol_id, rep)
    assert set(boards) == {"em", "n_retrievals"}
    proto, recorded = _fixture_setting(fixture_db)
    t = views.build_reported(rep, boards, protocol=proto, recorded=recorded)
    t = t.set_index(["method", "dataset", "metric"])
    row = t.loc[("naive_rag", "hotpotqa", "em")]
    assert (row["measured"], row["unit"]) == (0.5, "fraction")
    assert row["diff"] == pytest.approx(0.1)
    # averages over other dataset sets: our number shown, no difference, the coverage named
    avg = t.loc[("naive_rag", "avg", "em")]
    assert avg["measured"] == 0.5 and math.isnan(avg["diff"])
    assert "coverage 7 vs 3 sets" in avg["differs"]
    multi = t.loc[("naive_rag", "avg_multihop", "em")]
    assert (
        multi["measured"] == 0.375 and math.isnan(multi["diff"]) and multi["coverage"] == "hotpotqa, musique"
    )
    # another model: our number shown, no difference, the model named
    other = t.loc[("search_r1", "hotpotqa", "em")]
    assert other["measured"] == 0.75 and math.isnan(other["diff"])
    assert other["differs"] == "model Qwen2.5-7B vs smollm2-135m-instruct"
    # a count stays a count: 2.9 retrievals per question against our 1.0
    count = t.loc[("search_r1", "hotpotqa", "n_retrievals")]
    assert (count["reported"], count["measured"], count["unit"]) == (2.9, 1.0, "count")
    assert count["diff"] == pytest.approx(-1.9)
    same = views.build_reported(rep, boards, match_model=True, protocol=proto, recorded=recorded)
    assert math.isnan(
        same.set_index(["method", "dataset", "metric"]).loc[("search_r1", "hotpotqa", "em"), "measured"]
    )
    # the registered settings (these rows are not in the package: each paper's recorded setting)
    plain = views.build_reported(rep, boards, protocol=proto).set_index(["method", "dataset", "metric"])
    row = plain.loc[("naive_rag", "hotpotqa", "em")]
    assert row["measured"] == 0.5 and math.isnan(row["diff"])
    assert row["differs"] == (
        "corpus wiki18 vs closed; retriever dense e5-base-v2 Flat vs bm25s; prompt not recorded"
    )
    count = plain.loc[("search_r1", "hotpotqa", "n_retrievals")]
    assert math.isnan(count["diff"]) and "top-k 5 vs 3" in count["differs"]
    assert "training trained (algorithm not recorded) vs untrained" in count["differs"]


def test_reported_pivots_keep_units():
    cols = ["paper", "setting", "method", "model", "dataset", "metric", "value", "source", "note"]
    rows = pd.DataFrame(
        [
            ("p", "T5", "m", "M", "hotpotqa", "n_retrievals", 2.9, "src", ""),
            ("p", "T5", "m", "M", "avg_multihop", "n_retrievals", 2.95, "src", ""),
            ("p", "T3", "m", "M", "hotpotqa", "em", 0.41, "src", ""),
            ("p", "T3", "m", "M", "avg", "em", 0.35, "src", ""),
        ],
        columns=cols,
    )
    table = views.build_reported(rows, {})
    pivots = {p.metric: p for p in views.reported_pivots(table)}
    counts = pivots["n_retrievals"].frame.iloc[0]
    assert (counts["hotpotqa"], counts["avg_multihop"]) == ("2.9", "2.95")
    assert pivots["n_retrievals"].datasets == ["hotpotqa", "avg_multihop"]
    assert pivots["em"].frame.iloc[0]["hotpotqa"] == "41.0" and pivots["em"].title == "T3 · EM (in %)"
    assert (
        views.no_comparison_reason(table, {}) == "No run under this protocol is of this paper's methods (m)."
    )
    assert views.no_comparison_reason(table, {"m": {"tiny"}}) == (
        "The paper used M; no run here used those models (ours: tiny), so no difference is computed."
    )


def test_reported_rows_come_from_the_package_on_a_fresh_db(tmp_path):
    from harness.results.store import Store
    from leaderboards.reported_sync import registered_reported, reported_frame

    Store(tmp_path / "fresh.duckdb")
    rows = reported_frame(queries.open_results(tmp_path / "fresh.duckdb"))
    assert len(rows) == sum(len(r) for r in registered_reported().values())
    t = rows[(rows["paper"] == "tiresrag_r1") & (rows["metric"] == "n_retrievals")]
    assert len(t) and (t["value"] > 1).any()  # counts stored raw, never scaled


def test_cost_and_pareto(store, fixture_db):
    pid = fixture_db.protocol.protocol_id
    t = views.build_cost(
        queries.latest_values(store, pid, ["em"]), queries.latest_costs(store, pid), metric="em", dataset=None
    )
    assert t[t["model"] == OTHER_MODEL]["accuracy"].isna().all()  # popqa only: no all-datasets accuracy
    assert t[t["model"] == OTHER_MODEL]["pareto_tokens"].tolist() == [""]
    assert t[t["model"] == OTHER_MODEL]["coverage"].tolist() == ["1 of 3 datasets (partial)"]
    t = by_method(t)
    assert t.loc["direct", "accuracy"] == 0.25
    assert list(t["retrievals"]) == [0.0, 1.0, 1.0]
    # search_r1: 535 tokens per question, plus 110 on the three questions with an invalid first action
    assert (
        t.loc["direct", "tokens"] == 55
        and t.loc["naive_rag", "tokens"] == 406
        and t.loc["search_r1", "tokens"] == 535 + 110 * 3 / 12
    )
    assert t.loc["search_r1", "prompt_tokens"] == 500 + 100 * 3 / 12
    assert t.loc["search_r1", "completion_tokens"] == 35 + 10 * 3 / 12
    assert t.loc["naive_rag", "tokens_per_correct"] == 406 * 12 / 6  # 6 of 12 right
    assert t.loc["direct", "answered"] == 1.0
    assert t.loc["direct", "accuracy_lo"] < 0.25 < t.loc["direct", "accuracy_hi"]
    assert t.loc["direct", "coverage"] == "3 of 3 datasets"
    assert views.all_costs_zero_or_unknown(t.reset_index())
    assert t["pareto_retrievals"].to_dict() == {"direct": "yes", "naive_rag": "", "search_r1": "yes"}
    assert t["pareto_tokens"].to_dict() == {"direct": "yes", "naive_rag": "yes", "search_r1": "yes"}
    # the packaged model on the in-process backend costs $0 (harness.results.cost): only the best is optimal
    assert list(t["usd"]) == [0.0, 0.0, 0.0] and list(t["usd_per_correct"]) == [0.0, 0.0, 0.0]
    assert t["pareto_usd"].to_dict() == {"direct": "", "naive_rag": "", "search_r1": "yes"}
    one = views.build_cost(
        queries.latest_values(store, pid, ["em"]),
        queries.latest_costs(store, pid),
        metric="em",
        dataset="musique",
    )
    one = by_method(one)
    assert one.loc["search_r1", "accuracy"] == 0.5 and one.loc["search_r1", "n"] == 4


def test_score_cost_points_one_per_dataset_and_row(store, fixture_db):
    pid = fixture_db.protocol.protocol_id
    values, costs = queries.latest_values(store, pid, ["em"]), queries.latest_costs(store, pid)
    pts = views.score_cost_points(values, costs, metric="em")
    assert list(pts.columns) == list(views.SCORE_COST_COLUMNS)
    # the protocol's dataset order; the second model has popqa only, so one point there and none elsewhere
    assert list(dict.fromkeys(pts["dataset"])) == ["popqa", "hotpotqa", "musique"]
    other = pts[pts["model"] == OTHER_MODEL]
    assert other[["dataset", "score", "tokens", "n"]].values.tolist() == [["popqa", 0.25, 55.0, 4]]
    main = pts[pts["model"] == MODEL].set_index(["dataset", "method"])
    assert len(main) == 9
    for method, em in EXPECTED_EM.items():
        for d in ("popqa", "hotpotqa", "musique"):
            assert main.loc[(d, method), "score"] == em[d]
            assert main.loc[(d, method), "seconds"] == 0.5  # every fixture question: 0.5 s
            assert main.loc[(d, method), "n"] == 4
    # tokens per question: direct 50 + 5, naive_rag 400 + 6, search_r1 200 + 20 + 300 + 15 and, on
    # the first question of each dataset, an invalid generation of 100 + 10
    assert main.xs("direct", level="method")["tokens"].tolist() == [55.0, 55.0, 55.0]
    assert main.xs("naive_rag", level="method")["tokens"].tolist() == [406.0, 406.0, 406.0]
    assert main.xs("search_r1", level="method")["tokens"].tolist() == [535 + 110 / 4] * 3
    # the same numbers as the cost table of one dataset
    one = by_method(views.build_cost(values, costs, metric="em", dataset="musique"))
    assert main.xs("musique")["tokens"].to_dict() == one["tokens"].to_dict()


def test_pareto_text_joins_the_fronts():
    t = pd.DataFrame(
        {
            "pareto_retrievals": ["yes", "", "yes"],
            "pareto_tokens": ["yes", "", ""],
            "pareto_usd": ["", "", "yes"],
        }
    )
    assert views.pareto_text(t) == ["retrievals, tokens", "", "retrievals, usd"]


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


def test_sample_view_shows_prompt_injected_correction_and_empty_search(store, fixture_db):
    from tests.leaderboard.fixtures import CORRECTION, PROMPT

    s = views.sample_view(store, fixture_db.run_ids["search_r1"], "hotpotqa", "hotpotqa-0")
    assert s.prompt is not None and s.prompt.startswith(PROMPT)
    assert [t.kind for t in s.turns] == ["generate", views.INJECTED, "generate", "retrieve", "generate"]
    assert s.turns[1].text == CORRECTION  # reconstructed from the response, exactly
    assert s.turns[3].text == "Doc 1: thing 0" and len(s.turns[3].passages) == 2
    assert [p.doc_id for p in s.never_retrieved] == ["closed-000101"]  # gold, never retrieved
    empty = views.sample_view(store, fixture_db.run_ids["search_r1"], "hotpotqa", "hotpotqa-3")
    assert [t.kind for t in empty.turns] == ["generate", "retrieve", "generate"]
    assert empty.turns[1].passages == [] and empty.turns[1].text == ""
    assert len(empty.never_retrieved) == 2


def test_injected_messages_from_the_response():
    turns = [("generate", "a"), ("generate", "b<search>q</search>"), ("retrieve", "DOC"), ("generate", "c")]
    resp = "aFIX\nb<search>q</search>\n<information>DOC</information>\nc"
    assert views.injected_messages(resp, turns) == {1: "FIX\n"}  # observation wrappers are not messages
    assert views.injected_messages("a" + "FIX", [("generate", "a")]) == {1: "FIX"}  # after the last turn
    assert views.injected_messages("zzz", [("generate", "a")]) == {}  # not locatable: nothing invented


def test_collapse_repeats():
    text, n = views.collapse_repeats("Let me think. " + "I will search again. " * 60 + "Done.")
    assert n == 1 and len(text) < 120
    assert "repeated" in text and text.startswith("Let me think.") and text.endswith("Done.")
    assert views.collapse_repeats("no loops here at all") == ("no loops here at all", 0)


def test_glossary_covers_every_metric():
    names = {g["name"] for g in views.glossary()}
    from harness.metrics.registry import METRICS

    assert set(METRICS.names()) <= names
    assert {"judge@<model>:<hash>", "n_retrievals", "answered", "valid format", "em_f1_mean"} <= names
    cover = next(g for g in views.glossary() if g["name"] == "cover_em")
    assert "FlashRAG acc" in cover["also_called"] and "subem" in cover["also_called"]


def test_find_metric_is_case_insensitive():
    from leaderboards.schema import find_metric

    known = ["em", "f1", "cover_em", JUDGE_METRIC]
    assert find_metric("EM", known) == "em"
    assert find_metric("Cover-EM", known) == "cover_em"
    assert find_metric("COVER_EM", known) == "cover_em"
    assert find_metric("nope", known) is None


def test_other_corpus_has_no_packaged_text(fixture_db):
    proto = fixture_db.protocol.with_(corpus={"id": "wiki18", "content_hash": "x" * 64, "n_passages": 3})
    assert packaged_corpus_for(proto.model_dump_json()) is None


def test_schema_orders():
    assert order_datasets(["zeta", "musique", "nq", "hotpotqa"]) == ["nq", "hotpotqa", "musique", "zeta"]
    assert order_metrics(["retrieval_recall@3", "judge@m:1", "f1", "em", "cover_em"]) == [
        "em", "f1", "cover_em", "judge@m:1", "retrieval_recall@3",
    ]  # fmt: skip
    assert [g.key for g, _ in averages_for(["popqa"])] == ["avg_singlehop"]


# -- training runs ---------------------------------------------------------------------------------
def _steps(rows: dict[int, dict[str, float]]) -> pd.DataFrame:
    """``train_steps`` rows (``step, metric, value``) from {step: {metric: value}}."""
    return pd.DataFrame(
        [(s, m, v) for s, ms in rows.items() for m, v in ms.items()], columns=["step", "metric", "value"]
    )


def _heldout(em: float, lo: float, hi: float, n: int, answered: float, top: float, bits: float) -> dict:
    return {
        "heldout/em": em,
        "heldout/em_lo": lo,
        "heldout/em_hi": hi,
        "heldout/f1": em + 0.01,
        "heldout/n": float(n),
        "heldout/answered": answered,
        "heldout/top_answer_share": top,
        "heldout/answer_entropy_bits": bits,
    }


SFT_STEPS = _steps(
    {
        0: {"sft/loss": 2.0, **_heldout(0.25, 0.05, 0.45, 5, 0.4, 0.4, 0.97)},  # untrained
        1: {"sft/loss": 1.0},
        2: _heldout(0.4, 0.2, 0.6, 20, 0.9, 0.1, 3.5),  # after 2 steps: the SFT checkpoint
    }
)
RL_STEPS = _steps(
    {
        0: {"sampled/reward/total_mean": 0.1, "reward/total_mean": 0.5, **_heldout(0.4, 0.2, 0.6, 20, 0.9, 0.1, 3.5)},
        1: {"sampled/reward/total_mean": 0.3, "reward/total_mean": 0.5, **_heldout(0.45, 0.25, 0.65, 20, 1, 0.1, 3.7)},
        2: {"sampled/reward/total_mean": 0.2, "reward/total_mean": 0.5},
        3: _heldout(0.55, 0.35, 0.75, 20, 1.0, 0.05, 4.0),
    }
)  # fmt: skip


def test_heldout_table_names_untrained_sft_and_sft_rl():
    t = views.heldout_table([("sft-1", "sft recipe r", SFT_STEPS), ("rl-1", "recipe r", RL_STEPS)])
    assert t["checkpoint"].tolist() == ["untrained", "SFT", "SFT", "SFT+RL step 1", "SFT+RL"]
    assert t["run"].tolist() == ["sft recipe r"] * 2 + ["recipe r"] * 3
    assert t["step"].tolist() == [0, 2, 0, 1, 3]  # as stored: optimizer steps behind the checkpoint
    assert t["EM [95%]"].tolist() == [
        "0.250 [0.050, 0.450]",
        "0.400 [0.200, 0.600]",
        "0.400 [0.200, 0.600]",
        "0.450 [0.250, 0.650]",
        "0.550 [0.350, 0.750]",
    ]
    first = t.iloc[0]
    assert (first["em"], first["em_lo"], first["em_hi"], first["n"]) == (0.25, 0.05, 0.45, 5)
    assert (first["answered"], first["top_answer_share"], first["answer_entropy_bits"]) == (0.4, 0.4, 0.97)
    assert t["n"].tolist() == [5, 20, 20, 20, 20]
    assert t["f1"].tolist() == pytest.approx([0.26, 0.41, 0.41, 0.46, 0.56])


def test_heldout_table_of_an_rl_run_alone_says_start_and_rl():
    t = views.heldout_table([("rl-1", "recipe r", RL_STEPS)])
    assert t["checkpoint"].tolist() == ["start", "RL step 1", "RL"]
    assert views.heldout_table([("x", "recipe r", _steps({0: {"kl": 0.0}}))]).empty


def test_heldout_table_shows_the_baseline_row_and_the_paired_difference():
    base = {
        f"heldout/baseline/{k.removeprefix('heldout/')}": v
        for k, v in _heldout(0.19, 0.12, 0.28, 20, 1, 0.6, 0.97).items()
    }
    sft = pd.concat([SFT_STEPS, _steps({0: base})])
    paired = {"heldout/em_diff": 0.15, "heldout/em_diff_lo": 0.05, "heldout/em_diff_hi": 0.25}
    rl = pd.concat([RL_STEPS, _steps({3: paired})])
    t = views.heldout_table([("sft-1", "sft recipe r", sft), ("rl-1", "recipe r", rl)])
    assert t["checkpoint"].tolist() == [
        "template majority",
        "untrained",
        "SFT",
        "SFT",
        "SFT+RL step 1",
        "SFT+RL",
    ]
    assert t["EM [95%]"].tolist()[0] == "0.190 [0.120, 0.280]" and t["n"].tolist()[0] == 20
    assert t["EM vs start [95% paired]"].tolist() == ["", "", "", "", "", "+0.150 [+0.050, +0.250]"]
    assert views.heldout_points(sft)["step"].tolist() == [0, 2]  # the baseline is no checkpoint


def test_heldout_points_and_curves_keep_checkpoints_apart_from_steps():
    pts = views.heldout_points(SFT_STEPS)
    assert pts["step"].tolist() == [0, 2]
    assert pts[["em", "em_lo", "em_hi"]].values.tolist() == [[0.25, 0.05, 0.45], [0.4, 0.2, 0.6]]
    wide = views.train_curves(SFT_STEPS)
    assert list(wide.index) == [1, 2] and list(wide.columns) == ["sft/loss"]  # no heldout/*, 1-based


def test_rollout_curves_read_sampled_names_first():
    wide = views.train_curves(RL_STEPS)
    assert views.reward_names(wide.columns) == ["reward/total_mean"]
    curves = views.rollout_curves(wide, ["reward/total_mean", "searches_mean"])
    assert list(curves.columns) == ["reward/total_mean"]
    assert curves["reward/total_mean"].tolist() == [0.1, 0.3, 0.2]  # sampled/, not the kept 0.5
    old = views.train_curves(
        _steps({0: {"reward/total_mean": 0.5, "reward/em_mean": 0.25, "reward/total_std": 0.1}})
    )
    assert views.reward_names(old.columns) == ["reward/total_mean", "reward/em_mean"]
    assert views.rollout_curves(old, ["reward/total_mean"])["reward/total_mean"].tolist() == [0.5]


def _runs(*rows: tuple[str, str, str, str]) -> pd.DataFrame:
    return pd.DataFrame(
        [(r, "search_r1", model, label, cmd) for r, model, label, cmd in rows],
        columns=["run_id", "method", "model", "label", "command"],
    )


def test_an_rl_run_is_linked_to_the_sft_run_whose_checkpoint_it_trained():
    runs = _runs(  # newest first, as queries.train_runs orders them
        ("rl-2", "runs/other/final", "recipe r", "harness train --model runs/other/final"),
        ("rl-1", "./runs/sft/final/", "recipe r", "harness train --model ./runs/sft/final/"),
        ("sft-2", "m", "sft recipe r", "harness sft --method search_r1 --out=runs/elsewhere"),
        ("sft-1", "m", "sft recipe r", "harness sft --method search_r1 --out runs/sft"),
        ("sft-0", "m", "sft recipe r", "harness sft --method search_r1 --recipe r"),
        ("rl-0", "runs/search_r1-r-sft/final", "recipe r", "harness train"),
    )
    assert views.linked_sft_run(runs, "rl-1") == "sft-1"
    assert views.linked_sft_run(runs, "rl-0") == "sft-0"  # harness sft's default --out
    assert views.linked_sft_run(runs, "rl-2") is None
    assert views.linked_sft_run(runs, "sft-1") is None
    assert views.sft_checkpoint("pytest 'unclosed", "search_r1", "sft recipe r") is None
    assert views.sft_checkpoint("harness train --out x", "search_r1", "recipe r") is None


def test_an_rl_method_run_without_a_training_record_is_an_untrained_policy():
    # the type comes from the run's record (harness.results.training_state), never from its label or
    # the model's name: showcase runs of search_r1 with the reader model carry no adapter or
    # checkpoint hash, so they are untrained policies whatever they are called
    from harness.results.training_state import training_of, type_of

    assert type_of(training_of("search_r1", {})) == "untrained policy"
    assert type_of(training_of("search_r1", {"python": "3.11"})) == "untrained policy"
    trained = training_of("search_r1", {"checkpoint_sha256": "ab", "trained_by": "grpo"})
    assert trained == "trained (grpo)" and type_of(trained) == "trained"
    assert type_of(training_of("direct", {"checkpoint_sha256": "ab"})) == "prompt baseline"
    assert type_of(training_of("no_such_method", {})) == "?"
