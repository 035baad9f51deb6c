"""Held-out evaluation with both metrics of issue 43 (harness.rl.heldout_eval): greedy EM, mean@k
EM and pass@k per question, the paired tests between two checkpoints (exact McNemar for 0/1
outcomes, the paired bootstrap for mean@k and F1), the collapse guard, the record round trip, and
evaluate_heldout's two passes (greedy at the protocol's decoding, then k samples a question with
one seed per (question, sample), whatever the batch size)."""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path

import numpy as np
import pytest
from scipy.stats import binomtest

from harness.errors import ConfigError
from harness.metrics.paired import BOOTSTRAP, MCNEMAR, paired_bootstrap_diff
from harness.types import QAExample
from tests.support.scripted import ScriptedBackend
from tests.support.scripts import load_script


def _eval(
    label, greedy_em, sampled_em=(), *, ids=None, preds=None, sampled=None, engine="llamacpp", temp=1.0
):
    from harness.rl.heldout_eval import HeldoutEval

    n = len(greedy_em)
    ids = ids or [f"q{i}" for i in range(n)]
    return HeldoutEval(
        label=label,
        model=label,
        engine=engine,
        method="search_r1",
        protocol_id="p",
        temperature=temp if sampled_em else 0.0,
        seed=0,
        sample_ids=tuple(ids),
        greedy=tuple(preds or [f"answer {i}" for i in range(n)]),
        greedy_em=tuple(float(x) for x in greedy_em),
        greedy_f1=tuple(float(x) for x in greedy_em),
        greedy_cover_em=tuple(float(x) for x in greedy_em),
        sampled=tuple(
            sampled or [tuple(f"s{i}.{j}" for j in range(len(r))) for i, r in enumerate(sampled_em)]
        ),
        sampled_em=tuple(tuple(float(x) for x in r) for r in sampled_em),
    )


def test_mean_at_k_and_pass_at_k_per_question():
    ev = _eval("a", [1, 0, 0], [[1, 0, 0, 1], [0, 0, 0, 0], [1, 1, 1, 1]])
    assert ev.k == 4
    assert ev.mean_at_k().tolist() == [0.5, 0.0, 1.0]
    assert ev.pass_at_k().tolist() == [1.0, 0.0, 1.0]
    s = ev.summary()
    assert s["mean_em"].mean == pytest.approx(0.5)
    assert s["pass_em"].mean == pytest.approx(2 / 3)
    assert s["greedy_em"].mean == pytest.approx(1 / 3)
    m = ev.metrics()
    assert m["heldout/mean@4_em"] == pytest.approx(0.5) and m["heldout/pass@4_em"] == pytest.approx(2 / 3)
    assert m["heldout/k"] == 4 and m["heldout/n"] == 3
    assert ev.spread_share() == pytest.approx(1 / 3)  # only the first question's samples disagree
    assert m["heldout/spread_share"] == pytest.approx(1 / 3)
    with pytest.raises(ConfigError, match="different numbers of samples"):
        _eval("b", [1, 0], [[1, 0], [1]])
    with pytest.raises(ConfigError, match="no mean@k"):
        _eval("c", [1, 0]).mean_at_k()


def test_compare_greedy_em_is_exact_mcnemar_and_mean_at_k_the_paired_bootstrap():
    from harness.rl.heldout_eval import compare

    # 10 questions: b right where a is wrong on 6, a right where b is wrong on 1
    ga = [0, 0, 0, 0, 0, 0, 1, 1, 1, 0]
    gb = [1, 1, 1, 1, 1, 1, 0, 1, 1, 0]
    # every question's samples agree, so mean@k is 0/1 here, and still bootstrapped, not McNemar
    sa = [[x] * 4 for x in ga]
    sb = [[x] * 4 for x in gb]
    a, b = _eval("a", ga, sa), _eval("b", gb, sb)
    c = compare(a, b)
    t = c.tests["greedy_em"]
    assert t.test == MCNEMAR and (t.b_better, t.a_better) == (6, 1)
    assert t.p == pytest.approx(0.125)  # 2 * (C(7,6) + C(7,7)) / 2**7
    assert t.p == pytest.approx(binomtest(6, 7, 0.5).pvalue)
    assert t.diff.mean == pytest.approx(0.5)
    m = c.tests["mean_em"]
    assert m.test == BOOTSTRAP
    assert m.diff.mean == pytest.approx(0.5)
    ref = paired_bootstrap_diff(np.array(ga, float), np.array(gb, float))
    assert (m.diff.lo, m.diff.hi) == pytest.approx((ref.lo, ref.hi))
    assert c.tests["pass_em"].test == MCNEMAR and c.tests["greedy_f1"].test == BOOTSTRAP


def test_compare_pairs_by_question_id_not_position():
    from harness.rl.heldout_eval import compare

    ids = ["q0", "q1", "q2", "q3"]
    a = _eval("a", [1, 0, 0, 0], [[1, 1], [0, 0], [0, 0], [0, 1]], ids=ids)
    # b: the same questions listed in reverse; b gains q1 and q2 in samples, loses nothing
    # (rows given in b's own order q3, q2, q1, q0)
    b = _eval("b", [0, 0, 0, 1], [[1, 0], [1, 1], [0, 1], [1, 1]], ids=ids[::-1])
    c = compare(a, b)
    assert c.tests["greedy_em"].diff.mean == 0.0  # b's greedy [1, 0, 0, 0] in a's order: equal
    # mean@2: a = [1, 0, 0, .5], b = [1, .5, 1, .5] -> +0.375
    assert c.tests["mean_em"].diff.mean == pytest.approx(0.375)
    assert (c.tests["mean_em"].b_better, c.tests["mean_em"].a_better) == (2, 0)


def test_compare_refuses_other_questions_engines_or_k():
    from harness.rl.heldout_eval import compare

    a = _eval("a", [1, 0], [[1, 0], [0, 0]])
    with pytest.raises(ConfigError, match="same questions"):
        compare(a, _eval("b", [1, 0], [[1, 0], [0, 0]], ids=["q0", "x"]))
    with pytest.raises(ConfigError, match="engine"):
        compare(a, _eval("b", [1, 0], [[1, 0], [0, 0]], engine="transformers"))
    with pytest.raises(ConfigError, match="same k"):
        compare(a, _eval("b", [1, 0], [[1, 0, 1], [0, 0, 0]]))
    base = _eval("template majority", [0, 0], engine="none")
    assert set(compare(base, a).tests) == {"greedy_em", "greedy_f1"}  # no samples in the baseline


def test_collapse_guard_is_the_top_answer_share():
    preds = ["Paris", "paris", "the Paris", "Rome", "Oslo", "Bern", "Kyiv", "Riga", "Baku", None]
    ev = _eval("a", [0] * 10, preds=preds)
    g = ev.greedy_answers()
    assert (g.top_answer, g.top_share) == ("paris", 0.3)  # normalised: articles and case dropped
    assert ev.collapsed() and not ev.collapsed(share=0.3)
    spread = _eval("b", [0] * 10, [[0, 0]] * 10, sampled=[(f"a{i}", f"b{i}") for i in range(10)])
    assert not spread.collapsed()
    assert spread.sampled_answers().top_share == pytest.approx(0.05)


def test_record_round_trip_is_exact():
    from harness.rl.heldout_eval import HeldoutEval

    ev = _eval("a", [1, 0, 1], [[1, 0], [0, 0], [1, 1]], ids=["q2", "q0", "q1"])
    back = HeldoutEval.from_dict(ev.to_dict())
    assert back.to_dict() == ev.to_dict()
    assert back.sample_ids == ("q0", "q1", "q2")  # rows sorted by id
    assert back.mean_at_k().tolist() == [0.0, 1.0, 0.5]


class _SeedRecorder(ScriptedBackend):
    """Answers each prompt with its sampling seed (seed + index in the call) or 'greedy'."""

    def __init__(self):
        super().__init__({}, default="")
        self.seen: list[tuple[float, int | None, int]] = []

    def generate(self, prompts, *, stop, max_new_tokens, sampling, include_stop=False):
        self.seen.append((sampling.temperature, sampling.seed, len(prompts)))
        out = []
        for i, p in enumerate(prompts):
            self.script = {p: ["greedy" if sampling.temperature == 0 else f"s{sampling.seed + i}"]}
            out += super().generate([p], stop=stop, max_new_tokens=max_new_tokens, sampling=sampling)
        return out


def _questions(n: int) -> list[QAExample]:
    return [
        QAExample(
            id=f"q{i}",
            dataset="popqa",
            split="test",
            question=f"Question number {i}?",
            answers=["greedy" if i == 0 else "s5"],
        )
        for i in range(n)
    ]


@pytest.mark.parametrize("batch_size", [1, 2, 5])
def test_evaluate_heldout_seeds_every_sample_once_whatever_the_batch(batch_size):
    from harness.rl.heldout_eval import evaluate_heldout

    qs = _questions(3)
    be = _SeedRecorder()
    ev = evaluate_heldout(
        "scripted",
        qs,
        method="direct",
        samples=2,
        temperature=0.7,
        seed=0,
        backend=be,
        batch_size=batch_size,
        progress=False,
    )
    assert all(t == 0 for t, _s, _n in be.seen[: -(-3 // batch_size)])  # the greedy pass first
    # the sampled pass: question i's sample j has seed 2 i + j (seed 0), one each
    assert ev.sampled == (("s0", "s1"), ("s2", "s3"), ("s4", "s5"))
    assert ev.greedy == ("greedy",) * 3
    assert ev.greedy_em == (1.0, 0.0, 0.0)
    assert ev.sampled_em == ((0.0, 0.0), (0.0, 0.0), (0.0, 1.0))  # 's5' is q2's gold
    assert ev.temperature == 0.7 and ev.k == 2


def test_evaluate_heldout_refuses_samples_without_temperature():
    from harness.rl.heldout_eval import evaluate_heldout

    with pytest.raises(ConfigError, match="temperature"):
        evaluate_heldout(
            "scripted", _questions(1), method="direct", samples=8, temperature=0, backend=_SeedRecorder()
        )


def test_template_majority_eval_matches_the_heldout_report():
    """The baseline as an evaluation scores what harness.rl.heldout.template_majority_report scores."""
    from harness.rl.heldout import template_majority_report
    from harness.rl.heldout_eval import template_majority_eval

    ev = template_majority_eval("learning")
    rep = template_majority_report("learning")
    assert dict(zip(ev.sample_ids, ev.greedy_em, strict=True)) == dict(
        zip(rep.sample_ids, rep.em_values, strict=True)
    )
    assert ev.summary()["greedy_em"].mean == pytest.approx(0.19)  # docs/training.md: 0.190 on learning's 100
    assert replace(ev, label="x").engine == "none"


def test_recipe_heldout_fields():
    from harness.methods_registry import get_method

    r = get_method("search_r1").recipes()["cpu-grpo-long"]
    assert (r.heldout_every, r.heldout_samples, r.split) == (20, 8, "learning-400")
    assert "PRIMARY" in r.sources["heldout_samples"]
    with pytest.raises(ConfigError, match="set split"):
        r.with_overrides(["split=null"])
    assert r.with_overrides(["heldout_every=0", "split=null"]).heldout_every == 0


def test_heldout_at_step_runs_on_schedule_only(tmp_path):
    from harness.methods_registry import get_method
    from harness.rl.heldout_eval import heldout_at_step

    r = get_method("search_r1").recipes()["cpu-grpo-long"]
    assert heldout_at_step(r, "unused", None, 7, tmp_path) is None  # 7 is not a multiple of 20
    assert not (tmp_path / "heldout").exists()


def test_record_check_and_tables():
    """A record holds evaluations over exactly the split's held-out questions; the baseline rows
    must be the baseline recomputed now; its tables name its pairs."""
    from harness.rl.heldout_eval import (
        RECORD_SCHEMA,
        check_record,
        put_eval,
        record_tables,
        template_majority_eval,
    )

    base = template_majority_eval("learning")
    other = replace(base, label="copy", engine="llamacpp", method="m", protocol_id="p")
    rec = put_eval(put_eval({"schema": RECORD_SCHEMA, "split": "learning", "evaluations": []}, base), other)
    check_record(rec)
    text = record_tables({**rec, "pairs": [["template majority", "copy"]]})
    assert (
        "| copy - template majority | greedy_em | +0.000 [+0.000, +0.000] | exact McNemar | 1 | 0 / 0 |"
        in text
    )
    short = replace(
        other,
        sample_ids=other.sample_ids[:-1],
        greedy=other.greedy[:-1],
        greedy_em=other.greedy_em[:-1],
        greedy_f1=other.greedy_f1[:-1],
        greedy_cover_em=other.greedy_cover_em[:-1],
    )
    with pytest.raises(ConfigError, match="not the 100 held-out"):
        check_record(put_eval(rec, short))
    edited = base.to_dict()
    edited["rows"][0]["greedy"] = "someone else"
    with pytest.raises(ConfigError, match="recomputed now"):
        check_record({**rec, "evaluations": [edited]})
    with pytest.raises(ConfigError, match="not one of its evaluations"):
        record_tables({**rec, "pairs": [["template majority", "SFT"]]})


def test_the_documented_heldout_tables_are_the_records():
    """docs/training.md prints exactly `scripts/eval_heldout.py tables` of the committed record of
    the 400 held-out questions' baselines, and the record passes check_record."""
    from pathlib import Path

    from harness.rl.heldout_eval import check_record, load_record, record_tables

    root = Path(__file__).resolve().parents[2]
    record = load_record(root / "results" / "heldout-learning-400-2026-11-27.json")
    check_record(record)
    assert record["split"] == "learning-400"
    assert record_tables(record) in (root / "docs" / "training.md").read_text()


def test_heldout_at_step_reuses_an_evaluation_of_the_same_weights_and_settings_only(tmp_path, monkeypatch):
    """A run restarted into a folder that holds the step-0 evaluation of the same warm start does
    not redo it; other weights (adapter bytes) or other settings are evaluated anew."""
    import json

    from harness.methods_registry import get_method
    from harness.rl import heldout_eval as he

    r = get_method("search_r1").recipes()["cpu-grpo-long"].with_overrides(["heldout_samples=0"])
    folder = tmp_path / "heldout"
    folder.mkdir()
    ev = replace(_eval("step 0", [1, 0, 1]), model="runs/sft/final", seed=r.seed)
    (folder / "step-0.json").write_text(json.dumps(ev.to_dict()))

    class Asked(Exception):
        pass

    def evaluate(*a, **k):
        raise Asked

    monkeypatch.setattr(he, "evaluate_heldout", evaluate)
    got = he.heldout_at_step(r, "runs/sft/final", None, 0, tmp_path, log=lambda s: None)
    assert got is not None and got.greedy_em == (1.0, 0.0, 1.0)
    with pytest.raises(Asked):  # another starting model
        he.heldout_at_step(r, "runs/other/final", None, 0, tmp_path, log=lambda s: None)
    with pytest.raises(Asked):  # another seed
        he.heldout_at_step(
            r.with_overrides(["seed=7"]), "runs/sft/final", None, 0, tmp_path, log=lambda s: None
        )
    # with an adapter: reused only when the one just written is the evaluated one, byte for byte
    (folder / "step-0.gguf").write_bytes(b"weights A")
    (folder / "new.gguf").write_bytes(b"weights A")
    assert he._same_evaluation(
        folder / "step-0.json", folder / "step-0.gguf", folder / "new.gguf", "runs/sft/final", r, 0
    )
    (folder / "new.gguf").write_bytes(b"weights B")
    assert (
        he._same_evaluation(
            folder / "step-0.json", folder / "step-0.gguf", folder / "new.gguf", "runs/sft/final", r, 0
        )
        is None
    )
    assert (
        he._same_evaluation(folder / "step-0.json", folder / "step-0.gguf", None, "runs/sft/final", r, 0)
        is None
    )


def test_a_saved_checkpoint_is_evaluated_as_the_trainers_held_out_step(tiny_dir, tmp_path, monkeypatch):
    """A run that deferred its held-out evaluations (heldout_every=0, checkpoints kept) evaluates a
    kept checkpoint afterwards with the trained weights, not the fresh adapter: the adapter written
    for step 20 is the saved policy's, byte for byte, and the evaluation lands where the trainer's
    would (heldout/step-20.json)."""
    import json

    import torch

    from harness.llm.gguf_lora import write_lora_gguf
    from harness.methods_registry import get_method
    from harness.rl import heldout_eval as he
    from harness.rl.trainer import load_policy, saved_policy

    r = (
        get_method("search_r1")
        .recipes()["cpu-grpo-long"]
        .with_overrides(
            ["heldout_every=0", "heldout_samples=0", "lora.layers=[0, 1]"]  # the tiny model has 2 layers
        )
    )
    policy, _, _ = load_policy(str(tiny_dir), r, with_reference=False)
    fresh = write_lora_gguf(policy, tmp_path / "fresh.gguf").read_bytes()
    torch.manual_seed(1)
    with torch.no_grad():
        for name, p in policy.named_parameters():
            if "lora_B" in name:
                p.normal_(0, 0.02)  # a trained policy: LoRA's B leaves zero
    trained = write_lora_gguf(policy, tmp_path / "trained.gguf").read_bytes()
    assert trained != fresh
    saved = tmp_path / "kept" / "step-20"
    saved.mkdir(parents=True)
    torch.save(policy.state_dict(), saved / "policy_state.pt")
    (saved / "recipe.json").write_text(r.model_dump_json())
    (saved / "progress.json").write_text(json.dumps({"step": 20, "steps": 100, "run_id": "train-x"}))

    got, recipe, step = saved_policy(str(tiny_dir), saved)
    assert step == 20 and recipe == r
    asked = {}

    def evaluate(model, questions, **kw):
        asked.update(kw, model=model)
        return replace(_eval("step 20", [1, 0]), model=model, seed=kw["seed"])

    monkeypatch.setattr(he, "evaluate_heldout", evaluate)
    run = tmp_path / "run"
    ev = he.evaluate_step(recipe, "runs/sft/final", got, step, run, samples=0, log=lambda s: None)
    assert asked["adapters"] == [run / "heldout" / "step-20.gguf"] and asked["samples"] == 0
    assert (run / "heldout" / "step-20.gguf").read_bytes() == trained
    assert he.HeldoutEval.from_dict(json.loads((run / "heldout" / "step-20.json").read_text())) == ev
    (saved / "progress.json").unlink()
    with pytest.raises(ConfigError, match="progress.json"):
        saved_policy(str(tiny_dir), saved)


def test_parts_sample_with_the_whole_evaluations_seeds_and_merge_into_it():
    """An evaluation made in parts (evaluate_heldout's ``first``) draws each question's samples with
    the seeds one evaluation of every question would, so merge_parts gives that evaluation, row for
    row; parts of other settings, overlapping or leaving a question out are refused."""
    from harness.rl.heldout_eval import evaluate_heldout, merge_parts

    qs = _questions(5)

    def ev(part, first):
        return evaluate_heldout(
            "scripted",
            part,
            method="direct",
            samples=2,
            temperature=0.7,
            seed=3,
            backend=_SeedRecorder(),
            batch_size=2,
            progress=False,
            first=first,
        )

    whole = ev(qs, 0)
    a, b = ev(qs[:2], 0), ev(qs[2:], 2)
    assert b.sampled == whole.sampled[2:] and a.sampled == whole.sampled[:2]
    assert ev(qs[2:], 0).sampled != whole.sampled[2:]  # without ``first`` the seeds would repeat a's
    merged = merge_parts([b, a], qs)
    assert replace(merged, seconds=0.0, meta={}) == replace(whole, seconds=0.0, meta={})
    assert merged.seconds == a.seconds + b.seconds
    with pytest.raises(ConfigError, match="differ in seed"):
        merge_parts([a, replace(b, seed=4)], qs)
    with pytest.raises(ConfigError, match="two parts"):
        merge_parts([a, b, a], qs)
    with pytest.raises(ConfigError, match="cover 3 questions"):
        merge_parts([b], qs)


def test_a_step_evaluated_in_parts_is_merged_and_recorded_once_the_parts_cover_the_set(tmp_path, monkeypatch):
    """evaluate_step(questions=(lo, hi)) writes heldout/step-N.qLO-HI.json; step-N.json (what a
    whole evaluation writes) and its train_steps rows come only when the parts of the same weights
    cover the held-out set, and never from a part of other weights."""
    import json

    from harness.methods_registry import get_method
    from harness.rl import heldout_eval as he

    r = get_method("search_r1").recipes()["cpu-grpo-long"].with_overrides(["heldout_samples=0"])
    qs = he.heldout_questions(r.split)
    asked, recorded = [], []

    def evaluate(model, questions, **kw):
        asked.append((questions[0].id, len(questions), kw["first"]))
        n = len(questions)
        return replace(
            _eval("step 20", [1, 0] * (n // 2) + [1] * (n % 2), [[1, 0]] * n, ids=[e.id for e in questions]),
            model=model,
            seed=kw["seed"],
            temperature=kw["temperature"],
        )

    monkeypatch.setattr(he, "evaluate_heldout", evaluate)
    monkeypatch.setattr(
        he, "record_heldout_eval", lambda store, run_id, step, ev, against: recorded.append(ev)
    )
    run, log = tmp_path / "run", []

    def part(lo, hi):
        return he.evaluate_step(
            r,
            "runs/sft/final",
            None,
            20,
            run,
            samples=2,
            store="db",
            run_id="train-x",
            log=log.append,
            questions=(lo, hi),
        )

    first = part(0, 150)
    assert first.n == 150 and asked == [(qs[0].id, 150, 0)]
    assert (run / "heldout" / "step-20.q0-150.json").is_file() and not (
        run / "heldout" / "step-20.json"
    ).exists()
    assert not recorded
    part(0, 150)  # the same part again: reused, not evaluated
    assert len(asked) == 1
    # a part of other weights does not complete this one
    other = replace(
        evaluate("runs/other/final", qs[150:], first=150, seed=r.seed, temperature=1.0),
        meta={"questions": [150, len(qs)]},
    )
    (run / "heldout" / f"step-20.q150-{len(qs)}.json").write_text(json.dumps(other.to_dict()))
    with pytest.raises(ConfigError, match="questions 150:401"):
        part(150, len(qs) + 1)
    assert not (run / "heldout" / "step-20.json").exists()
    merged = part(150, len(qs))
    assert asked[-1] == (qs[150].id, len(qs) - 150, 150)
    assert merged.n == len(qs) and merged.sample_ids == tuple(e.id for e in qs)
    assert [p["questions"] for p in merged.meta["parts"]] == [[0, 150], [150, len(qs)]]
    written = he.HeldoutEval.from_dict(json.loads((run / "heldout" / "step-20.json").read_text()))
    assert written.to_dict() == merged.to_dict()  # the file's rows are sorted by id
    assert recorded == [merged]


def test_the_methods_own_reward_is_scored_per_question_kept_and_paired(monkeypatch):
    """``reward=(name, ctx)`` scores each greedy trajectory with the method's reward table, in the
    questions' order; the column survives the record and is paired only between evaluations scored
    with the same reward (a baseline without it pairs on EM and F1 alone)."""
    import harness.methods_registry as reg
    from harness.method import RewardBreakdown, RewardContext, TrainableMethod, reward_fn
    from harness.rl.heldout_eval import HeldoutEval, compare, evals_table, evaluate_heldout

    seen = []

    class DirectTrained(type(reg.get_method("direct")), TrainableMethod):
        """The direct baseline's answers, with a batched training reward: the answer's length."""

        def rollout_config(self, protocol):
            return None

        @reward_fn("em_like", default=True, batched=True)
        def length_reward(self, trajs, *, name, ctx):
            seen.append((name, ctx.step))
            return [RewardBreakdown(total=float(len(t.prediction or "")), components={}) for t in trajs]

    direct = DirectTrained()
    monkeypatch.setattr(reg, "get_method", lambda n: direct)
    qs = _questions(3)
    be = _ByQuestion({f"Question number {i}?": "x" * (i + 1) for i in range(3)})
    ev = evaluate_heldout(
        "scripted",
        qs,
        method="direct",
        samples=0,
        backend=be,
        batch_size=2,
        progress=False,
        reward=("em_like", RewardContext(step=49, total_steps=50)),
    )
    assert seen == [("em_like", 49)]
    assert ev.reward == "em_like"
    assert ev.greedy == ("x", "xx", "xxx")
    assert ev.greedy_reward == (1.0, 2.0, 3.0)
    back = HeldoutEval.from_dict(ev.to_dict())
    assert back.to_dict() == ev.to_dict() and back.greedy_reward == ev.greedy_reward
    other = replace(ev, label="b", greedy_reward=tuple(r + 1.0 for r in ev.greedy_reward))
    tests = compare(ev, other).tests
    assert tests["greedy_reward"].diff.mean == pytest.approx(1.0)
    bare = replace(ev, label="baseline", reward="", greedy_reward=())
    assert "greedy_reward" not in compare(bare, ev).tests
    assert "(em_like)" in evals_table([ev, bare])
    with pytest.raises(ConfigError, match="one value per question"):
        replace(ev, greedy_reward=ev.greedy_reward[:2])
    # a baseline has no training reward: refused before any engine is opened or answer generated
    monkeypatch.setattr(reg, "get_method", lambda n: reg.METHODS.get(n)())
    with pytest.raises(ConfigError, match="'direct' is a baseline with no training reward"):
        evaluate_heldout("no-such-model", qs, method="direct", samples=0, progress=False, reward=("em", None))


class _ByQuestion(ScriptedBackend):
    """Answers each prompt with the text scripted for the question it contains."""

    def __init__(self, by_question):
        super().__init__({}, default="")
        self.by_question = by_question

    def generate(self, prompts, *, stop, max_new_tokens, sampling, include_stop=False):
        out = []
        for p in prompts:
            (text,) = [t for q, t in self.by_question.items() if q in p]
            self.script = {p: [text]}
            out += super().generate([p], stop=stop, max_new_tokens=max_new_tokens, sampling=sampling)
        return out


def test_eval_heldout_merge_joins_the_parts_of_a_run_into_the_whole_evaluation(tmp_path):
    """``eval_heldout.py run --questions LO:HI`` parts, each in its own record, are joined by
    ``merge`` into one evaluation over the split's held-out ids in their order; a gap is refused."""
    import json

    from harness.rl.heldout_eval import heldout_questions, load_record, record_evals

    tool = load_script("eval_heldout")
    ids = [e.id for e in heldout_questions("learning-multihop")]
    files = []
    for lo, hi in ((0, 150), (150, len(ids))):
        ev = _eval("RL", [float(i % 3 == 0) for i in range(lo, hi)], ids=ids[lo:hi])
        ev = replace(
            ev, meta={"questions": [lo, hi]}, reward="r", greedy_reward=tuple(float(i) for i in range(lo, hi))
        )
        f = tmp_path / f"part{lo}.json"
        f.write_text(
            json.dumps(
                {"schema": 1, "split": "learning-multihop", "commit": "c0ffee", "evaluations": [ev.to_dict()]}
            )
        )
        files.append(f)
    out = tmp_path / "whole.json"
    assert tool.main(["merge", *map(str, files), "--label", "RL", "--record", str(out)]) == 0
    (whole,) = record_evals(load_record(out))
    by_id = dict(zip(whole.sample_ids, whole.greedy_reward, strict=True))
    assert sorted(whole.sample_ids) == sorted(ids)
    assert [by_id[q] for q in ids] == [float(i) for i in range(len(ids))]
    assert sum(whole.greedy_em) == sum(float(i % 3 == 0) for i in range(len(ids)))
    assert whole.meta["commit"] == "c0ffee"  # the parts' code, read once per part
    with pytest.raises(ConfigError, match="cover 150 questions"):
        tool.main(["merge", str(files[0]), "--label", "RL", "--record", str(tmp_path / "gap.json")])


def test_a_record_written_outside_a_git_checkout_names_the_exported_commit(tmp_path, monkeypatch):
    """A learning run's evaluations run from an exported copy (git archive: no git), so the record
    takes its commit from HARNESS_COMMIT, as scripts/learning_run.sh does; inside a checkout git's
    commit wins."""
    import json

    import harness.results.lifecycle as lifecycle

    tool = load_script("eval_heldout")
    monkeypatch.setenv("HARNESS_COMMIT", "f8ba33b")
    monkeypatch.setattr(lifecycle, "_GIT_COMMIT", "")
    tool._write(tmp_path / "a.json", {"schema": 1, "split": "s", "evaluations": []})
    assert json.loads((tmp_path / "a.json").read_text())["commit"] == "f8ba33b"
    monkeypatch.setattr(lifecycle, "_GIT_COMMIT", "4e6aa6e")
    tool._write(tmp_path / "b.json", {"schema": 1, "split": "s", "evaluations": []})
    assert json.loads((tmp_path / "b.json").read_text())["commit"] == "4e6aa6e"


def test_run_refuses_a_record_of_unknown_code_before_evaluating(tmp_path, monkeypatch):
    """Outside a checkout without HARNESS_COMMIT the record could name no commit: refused in one
    line before any model is opened (the evaluation would otherwise run for an hour first)."""
    import harness.results.lifecycle as lifecycle
    from harness.errors import ConfigError

    tool = load_script("eval_heldout")
    monkeypatch.delenv("HARNESS_COMMIT", raising=False)
    monkeypatch.setattr(lifecycle, "_GIT_COMMIT", "")
    monkeypatch.setattr(tool, "_run_eval", lambda *a: pytest.fail("evaluated before refusing"))
    argv = [
        "run",
        "--split",
        "learning-multihop",
        "--method",
        "naive_rag",
        "--model",
        "smollm2-135m-instruct",
    ]
    argv += ["--label", "x", "--samples", "0", "--record", str(tmp_path / "r.json")]
    with pytest.raises(ConfigError, match="r.json: no git commit here and HARNESS_COMMIT is unset"):
        tool.main(argv)
    assert not (tmp_path / "r.json").exists()


# -- replay_ranges: the batches a re-evaluation must reproduce ------------------------------------------


def _placed(order, positions, meta):
    """An evaluation of order[p] for p in positions, its rows sorted by id (as a committed record's)."""
    ids = sorted(order[p] for p in positions)
    return replace(_eval("x", [0] * len(ids), ids=ids), meta=meta)


def test_replay_ranges_are_the_committed_batches_of_a_merged_evaluation():
    from harness.rl.heldout_eval import replay_ranges

    order = [f"q{i:03d}" for i in range(40)][::-1]  # held-out order is not id order
    merged = _placed(order, range(40), {"parts": [{"questions": [0, 21]}, {"questions": [21, 40]}]})
    # the first 20 in held-out order were answered 8 at a time from position 0: 0-7, 8-15, 16-20
    assert replay_ranges(merged, order, 20) == [(0, 21)]
    assert replay_ranges(merged, order, 3) == [(0, 8)]
    # past the first part: its last batch is cut at 21, and the second part's batches start at 21
    assert replay_ranges(merged, order, 23) == [(0, 21), (21, 29)]


def test_replay_ranges_of_one_part_and_of_another_batch_size():
    from harness.rl.heldout_eval import replay_ranges

    order = [f"q{i:03d}" for i in range(40)]
    part = _placed(order, range(21, 40), {"questions": [21, 40], "batch_size": 4})
    assert replay_ranges(part, order, 6) == [(21, 29)]
    whole = _placed(order, range(12), {})  # neither parts nor a range: from position 0, batches of 8
    assert replay_ranges(whole, order, 12) == [(0, 12)]
    with pytest.raises(ConfigError, match="q039 of 'x' is not held out"):
        replay_ranges(_placed(order, [39], {}), order[:39], 1)


def test_the_engines_tokens_a_slot_are_the_callers_and_each_part_keeps_its_own(monkeypatch):
    """ARENA's 20-paragraph MuSiQue prompts with its 1,024 new tokens exceed llama.cpp's default
    4,096 tokens a slot (the 2026-11-30 evaluation parts from question 275 stopped at their first
    batch): ``n_ctx`` reaches the engine's spec, is refused for transformers, and each merged part
    keeps the value it ran with."""
    import harness.llm.llamacpp_backend as llamacpp_backend
    from harness.llm.base import BackendSpec
    from harness.rl.heldout_eval import merge_parts, open_engine

    specs = []

    class Recorder:
        def __init__(self, spec, **kw):
            specs.append(spec)

    monkeypatch.setattr(llamacpp_backend, "LlamaCppBackend", Recorder)
    open_engine("default", work_dir=Path("unused"), n_ctx=8192)
    open_engine("default", work_dir=Path("unused"))
    assert [s.n_ctx for s in specs] == [8192, BackendSpec.model_fields["n_ctx"].default]
    assert specs[1].n_ctx == 4096
    with pytest.raises(ConfigError, match="n_ctx applies to engine 'llamacpp' only"):
        open_engine("default", engine="transformers", work_dir=Path("unused"), n_ctx=8192)

    qs = _questions(4)
    a = replace(_eval("x", [1, 0], ids=[q.id for q in qs[:2]]), meta={"questions": [0, 2], "threads": 1})
    b = replace(
        _eval("x", [0, 1], ids=[q.id for q in qs[2:]]),
        meta={"questions": [2, 4], "threads": 1, "n_ctx": 8192},
    )
    parts = merge_parts([a, b], qs).meta["parts"]
    assert [p.get("n_ctx") for p in parts] == [None, 8192]
