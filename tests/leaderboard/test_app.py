"""The Streamlit app on the fixture database (Streamlit's AppTest: no server, no browser)."""

from __future__ import annotations

import json
from pathlib import Path

import pandas as pd
import pytest

pytest.importorskip("streamlit", reason="the leaderboard app needs the ui extra (streamlit)")

from streamlit.testing.v1 import AppTest  # noqa: E402

import leaderboards  # noqa: E402
from tests.leaderboard import fixtures  # noqa: E402
from tests.leaderboard.fixtures import CORRECTION, MODEL, OTHER_MODEL, PROMPT, TOP5_NAIVE_RAG_EM  # noqa: E402

APP = Path(leaderboards.__file__).resolve().parent / "app.py"


@pytest.fixture
def app(fixture_db, monkeypatch) -> AppTest:
    monkeypatch.setenv(leaderboards.DB_ENV, str(fixture_db.path))
    at = AppTest.from_file(str(APP), default_timeout=60)
    at.run()
    assert not at.exception, [e.value for e in at.exception]
    at.selectbox(key="protocol").set_value(fixture_db.protocol.protocol_id).run()
    return at


def _table(at: AppTest, i: int = 0):
    assert not at.exception, [e.value for e in at.exception]
    return at.dataframe[i].value


def _main_model(at: AppTest):
    df = _table(at)
    return df[df["model"] == MODEL].set_index("method")


def test_leaderboard_page(app):
    assert app.title[0].value == "Leaderboard"
    rows = _table(app)
    assert list(zip(rows["method"], rows["model"], strict=True)) == [
        ("search_r1", MODEL), ("naive_rag", MODEL), ("direct", MODEL), ("direct", OTHER_MODEL),
    ]  # fmt: skip
    df = _main_model(app)
    # score and 95% Wilson interval in one cell, in %; ties with the best marked
    assert df.loc["search_r1", "avg_all_text"] == "75.0 [47.3, 90.2]"  # stratified Agresti-Coull
    assert df.loc["naive_rag", "hotpotqa_text"] == "50.0 [15.0, 85.0] ≈"
    assert df.loc["search_r1", "popqa_text"] == "100.0 [51.0, 100.0]"
    assert df.loc["search_r1", "type"] == "untrained policy" and df.loc["direct", "type"] == "prompt baseline"
    details = _table(app, 1)  # answered, format, retriever, top-k, ... under the scores
    d = details[details["model"] == MODEL].set_index("method")
    assert d.loc["search_r1", "valid_format"] == 75.0 and d.loc["search_r1", "answered"] == 100.0
    assert d.loc["direct", "top_k"] == "—" and d.loc["direct", "retriever"] == "—"  # no retrieval
    assert d.loc["naive_rag", "top_k"] == "3"
    settings = pd.concat([t.value for t in app.table])  # the protocol as a table, not raw JSON
    assert settings.loc["top_k", "value"] == "3" and "retriever.kind" in settings.index
    assert "status" not in details.columns  # partial runs are left out, so no status column
    cfg = json.loads(app.dataframe[0].proto.columns)
    assert cfg["method"]["pinned"] is True  # stays visible when the table scrolls sideways
    assert cfg["avg_multihop_text"]["label"] == "avg multi-hop · n=8"  # n; coverage under the table
    assert any(
        "avg multi-hop**: unweighted mean over hotpotqa, musique (2 of 4)" in c.value for c in app.caption
    )


def test_protocol_selector_changes_rows(app, fixture_db):
    app.selectbox(key="protocol").set_value(fixture_db.other_protocol.protocol_id).run()
    df = _table(app)
    assert list(df["method"]) == ["naive_rag"]
    assert df.loc[0, "hotpotqa_text"].startswith(f"{100 * TOP5_NAIVE_RAG_EM:.1f} [")
    assert "musique_text" not in df.columns
    options = app.selectbox(key="protocol").options
    assert all(o.startswith("mini · ") for o in options) and len(options) == 2


def test_protocol_from_a_shared_link(fixture_db, monkeypatch):
    monkeypatch.setenv(leaderboards.DB_ENV, str(fixture_db.path))
    at = AppTest.from_file(str(APP), default_timeout=60)
    at.query_params["protocol"] = fixture_db.other_protocol.protocol_id
    at.run()
    assert list(_table(at)["method"]) == ["naive_rag"]
    at.selectbox(key="protocol").set_value(fixture_db.protocol.protocol_id).run()
    assert at.query_params["protocol"] == fixture_db.protocol.protocol_id
    assert len(_table(at)) == 4


def test_permalink_restores_metric_sort_and_filters(fixture_db, monkeypatch):
    monkeypatch.setenv(leaderboards.DB_ENV, str(fixture_db.path))
    at = AppTest.from_file(str(APP), default_timeout=60)
    at.query_params.update(
        {
            "protocol": fixture_db.protocol.protocol_id,
            "metric": "f1",
            "sort": "popqa",
            "lb_method": "direct,naive_rag",
        }
    )
    at.run()
    assert at.selectbox(key="metric").value == "f1" and at.selectbox(key="sort").value == "popqa"
    assert at.multiselect(key="lb_method").value == ["direct", "naive_rag"]
    assert list(zip(_table(at)["method"], _table(at)["model"], strict=True)) == [
        ("naive_rag", MODEL), ("direct", MODEL), ("direct", OTHER_MODEL),
    ]  # fmt: skip
    at.selectbox(key="metric").set_value("em").run()  # the URL follows the widgets
    assert "metric" not in at.query_params  # the default is left out
    assert at.query_params["sort"] == "popqa"


def test_metric_selector_changes_values(app):
    app.toggle(key="show_ci").set_value(False).run()  # the scores alone (with their tie marks)
    assert _main_model(app).loc["direct", "hotpotqa_text"].split(" ")[0] == "25.0"
    app.selectbox(key="metric").set_value("f1").run()
    assert _main_model(app).loc["direct", "hotpotqa_text"].split(" ")[0] == f"{100 * (1 + 2 / 3) / 4:.1f}"
    assert "F1" in app.caption[0].value
    app.toggle(key="show_ci").set_value(True).run()  # F1 is not 0/1: bootstrap, named under the table
    assert any(c.value.startswith("95% intervals: percentile bootstrap") for c in app.caption)


def test_judge_metric_in_the_selector(app):
    labels = [app.selectbox(key="metric").format_func(o) for o in app.selectbox(key="metric").options]
    assert labels[:4] == ["EM", "F1", "cover-EM", "cover-EM (tokens)"]
    assert "judge (judge-test:abc123)" in labels
    app.selectbox(key="metric").set_value("judge@judge-test:abc123").run()
    assert _table(app)[["method", "hotpotqa_text"]].values.tolist() == [["direct", "50.0 [15.0, 85.0]"]]


def test_filters_sort_and_interval_toggle(app):
    app.multiselect(key="lb_method").set_value(["direct", "naive_rag"]).run()
    assert list(_table(app)["method"]) == ["naive_rag", "direct", "direct"]
    app.multiselect(key="lb_model").set_value([OTHER_MODEL]).run()
    assert list(zip(_table(app)["method"], _table(app)["model"], strict=True)) == [("direct", OTHER_MODEL)]
    app.multiselect(key="lb_model").set_value([]).run()
    app.selectbox(key="sort").set_value("popqa").run()  # naive_rag 0.75, then direct 0.5 and 0.25
    assert list(_table(app)["model"]) == [MODEL, MODEL, OTHER_MODEL]

    def ties(df) -> set:
        cols = [c for c in df.columns if c.endswith("_text")]
        return {(m, mo, c) for m, mo, *vals in df[["method", "model", *cols]].itertuples(index=False)
                for c, v in zip(cols, vals, strict=True) if str(v).endswith("≈")}  # fmt: skip

    with_ci = ties(_table(app))
    assert with_ci  # direct's scores are tied with naive_rag's on four questions
    app.toggle(key="show_ci").set_value(False).run()
    # no intervals, but the same tie marks (they used to vanish with the intervals while bold stayed)
    assert not any("[" in str(v) for v in _table(app)["hotpotqa_text"])
    assert ties(_table(app)) == with_ci
    assert "≈: not separated from the best" in " ".join(c.value for c in app.caption)
    assert app.query_params["show_ci"] == "0"


def test_ties_caption_and_holm_toggle(app):
    """The caption says where ≈ comes from (the paired test, 0.05 per pair, uncorrected); the Holm
    toggle says Holm instead and is in the link."""
    caption = " ".join(c.value for c in app.caption)
    assert "paired test (exact McNemar)" in caption and "not corrected for multiple comparisons" in caption
    app.toggle(key="holm").set_value(True).run()
    caption = " ".join(c.value for c in app.caption)
    assert "with Holm's correction across the column's rows" in caption
    assert app.query_params["holm"] == "1"
    assert _main_model(app).loc["naive_rag", "hotpotqa_text"] == "50.0 [15.0, 85.0] ≈"  # still tied


def test_reported_page(app):
    app.switch_page("app_pages/reported.py").run()
    assert app.title[0].value == "Reported vs reproduced"
    app.selectbox(key="paper").set_value("search_r1").run()
    assert not app.exception, [e.value for e in app.exception]
    html = "".join(m.value for m in app.markdown)
    # one row per paper row: ours with its interval and n; no difference (the paper's corpus and
    # retriever are not ours); the paper's averages hold the paper's numbers alone
    assert (
        '<td class="name">naive_rag</td><td class="name">smollm2-135m-instruct</td>'
        '<td class="name">smollm2-135m-instruct</td>'
        '<td><span class="paper">40.0</span><br><span class="ours">50.0 <span class="ci">[15.0, 85.0]</span></span><br>'
        '<span class="meta">n=4 · Δ —</span></td>'
        '<td><span class="paper">35.0</span></td><td><span class="paper">30.0</span></td>'
    ) in html
    assert "not comparable: corpus, retriever, prompt" in html
    assert (
        '<span class="paper">43.3</span><br><span class="ours">75.0 <span class="ci">[30.1, 95.4]</span></span>'
        in html
    )
    assert (
        "model Qwen2.5-7B vs smollm2-135m-instruct" in html and "training trained (ppo) vs untrained" in html
    )
    assert len(app.dataframe) == 1  # the long table (in the expander); the pivots are plain HTML tables
    app.selectbox(key="paper").set_value("tiresrag_r1").run()
    html = "".join(m.value for m in app.markdown)
    assert (
        '<span class="paper">2.9</span><br><span class="ours">1 <span class="ci">[0.51, 1]</span></span>'
        in html
    )  # a count


def test_reported_page_says_why_nothing_matches(app):
    app.switch_page("app_pages/reported.py").run()
    app.selectbox(key="paper").set_value("r_search").run()
    [w] = [w.value for w in app.warning]
    assert w.startswith("The paper used ") and "no run here used those models" in w


def test_cost_page(app):
    app.switch_page("app_pages/cost.py").run()
    assert app.title[0].value == "Cost and efficiency"
    # retrievals, tokens, prompt vs completion; no $ plot: every cost is $0 (in-process backend);
    # then score against seconds per question, one panel per dataset (popqa, hotpotqa, musique)
    charts = app.get("vega_lite_chart")
    assert len(charts) == 3 + 3
    titles = [json.loads(c.proto.spec)["title"] for c in charts[3:]]
    assert titles == ["PopQA · n = 4", "HotpotQA · n = 4", "MuSiQue · n = 4"]
    assert any("no $ plot" in c.value for c in app.caption)
    assert any("cover fewer datasets" in w.value for w in app.warning)  # the popqa-only row
    t = _main_model(app)
    assert t.loc["search_r1", "accuracy_text"].startswith("75.0 [")
    assert len(app.dataframe) == 3  # accuracy and time; tokens; money and Pareto (each fits the frame)
    money = _table(app, 2)
    money = money[money["model"] == t.loc["naive_rag", "model"]].set_index("method")
    assert money.loc["search_r1", "pareto"] == "retrievals, tokens, usd"
    assert money.loc["direct", "pareto"] == "retrievals, tokens"
    more = _table(app, 1)  # retrievals, LLM calls and tokens
    assert (
        more[more["model"] == t.loc["naive_rag", "model"]]
        .set_index("method")
        .loc["naive_rag", "tokens_per_correct"]
        == 812.0
    )
    assert money.loc["naive_rag", "usd"] == "free (local)"  # in-process: not $0.000000
    app.selectbox(key="cost_dataset").set_value("musique").run()
    assert _main_model(app).loc["search_r1", "accuracy_text"].startswith("50.0 [")
    assert app.query_params["cost_dataset"] == "musique"


def test_trajectory_explorer_and_disagreements(app, fixture_db):
    app.switch_page("app_pages/trajectories.py").run()
    assert app.title[0].value == "Trajectory explorer"
    app.selectbox(key="traj_a").set_value("naive_rag · smollm2-135m-instruct").run()
    app.selectbox(key="traj_dataset").set_value("hotpotqa").run()
    assert app.selectbox(key="q").options[0] == "✓ 0. hotpotqa question 0: what is thing 0?"
    text = " ".join(m.value for m in app.markdown)
    assert "search** `hotpotqa question 0: what is thing 0?` · 3 passages" in text
    assert "**✓ correct** (EM 1.00)" in text
    gold = [s.value for s in app.success]
    assert len(gold) == 2 and all("GOLD · `closed-0001" in g for g in gold)
    app.selectbox(key="traj_b").set_value("direct · smollm2-135m-instruct").run()
    assert len(app.selectbox(key="q").options) == 4
    app.toggle(key="traj_disagree").set_value(True).run()
    assert not app.exception, [e.value for e in app.exception]
    [only] = app.selectbox(key="q").options
    assert only.startswith(
        "✓ 1. hotpotqa question 1"
    )  # naive_rag's badge and only.endswith("[1.00 vs 0.00]")
    assert "1 where EM differs" in " ".join(c.value for c in app.caption)
    assert any(s.value == "direct · smollm2-135m-instruct" for s in app.subheader)
    assert app.query_params["q"] == "hotpotqa-1"


def test_trajectory_shows_prompt_correction_and_empty_search(app):
    app.switch_page("app_pages/trajectories.py").run()
    app.selectbox(key="traj_a").set_value("search_r1 · smollm2-135m-instruct").run()
    app.selectbox(key="traj_dataset").set_value("hotpotqa").run()
    app.selectbox(key="q").set_value("hotpotqa-0").run()
    assert not app.exception, [e.value for e in app.exception]
    codes = [c.value for c in app.code]
    assert any(c.startswith(PROMPT) for c in codes)  # in the collapsed per-call prompt expanders
    labels = [e.label for e in app.expander]
    assert labels[0] == "prompt of turn 0 · generation · stored"
    assert all(" · continued context" in x for x in labels[1:]) and len(labels) > 1
    assert [w.value for w in app.warning] == [CORRECTION.strip()]
    assert "gold passages never retrieved** (1)" in " ".join(m.value for m in app.markdown)
    app.selectbox(key="q").set_value("hotpotqa-3").run()
    assert "· **0 passages** ·" in " ".join(m.value for m in app.markdown)


def test_trajectory_permalink_opens_the_question(fixture_db, monkeypatch):
    monkeypatch.setenv(leaderboards.DB_ENV, str(fixture_db.path))
    at = AppTest.from_file(str(APP), default_timeout=60)
    at.query_params.update({"protocol": fixture_db.protocol.protocol_id})
    at.run()
    at.switch_page("app_pages/trajectories.py")
    at.query_params.update(
        {"traj_a": "direct · smollm2-135m-instruct", "traj_dataset": "hotpotqa", "q": "hotpotqa-1"}
    )
    at.run()
    assert at.selectbox(key="q").value == "hotpotqa-1"
    assert "**answer:** `Lovelace`" in " ".join(m.value for m in at.markdown)


def test_trajectory_shows_judge_verdict(app):
    app.switch_page("app_pages/trajectories.py").run()
    app.selectbox(key="traj_a").set_value("direct · smollm2-135m-instruct").run()
    app.selectbox(key="traj_dataset").set_value("hotpotqa").run()
    app.selectbox(key="q").set_value("hotpotqa-1").run()
    assert not app.exception, [e.value for e in app.exception]
    assert "**answer:** `Lovelace`" in " ".join(m.value for m in app.markdown)
    verdicts = [d.value for d in app.dataframe if "rationale" in d.value.columns]
    assert verdicts and verdicts[0]["rationale"].tolist() == ["Lovelace names Ada Lovelace."]


def test_training_page(app, fixture_db):
    app.switch_page("app_pages/training.py").run()
    assert not app.exception, [e.value for e in app.exception]
    assert app.title[0].value == "Training runs"
    assert app.selectbox(key="train_run").value == fixture_db.train_run_id
    assert len(app.get("vega_lite_chart")) == 4  # rewards, searches, length, kl/clip
    assert [s.value for s in app.subheader[:3]] == [
        "Reward components",
        "Searches per rollout",
        "Response length",
    ]
    assert list(_table(app).index) == [1, 2, 3]  # 1-based, as `harness train` prints them


def test_glossary_page(app):
    app.switch_page("app_pages/glossary.py").run()
    assert app.title[0].value == "Metric glossary"
    assert not app.dataframe  # a static table: long definitions wrap instead of being cut
    g = app.table[0].value
    assert "FlashRAG acc" in g.loc["cover_em", "papers / toolkits"]
    assert g.loc["n_retrievals", "unit"] == "count" and g.loc["em", "unit"] == "%"


def test_no_icon_is_fetched(app):
    """The favicon is an emoji (an inline SVG in the browser), not a Material icon, which the browser
    would fetch from fonts.gstatic.com."""
    assert 'page_icon="📊"' in APP.read_text()


def test_missing_database(tmp_path, monkeypatch):
    monkeypatch.setenv(leaderboards.DB_ENV, str(tmp_path / "none.duckdb"))
    at = AppTest.from_file(str(APP), default_timeout=60).run()
    assert "No results database" in at.error[0].value


def test_training_page_shows_the_learning_run(tmp_path, monkeypatch):
    """SFT then RL from its checkpoint: the RL run opens with its sampled/ curves, held-out EM at
    its checkpoints, and the untrained / SFT / SFT+RL table (the SFT run linked by the checkpoint
    path); the SFT run shows its loss."""
    sft_run, rl_run = fixtures.build_training(tmp_path / "learning.duckdb")
    monkeypatch.setenv(leaderboards.DB_ENV, str(tmp_path / "learning.duckdb"))
    at = AppTest.from_file(str(APP), default_timeout=60)
    at.run()
    at.switch_page("app_pages/training.py").run()
    assert not at.exception, [e.value for e in at.exception]
    assert at.selectbox(key="train_run").value == rl_run  # the newest
    assert at.multiselect(key=f"train_heldout_runs_{rl_run}").value == [sft_run, rl_run]
    subheaders = [s.value for s in at.subheader]
    assert subheaders[:3] == ["Reward components", "Searches per rollout", "Response length"]
    assert "Held-out EM at checkpoints" in subheaders and "SFT loss" not in subheaders
    table = next(d.value for d in at.dataframe if "checkpoint" in d.value.columns)
    h = fixtures.HELDOUT
    assert table["checkpoint"].tolist() == ["untrained", "SFT", "SFT", "SFT+RL"]
    assert table["step"].tolist() == [0, fixtures.SFT_STEPS, 0, fixtures.RL_STEPS]
    assert table["EM [95%]"].tolist() == [
        "0.250 [0.050, 0.450]",
        "0.400 [0.200, 0.600]",
        "0.400 [0.200, 0.600]",
        "0.550 [0.350, 0.750]",
    ]
    for row, name in zip(table.itertuples(), ["untrained", "sft", "sft", "sft+rl"], strict=True):
        assert (row.n, row.answered, row.top_answer_share, row.answer_entropy_bits) == (
            h[name]["n"],
            h[name]["answered"],
            h[name]["top_answer_share"],
            h[name]["answer_entropy_bits"],
        )
    # the curves read sampled/ (0, 0.1, 0.2), not the kept groups' 0.5; the all-values table is 1-based
    charts = at.get("vega_lite_chart")
    assert len(charts) == 5  # reward, searches, length, other (kl), held-out EM
    values = next(d.value for d in at.dataframe if "sampled/reward/total_mean" in d.value.columns)
    assert list(values.index) == [1, 2, 3] and "heldout/em" not in values.columns

    at.selectbox(key="train_run").set_value(sft_run).run()
    assert not at.exception, [e.value for e in at.exception]
    subheaders = [s.value for s in at.subheader]
    assert subheaders[0] == "SFT loss" and "Reward components" not in subheaders
    assert at.multiselect(key=f"train_heldout_runs_{sft_run}").value == [sft_run, rl_run]
    # steps counted without the held-out rows (the SFT run's checkpoint sits at step 2: 2 steps)
    assert any("sft recipe cpu-sft-rl · 2 steps" in o for o in at.selectbox(key="train_run").options)

    at.selectbox(key="train_run").set_value(fixtures.PPO_RUN).run()  # a PPO run: its critic
    assert not at.exception, [e.value for e in at.exception]
    assert "Critic (PPO)" in [s.value for s in at.subheader]
    assert at.multiselect(key=f"train_heldout_runs_{fixtures.PPO_RUN}").value == [fixtures.PPO_RUN]
    assert len(at.get("vega_lite_chart")) == 3  # reward, value loss, values vs returns (no kl)
