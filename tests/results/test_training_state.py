"""One definition of a run's training state (harness.results.training_state), read from the run's
record: a planted mislabel gets no difference, and a trained GRPO run gets a difference only
against the paper's GRPO rows (not its PPO rows or its PPO ablation)."""

from __future__ import annotations

import hashlib
import json
import math
from types import SimpleNamespace

import pandas as pd
import pytest

from harness.results import training_state as ts
from leaderboards import views

PROTOCOL = {"corpus": {"id": "wiki18"}, "retriever": {"kind": "bm25s"}, "top_k": 3}
SETTING = {"corpus": "wiki18", "retriever": "bm25s", "top_k": 3, "prompt": "search_r1"}
MODEL = "Qwen2.5-3B"


def _board(label: str, record: dict) -> dict[str, views.Leaderboard]:
    rows = [
        {"protocol_id": "x", "method": "search_r1", "model": MODEL, "dataset": "nq", "metric": "em",
         "value": float(i % 2), "label": label, "run_id": "r1", "sample_id": f"q{i}"}
        for i in range(10)
    ]  # fmt: skip
    board = views.build_leaderboard(
        pd.DataFrame(rows), protocol_id="x", protocol_name="x", metric="em", records={"r1": record}
    )
    return {"em": board}


def _paper() -> tuple[pd.DataFrame, dict]:
    tables = [
        ("Table 2", "ppo", None),
        ("Table 3: GRPO", "grpo", None),
        ("Table 4: w/o mask", "ppo", "w/o mask"),
    ]
    rows = pd.DataFrame(
        [
            {"paper": "search_r1", "setting": t, "method": "search_r1", "model": MODEL, "dataset": "nq",
             "metric": "em", "value": 0.45, "source": "S", "note": ""}
            for t, _, _ in tables
        ]
    )  # fmt: skip
    recorded = {
        ("search_r1", t, "search_r1", MODEL): {**SETTING, "algorithm": a, **({"variant": v} if v else {})}
        for t, a, v in tables
    }
    return rows, recorded


def _diffs(label: str, record: dict) -> dict[str, float]:
    rows, recorded = _paper()
    t = views.build_reported(rows, _board(label, record), protocol=PROTOCOL, recorded=recorded)
    return dict(zip(t["setting"], t["diff"], strict=True))


def test_a_planted_mislabel_gets_no_difference() -> None:
    # "not trained" matched the old label pattern for trained; with no adapter or checkpoint hash
    # in its record the run is its base model, and the paper's trained rows do not compare with it
    for label in ("not trained", "trained", "untrained policy"):
        diffs = _diffs(label, {"python": "3.11"})
        assert all(math.isnan(d) for d in diffs.values()), (label, diffs)
        board = _board(label, {})["em"]
        assert board.frame.loc[0, "type"] == "untrained policy"


def test_a_trained_grpo_run_gets_a_difference_only_against_grpo_rows() -> None:
    diffs = _diffs("", {"adapter_sha256": "00ff", "trained_by": "grpo"})
    assert diffs["Table 3: GRPO"] == pytest.approx(0.5 - 0.45)
    assert math.isnan(diffs["Table 2"]) and math.isnan(diffs["Table 4: w/o mask"])
    rows, recorded = _paper()
    t = views.build_reported(
        rows,
        _board("", {"adapter_sha256": "00ff", "trained_by": "grpo"}),
        protocol=PROTOCOL,
        recorded=recorded,
    )
    why = t.set_index("setting").loc["Table 2", "differs"]
    assert "training trained (ppo) vs trained (grpo)" in why
    ppo_variant = _diffs("", {"checkpoint_sha256": "aa", "trained_by": "ppo", "trained_variant": "w/o mask"})
    assert not math.isnan(ppo_variant["Table 4: w/o mask"]) and math.isnan(ppo_variant["Table 2"])


def test_checkpoint_and_preset_records(tmp_path, monkeypatch) -> None:
    ck = tmp_path / "final"
    ck.mkdir()
    (ck / "model.safetensors").write_bytes(b"weights")
    assert ts.record_for_model(str(ck)) == {}  # not written by harness train: a base model
    (ck / "harness_train.json").write_text(json.dumps({"method": "search_r1", "stage": "rl"}))
    (ck / "recipe.json").write_text(json.dumps({"algo": {"adv_estimator": "gae"}}))
    rec = ts.record_for_model(str(ck))
    assert rec == {"checkpoint_sha256": hashlib.sha256(b"weights").hexdigest(), "trained_by": "ppo"}
    assert ts.training_of("search_r1", rec) == "trained (ppo)"
    assert ts.record_for_model("smollm2-135m-instruct") == {}  # a packaged base model: no adapter
    preset = SimpleNamespace(adapter_sha256="beef", trained_by="grpo", trained_variant=None)
    monkeypatch.setattr("harness.llm.model_files.is_preset", lambda name: True)
    monkeypatch.setattr("harness.llm.model_files.get_preset", lambda name: preset)
    assert ts.record_for_model("some-adapter-preset") == {"adapter_sha256": "beef", "trained_by": "grpo"}
