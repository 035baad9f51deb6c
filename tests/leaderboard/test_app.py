"""The Streamlit app on the fixture database (Streamlit's AppTest: no server, no browser)."""

from __future__ import annotations

from pathlib import Path

import pytest

pytest.importorskip("streamlit", reason="the leaderboard app needs the ui extra (streamlit)")

from streamlit.testing.v1 import AppTest  # noqa: E402

import leaderboards  # noqa: E402
from tests.leaderboard.fixtures import EXPECTED_EM, MODEL, OTHER_MODEL, TOP5_NAIVE_RAG_EM  # noqa: E402

APP = Path(leaderboards.__file__).resolve().parent / "app.py"


@pytest.fixture
def app(fixture_db, monkeypatch) -> AppTest:
    monkeypatch.setenv(leaderboards.DB_ENV, str(fixture_db.path))
    at = AppTest.from_file(str(APP), default_timeout=60)
    at.run()
    assert not at.exception, [e.value for e in at.exception]
    at.selectbox(key="protocol").set_value(fixture_db.protocol.protocol_id).run()
    return at


def _table(at: AppTest):
    assert not at.exception, [e.value for e in at.exception]
    return at.dataframe[0].value


def _main_model(at: AppTest):
    df = _table(at)
    return df[df["model"] == MODEL].set_index("method")


def test_leaderboard_page(app):
    assert app.title[0].value == "Leaderboard"
    rows = _table(app)
    assert sorted(zip(rows["method"], rows["model"], strict=True)) == [
        ("direct", OTHER_MODEL), ("direct", MODEL), ("naive_rag", MODEL), ("search_r1", MODEL),
    ]  # fmt: skip
    df = _main_model(app)
    for method, expected in EXPECTED_EM.items():
        for key, value in expected.items():
            assert df.loc[method, key] == pytest.approx(100 * value), (method, key)  # shown in %
    assert df.loc["search_r1", "label"] == "untrained policy"
    assert df.loc["search_r1", "popqa_ci"] == "[100.0, 100.0]"


def test_protocol_selector_changes_rows(app, fixture_db):
    app.selectbox(key="protocol").set_value(fixture_db.other_protocol.protocol_id).run()
    df = _table(app)
    assert list(df["method"]) == ["naive_rag"]
    assert df.loc[0, "hotpotqa"] == 100 * TOP5_NAIVE_RAG_EM
    assert "musique" not in df.columns
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


def test_metric_selector_changes_values(app):
    assert _main_model(app).loc["direct", "hotpotqa"] == 25.0
    app.selectbox(key="metric").set_value("f1").run()
    assert _main_model(app).loc["direct", "hotpotqa"] == pytest.approx(100 * (1 + 2 / 3) / 4)
    assert "F1" in app.caption[0].value


def test_judge_metric_in_the_selector(app):
    labels = [app.selectbox(key="metric").format_func(o) for o in app.selectbox(key="metric").options]
    assert labels[:4] == ["EM", "F1", "cover-EM", "cover-EM (tokens)"]
    assert "judge (judge-test:abc123)" in labels
    app.selectbox(key="metric").set_value("judge@judge-test:abc123").run()
    assert _table(app)[["method", "hotpotqa"]].values.tolist() == [["direct", 50.0]]


def test_filters_sort_and_interval_toggle(app):
    app.multiselect(key="lb_method").set_value(["direct", "naive_rag"]).run()
    assert list(_table(app)["method"]) == ["naive_rag", "direct", "direct"]
    app.multiselect(key="lb_model").set_value([OTHER_MODEL]).run()
    assert list(zip(_table(app)["method"], _table(app)["model"], strict=True)) == [("direct", OTHER_MODEL)]
    app.multiselect(key="lb_model").set_value([]).run()
    app.selectbox(key="sort_by").set_value("popqa").run()  # naive_rag 0.75, then direct 0.5 and 0.25
    assert list(_table(app)["model"]) == [MODEL, MODEL, OTHER_MODEL]
    app.toggle(key="show_ci").set_value(False).run()
    assert not any(c.endswith("_ci") for c in _table(app).columns)


def test_reported_page(app):
    app.switch_page("app_pages/reported.py").run()
    assert app.title[0].value == "Reported vs reproduced"
    t = _table(app).set_index(["method", "dataset"])
    assert t.loc[("naive_rag", "hotpotqa"), "measured"] == 50.0
    assert t.loc[("naive_rag", "hotpotqa"), "diff"] == pytest.approx(10.0)  # percentage points
    app.toggle(key="only_measured").set_value(True).run()
    assert len(_table(app)) == 2
    app.toggle(key="match_model").set_value(False).run()
    assert len(_table(app)) == 3


def test_cost_page(app):
    app.switch_page("app_pages/cost.py").run()
    assert app.title[0].value == "Cost and efficiency"
    assert len(app.get("vega_lite_chart")) == 3  # retrievals, tokens, dollars (prices known)
    assert _main_model(app).loc["search_r1", "accuracy"] == 75.0
    app.selectbox(key="cost_dataset").set_value("musique").run()
    assert _main_model(app).loc["search_r1", "accuracy"] == 50.0


def test_trajectory_explorer_and_disagreements(app, fixture_db):
    app.switch_page("app_pages/trajectories.py").run()
    assert app.title[0].value == "Trajectory explorer"
    app.selectbox(key="traj_a").set_value("naive_rag · smollm2-135m-instruct").run()
    app.selectbox(key="traj_dataset").set_value("hotpotqa").run()
    assert app.selectbox(key="traj_question").options[0].startswith("0. hotpotqa question 0")
    text = " ".join(m.value for m in app.markdown)
    assert "search** `hotpotqa question 0: what is thing 0?`" in text
    gold = [s.value for s in app.success]
    assert len(gold) == 2 and all("GOLD · `closed-0001" in g for g in gold)
    app.selectbox(key="traj_b").set_value("direct · smollm2-135m-instruct").run()
    assert len(app.selectbox(key="traj_question").options) == 4
    app.toggle(key="traj_disagree").set_value(True).run()
    assert not app.exception, [e.value for e in app.exception]
    [only] = app.selectbox(key="traj_question").options
    assert only.startswith("1. hotpotqa question 1") and only.endswith("[1.00 vs 0.00]")
    assert "1 where EM differs" in " ".join(c.value for c in app.caption)
    assert any(s.value == "direct · smollm2-135m-instruct" for s in app.subheader)


def test_trajectory_shows_judge_verdict(app):
    app.switch_page("app_pages/trajectories.py").run()
    app.selectbox(key="traj_a").set_value("direct · smollm2-135m-instruct").run()
    app.selectbox(key="traj_dataset").set_value("hotpotqa").run()
    app.selectbox(key="traj_question").set_value("hotpotqa-1").run()
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


def test_missing_database(tmp_path, monkeypatch):
    monkeypatch.setenv(leaderboards.DB_ENV, str(tmp_path / "none.duckdb"))
    at = AppTest.from_file(str(APP), default_timeout=60).run()
    assert "No results database" in at.error[0].value
