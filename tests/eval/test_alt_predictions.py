"""Alternative predictions (``Trajectory.alt_predictions``): each named alternative is scored with
the runner's answer metrics under ``metric[name]``, stored per sample beside the prediction's own
metrics (which do not change), its text kept in the sample's meta_json; the leaderboard and the
regression gate carry the extra names like any other metric."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from harness.data.benches import Selection
from harness.errors import ConfigError
from harness.eval.protocol import preset
from harness.eval.runner import RunConfig, Runner, score_trajectory
from harness.eval.scoring import RunScoring, alt_metric_name, score_alternatives
from harness.method import Method, MethodSpec
from harness.protocol import Protocol
from harness.results import queries, regress
from harness.rollout.base import RunContext
from harness.types import QAExample, Trajectory
from leaderboards import views


def test_alternatives_are_scored_under_bracketed_names():
    got = score_alternatives({"first_answer": "the Lyon", "draft": ""}, ["Paris", "Lyon"], ("em", "f1"))
    assert got == {"em[first_answer]": 1.0, "f1[first_answer]": 1.0, "em[draft]": 0.0, "f1[draft]": 0.0}
    assert score_alternatives({}, ["Paris"], ("em",)) == {}
    assert alt_metric_name("cover_em_tokens", "first_answer") == "cover_em_tokens[first_answer]"


def test_f1_of_an_alternative_is_the_metric_of_its_own_text():
    got = score_alternatives({"first_answer": "Paris France"}, ["Paris"], ("f1", "cover_em"))
    assert got == {"f1[first_answer]": pytest.approx(2 / 3), "cover_em[first_answer]": 1.0}


@pytest.mark.parametrize("name", ["First", "first-answer", "", "em[x]", "1st"])
def test_bad_alternative_names_are_refused(name):
    with pytest.raises(ConfigError, match="alternative prediction name"):
        score_alternatives({name: "Paris"}, ["Paris"], ("em",))


def test_a_missing_alternative_must_be_written_as_empty():
    with pytest.raises(ConfigError, match='write "" for no answer'):
        score_alternatives({"first_answer": None}, ["Paris"], ("em",))  # type: ignore[dict-item]


def test_the_runner_scores_the_prediction_unchanged_and_each_alternative():
    t = Trajectory("1", "toy", "q", ["Paris"], prediction="Paris", alt_predictions={"first_answer": "Lyon"})
    mini = preset("mini")
    answer_metrics = RunScoring.of(mini).answer
    assert answer_metrics == ("em", "f1", "f1_squad", "cover_em", "cover_em_tokens")
    m = score_trajectory(t, (), mini)
    assert {k: m[k] for k in answer_metrics} == {
        "em": 1.0,
        "f1": 1.0,
        "f1_squad": 1.0,
        "cover_em": 1.0,
        "cover_em_tokens": 1.0,
    }
    assert {k: v for k, v in m.items() if k not in answer_metrics} == {
        "em[first_answer]": 0.0,
        "f1[first_answer]": 0.0,
        "f1_squad[first_answer]": 0.0,
        "cover_em[first_answer]": 0.0,
        "cover_em_tokens[first_answer]": 0.0,
    }
    plain = Trajectory("1", "toy", "q", ["Paris"], prediction="Paris")
    assert sorted(score_trajectory(plain, (), mini)) == sorted(answer_metrics)


class TwoAnswers(Method):
    """Answers the first gold alias; its alternative ``first_answer`` is wrong."""

    name = "two_answers_test"
    description = "test method with an alternative prediction"
    source = "tests"
    uses_retrieval = False

    def spec(self, protocol: Protocol) -> MethodSpec:
        return MethodSpec(name=self.name)

    def solve(self, examples: list[QAExample], ctx: RunContext) -> list[Trajectory]:
        out = []
        for e in examples:
            t = Trajectory(e.id, e.dataset, e.question, list(e.answers), prediction=e.answers[0])
            t.extraction_status = "ok"
            t.alt_predictions["first_answer"] = "zzz wrong"
            out.append(t)
        return out


def test_run_stores_both_and_leaderboard_and_regress_carry_them(monkeypatch, tmp_path: Path):
    monkeypatch.setattr(Runner, "backend", lambda self: None)  # the method never generates
    proto = preset("mini").with_(selection=Selection(mode="first", n=1))
    runner = Runner(RunConfig(methods=[], bench="mini", protocol=proto, db=tmp_path / "r.duckdb"))
    (run,) = runner.run([TwoAnswers()])
    store = runner.store
    samples = store.query(
        "SELECT dataset, sample_id, prediction, meta_json FROM samples WHERE run_id = $r", {"r": run.run_id}
    )
    assert len(samples) == run.n_total > 1
    metas = [json.loads(m) for m in samples["meta_json"]]
    assert {m["alt_predictions"]["first_answer"] for m in metas} == {"zzz wrong"}
    em = queries.metric_values(store, [run.run_id], ["em", "em[first_answer]", "f1[first_answer]"])
    per = em.groupby("metric")["value"].agg(["count", "mean"])
    assert per.to_dict("index") == {
        "em": {"count": run.n_total, "mean": 1.0},
        "em[first_answer]": {"count": run.n_total, "mean": 0.0},
        "f1[first_answer]": {"count": run.n_total, "mean": 0.0},
    }
    pid = proto.protocol_id
    assert views.resolve_metric(store, pid, "EM[first_answer]") == "em[first_answer]"
    board = views.leaderboard_from_db(store, pid, "em[first_answer]")
    assert board.metric == "em[first_answer]" and len(board.frame) == 1
    assert [board.frame[d].iloc[0] for d in board.datasets] == [0.0] * len(board.datasets)
    values = queries.latest_values(store, pid)
    base = regress.baseline_from_values(values)
    assert {e.metric for e in base.entries} >= {"em", "em[first_answer]", "cover_em_tokens[first_answer]"}
    verdicts = {c.metric: c.verdict for c in regress.compare(base, values)}
    assert verdicts["em[first_answer]"] == verdicts["em"] == "ok"
