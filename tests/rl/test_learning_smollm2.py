"""The trainer learns on the real thing (slow; ``tox -e slow``): the packaged SmolLM2-135M-Instruct,
Search-R1's rollout over the closed corpus (bm25s, top-3) on PopQA questions, Search-R1's
format-aware reward (``em_format``), GRPO with DAPO dynamic sampling: the ``cpu-learn`` recipe,
run through ``harness train`` exactly as the README shows.

Criterion: the mean reward over *every* rollout generated in the last 5 steps (``sampled/*``,
not the reward-filtered groups that are trained on) is clearly above the first 5 steps', and so
is the share of rollouts that close an ``<answer>`` span. A trainer that cannot learn (wrong sign,
masks, advantages, or no update at all) leaves both flat and fails. About 15 minutes on 2 cores.
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

pytestmark = pytest.mark.slow

WINDOW = 5


def _curve(db: Path, metric: str) -> list[float]:
    import duckdb

    with duckdb.connect(str(db), read_only=True) as con:
        rows = con.execute(
            "SELECT step, value FROM train_steps WHERE metric = ? ORDER BY step", [metric]
        ).fetchall()
    return [v for _, v in rows]


def _mean(xs: list[float]) -> float:
    return sum(xs) / len(xs)


def test_search_r1_format_reward_rises_on_smollm2(smollm2_dir: Path, tmp_path: Path):
    db = tmp_path / "train.duckdb"
    cmd = [
        sys.executable,
        "-m",
        "harness",
        "train",
        "--method",
        "search_r1",
        "--recipe",
        "cpu-learn",
        "--out",
        str(tmp_path / "run"),
        "--db",
        str(db),
    ]
    env = {**os.environ, "OMP_NUM_THREADS": os.environ.get("OMP_NUM_THREADS", "2")}
    proc = subprocess.run(cmd, capture_output=True, text=True, env=env, timeout=3 * 3600)
    assert proc.returncode == 0, proc.stderr[-3000:]
    print(proc.stderr[-4000:])  # the per-step log, shown with -s

    reward = _curve(db, "sampled/reward/total_mean")
    answered = _curve(db, "sampled/reward/answered_mean")
    assert len(reward) == len(answered) == 16
    first, last = _mean(reward[:WINDOW]), _mean(reward[-WINDOW:])
    print(f"sampled reward: first {WINDOW} steps {first:.3f}, last {WINDOW} steps {last:.3f}")
    assert last > first + 0.03 and last > 2 * first, reward
    assert _mean(answered[-WINDOW:]) > _mean(answered[:WINDOW]) + 0.2, answered
    assert (tmp_path / "run" / "final" / "config.json").exists()
