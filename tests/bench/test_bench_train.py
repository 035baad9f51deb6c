"""Training step benchmarks: seconds per GRPO step on the tiny test model with our trainer and with
TRL's GRPOTrainer side by side (same model, group, batch, lengths, loss, toy reward), through the
same code as the GPU acceptance check (``scripts/gpu_check.py``: ``ours_grpo`` / ``trl_grpo``).
Figures go to ``benchmark.extra_info``.

Run: ``pytest tests/bench/test_bench_train.py --benchmark-only -s``."""

from __future__ import annotations

import importlib.util
import resource
from pathlib import Path

import pytest
import torch

from tests.support.side_by_side import report

ROOT = Path(__file__).resolve().parents[2]
SIZES = {"group": 4, "prompts": 2, "new_tokens": 32, "steps": 3}
CPU = torch.device("cpu")


def gpu_check():
    spec = importlib.util.spec_from_file_location("gpu_check", ROOT / "scripts" / "gpu_check.py")
    assert spec is not None and spec.loader is not None
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


def test_bench_grpo_step_ours(benchmark, tiny_dir, tmp_path):
    gc = gpu_check()
    before = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    res = benchmark.pedantic(
        lambda: gc.ours_grpo(tiny_dir, CPU, "float32", tmp_path, SIZES), rounds=1, iterations=1
    )
    steps = res["step_s"]
    peak_mb = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
    benchmark.extra_info.update(
        {"seconds_per_step": steps[1:], "peak_rss_mb": peak_mb, "peak_rss_before_mb": before / 1024}
    )
    report(benchmark, f"ours: seconds per step {[round(s, 2) for s in steps]}, peak RSS {peak_mb:.0f} MB")
    assert len(steps) == SIZES["steps"]


def test_bench_grpo_step_vs_trl(benchmark, tiny_dir, tmp_path):
    pytest.importorskip("trl", reason="TRL is in the dev extra")
    gc = gpu_check()
    ours = gc.ours_grpo(tiny_dir, CPU, "float32", tmp_path, SIZES)["step_s"]
    trl = benchmark.pedantic(
        lambda: gc.trl_grpo(tiny_dir, CPU, "float32", tmp_path, SIZES)["step_s"], rounds=1, iterations=1
    )
    o, t = gc.median_later(ours), gc.median_later(trl)  # the first step of each warms caches
    benchmark.extra_info.update({"ours_s": o, "trl_s": t, "ratio_ours_over_trl": o / t})
    report(
        benchmark,
        f"GRPO step (G={SIZES['group']}, {SIZES['prompts']} prompts, {SIZES['new_tokens']} tokens): "
        f"ours {o:.2f}s, TRL {t:.2f}s, ratio {o / t:.2f}",
    )
    assert len(trl) == SIZES["steps"]
