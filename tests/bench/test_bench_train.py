"""Training step benchmarks: seconds per GRPO step (group 4) on the tiny test model with our
trainer, peak memory, and the same step with TRL's GRPOTrainer side by side (same model, group,
batch, lengths, loss; TRL comes with the ``dev`` extra). Figures go to ``benchmark.extra_info``.

Run: ``pytest tests/bench/test_bench_train.py --benchmark-only -s``."""

from __future__ import annotations

import resource
import time
from pathlib import Path

import pytest

from harness.method import RewardBreakdown
from harness.protocol import CorpusRef, Protocol
from harness.rl.config import grpo
from harness.rl.recipe import Recipe
from harness.rl.trainer import Trainer
from harness.types import QAExample
from tests.support.toy import SingleTurnToy

GROUP, PROMPTS, NEW_TOKENS, STEPS = 4, 2, 32, 3
PROTO = Protocol(name="bench", corpus=CorpusRef(id="none", content_hash="0" * 64, n_passages=0))


def prompt_text(i: int) -> str:
    return f"Write a short sentence about topic number {i}."


def share_of_e(text: str) -> float:
    """The toy reward both trainers optimise: share of the letter 'e' in the completion."""
    return text.count("e") / max(len(text), 1)


class Toy(SingleTurnToy):
    name = "bench-toy"
    max_new_tokens = NEW_TOKENS

    def prompt(self, example):
        return prompt_text(int(example.id))

    def score(self, trajectory):
        return RewardBreakdown(total=share_of_e(trajectory.response))


def recipe() -> Recipe:
    algo = grpo().replace(
        group_size=GROUP,
        train_batch_size=PROMPTS,
        mini_batch_size=PROMPTS,
        lr=1e-5,
        kl_placement="none",
        kl_coef=0.0,
        loss_agg_mode="token-mean",
    )
    return Recipe(
        name="bench",
        method="bench-toy",
        algo=algo,
        steps=STEPS,
        bench="none",
        max_new_tokens=NEW_TOKENS,
        max_turns=0,
        top_k=1,
        max_obs_tokens=8,
        micro_batch_size=GROUP * PROMPTS,
    )


def examples() -> list[QAExample]:
    return [QAExample(id=str(i), dataset="toy", split="t", question=str(i), answers=("x",)) for i in range(8)]


def ours_step_seconds(tiny_dir: Path, out: Path) -> list[float]:
    tr = Trainer(
        Toy(),
        recipe(),
        model=str(tiny_dir),
        out_dir=out,
        protocol=PROTO,
        retriever=None,
        examples=examples(),
        log=lambda s: None,
    )
    return [s.metrics["seconds"] for s in tr.train().steps]


def trl_step_seconds(tiny_dir: Path, out: Path) -> list[float]:
    from datasets import Dataset
    from transformers import TrainerCallback
    from trl import GRPOConfig, GRPOTrainer

    times: list[float] = []

    class Timer(TrainerCallback):
        def on_step_begin(self, args, state, control, **kw):
            self.t0 = time.perf_counter()

        def on_step_end(self, args, state, control, **kw):
            times.append(time.perf_counter() - self.t0)

    def reward_fn(completions, **kw):
        return [share_of_e(c) for c in completions]

    ds = Dataset.from_list([{"prompt": prompt_text(i)} for i in range(8)])
    cfg = GRPOConfig(
        output_dir=str(out),
        use_cpu=True,
        per_device_train_batch_size=GROUP * PROMPTS,
        num_generations=GROUP,
        max_completion_length=NEW_TOKENS,
        max_steps=STEPS,
        beta=0.0,
        loss_type="grpo",
        learning_rate=1e-5,
        logging_steps=1,
        save_strategy="no",
        report_to=[],
        temperature=1.0,
        seed=0,
        dataloader_num_workers=0,
    )
    trainer = GRPOTrainer(
        model=str(tiny_dir), reward_funcs=reward_fn, args=cfg, train_dataset=ds, callbacks=[Timer()]
    )
    trainer.train()
    return times


def test_bench_grpo_step_ours(benchmark, tiny_dir, tmp_path):
    before = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    steps = benchmark.pedantic(lambda: ours_step_seconds(tiny_dir, tmp_path / "ours"), rounds=1, iterations=1)
    peak_mb = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
    benchmark.extra_info.update(
        {"seconds_per_step": steps[1:], "peak_rss_mb": peak_mb, "peak_rss_before_mb": before / 1024}
    )
    print(f"\nours: seconds per step {[round(s, 2) for s in steps]}, peak RSS {peak_mb:.0f} MB")
    assert len(steps) == STEPS


def test_bench_grpo_step_vs_trl(benchmark, tiny_dir, tmp_path):
    pytest.importorskip("trl", reason="TRL is in the dev extra")
    ours = ours_step_seconds(tiny_dir, tmp_path / "ours")
    trl = benchmark.pedantic(lambda: trl_step_seconds(tiny_dir, tmp_path / "trl"), rounds=1, iterations=1)
    # the first step of each warms caches; compare the later ones
    o, t = sum(ours[1:]) / (STEPS - 1), sum(trl[1:]) / (STEPS - 1)
    benchmark.extra_info.update({"ours_s": o, "trl_s": t, "ratio_ours_over_trl": o / t})
    print(
        f"\nGRPO step (G={GROUP}, {PROMPTS} prompts, {NEW_TOKENS} tokens): ours {o:.2f}s, TRL {t:.2f}s, "
        f"ratio {o / t:.2f}"
    )
    assert len(trl) == STEPS
