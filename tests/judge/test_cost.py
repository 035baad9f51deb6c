"""Cost accounting on hand-made rows: exact USD per question, run and correct answer; unknown
prices and token counts give NULL (never 0); prices.json overrides presets; the run summary shows it."""

from __future__ import annotations

import json
import math

import pytest

from harness.errors import DataError
from harness.judge.core import Judge, JudgeItem
from harness.judge.prompts import get_prompt
from harness.judge.transport import JudgeReply
from harness.results.cost import (
    PRESET_MODELS,
    cost_summary,
    format_usd,
    load_prices,
    run_costs,
    sync_prices,
)
from harness.results.summary import summary
from tests.judge.helpers import ScriptedTransport, make_run, new_store

RIGHT = [("Capital of France?", ["Paris"], "Paris"), ("Gold symbol?", ["Au"], "Au")]
WRONG = [("Red planet?", ["Mars"], "Venus")]


def _null(x) -> bool:
    return x is None or (isinstance(x, float) and math.isnan(x))


def _api_run(store):
    return make_run(
        store,
        RIGHT + WRONG,
        run_id="api",
        method="search_r1",
        model="gpt-4o-mini",
        backend="openai",
        tokens=[(1000, 200), (2000, 100), (500, 0)],
        retrievals=[0, 1, 2],
        latency=1.5,
    )


def test_hosted_model_costs_are_exact(tmp_path):
    store = new_store(tmp_path)
    run = _api_run(store)
    df = cost_summary(store, [run])
    r = df.iloc[0]
    # gpt-4o-mini: $0.15 / $0.60 per 1M input / output tokens
    per_sample = [(1000 * 0.15 + 200 * 0.60) / 1e6, (2000 * 0.15 + 100 * 0.60) / 1e6, 500 * 0.15 / 1e6]
    assert (r["method"], r["dataset"], r["n"], r["n_correct_em"]) == ("search_r1", "toyqa", 3, 2)
    assert r["cost_usd"] == pytest.approx(sum(per_sample), rel=1e-12)
    assert r["cost_usd_per_q"] == pytest.approx(sum(per_sample) / 3, rel=1e-12)
    assert r["usd_per_correct"] == pytest.approx(sum(per_sample) / 2, rel=1e-12)
    assert (r["retrievals_per_q"], r["prompt_tokens"], r["completion_tokens"]) == (1.0, 3500, 300)
    assert r["n_unpriced"] == 0 and _null(r["gpu_seconds"])  # no GPU rate for the openai backend
    per_q = store.query("SELECT sample_id, cost_usd FROM sample_costs ORDER BY sample_id")
    assert per_q["cost_usd"].tolist() == pytest.approx(per_sample, rel=1e-12)
    rc = run_costs(store, [run]).iloc[0]
    assert (rc["run_id"], rc["n"], rc["usd_per_correct"]) == ("api", 3, pytest.approx(sum(per_sample) / 2))


def test_local_models_cost_their_gpu_time_where_a_rate_is_set(tmp_path):
    store = new_store(tmp_path)
    run = make_run(store, WRONG * 2, run_id="local", latency=2.0, tokens=[(100, 10), (100, 10)])
    r = cost_summary(store, [run]).iloc[0]
    assert (r["cost_usd"], r["cost_usd_per_q"], r["n_unpriced"]) == (0.0, 0.0, 0)
    assert _null(r["usd_per_correct"])  # nothing correct: undefined
    (tmp_path / "prices.json").write_text(
        json.dumps({"backends": {"transformers": {"gpu_hourly_usd": 3.6, "source": "test"}}})
    )
    r = cost_summary(store, [run]).iloc[0]
    assert r["cost_usd"] == pytest.approx(2 * 2.0 * 3.6 / 3600) and r["gpu_seconds"] == 4.0


def test_unknown_prices_and_token_counts_are_null_not_zero(tmp_path):
    store = new_store(tmp_path)
    a = make_run(store, RIGHT, run_id="unpriced", method="m1", model="my-model", backend="openai")
    b = make_run(store, RIGHT, run_id="no-usage", method="m2", model="gpt-4o", backend="openai",
                 tokens=[(100, 10), (-1, -1)])  # fmt: skip
    df = cost_summary(store, [a, b]).set_index("method")
    assert df.loc["m1", "n_unpriced"] == 2 and df.loc["m1", "unpriced_models"] == "my-model"
    assert df.loc["m2", "n_unpriced"] == 1
    for m in ("m1", "m2"):
        assert all(_null(df.loc[m, c]) for c in ("cost_usd", "cost_usd_per_q", "usd_per_correct"))
    # a price in prices.json makes it known
    (tmp_path / "prices.json").write_text(
        json.dumps({"models": {"my-model": {"input_usd_per_1m": 1.0, "output_usd_per_1m": 2.0}}})
    )
    r = cost_summary(store, [a]).iloc[0]
    assert r["cost_usd"] == pytest.approx(2 * (10 * 1.0 + 2 * 2.0) / 1e6)


def test_prices_file_overrides_presets_and_is_validated(tmp_path):
    path = tmp_path / "prices.json"
    path.write_text(json.dumps({"models": {"gpt-4o-mini": {"input_usd_per_1m": 1, "output_usd_per_1m": 4}}}))
    t = load_prices(path)
    assert t.token_cost("gpt-4o-mini", 1_000_000, 500_000) == 3.0
    assert t.token_cost("gpt-4o", 1_000_000, 0) == PRESET_MODELS["gpt-4o"].input_usd_per_1m
    assert t.token_cost("unknown", 1, 1) is None and t.token_cost("gpt-4o", -1, 5) is None
    path.write_text(json.dumps({"models": {"x": {"input_usd_per_1m": -1, "output_usd_per_1m": 0}}}))
    with pytest.raises(DataError, match=r"prices.json: models.x.input_usd_per_1m: Input should be greater"):
        load_prices(path)
    path.write_text('{"models": {')
    with pytest.raises(DataError, match=r"prices.json:1: not valid JSON"):
        load_prices(path)
    assert load_prices(tmp_path / "absent.json").models == PRESET_MODELS


def test_the_run_summary_has_cost_columns(tmp_path):
    store = new_store(tmp_path)
    run = _api_run(store)
    df = summary(store, [run])
    row = df.iloc[0]
    assert row["cost_usd_per_q"] == pytest.approx((270 + 360 + 75) / 1e6 / 3)
    assert row["usd_per_correct"] == pytest.approx((270 + 360 + 75) / 1e6 / 2)
    assert [format_usd(x) for x in (None, float("nan"), 0.0, 0.5, 2.35e-4)] == [
        "-",
        "-",
        "$0",
        "$0.5000",
        "$0.00023",
    ]


def test_judge_costs_view(tmp_path):
    store = new_store(tmp_path)
    t = ScriptedTransport({}, default=JudgeReply("Yes", "ok", 50, 12), model="gpt-4o-mini")
    Judge(t, get_prompt("default"), store).judge([JudgeItem(f"q{i}", ("a",), "p") for i in range(4)])
    sync_prices(store)
    r = store.query("SELECT * FROM judge_costs").iloc[0]
    assert (r["judge_model"], r["n"], r["prompt_tokens"], r["completion_tokens"]) == (
        "gpt-4o-mini",
        4,
        200,
        48,
    )
    assert r["cost_usd"] == pytest.approx((200 * 0.15 + 48 * 0.60) / 1e6)
