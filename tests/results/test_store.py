"""Direct tests of ``harness.results.store.Store`` on a temporary DuckDB file: every write and the reads the
run bookkeeping relies on, with the exact rows they leave."""

from __future__ import annotations

import json
import os
import subprocess
from datetime import datetime, timedelta

import pytest

from harness.errors import StoreError
from harness.judge.core import Judgement
from harness.results.store import (
    ERROR_STATUS,
    OWNER_STALE_S,
    ReportedRow,
    RetrievalEvalRow,
    RunRecord,
    ScoredSample,
    Store,
    owner_alive,
    this_owner,
)
from harness.types import Trajectory, Turn


def record(run_id: str = "r1", **kw) -> RunRecord:
    fields = dict(
        run_id=run_id,
        kind="eval",
        method="direct",
        model="m",
        backend="transformers",
        protocol_id="pid",
        protocol_name="mini",
        protocol_json="{}",
        method_spec_hash="h1",
        method_spec_json="{}",
        bench="mini-multihop",
    )
    fields.update(kw)
    return RunRecord(**fields)


def sample(i: int, *, dataset: str = "hotpotqa", prediction: str = "Paris", status: str = "ok", error=None):
    turns = [
        Turn(index=0, kind="generate", text="<search>x</search>", prompt_tokens=10, completion_tokens=3),
        Turn(index=1, kind="retrieve", query="x", doc_ids=["d1", "d2"], doc_scores=[1.5, 0.5]),
        Turn(
            index=2,
            kind="generate",
            text=f"<answer>{prediction}</answer>",
            prompt_tokens=30,
            prefill_tokens=20,
            completion_tokens=4,
            stop_reason="error" if error else "stop",
        ),
    ]
    t = Trajectory(
        example_id=f"q{i}",
        dataset=dataset,
        question=f"question {i}?",
        answers=["Paris"],
        turns=turns,
        prediction=prediction,
        extraction_status=status,
        response="...",
        error=error,
        meta={"k": i},
    )
    metrics = {} if error else {"em": 1.0 if prediction == "Paris" else 0.0, "f1": 0.5}
    return ScoredSample(trajectory=t, metrics=metrics, position=i, gold_ids=["d1"], latency_s=0.25)


@pytest.fixture
def store(tmp_path) -> Store:
    return Store(tmp_path / "r.duckdb", lock_timeout=5.0)


# -- opening -----------------------------------------------------------------------------------------
def test_a_new_file_gets_the_schema_version(store):
    assert store.query("SELECT value FROM meta WHERE key = 'schema_version'").iloc[0, 0] == "1"
    tables = set(store.query("SELECT table_name FROM duckdb_tables()")["table_name"])
    assert {"runs", "samples", "sample_metrics", "turns", "judgements", "prices", "train_steps"} <= tables


def test_a_missing_file_is_refused_read_only_or_without_create(tmp_path):
    path = tmp_path / "none.duckdb"
    msg = f"{path}: no results database here (run `harness run` first or pass --db)"
    with pytest.raises(StoreError) as e:
        Store(path, read_only=True)
    assert str(e.value) == msg
    with pytest.raises(StoreError) as e:
        Store(path, create=False)
    assert str(e.value) == msg
    assert not path.exists()


def test_a_directory_and_an_empty_file_are_one_line_errors(tmp_path):
    with pytest.raises(StoreError, match="is a directory, not a results database; pass a file to --db"):
        Store(tmp_path)
    empty = tmp_path / "empty.duckdb"
    empty.touch()
    with pytest.raises(StoreError) as e:
        Store(empty)
    assert str(e.value).startswith(
        f"{empty}: the results database is damaged or truncated (the file is empty)"
    )


def test_read_only_store_cannot_write(store):
    store.create_run(record())
    ro = Store(store.path, read_only=True)
    assert ro.get_run("r1").method == "direct"
    with pytest.raises(Exception, match="read-only"):
        ro.create_run(record("r2"))


def test_query_takes_positional_and_named_parameters(store):
    store.create_run(record("it's"))
    assert store.query("SELECT run_id FROM runs WHERE run_id = ?", ["it's"]).iloc[0, 0] == "it's"
    assert store.query("SELECT run_id FROM runs WHERE run_id = $id", {"id": "it's"}).iloc[0, 0] == "it's"


# -- runs ----------------------------------------------------------------------------------------
def test_create_and_get_run_round_trip_with_credentials_redacted(store):
    run = record(
        command="harness run --base-url http://u:secret@h:1/v1 --x 'https://h/v1?api_key=k1&y=2'",
        label="lab",
        n_expected=12,
        owner_pid=123,
        owner_host="host-a",
    )
    store.create_run(run)
    got = store.get_run("r1")
    assert (
        got.command == "harness run --base-url http://u:***@h:1/v1 --x 'https://h/v1?api_key=***&y=***'"
    )  # every query value
    expected = {**run.__dict__, "command": got.command}
    assert got.__dict__ == expected
    assert got.status == "running" and got.ended_at is None and got.seconds == 0.0
    assert store.get_run("nope") is None


def test_a_run_id_is_unique(store):
    store.create_run(record())
    with pytest.raises(Exception, match="run_id"):
        store.create_run(record())


def test_find_resumable_is_the_newest_identical_eval_run_with_its_status(store):
    t0 = datetime(2025, 1, 1, 12, 0, 0)
    store.create_run(record("old", started_at=t0, status="interrupted"))
    store.create_run(record("new", started_at=t0 + timedelta(minutes=1), status="failed"))
    store.create_run(record("other-spec", started_at=t0 + timedelta(minutes=3), method_spec_hash="h2"))
    store.create_run(record("train", started_at=t0 + timedelta(minutes=4), kind="train"))
    key = dict(method="direct", model="m", protocol_id="pid", method_spec_hash="h1", bench="mini-multihop")
    assert store.find_resumable(**key) == ("new", "failed")
    assert store.find_resumable(**{**key, "method_spec_hash": "h2"}) == ("other-spec", "running")
    assert store.find_resumable(**{**key, "bench": "mini"}) is None
    assert store.find_resumable(**{**key, "model": "m2"}) is None
    store.finish_run("new", "complete", 1.0)
    assert store.find_resumable(**key) == ("new", "complete")  # finished work, newer than "old"


def test_finish_run_sets_status_seconds_and_end(store):
    store.create_run(record())
    before = datetime.now().replace(tzinfo=None) - timedelta(days=1)
    store.finish_run("r1", "incomplete", 12.5)
    got = store.get_run("r1")
    assert (got.status, got.seconds) == ("incomplete", 12.5)
    assert got.ended_at is not None and got.ended_at > before


def test_claim_run_makes_this_process_the_owner(store):
    store.create_run(record(status="interrupted", owner_pid=None))
    store.claim_run("r1")
    got = store.get_run("r1")
    assert (got.status, got.owner_pid, got.owner_host) == ("running", *this_owner())
    assert got.heartbeat_at is not None
    store.claim_run("r1")  # this process may claim its own run again


def test_claim_run_refuses_a_live_owner_on_this_host(store):
    pid, host = os.getppid(), this_owner()[1]  # the parent process: alive, not us
    store.create_run(record(owner_pid=pid, owner_host=host))
    with pytest.raises(StoreError) as e:
        store.claim_run("r1")
    assert f"run r1 is being written by process {pid} on {host}" in str(e.value)
    assert "\n" not in str(e.value)
    assert store.get_run("r1").owner_pid == pid  # untouched


@pytest.mark.integration
def test_claim_run_takes_over_a_dead_owner_and_a_stale_other_host(store):
    dead = subprocess.Popen(["true"])
    dead.wait()  # exited and reaped: its pid names no process
    store.create_run(record("dead", owner_pid=dead.pid, owner_host=this_owner()[1]))
    store.claim_run("dead")
    assert store.get_run("dead").owner_pid == os.getpid()

    now = datetime.now().replace(tzinfo=None)
    stale = now - timedelta(seconds=OWNER_STALE_S + 60)
    store.create_run(record("stale", owner_pid=1, owner_host="elsewhere", heartbeat_at=stale))
    store.claim_run("stale")
    assert store.get_run("stale").owner_host == this_owner()[1]

    store.create_run(record("fresh", owner_pid=1, owner_host="elsewhere", heartbeat_at=now))
    with pytest.raises(StoreError, match="run fresh is being written by process 1 on elsewhere"):
        store.claim_run("fresh")


def test_owner_alive_only_for_running_runs():
    host = this_owner()[1]
    assert owner_alive(record(owner_pid=os.getppid(), owner_host=host))
    assert not owner_alive(record(owner_pid=os.getppid(), owner_host=host, status="interrupted"))
    assert not owner_alive(record(owner_pid=os.getpid(), owner_host=host))  # ourselves
    assert not owner_alive(record(owner_pid=None))


def test_claim_run_of_an_unknown_run(store):
    with pytest.raises(StoreError, match="no run ghost"):
        store.claim_run("ghost")


# -- samples ---------------------------------------------------------------------------------------
def test_add_samples_writes_samples_metrics_and_turns(store):
    store.create_run(record())
    store.add_samples("r1", [sample(0), sample(1, prediction="Rome", status="multiple_answers")])
    s = store.query("SELECT * FROM samples ORDER BY position")
    assert list(s["sample_id"]) == ["q0", "q1"]
    first = s.iloc[0]
    assert first["run_id"] == "r1" and first["dataset"] == "hotpotqa" and first["position"] == 0
    assert first["question"] == "question 0?" and list(first["answers"]) == ["Paris"]
    assert (first["prediction"], first["extraction_status"], first["error"]) == ("Paris", "ok", None)
    assert (first["n_retrievals"], first["n_llm_calls"]) == (1, 2)
    assert (first["prompt_tokens"], first["completion_tokens"]) == (40, 7)
    assert list(first["retrieved_ids"]) == ["d1", "d2"] and list(first["gold_ids"]) == ["d1"]
    assert first["latency_s"] == 0.25 and json.loads(first["meta_json"]) == {"k": 0}
    assert s.iloc[1]["extraction_status"] == "multiple_answers"
    m = store.query("SELECT sample_id, metric, value FROM sample_metrics ORDER BY sample_id, metric")
    assert [tuple(r) for r in m.itertuples(index=False)] == [
        ("q0", "em", 1.0),
        ("q0", "f1", 0.5),
        ("q1", "em", 0.0),
        ("q1", "f1", 0.5),
    ]
    t = store.query("SELECT * FROM turns WHERE sample_id = 'q0' ORDER BY turn_index")
    assert list(t["kind"]) == ["generate", "retrieve", "generate"]
    assert list(t.iloc[1]["doc_ids"]) == ["d1", "d2"] and list(t.iloc[1]["doc_scores"]) == [1.5, 0.5]
    assert t.iloc[2]["prefill_tokens"] == 20 and t["prefill_tokens"].isna().tolist() == [True, True, False]
    assert store.finished_samples("r1") == {("hotpotqa", "q0"), ("hotpotqa", "q1")}


def test_add_samples_refreshes_the_heartbeat_only_when_asked(store):
    store.create_run(record())
    store.add_samples("r1", [sample(0)])
    assert store.get_run("r1").heartbeat_at is None
    store.add_samples("r1", [sample(1)], heartbeat=True)
    assert store.get_run("r1").heartbeat_at is not None


def test_a_duplicate_sample_is_refused_and_nothing_of_its_batch_is_written(store):
    store.create_run(record())
    store.add_samples("r1", [sample(0)])
    with pytest.raises(StoreError, match="run r1 already has one of these samples"):
        store.add_samples("r1", [sample(1), sample(0)])
    assert store.finished_samples("r1") == {("hotpotqa", "q0")}
    assert int(store.query("SELECT count(*) FROM turns").iloc[0, 0]) == 3


def test_an_errored_sample_is_not_finished_and_its_retry_replaces_it(store):
    store.create_run(record())
    failed = sample(1, status=ERROR_STATUS, error="request to http://u:pw@h/v1 failed")
    store.add_samples("r1", [sample(0), failed])
    row = store.query("SELECT extraction_status, error FROM samples WHERE sample_id = 'q1'").iloc[0]
    assert (row["extraction_status"], row["error"]) == ("error", "request to http://u:***@h/v1 failed")
    assert store.query("SELECT count(*) FROM sample_metrics WHERE sample_id = 'q1'").iloc[0, 0] == 0
    assert store.finished_samples("r1") == {("hotpotqa", "q0")}

    store.add_samples("r1", [sample(1, prediction="Paris")])  # the retry
    assert store.finished_samples("r1") == {("hotpotqa", "q0"), ("hotpotqa", "q1")}
    s = store.query("SELECT extraction_status, error FROM samples WHERE sample_id = 'q1'")
    assert [tuple(r) for r in s.itertuples(index=False)] == [("ok", None)]
    m = store.query("SELECT metric, value FROM sample_metrics WHERE sample_id = 'q1' ORDER BY metric")
    assert [tuple(r) for r in m.itertuples(index=False)] == [("em", 1.0), ("f1", 0.5)]
    assert int(store.query("SELECT count(*) FROM turns WHERE sample_id = 'q1'").iloc[0, 0]) == 3


def test_finished_samples_are_per_run(store):
    store.create_run(record("a"))
    store.create_run(record("b"))
    store.add_samples("a", [sample(0)])
    store.add_samples("b", [sample(0, dataset="musique")])
    assert store.finished_samples("a") == {("hotpotqa", "q0")}
    assert store.finished_samples("b") == {("musique", "q0")}
    assert store.finished_samples("c") == set()


def test_add_sample_metrics_adds_or_replaces(store):
    store.create_run(record())
    store.add_samples("r1", [sample(0)])
    store.add_sample_metrics([("r1", "hotpotqa", "q0", "em", 0.0), ("r1", "hotpotqa", "q0", "judge@x", 1.0)])
    m = store.query("SELECT metric, value FROM sample_metrics ORDER BY metric")
    assert [tuple(r) for r in m.itertuples(index=False)] == [("em", 0.0), ("f1", 0.5), ("judge@x", 1.0)]


# -- judgements, prices, reported, retrieval, training -------------------------------------------
def judgement(key: str, status: str = "correct", score: float | None = 1.0) -> Judgement:
    return Judgement(
        key=key,
        judge_model="j",
        prompt_id="p",
        prompt_hash="ph",
        question="q?",
        golds=["a", "b"],
        prediction="a",
        status=status,
        verdict="correct" if score else None,
        score=score,
        rationale="why",
        raw="YES",
        prompt_tokens=5,
        completion_tokens=1,
        latency_s=0.1,
    )


def test_judgements_are_stored_replaced_and_read_by_key(store):
    store.add_judgements([judgement("k1"), judgement("k2", "unparseable", None)])
    store.add_judgements([judgement("k2", "correct", 0.0)])
    got = {r["key"]: r for r in store.get_judgements(["k2", "k1", "absent"])}
    assert set(got) == {"k1", "k2"}
    assert (got["k2"]["status"], got["k2"]["score"]) == ("correct", 0.0)
    assert list(got["k1"]["golds"]) == ["a", "b"] and got["k1"]["rationale"] == "why"
    assert store.get_judgements([]) == []


def test_replace_reported_replaces_one_paper_only(store):
    row = dict(method="m", model="M", dataset="nq", metric="em", source="Table 2")
    store.replace_reported("A", [ReportedRow(paper="A", value=0.4, **row)])
    store.replace_reported("B", [ReportedRow(paper="B", value=0.5, **row)])
    store.replace_reported(
        "A", [ReportedRow(paper="A", value=0.3, **row), ReportedRow(paper="A", value=0.2, setting="s", **row)]
    )
    df = store.query("SELECT paper, setting, value FROM reported ORDER BY paper, setting")
    assert [tuple(r) for r in df.itertuples(index=False)] == [("A", "", 0.3), ("A", "s", 0.2), ("B", "", 0.5)]
    store.replace_reported("A", [])
    assert list(store.query("SELECT paper FROM reported")["paper"]) == ["B"]


def test_train_steps_add_or_replace(store):
    store.add_train_steps("t", 1, {"loss": 2.0, "reward": 0.5})
    store.add_train_steps("t", 1, {"loss": 1.5})
    store.add_train_steps("t", 2, {"loss": 1.0})
    df = store.query("SELECT step, metric, value FROM train_steps ORDER BY step, metric")
    assert [tuple(r) for r in df.itertuples(index=False)] == [
        (1, "loss", 1.5),
        (1, "reward", 0.5),
        (2, "loss", 1.0),
    ]


def test_retrieval_evals_are_appended(store):
    row = RetrievalEvalRow("mini", "nq", "bm25", "{}", "c", "ch", 5, 0.75, 4, 0.5)
    store.add_retrieval_evals([row, row])
    store.add_retrieval_evals([])
    df = store.query("SELECT bench, dataset, k, recall, n FROM retrieval_evals")
    assert [tuple(r) for r in df.itertuples(index=False)] == [("mini", "nq", 5, 0.75, 4)] * 2


def test_replace_prices_replaces_the_table(store):
    from harness.results.cost import PriceRow

    now = datetime(2025, 1, 1)
    store.replace_prices([PriceRow("model", "a", 1.0, 2.0, None, None, "s", now)])
    store.replace_prices([PriceRow("backend", "vllm", None, None, False, 2.5, "s", now)])
    df = store.query("SELECT kind, name, token_priced, gpu_hourly_usd FROM prices")
    assert [tuple(r) for r in df.itertuples(index=False)] == [("backend", "vllm", False, 2.5)]
    store.replace_prices([])
    assert store.query("SELECT count(*) FROM prices").iloc[0, 0] == 0
