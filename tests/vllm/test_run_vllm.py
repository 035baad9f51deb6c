"""``harness run --backend vllm`` end to end: Search-R1 and direct on two questions of each
mini-multihop dataset under the ``mini`` protocol (Search-R1's evaluation settings, top-3, 4
turns, 500 tokens per turn and per observation, greedy, over the packaged closed corpus: the
``searchr1`` preset needs the 21M-passage wiki-18 and e5-base-v2). The rows must land in DuckDB,
complete, with token counts that add up."""

from __future__ import annotations

import os
import subprocess
import sys
import time
from pathlib import Path

import duckdb

from harness.eval.protocol import preset

LIMIT = 2
DATASETS = 3  # mini-multihop: hotpotqa, 2wikimultihopqa, musique


def test_harness_run_with_the_vllm_backend(tmp_path: Path, smollm2_dir: Path):
    db = tmp_path / "vllm.duckdb"
    cmd = [
        sys.executable,
        "-m",
        "harness",
        "run",
        "--backend",
        "vllm",
        "--method",
        "direct,search_r1",
        "--bench",
        "mini-multihop",
        "--protocol",
        "mini",
        "--limit",
        str(LIMIT),
        "--db",
        str(db),
        "--no-progress",
    ]
    t0 = time.perf_counter()
    proc = subprocess.run(cmd, env={**os.environ}, capture_output=True, text=True, timeout=1800)
    print(f"\nharness run --backend vllm: {time.perf_counter() - t0:.0f} s (engine start included)")
    assert proc.returncode == 0, proc.stderr[-3000:]
    max_new = preset("mini").decoding.max_new_tokens
    with duckdb.connect(str(db), read_only=True) as con:
        runs = con.execute(
            "SELECT method, backend, status, n_expected, protocol_name FROM runs ORDER BY method"
        ).fetchall()
        assert runs == [
            ("direct", "vllm", "complete", LIMIT * DATASETS, "mini"),
            ("search_r1", "vllm", "complete", LIMIT * DATASETS, "mini"),
        ]
        samples = con.execute(
            """SELECT r.method, s.dataset, s.sample_id, s.extraction_status, s.error,
                      s.prompt_tokens, s.completion_tokens, s.n_llm_calls
               FROM samples s JOIN runs r USING (run_id) ORDER BY ALL"""
        ).fetchall()
        assert len(samples) == 2 * LIMIT * DATASETS
        turns = con.execute(
            """SELECT r.method, t.dataset, t.sample_id, t.turn_index, t.prompt_tokens, t.completion_tokens,
                      t.stop_reason, t.prefill_tokens
               FROM turns t JOIN runs r USING (run_id) WHERE t.kind = 'generate' ORDER BY ALL"""
        ).fetchall()
    by_sample: dict[tuple, list[tuple]] = {}
    for t in turns:
        by_sample.setdefault(t[:3], []).append(t)
    for method, dataset, sid, status, error, prompt_tokens, completion_tokens, n_llm in samples:
        assert status != "error" and error is None, (method, dataset, sid, error)
        gens = by_sample[(method, dataset, sid)]
        assert len(gens) == n_llm >= 1
        # the sample's counts are its turns' counts; each turn's are the backend's exact counts
        assert prompt_tokens == sum(t[4] for t in gens)
        assert completion_tokens == sum(t[5] for t in gens)
        for t in gens:
            assert 20 < t[4] < 2048 and 1 <= t[5] <= max_new, t
            assert t[7] is not None and 0 <= t[7] <= t[4]  # vLLM reports its prefix-cache hits
        # a later turn's prompt holds the earlier turns and their observations
        assert all(b[4] > a[4] + a[5] for a, b in zip(gens, gens[1:], strict=False))
    search_turns = [t for t in turns if t[0] == "search_r1"]
    assert any(len(v) > 1 for k, v in by_sample.items() if k[0] == "search_r1"), "no second turn ran"
    assert any(t[7] < t[4] for t in search_turns[1:]), "the prefix cache never hit on a later turn"
