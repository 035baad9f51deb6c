"""Every protocol field acts: changing it changes the protocol id AND what a run does.

For each field of :class:`harness.protocol.Protocol` (iterated from ``Protocol.model_fields``, so a
new field without a case below fails :func:`test_every_field_has_a_case`) a scripted-backend run of
``search_r1`` over a tiny corpus is compared under the base protocol and under a copy with only that
field changed: the questions loaded, each sample's turns (retrieved ids, scores, observation text),
prediction and stored metrics, what the backend was asked to generate with, the run summary's
primary column, and whether the run is refused (a remote retriever without a server, a judge
that was not given). ``name`` and ``description`` are the exceptions: they change neither.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from harness.data.benches import Selection
from harness.errors import ConfigError
from harness.eval.protocol import PROTOCOLS, check_judge, preset, resolve_corpus
from harness.eval.runner import RunConfig, Runner
from harness.eval.scoring import RunScoring
from harness.judge.prompts import get_prompt
from harness.methods_registry import get_method
from harness.protocol import PROTOCOL_FORMAT, CorpusRef, Decoding, JudgeRef, Protocol, RemoteRetrieval
from harness.results import queries
from harness.retrieval.paths import CACHE_ENV
from harness.retrieval.spec import Bm25sSpec
from tests.retrieval.helpers import TINY, write_jsonl
from tests.support.scripted import ScriptedBackend

BENCH = "mini-singlehop"  # PopQA questions (with gold passage ids, so retrieval metrics are scored)
OTHER_CORPUS = [
    {"id": "x1", "contents": '"George Rankin"\nGeorge Rankin was an Australian politician and soldier.'},
    {"id": "x2", "contents": '"John Mayne"\nJohn Mayne was a Scottish journalist and poet.'},
    {"id": "x3", "contents": '"Occupation"\nAn occupation is a job or profession.'},
]


class RecordingBackend(ScriptedBackend):
    """A scripted backend that records the token budget and sampling of every generation."""

    def __init__(self, script):
        super().__init__(script)
        self.settings: set[tuple[int, object]] = set()

    def generate(self, prompts, *, stop, max_new_tokens, sampling, include_stop=False):
        self.settings.add((max_new_tokens, sampling))
        return super().generate(
            prompts, stop=stop, max_new_tokens=max_new_tokens, sampling=sampling, include_stop=include_stop
        )


def script(runner: Runner, proto: Protocol) -> dict[str, list[str]]:
    """Per question: two searches, then its first gold answer followed by extra words (EM 0, F1 > 0)."""
    return {
        e.question: [
            f"<search>{e.question} occupation</search>",
            "<search>capital of France</search>",
            f"<answer>{e.answers[0]} and Paris France</answer>",
        ]
        for e, _ in runner.load_examples(proto)
    }


def observe(proto: Protocol, corpus: Path, tmp: Path, monkeypatch) -> dict[str, object]:
    """What a run of search_r1 under ``proto`` does, as plain data (or how it was refused)."""
    db = tmp / f"{len(list(tmp.glob('*.duckdb')))}.duckdb"
    runner = Runner(
        RunConfig(methods=["search_r1"], bench=BENCH, protocol=proto, corpus_path=corpus, db=db),
        progress=False,
    )
    try:
        check_judge(proto, None, None)  # `harness run` without --judge-url
        judged = "no judge needed"
    except ConfigError as e:
        judged = f"refused: {e}"
    try:
        backend = RecordingBackend(script(runner, proto))
        monkeypatch.setattr(Runner, "backend", lambda self: backend)
        (run,) = runner.run([get_method("search_r1")])
    except ConfigError as e:
        return {"refused": str(e), "judge": judged}
    store = runner.store
    turns = store.query(
        "SELECT sample_id, turn_index, kind, text, query, doc_ids, doc_scores FROM turns WHERE run_id = $r ORDER BY ALL",
        {"r": run.run_id},
    )
    samples = store.query(
        "SELECT dataset, sample_id, prediction FROM samples WHERE run_id = $r ORDER BY ALL", {"r": run.run_id}
    )
    metrics = store.query(
        "SELECT sample_id, metric, value FROM sample_metrics WHERE run_id = $r ORDER BY ALL",
        {"r": run.run_id},
    )
    # the column `harness run`'s summary shows first (harness.results.summary.summary adds costs to it)
    primary = queries.run_metrics(store, [run.run_id], RunScoring.of(proto).primary)["primary"]
    return {
        "samples": samples.to_dict("records"),
        "turns": json.loads(turns.to_json(orient="records")),
        "metrics": metrics.to_dict("records"),
        "generation": sorted(map(repr, backend.settings)),
        "primary": [round(float(v), 6) for v in primary],
        "judge": judged,
    }


@pytest.fixture(scope="module")
def env(tmp_path_factory):
    """The base protocol (tiny corpus, first 2 questions), both corpus files, a folder for the runs'
    results files, and the base run's observation (computed once: every case compares with it)."""
    tmp = tmp_path_factory.mktemp("fields")
    with pytest.MonkeyPatch.context() as mp:
        mp.setenv(CACHE_ENV, str(tmp / "cache"))  # indexes and cached results stay here
        tiny = write_jsonl(tmp / "tiny.jsonl", TINY)
        other = write_jsonl(tmp / "other.jsonl", OTHER_CORPUS)
        base = resolve_corpus(
            Protocol(name="base", corpus=CorpusRef(id="tiny"), selection=Selection(mode="first", n=2)), tiny
        )
        runs = tmp / "runs"
        runs.mkdir()
        before = observe(base, tiny, runs, mp)
        assert "refused" not in before and before["judge"] == "no judge needed"
        assert len(before["samples"]) == 2 and before["primary"] == [
            0.0
        ]  # one dataset; EM of "<gold> and ..."
        yield base, tiny, other, runs, before


@pytest.fixture
def run(env, monkeypatch):
    """``run(protocol, corpus)``: the observation of a run under ``protocol``."""
    monkeypatch.setenv(CACHE_ENV, str(env[3].parent / "cache"))
    return lambda proto, corpus: observe(proto, corpus, env[3], monkeypatch)


# field -> the changed protocol (and the corpus file its run reads), given the base and the files
CHANGES = {
    "corpus": lambda p, tiny, other: (
        resolve_corpus(p.with_(corpus=CorpusRef(id="other").model_dump()), other),
        other,
    ),
    "retriever": lambda p, tiny, other: (p.with_(retriever=Bm25sSpec(k1=1.5, b=0.9).model_dump()), tiny),
    "top_k": lambda p, tiny, other: (p.with_(top_k=1), tiny),
    "max_turns": lambda p, tiny, other: (p.with_(max_turns=1), tiny),
    "max_obs_tokens": lambda p, tiny, other: (p.with_(max_obs_tokens=12), tiny),
    "decoding": lambda p, tiny, other: (p.with_(decoding=Decoding(temperature=0.7).model_dump()), tiny),
    "selection": lambda p, tiny, other: (p.with_(selection=Selection(mode="first", n=1)), tiny),
    "metrics": lambda p, tiny, other: (p.with_(metrics={"em": "1"}), tiny),
    "primary_metric": lambda p, tiny, other: (p.with_(primary_metric="f1"), tiny),
    "judge": lambda p, tiny, other: (
        p.with_(
            judge=JudgeRef(model="m", prompt_id="default", prompt_hash=get_prompt("default").prompt_hash)
        ),
        tiny,
    ),
    "remote": lambda p, tiny, other: (p.with_(remote=RemoteRetrieval(described_by="nobody")), tiny),
}
NO_ID = {"name": "renamed", "description": "described"}  # these never change the id

# Decoding field -> a changed value: each reaches the backend (token budget or sampling)
DECODING_CHANGES = {
    "temperature": 0.7,
    "top_p": 0.8,
    "max_new_tokens": 300,
    "seed": 7,
    "top_k": 20,
    "repetition_penalty": 1.05,
}


def test_every_field_has_a_case():
    assert set(Protocol.model_fields) == set(CHANGES) | set(NO_ID)
    assert set(Decoding.model_fields) == set(DECODING_CHANGES)


@pytest.mark.parametrize("field", sorted(CHANGES))
def test_changing_a_field_changes_the_id_and_the_run(field, env, run):
    base, tiny, other, _runs, before = env
    changed, corpus = CHANGES[field](base, tiny, other)
    assert changed.model_dump(exclude={field}) == base.model_dump(exclude={field})  # only that field
    assert changed.protocol_id != base.protocol_id
    after = run(changed, corpus)
    assert after != before
    if field == "primary_metric":
        assert after["primary"][0] > 0  # F1 of "<gold> and Paris France"
    if field == "metrics":
        assert {m["metric"] for m in after["metrics"]} == {"em"}
        assert {m["metric"] for m in before["metrics"]} == {
            "em", "f1", "f1_squad", "cover_em", "cover_em_tokens", "retrieval_recall@3", "evidence_recall"
        }  # fmt: skip
    if field in ("judge", "remote"):
        refusal = after["judge"] if field == "judge" else after["refused"]
        assert refusal.startswith("refused: " if field == "judge" else "protocol") and "--" in refusal


@pytest.mark.parametrize("field", sorted(DECODING_CHANGES))
def test_each_decoding_field_reaches_the_backend(field, env, run):
    base, tiny, _other, _runs, before = env
    changed = base.with_(
        decoding=base.decoding.model_copy(update={field: DECODING_CHANGES[field]}).model_dump()
    )
    assert changed.protocol_id != base.protocol_id
    after = run(changed, tiny)["generation"]
    assert after != before["generation"] and len(after) == len(before["generation"]) == 1


@pytest.mark.parametrize("field", sorted(NO_ID))
def test_name_and_description_change_nothing(field, env, run):
    base, tiny, _other, _runs, before = env
    renamed = base.with_(**{field: NO_ID[field]})
    assert renamed.protocol_id == base.protocol_id
    assert run(renamed, tiny) == before


def test_the_format_version_is_part_of_every_id():
    p = preset("mini")
    data = json.loads(p.canonical_json())
    assert data["format"] == PROTOCOL_FORMAT == 2
    assert not {"renderer", "prompt_template", "answer_extractor", "split_policy"} & set(data)


@pytest.mark.parametrize(
    "metrics, primary, error",
    [
        ({"em": "1", "bleu": "1"}, "em", "protocol 'base': unknown metric 'bleu'"),
        (
            {"em": "2"},
            "em",
            "protocol 'base' pins metric 'em' at version '2', the harness computes version '1'",
        ),
        (
            {"em": "1", "answer_recall@k": "1"},
            "em",
            "protocol 'base': metric 'answer_recall@k' needs inputs a run does not store",
        ),
    ],
)
def test_a_metric_a_run_cannot_score_is_one_line_error(metrics, primary, error, env):
    base, tiny, _other, runs, _before = env
    bad = base.with_(metrics=metrics, primary_metric=primary)
    with pytest.raises(ConfigError, match="^" + error.replace("(", r"\(")) as e:
        observe_or_raise(bad, tiny, runs)
    assert "\n" not in str(e.value)


def observe_or_raise(proto: Protocol, corpus: Path, tmp: Path) -> None:
    runner = Runner(
        RunConfig(methods=["search_r1"], bench=BENCH, protocol=proto, corpus_path=corpus, db=tmp / "x.duckdb")
    )
    runner.plan_groups([(proto, [get_method("search_r1")])])


def test_the_primary_metric_is_one_of_the_metrics():
    with pytest.raises(ValueError, match="primary_metric 'f1' is not one of the protocol's metrics"):
        preset("mini").with_(metrics={"em": "1"}, primary_metric="f1")


def test_a_protocol_with_a_judge_takes_exactly_that_judge():
    h = get_prompt("default").prompt_hash
    p = preset("mini").with_(judge=JudgeRef(model="m", prompt_id="default", prompt_hash=h))
    check_judge(p, "m", "default")
    check_judge(preset("mini"), None, None)
    check_judge(preset("mini"), "any", "default")  # a protocol without a judge may still be judged
    with pytest.raises(ConfigError, match="pass --judge-url with --judge-model m --judge-prompt default"):
        check_judge(p, None, None)
    with pytest.raises(ConfigError, match="not --judge-model other --judge-prompt default"):
        check_judge(p, "other", "default")
    stale = p.with_(judge=JudgeRef(model="m", prompt_id="default", prompt_hash="0" * 8))
    with pytest.raises(ConfigError, match="the prompt changed since the protocol was defined"):
        check_judge(stale, "m", "default")


def test_harness_run_refuses_a_judged_protocol_without_its_judge(monkeypatch, tmp_path, capsys):
    import harness.eval.protocol
    from harness.cli import main

    h = get_prompt("default").prompt_hash
    judged = preset("mini").with_(judge=JudgeRef(model="m", prompt_id="default", prompt_hash=h))
    monkeypatch.setattr(harness.eval.protocol, "preset", lambda name: judged)
    db = tmp_path / "r.duckdb"
    args = ["run", "--method", "direct", "--bench", "mini-singlehop", "--limit", "1", "--db", str(db)]
    assert main([*args, "--no-progress"]) == 2
    err = capsys.readouterr().err
    assert (
        f"({judged.with_(selection=Selection(mode='first', n=1)).protocol_id}) is scored by an LLM judge"
        in err
    )
    assert "pass --judge-url with --judge-model m --judge-prompt default" in err
    assert not db.exists()  # refused before the results file is touched
    other_judge = ["--judge-url", "http://127.0.0.1:9/v1", "--judge-model", "other"]
    assert main([*args, *other_judge, "--no-progress"]) == 2
    assert "not --judge-model other --judge-prompt default" in capsys.readouterr().err


@pytest.mark.parametrize("name", PROTOCOLS.names())
def test_every_registered_protocol_can_be_scored_by_a_run(name):
    p = preset(name)
    scoring = RunScoring.of(p)  # no metric a run cannot compute (answer_recall@k), every version current
    assert "em" in scoring.answer and scoring.primary == p.primary_metric == "em"
