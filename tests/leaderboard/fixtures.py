"""A small results database written through ``harness.results.store.Store``, with numbers known exactly.

Protocol ``mini`` (the real preset): methods direct, naive_rag and search_r1 (label "untrained
policy") on hotpotqa, musique and popqa, 4 questions each. Metrics come from the harness's own
scoring (``harness.eval.runner.score_trajectory``) of the predictions below. A second protocol
(``mini`` with top-5, a different id) holds one naive_rag run on hotpotqa that must never appear
in the first protocol's rows. A second model (``OTHER_MODEL``) has a direct run on popqa only.
A training run logs three steps.

Correct answers per method (1 = the prediction is the gold answer):

    method      hotpotqa  musique  popqa   EM: hotpotqa musique popqa | avg multi-hop  avg all
    direct      1 p 0 0   0 0 0 0  1 1 0 0      0.25     0.00    0.50 |    0.125        0.25
    naive_rag   1 1 0 0   1 0 0 0  1 1 1 0      0.50     0.25    0.75 |    0.375        0.50
    search_r1   1 1 1 0   1 1 0 0  1 1 1 1      0.75     0.50    1.00 |    0.625        0.75

Search-R1's trajectories carry the prompt (``meta["prompt"]``) and a response with every
environment text interleaved, as the engine stores them. Its question 0 of every dataset starts
with a generation without an action, answered by the correction message (``CORRECTION``, which
the engine stores no turn for); its question 3 makes a search that returns 0 passages. The
reported rows include a count (TIRESRAG-R1's ``n_retrievals`` 2.9, ours 1) and a seven-dataset
average against our three-dataset one (no difference). ``build(partial=True)`` adds a killed
run (status ``interrupted``, IRCoT on hotpotqa, 2 of 4 questions scored, a third failed with an
error and no metrics).

``p`` is a partial answer ("Lovelace" for "Ada Lovelace"): EM 0, F1 2/3, so direct's F1 on
hotpotqa is (1 + 2/3) / 4 = 0.41667 while its EM is 0.25. An LLM judge (``JUDGE_METRIC``, with a
stored verdict and rationale for that answer) accepts it: direct's judge score on hotpotqa is 0.5.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from harness.eval.protocol import preset
from harness.eval.runner import score_trajectory
from harness.judge.core import Judgement
from harness.protocol import Protocol
from harness.results.cost import sync_prices
from harness.results.store import ReportedRow, RunRecord, ScoredSample, Store
from harness.types import Trajectory, Turn
from methods.search_r1.render import SEARCH_R1_INVALID_MESSAGE

CORRECTION = SEARCH_R1_INVALID_MESSAGE
PROMPT = "Answer the given question. You must conduct reasoning inside <think> and </think> ..."

DATASETS = ("hotpotqa", "musique", "popqa")
ANSWERS = ("Paris", "Ada Lovelace", "1969", "blue whale")
WRONG = "unknown"
PATTERN: dict[str, dict[str, str]] = {  # per method, per dataset: c = correct, p = partial, 0 = wrong
    "direct": {"hotpotqa": "cp00", "musique": "0000", "popqa": "cc00"},
    "naive_rag": {"hotpotqa": "cc00", "musique": "c000", "popqa": "ccc0"},
    "search_r1": {"hotpotqa": "ccc0", "musique": "cc00", "popqa": "cccc"},
}
EXPECTED_EM = {
    "direct": {
        "hotpotqa": 0.25,
        "musique": 0.0,
        "popqa": 0.5,
        "avg_singlehop": 0.5,
        "avg_multihop": 0.125,
        "avg_all": 0.25,
    },
    "naive_rag": {
        "hotpotqa": 0.5,
        "musique": 0.25,
        "popqa": 0.75,
        "avg_singlehop": 0.75,
        "avg_multihop": 0.375,
        "avg_all": 0.5,
    },
    "search_r1": {
        "hotpotqa": 0.75,
        "musique": 0.5,
        "popqa": 1.0,
        "avg_singlehop": 1.0,
        "avg_multihop": 0.625,
        "avg_all": 0.75,
    },
}
MODEL = "smollm2-135m-instruct"
OTHER_MODEL = (
    "qwen-test"  # a second model: direct on popqa only, 1 of 4 right (EM 0.25, no multi-hop average)
)
TOP5_NAIVE_RAG_EM = 1.0  # the other protocol's only run: both questions right
JUDGE_METRIC = "judge@judge-test:abc123"  # direct on hotpotqa only: [1, 1, 0, 0] (accepts "Lovelace")


@dataclass(frozen=True)
class FixtureDB:
    path: Path
    protocol: Protocol
    other_protocol: Protocol
    run_ids: dict[str, str]  # method -> run id (first protocol, MODEL)
    train_run_id: str


def question(dataset: str, i: int) -> str:
    return f"{dataset} question {i}: what is thing {i}?"


def gold_ids(dataset: str, i: int) -> list[str]:
    base = {"hotpotqa": 100, "musique": 200, "popqa": 300}[dataset] + 10 * i
    return [f"closed-{base:06d}", f"closed-{base + 1:06d}"]


def _prediction(code: str, i: int) -> str:
    if code == "c":
        return ANSWERS[i]
    if code == "p":
        return ANSWERS[i].split()[-1]
    return WRONG


def _turns(method: str, dataset: str, i: int, prediction: str) -> list[Turn]:
    gold = gold_ids(dataset, i)
    other = f"closed-{int(gold[0].split('-')[1]) + 5:06d}"
    if method == "direct":
        return [
            Turn(
                index=0,
                kind="generate",
                text=prediction,
                prompt_tokens=50,
                completion_tokens=5,
                stop_reason="eos",
            )
        ]
    if method == "naive_rag":
        return [
            Turn(
                index=0,
                kind="retrieve",
                query=question(dataset, i),
                doc_ids=[gold[0], other, gold[1]],
                doc_scores=[9.5, 8.0, 7.25],
            ),
            Turn(
                index=1,
                kind="generate",
                text=prediction,
                prompt_tokens=400,
                completion_tokens=6,
                stop_reason="eos",
            ),
        ]
    turns = []
    if i == 0:  # a generation without an action: the engine appends CORRECTION (no turn stored)
        turns.append(
            Turn(
                index=0,
                kind="generate",
                text="<think>I should look this up.</think>",
                prompt_tokens=100,
                completion_tokens=10,
                stop_reason="eos",
                status="invalid_action",
            )
        )
    empty = i == 3  # a search that returns nothing
    turns += [
        Turn(
            index=len(turns),
            kind="generate",
            text=f"<think>I need thing {i}.</think><search>thing {i}</search>",
            prompt_tokens=200,
            completion_tokens=20,
            stop_reason="</search>",
        ),
        Turn(
            index=len(turns) + 1,
            kind="retrieve",
            text="" if empty else f"Doc 1: thing {i}",
            query=f"thing {i}",
            doc_ids=[] if empty else [other, gold[0]],
            doc_scores=[] if empty else [6.0, 5.5],
            observation_tokens=5 if empty else 40,
        ),
        Turn(
            index=len(turns) + 2,
            kind="generate",
            text=f"<think>Found it.</think><answer>{prediction}</answer>",
            prompt_tokens=300,
            completion_tokens=15,
            stop_reason="</answer>",
        ),
    ]
    return turns


def _response(turns: list[Turn]) -> str:
    """The stored response: generations, with the correction message after a generation without an
    action and each observation wrapped in the Search-R1 tags (as the engine's ``append_env``)."""
    out = []
    for t in turns:
        if t.kind == "generate":
            out.append(t.text)
            if t.status == "invalid_action":
                out.append(CORRECTION)
        elif t.kind == "retrieve":
            out.append(f"\n\n<information>{t.text}</information>\n\n")
    return "".join(out)


def _run_record(
    run_id: str, method: str, proto: Protocol, label: str = "", kind: str = "eval", model: str = MODEL
) -> RunRecord:
    return RunRecord(
        run_id=run_id,
        kind=kind,
        method=method,
        model=model,
        backend="transformers",
        protocol_id=proto.protocol_id,
        protocol_name=proto.name,
        protocol_json=proto.model_dump_json(),
        method_spec_hash=f"spec-{method}",
        method_spec_json="{}",
        bench="fixture",
        label=label,
        command=f"fixture {method}",
        status="complete",
    )


def _samples(method: str, patterns: dict[str, str], proto: Protocol, corrupt: bool) -> list[ScoredSample]:
    out = []
    pos = 0
    for dataset, codes in patterns.items():
        for i, code in enumerate(codes):
            pred = "corrupted output" if corrupt else _prediction(code, i)
            turns = _turns(method, dataset, i, pred)
            t = Trajectory(
                example_id=f"{dataset}-{i}",
                dataset=dataset,
                question=question(dataset, i),
                answers=[ANSWERS[i]],
                turns=turns,
                prediction=pred,
                extraction_status="ok",
                response=_response(turns) if method == "search_r1" else pred,
                meta={"prompt": f"{PROMPT}\nQuestion: {question(dataset, i)}"},
            )
            g = gold_ids(dataset, i)
            out.append(
                ScoredSample(t, score_trajectory(t, g, proto), position=pos, gold_ids=g, latency_s=0.5)
            )
            pos += 1
    return out


def build(path: Path, *, corrupt: str | None = None, tag: str = "", partial: bool = False) -> FixtureDB:
    """Write the fixture database at ``path``; ``corrupt`` names a method whose predictions are
    garbage; ``partial`` adds a killed run."""
    store = Store(path)
    sync_prices(store)  # the presets: the packaged model on the in-process backend costs $0
    proto = preset("mini")
    other = proto.with_(top_k=5)
    run_ids = {}
    for n, method in enumerate(PATTERN):
        run_id = f"{method}-fixture{tag}-{n}"
        label = "untrained policy" if method == "search_r1" else ""
        store.create_run(_run_record(run_id, method, proto, label))
        store.add_samples(run_id, _samples(method, PATTERN[method], proto, corrupt == method))
        store.finish_run(run_id, "complete", 1.0)
        run_ids[method] = run_id
    direct = run_ids["direct"]
    store.add_sample_metrics(
        [(direct, "hotpotqa", f"hotpotqa-{i}", JUDGE_METRIC, v) for i, v in enumerate([1, 1, 0, 0])]
    )
    store.add_judgements(
        [
            Judgement(
                key=f"fixture-judgement{tag}",
                judge_model="judge-test",
                prompt_id="fixture",
                prompt_hash="abc123",
                question=question("hotpotqa", 1),
                golds=[ANSWERS[1]],
                prediction=_prediction("p", 1),
                status="ok",
                verdict="correct",
                score=1.0,
                rationale="Lovelace names Ada Lovelace.",
                raw="correct",
                prompt_tokens=30,
                completion_tokens=4,
                latency_s=0.1,
            )
        ]
    )
    qwen_id = f"direct-fixture{tag}-qwen"
    store.create_run(_run_record(qwen_id, "direct", proto, model=OTHER_MODEL))
    store.add_samples(qwen_id, _samples("direct", {"popqa": "c000"}, proto, False))
    other_id = f"naive_rag-fixture{tag}-top5"
    store.create_run(_run_record(other_id, "naive_rag", other))
    store.add_samples(other_id, _samples("naive_rag", {"hotpotqa": "cc"}, other, False))
    store.replace_reported(
        "search_r1",
        [
            ReportedRow(
                "search_r1", "naive_rag", MODEL, "hotpotqa", "em", 0.4, "Search-R1, Table 2", "Table 2"
            ),
            ReportedRow(
                "search_r1", "naive_rag", MODEL, "avg_multihop", "em", 0.3, "Search-R1, Table 2", "Table 2"
            ),
            ReportedRow("search_r1", "naive_rag", MODEL, "avg", "em", 0.35, "Search-R1, Table 2", "Table 2"),
            ReportedRow(
                "search_r1",
                "search_r1",
                "Qwen2.5-7B",
                "hotpotqa",
                "em",
                0.433,
                "Search-R1, Table 2",
                "Table 2",
            ),
        ],
    )
    store.replace_reported(
        "tiresrag_r1",
        [
            ReportedRow(
                "tiresrag_r1",
                "search_r1",
                MODEL,
                "hotpotqa",
                "n_retrievals",
                2.9,
                "TIRESRAG-R1, Table 5",
                "Table 5",
            ),
        ],
    )
    if partial:
        killed = f"ircot-fixture{tag}-killed"
        store.create_run(_run_record(killed, "ircot", proto))
        store.add_samples(killed, _samples("naive_rag", {"hotpotqa": "cc"}, proto, False))
        failed = Trajectory(  # a request that failed after the backend's retries: no answer, no metrics
            example_id="hotpotqa-2",
            dataset="hotpotqa",
            question=question("hotpotqa", 2),
            answers=[ANSWERS[2]],
            extraction_status="error",
            error="HTTP 500 from http://127.0.0.1:1/v1 after 3 attempts",
        )
        store.add_samples(killed, [ScoredSample(failed, {}, position=2, gold_ids=gold_ids("hotpotqa", 2))])
        store.finish_run(killed, "interrupted", 1.0)
    train_id = f"train-search_r1-fixture{tag}"
    store.create_run(_run_record(train_id, "search_r1", proto, "recipe cpu-smoke", kind="train"))
    for step in range(3):
        store.add_train_steps(
            train_id,
            step,
            {
                "reward/total_mean": 0.1 * step,
                "reward/em_mean": 0.1 * step,
                "searches_mean": 1.0 + step,
                "response_len_mean": 100.0 - 10 * step,
                "kl": 0.01 * step,
                "clip_frac": 0.0,
            },
        )
    return FixtureDB(path=path, protocol=proto, other_protocol=other, run_ids=run_ids, train_run_id=train_id)


# -- a learning run: SFT, then RL from its checkpoint (the training page's held-out table) ---------
SFT_RUN = "sft-search_r1-fixture"
RL_RUN = "train-search_r1-fixture-rl"
SFT_STEPS = 2  # optimizer steps of the SFT run (stored 0, 1): its checkpoint is held-out step 2
RL_STEPS = 3  # of the RL run (stored 0, 1, 2)
PPO_RUN = "train-search_r1-fixture-ppo"  # an older PPO run from the base model: critic metrics
# held-out metrics per checkpoint (harness.rl.heldout.HeldoutReport.metrics without the prefix)
HELDOUT = {
    "untrained": {"em": 0.25, "em_lo": 0.05, "em_hi": 0.45, "f1": 0.3, "n": 20.0, "answered": 0.5,
                  "top_answer_share": 0.4, "answer_entropy_bits": 1.5},
    "sft": {"em": 0.4, "em_lo": 0.2, "em_hi": 0.6, "f1": 0.45, "n": 20.0, "answered": 0.9,
            "top_answer_share": 0.1, "answer_entropy_bits": 3.5},
    "sft+rl": {"em": 0.55, "em_lo": 0.35, "em_hi": 0.75, "f1": 0.6, "n": 20.0, "answered": 1.0,
               "top_answer_share": 0.05, "answer_entropy_bits": 4.0},
}  # fmt: skip


def build_training(path: Path) -> tuple[str, str]:
    """A database with only a learning run (no eval run), logged as the trainer and
    ``tests/rl/test_learning_sft_rl.py`` log it: ``harness sft --out runs/sft`` (``sft/loss``),
    then ``harness train --model runs/sft/final`` (rollout metrics under both ``sampled/`` and
    the kept-groups names, the sampled ones different), and ``heldout/*`` at each run's step 0 and
    at its checkpoint; and an older PPO run (``critic/*``, no held-out rows). Returns (SFT run id,
    RL run id)."""
    from dataclasses import replace
    from datetime import datetime, timedelta

    store = Store(path)
    proto = preset("mini")
    t0 = datetime(2026, 1, 1)  # naive UTC, as harness.results.store writes
    for i, (run_id, label, model, command) in enumerate(
        [
            (SFT_RUN, "sft recipe cpu-sft-rl", MODEL, "harness sft --method search_r1 --out runs/sft"),
            (RL_RUN, "recipe cpu-sft-rl", "runs/sft/final", "harness train --model runs/sft/final"),
            (PPO_RUN, "recipe cpu-ppo", MODEL, "harness train --recipe cpu-ppo"),
        ]
    ):
        rec = _run_record(run_id, "search_r1", proto, label, kind="train", model=model)
        store.create_run(replace(rec, command=command, started_at=t0 + timedelta(hours=(0, 1, -1)[i])))

    def heldout(run_id: str, step: int, name: str) -> None:
        store.add_train_steps(run_id, step, {f"heldout/{k}": v for k, v in HELDOUT[name].items()})

    for step in range(SFT_STEPS):
        store.add_train_steps(SFT_RUN, step, {"sft/loss": 2.0 - step, "sft/tokens": 100.0, "lr": 1e-3})
    heldout(SFT_RUN, 0, "untrained")
    heldout(SFT_RUN, SFT_STEPS, "sft")
    for step in range(RL_STEPS):
        kept = {"reward/total_mean": 0.5, "reward/outcome_mean": 0.5, "searches_mean": 1.0,
                "response_len_mean": 50.0}  # fmt: skip
        store.add_train_steps(
            RL_RUN,
            step,
            {**kept, **{f"sampled/{k}": 0.1 * step for k in kept}, "reward/total_std": 0.5, "kl": 0.0},
        )
    heldout(RL_RUN, 0, "sft")
    heldout(RL_RUN, RL_STEPS, "sft+rl")
    for step in range(2):
        store.add_train_steps(
            PPO_RUN,
            step,
            {"sampled/reward/total_mean": 0.1, "critic/vf_loss": 1.0 - 0.5 * step,
             "critic/values_mean": 0.1 * step, "critic/returns_mean": 0.2},
        )  # fmt: skip
    return SFT_RUN, RL_RUN
