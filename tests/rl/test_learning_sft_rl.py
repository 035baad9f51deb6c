"""The learning run (slow; ``tox -e slow``): SFT warm-up then GRPO on the real thing, judged on the
held-out questions against the untrained model, the template-majority baseline and each other, and
compared with the committed record of the run (``results/learning-2026-11-26.json``).

The packaged SmolLM2-135M-Instruct; Search-R1's rollout over the closed corpus (bm25s, top-3);
PopQA questions of the packaged ``learning`` split. Commands, as a user runs them:

1. ``harness sft --method search_r1 --recipe cpu-sft-grpo``: demonstrations built through the
   method's own rollout (real retrieval), on train questions only;
2. ``harness train --method search_r1 --recipe cpu-sft-grpo --model <sft>/final``: GRPO (DAPO
   dynamic sampling, groups of 8, token-F1 reward);
3. ``harness run --method search_r1 --model M --bench mini-singlehop --sample 100 --seed 20``
   under the mini protocol for the untrained model, the SFT and the SFT+RL checkpoints, every one
   on all 100 held-out questions. Each evaluation runs in the background while the next training
   stage goes on (its own database: DuckDB has one writer).

Criteria: the evaluated ids are exactly the split's held-out ids and no demonstration is one of
them; the untrained and SFT checkpoints' per-question EM is the committed record's (the run
reproduces; SFT+RL is only reported against it, see RL_RECORD_REPLACED); SFT beats
the untrained model and the template-majority baseline by a paired bootstrap on the same
questions (intervals above 0); neither trained checkpoint gives one answer to more than half the
questions (the reward-hack guard). The paired SFT+RL minus SFT difference is ASSERT_RL_GAIN's
business: see below. The ``heldout/*`` metrics (with the paired difference from each run's start)
and the baseline are written into ``train_steps`` of the SFT and RL runs.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from pathlib import Path

import pytest

pytestmark = pytest.mark.slow

RECIPE = "cpu-sft-grpo"
RECORD = Path(__file__).resolve().parents[2] / "results" / "learning-2026-11-26.json"
TOP_SHARE_MAX = 0.5
# The committed run's paired SFT+RL - SFT EM difference did not exclude 0 (docs/training.md): the
# test asserts the record is reproduced and reports the difference; set True once a recipe's
# committed record shows the gain, so that the gain itself is asserted.
ASSERT_RL_GAIN = False
# checkpoints whose record was made before RL's questions became disjoint from the warm-up's
RL_RECORD_REPLACED = ("sft+rl",)


def _env(threads: str = "2") -> dict[str, str]:
    """Training gets both cores, a background evaluation one; passive OpenMP waiting, so the
    overlapping processes do not spin against each other on a 2-core machine."""
    return {**os.environ, "OMP_NUM_THREADS": threads, "OMP_WAIT_POLICY": "PASSIVE"}


def _harness(*args: str) -> str:
    t0 = time.perf_counter()
    proc = subprocess.run(
        [sys.executable, "-m", "harness", *args], capture_output=True, text=True, env=_env(), timeout=3 * 3600
    )
    print(f"$ harness {' '.join(args)}  ({time.perf_counter() - t0:.0f}s)")
    print(proc.stderr[-2500:])
    assert proc.returncode == 0, proc.stderr[-3000:]
    return proc.stdout + proc.stderr


class _Background:
    """An evaluation that runs while training goes on (each command is one process; on 2 cores
    the evaluation of one checkpoint overlaps the training of the next)."""

    def __init__(self, log: Path, *args: str, threads: str = "1"):
        self.args, self.log, self.t0 = args, log, time.perf_counter()
        self.fh = log.open("w")
        self.proc = subprocess.Popen(
            [sys.executable, "-m", "harness", *args],
            stdout=self.fh,
            stderr=subprocess.STDOUT,
            env=_env(threads),
        )

    def wait(self) -> None:
        rc = self.proc.wait(timeout=3 * 3600)
        self.fh.close()
        text = self.log.read_text()
        print(f"$ harness {' '.join(self.args)}  ({time.perf_counter() - self.t0:.0f}s, overlapped)")
        print(text[-2500:])
        assert rc == 0, text[-3000:]


def _run_id(db: Path, label: str) -> str:
    import duckdb

    with duckdb.connect(str(db), read_only=True) as con:
        rows = con.execute("SELECT run_id FROM runs WHERE label = ? ORDER BY started_at", [label]).fetchall()
    assert len(rows) == 1, (label, rows)
    return rows[0][0]


def _train_run(out: str) -> str:
    return next(line.split()[1] for line in out.splitlines() if line.startswith("run: "))


def _train(tmp_path: Path, db: Path, heldout: set[str], evals: dict, evaluate, n: int) -> tuple[str, str]:
    """SFT, then RL from its checkpoint; each checkpoint's evaluation starts as soon as it exists."""
    sft_out = _harness(
        "sft",
        "--method",
        "search_r1",
        "--recipe",
        RECIPE,
        "--out",
        str(tmp_path / "sft"),
        "--db",
        str(db),
    )
    demo_ids = {
        json.loads(x)["id"] for x in (tmp_path / "sft" / "demonstrations.jsonl").read_text().splitlines()
    }
    assert demo_ids and not demo_ids & heldout
    evals["sft"] = evaluate("sft", str(tmp_path / "sft" / "final"), n)
    rl_out = _harness(
        "train",
        "--method",
        "search_r1",
        "--recipe",
        RECIPE,
        "--model",
        str(tmp_path / "sft" / "final"),
        "--out",
        str(tmp_path / "rl"),
        "--db",
        str(db),
    )
    evals["sft+rl"] = evaluate("sft+rl", str(tmp_path / "rl" / "final"), n, "2")  # nothing left to overlap
    for e in evals.values():
        e.wait()
    return sft_out, rl_out


def test_sft_then_grpo_raise_heldout_em_without_collapse(smollm2_dir: Path, tmp_path: Path):
    from harness.methods_registry import get_trainable
    from harness.results.store import Store
    from harness.rl.heldout import heldout_report, record_heldout
    from harness.rl.split import load_split

    db = tmp_path / "learn.duckdb"
    split = load_split("learning")
    heldout = set(split.heldout["popqa"])
    sel = split.heldout_selection

    def evaluate(label: str, model: str, n: int, threads: str = "1") -> _Background:
        return _Background(
            tmp_path / f"eval-{label}.log",
            "run",
            "--method",
            "search_r1",
            "--model",
            model,
            "--backend",
            "transformers",  # every checkpoint on the backend it was trained with
            "--bench",
            split.bench,
            "--sample",
            str(n),
            "--seed",
            str(sel.seed),
            "--db",
            str(tmp_path / f"eval-{label}.duckdb"),
            "--label",
            f"learning {label}",
            "--no-progress",
            threads=threads,
        )

    evals = {"untrained": evaluate("untrained", "smollm2-135m-instruct", sel.n)}
    try:
        sft_out, rl_out = _train(tmp_path, db, heldout, evals, evaluate, sel.n)
    finally:  # a failed stage leaves no evaluation running
        for e in evals.values():
            if e.proc.poll() is None:
                e.proc.kill()
    from harness.rl.heldout import paired_diff, record_baseline, template_majority_report
    from harness.rl.learning_record import checkpoints, load_record

    store = Store(db)
    reports = {
        label: heldout_report(
            Store(tmp_path / f"eval-{label}.duckdb"),
            _run_id(tmp_path / f"eval-{label}.duckdb", f"learning {label}"),
        )
        for label in evals
    }
    baseline = template_majority_report(split.name)
    print(baseline.line("template majority"))
    for label, rep in reports.items():
        print(rep.line(label))
    # what was evaluated is the held-out part, all of it, for every checkpoint
    for rep in reports.values():
        assert set(rep.sample_ids) == heldout

    # held-out metrics per checkpoint into train_steps: step = optimizer steps of that run so far
    sft_run, rl_run = _train_run(sft_out), _train_run(rl_out)
    sft_steps = store.query("SELECT max(step) AS s FROM train_steps WHERE run_id = ?", [sft_run])["s"][0]
    record_baseline(store, sft_run, baseline)
    record_heldout(store, sft_run, 0, reports["untrained"])
    record_heldout(store, sft_run, int(sft_steps) + 1, reports["sft"], against=reports["untrained"])
    record_heldout(store, rl_run, 0, reports["sft"])
    rl_steps = get_trainable("search_r1", RECIPE)[1].steps
    m = record_heldout(store, rl_run, rl_steps, reports["sft+rl"], against=reports["sft"])
    assert m["heldout/em"] == reports["sft+rl"].em.mean

    un, sft, rl = reports["untrained"], reports["sft"], reports["sft+rl"]
    over_untrained, over_baseline = paired_diff(un, sft), paired_diff(baseline, sft)
    rl_gain = paired_diff(sft, rl)
    print(f"SFT - untrained: {over_untrained.diff}; SFT - template majority: {over_baseline.diff}")
    print(f"SFT+RL - SFT (paired, EM): {rl_gain.diff}; {rl_gain.b_only} questions won, {rl_gain.a_only} lost")

    # the committed record is what this run measured, question by question (on the questions it
    # has: a checkpoint the record marks partial was stopped before the last ones)
    # SFT+RL is not compared: the recorded RL steps drew the warm-up's own questions (both stages
    # shuffled the training questions with one seed), and since issue 43 RL draws only questions
    # the warm-up did not use (harness.rl.split.stage_questions), so this run's RL rollouts, and its
    # SFT+RL checkpoint, are not the record's; the untrained model and the warm-up are unchanged
    committed = {c.label: c.report for c in checkpoints(load_record(RECORD))}
    for label, name in (("untrained", "untrained"), ("sft", "SFT"), ("sft+rl", "SFT+RL")):
        got = dict(zip(reports[label].sample_ids, reports[label].em_values, strict=True))
        want = dict(zip(committed[name].sample_ids, committed[name].em_values, strict=True))
        differ = [k for k in want if got[k] != want[k]]
        if label in RL_RECORD_REPLACED:
            print(
                f"{label}: {len(differ)} of {len(want)} questions differ from the record (its RL drew other questions)"
            )
            continue
        assert not differ, (label, len(differ), "questions differ from the record", differ[:5])

    assert over_untrained.diff.lo > 0 and over_baseline.diff.lo > 0  # the warm-up learned the task
    if ASSERT_RL_GAIN:
        assert rl_gain.diff.lo > 0, rl_gain
    for label in ("sft", "sft+rl"):  # reward-hack guard: no single answer takes over
        a = reports[label].answers
        assert a.top_share <= TOP_SHARE_MAX, (label, a)
