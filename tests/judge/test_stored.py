"""Judging stored runs: scores land in sample_metrics only when scored; agreement counts are exact;
the CLI fails on a dead judge URL before judging or storing anything."""

from __future__ import annotations

import pytest

from harness.cli import main
from harness.errors import ConfigError
from harness.judge.core import Judge
from harness.judge.prompts import get_prompt
from harness.judge.stored import judge_runs, resolve_runs
from harness.judge.transport import JudgeReply
from harness.llm.server import free_port
from tests.judge.helpers import ScriptedTransport, make_run, new_store

QA = [
    ("Who was the 35th US president?", ["John F. Kennedy"], "JFK"),  # EM 0, cover 0; judge yes
    ("Capital of France?", ["Paris"], "Paris"),  # EM 1; judge yes
    ("Red planet?", ["Mars"], "Mars, or maybe Venus"),  # EM 0, cover 1; judge no
    ("Largest ocean?", ["Pacific"], "Atlantic"),  # EM 0; judge no
    ("Gold symbol?", ["Au"], "Au"),  # EM 1; the judge's reply cannot be parsed
    ("Boiling point?", ["100"], ""),  # no prediction: 0 without asking
]
SCRIPT = {
    "Predicted answer: JFK\n": JudgeReply('{"judgement": "correct"}', "ok", 10, 5),
    "Predicted answer: Paris\n": JudgeReply('{"judgement": "correct"}', "ok", 10, 5),
    "Predicted answer: Mars, or maybe Venus\n": JudgeReply('{"judgement": "incorrect"}', "ok", 10, 5),
    "Predicted answer: Atlantic\n": JudgeReply("No", "ok", 10, 1),
    "Predicted answer: Au\n": JudgeReply("hmm", "ok", 10, 1),
}


def test_judge_runs_writes_scored_metrics_and_exact_agreement(tmp_path):
    store = new_store(tmp_path)
    run = make_run(store, QA)
    judge = Judge(ScriptedTransport(dict(SCRIPT)), get_prompt("default"), store)
    report = judge_runs(store, [run], judge)
    metric = "judge@scripted-judge:b5fb6b85"
    rows = store.query(
        "SELECT sample_id, value FROM sample_metrics WHERE metric = ? ORDER BY sample_id", [metric]
    )
    assert dict(zip(rows["sample_id"], rows["value"], strict=True)) == {
        "q0": 1.0,
        "q1": 1.0,
        "q2": 0.0,
        "q3": 0.0,
        "q5": 0.0,
    }  # fmt: skip   (q4's reply is unparseable: no metric row)
    assert report.metric_rows == 5 and report.status_counts["unparseable"] == 1
    assert report.scores.to_dict("records") == [
        {"method": "direct", "dataset": "toyqa", "n": 6, "scored": 5, "judge": 0.4}
    ]
    a = report.agreement.set_index("metric")
    assert a.loc["em"][["judge_correct_metric_1", "judge_correct_metric_0", "judge_incorrect_metric_1",
                        "judge_incorrect_metric_0", "not_scored", "n"]].tolist() == [1, 1, 0, 3, 1, 6]  # fmt: skip
    assert a.loc["cover_em"][["judge_correct_metric_1", "judge_correct_metric_0", "judge_incorrect_metric_1",
                              "judge_incorrect_metric_0", "not_scored"]].tolist() == [1, 1, 1, 2, 1]  # fmt: skip
    assert a.loc["em"]["agreement"] == pytest.approx(4 / 5)


def test_trajectory_judges_see_the_response(tmp_path):
    store = new_store(tmp_path)
    run = make_run(store, QA[:1])
    t = ScriptedTransport({}, default=JudgeReply('{"Sufficient Context To The Given Answer": 1}', "ok", 1, 1))
    judge_runs(store, [run], Judge(t, get_prompt("tiresrag_r1_sufficiency"), store))
    assert t.asked == [
        "### QUESTION\nWho was the 35th US president?\n### ANSWER\nJohn F. Kennedy\n### REFERENCES\n"
    ]


def test_resolve_runs(tmp_path):
    store = new_store(tmp_path)
    make_run(store, QA[:1], run_id="a")
    make_run(store, QA[:1], run_id="b", method="search_r1")
    assert resolve_runs(store, method="direct,search_r1", bench="toy") == ["a", "b"]
    assert resolve_runs(store, run_ids=["b"]) == ["b"]
    with pytest.raises(ConfigError, match="no run zzz"):
        resolve_runs(store, run_ids=["zzz"])
    with pytest.raises(ConfigError, match="no run of method 'direct' on bench 'other'"):
        resolve_runs(store, method="direct", bench="other")
    with pytest.raises(ConfigError, match="--run RUN_ID, or --method M --bench B"):
        resolve_runs(store)


def test_a_dead_judge_url_fails_naming_it_and_stores_nothing(tmp_path, capsys):
    store = new_store(tmp_path)
    run = make_run(store, QA)
    before = store.query("SELECT * FROM sample_metrics ORDER BY ALL")
    url = f"http://127.0.0.1:{free_port()}/v1"  # nothing listens there
    rc = main(["judge", "--run", run, "--db", str(store.path), "--judge-url", url, "--judge-model", "m"])
    err = capsys.readouterr().err.strip().splitlines()
    assert rc == 2
    assert err == [
        f"error: the judge server at {url} cannot be reached (ConnectError: [Errno 111] Connection refused); "
        "start it (e.g. `harness serve-model`) or fix --judge-url. Nothing was judged."
    ]
    assert store.query("SELECT count(*) AS n FROM judgements")["n"][0] == 0
    assert store.query("SELECT * FROM sample_metrics ORDER BY ALL").equals(before)


def test_harness_run_probes_the_judge_before_running(tmp_path, capsys):
    db = tmp_path / "h.duckdb"
    url = f"http://127.0.0.1:{free_port()}/v1"
    argv = ["run", "--method", "direct", "--bench", "mini-multihop", "--limit", "1", "--db", str(db)]
    rc = main([*argv, "--judge-url", url, "--judge-model", "m", "--no-progress"])
    assert rc == 2 and f"the judge server at {url} cannot be reached" in capsys.readouterr().err
    assert new_store(tmp_path).query("SELECT count(*) AS n FROM runs")["n"][0] == 0  # nothing was run
    assert main([*argv, "--judge-model", "m"]) == 2
    assert "--judge-model needs --judge-url" in capsys.readouterr().err
