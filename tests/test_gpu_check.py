"""``scripts/gpu_check.py`` (the GPU acceptance check) runs on the CPU at its tiny shape, so it
cannot rot between the runs on a GPU: greedy equality with ``model.generate``, seeded
repeatability, the encoder figure, and our GRPO step beside TRL's (TRL is in the dev extra)."""

from __future__ import annotations

import importlib.util
import json
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


def test_gpu_check_runs_tiny_on_the_cpu(tmp_path: Path, smollm2_dir: Path):
    spec = importlib.util.spec_from_file_location("gpu_check", ROOT / "scripts" / "gpu_check.py")
    assert spec is not None and spec.loader is not None
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    out = tmp_path / "report.json"
    rc = mod.main(["--device", "cpu", "--tiny", "--tokenizer", str(smollm2_dir), "--json", str(out)])
    report = json.loads(out.read_text())
    assert rc == 0, report["failures"]
    (gen,) = report["generation"]
    n = gen["prompts"]
    assert gen["greedy_equal_batch1"] == n and gen["greedy_equal_batch8"] == n
    assert gen["seeded_repeat_equal"] == n and gen["seeded_batch1_vs_batch8_equal"] == n
    assert report["encoder"]["passages_per_s"] > 0
    (row,) = report["grpo"]
    assert row["shape"] == "tiny" and row["dtype"] == "float32"
    assert len(row["ours"]["step_s"]) == report["steps"] == len(row["trl"]["step_s"])
    assert row["time_ratio"] > 0 and row["ours"]["peak_gib"] is None  # no GPU memory on the CPU
