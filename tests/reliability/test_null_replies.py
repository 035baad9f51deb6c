"""Null text in a 200 reply is a failed request, never an empty answer or verdict.

Issue 45, failure 5: a judge reply of HTTP 200 with ``content: null`` was stored as an ``empty``
verdict and the command exited 0; later runs sent no request, even once the server was healthy.
Now it is a failed request like a 500: retried, then counted (exit 1), no verdict stored, and
asked again by the next run.

Issue 45, failure 7: a stream whose every event has ``text: null`` (library use of the openai
backend with ``server="llamacpp"``, which streams to apply stop strings on the client) was scored
as an empty answer; now it is an error completion after the retries."""

from __future__ import annotations

import pytest

from harness.cli import main
from tests.reliability.fake_openai import FakeOpenAI
from tests.reliability.helpers import TOTAL, rows, run_args


@pytest.mark.integration
def test_null_judge_content_is_a_retried_error_then_asked_again(tok_dir, tmp_path, capsys):
    db = tmp_path / "r.duckdb"
    with FakeOpenAI() as srv:
        assert main(run_args(srv.url, tok_dir, db)) == 0
    (run_id,) = [r for (r,) in rows(db, "SELECT run_id FROM runs")]
    capsys.readouterr()

    def judge(url: str) -> list[str]:
        args = ["judge", "--run", run_id, "--db", str(db), "--judge-url", url]
        return args + ["--judge-model", "fake-model", "--judge-retries", "1", "--no-progress"]

    with FakeOpenAI(fault="null_text") as null:
        assert main(judge(null.url)) == 1
        assert null.requests == 2 * TOTAL  # each asked, then retried once
    err = capsys.readouterr().err
    assert "Traceback" not in err
    assert f"error: {TOTAL} judge request(s) failed after their retries" in err, err
    assert rows(db, "SELECT count(*) FROM sample_metrics WHERE metric LIKE 'judge@%'") == [(0,)]
    assert rows(db, "SELECT DISTINCT status FROM judgements") == [("error",)]  # no `empty` verdict
    with FakeOpenAI() as healthy:
        assert main(judge(healthy.url)) == 0, capsys.readouterr().err
        assert healthy.requests == TOTAL  # nothing was cached from the null replies
    # every item now has a final verdict (the fake's one-word replies parse as no verdict at all)
    assert rows(db, "SELECT count(*) FROM judgements WHERE status NOT IN ('error', 'timeout')") == [(TOTAL,)]


@pytest.mark.integration
def test_an_all_null_stream_is_an_error_not_an_empty_answer(tok_dir):
    from harness.llm.base import BackendSpec, make_backend

    with FakeOpenAI(fault="null_text") as srv:
        spec = BackendSpec(
            kind="openai",
            model="fake-model",
            base_urls=(srv.url,),
            server="llamacpp",
            tokenizer=str(tok_dir),
            retries=1,
            backoff=0.01,
        )
        backend = make_backend(spec)
        (out,) = backend.generate(["Question: where?"], stop=["</search>"], max_new_tokens=8)
        assert srv.requests == 2  # asked, then retried once
    assert out.finish_reason == "error" and out.text == ""
    assert "streamed no generated text" in (out.error or ""), out.error
    with FakeOpenAI() as healthy:  # the same library call against a server that answers
        backend = make_backend(spec.model_copy(update={"base_urls": (healthy.url,)}))
        (ok,) = backend.generate(["Question: where?"], stop=["</search>"], max_new_tokens=8)
    assert ok.finish_reason == "eos" and ok.text
