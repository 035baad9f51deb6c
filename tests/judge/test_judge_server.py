"""The judge against a REAL OpenAI-compatible server (llama.cpp's, from the xllamacpp wheel, started
by the ``llama_server`` fixture over the packaged GGUF) through the real ``openai`` client: 20 stored
predictions judged, stored, and reused with no request on the second pass (checked with our
counter and with the server's own log)."""

from __future__ import annotations

import pytest

from harness.cli import main
from harness.judge.factory import JudgeSpec, make_judge
from harness.judge.parsers import SCORED_STATUSES
from harness.judge.stored import judge_runs
from harness.judge.transport import probe_server
from tests.judge.helpers import QA, make_run, new_store

llamacpp = pytest.mark.llamacpp
FINAL = {"ok", "fallback_parse", "unparseable", "truncated", "empty", "no_prediction"}


def _server_requests(srv) -> int:
    """Generation tasks in the server's log: llama.cpp logs one "processing task" line per
    completion request it serves (listing models or tokenizing starts no task)."""
    return srv.log_path.read_text(errors="replace").count("| processing task")


@pytest.mark.integration
@llamacpp
def test_twenty_predictions_are_judged_once_and_reused(llama_server, tmp_path, capsys):
    info = probe_server(llama_server.base_url)
    assert (info.models, info.kind) == (("smollm2",), "llamacpp")  # neutral sampling gets sent

    store = new_store(tmp_path)
    run = make_run(store, QA)
    assert len(QA) == 20 and sum(1 for _, _, p in QA if not p) == 1
    spec = JudgeSpec(url=llama_server.base_url, model="smollm2", prompt="when_to_search", concurrency=2)
    before = _server_requests(llama_server)
    judge = make_judge(spec, store)
    report = judge_runs(store, [run], judge)
    o = report.outcome
    assert (o.asked, o.cached, len(o.judgements)) == (19, 0, 20)
    assert judge.transport.requests_made() == 19
    assert _server_requests(llama_server) - before == 19
    assert sum(o.status_counts.values()) == 20 and set(o.status_counts) <= FINAL
    assert o.status_counts["no_prediction"] == 1
    assert o.prompt_tokens > 19 * 50 and o.completion_tokens > 0  # the server's usage, stored
    stored = store.query("SELECT status, score, judge_model, prompt_id, prompt_hash FROM judgements")
    assert len(stored) == 19 and set(stored["judge_model"]) == {"smollm2"}
    assert set(stored["prompt_id"]) == {"when_to_search"} and set(stored["prompt_hash"]) == {"d9206469"}
    scored = stored[stored["status"].isin(SCORED_STATUSES)]
    assert (
        scored["score"].isin([0.0, 1.0]).all()
        and stored[~stored["status"].isin(SCORED_STATUSES)]["score"].isna().all()
    )
    metric = "judge@smollm2:d9206469"
    n_rows = store.query("SELECT count(*) AS n FROM sample_metrics WHERE metric = ?", [metric])["n"][0]
    assert n_rows == report.metric_rows == len(scored) + 1  # + the empty prediction, scored 0

    # second pass, a new judge and client: everything comes from the store, no request is made
    before = _server_requests(llama_server)
    judge2 = make_judge(spec, store)
    again = judge_runs(store, [run], judge2).outcome
    assert (again.asked, again.cached, judge2.transport.requests_made()) == (0, 19, 0)
    assert _server_requests(llama_server) == before
    assert [j.status for j in again.judgements] == [j.status for j in o.judgements]

    # the CLI on the same database says so too
    rc = main(["judge", "--run", run, "--db", str(store.path), "--judge-url", llama_server.base_url,
               "--judge-model", "smollm2", "--judge-prompt", "when_to_search", "--no-progress"])  # fmt: skip
    out = capsys.readouterr().out
    assert rc == 0 and "requests: 0 asked, 19 from the cache, 0 duplicates" in out
    assert _server_requests(llama_server) == before


@llamacpp
def test_logit_scores_come_from_the_first_token(llama_server, tmp_path):
    store = new_store(tmp_path)
    run = make_run(store, QA[:3])
    spec = JudgeSpec(url=llama_server.base_url, model="smollm2", prompt="when_to_search+logit")
    report = judge_runs(store, [run], make_judge(spec, store))
    js = report.outcome.judgements
    assert (
        len(js) == 3
        and report.metric.startswith("judge@smollm2:")
        and report.metric != "judge@smollm2:d9206469"
    )
    for j in js:
        assert j.status in {"ok", "no_logprobs", "unparseable"}
        if j.status == "ok":
            assert 0.0 < j.score < 1.0  # a probability, not a 0/1 verdict
        else:
            assert j.score is None


@llamacpp
def test_an_unknown_model_name_is_refused_before_judging(llama_server):
    from harness.errors import ConfigError

    with pytest.raises(ConfigError, match=r"does not serve 'gpt-4o'; it serves: smollm2"):
        make_judge(JudgeSpec(url=llama_server.base_url, model="gpt-4o"))
