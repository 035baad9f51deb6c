"""verl export: the exported reward gives the in-harness reward on the same trajectories, and the
exported files parse."""

from __future__ import annotations

import importlib.util
import json
from pathlib import Path

import pyarrow.parquet as pq
import pytest

from harness.export_verl import verl_compute_score
from harness.method import RewardContext
from harness.methods_registry import get_method
from tests.methods.helpers import ScriptedReader, context, example

SCRIPTS = {
    "search_r1": {
        "capital of France": [
            "<think>look</think><search>capital of France</search>",
            "<answer> Paris </answer>",
        ],
        "capital of Italy": ["<answer>Milan</answer>"],
        "tallest mountain": ["no tags at all"] * 6,
    },
    "eval_rar": {
        "capital of France": [
            "<search>capital of France</search>",
            "<evaluate>the docs say Paris</evaluate><answer>Lyon</answer>",
        ],
        "capital of Italy": ["<search>Italy</search>", "<evaluate>fine</evaluate><answer>Rome</answer>"],
        "tallest mountain": ["<answer>K2</answer>"],
    },
    "r_search": {
        "capital of France": [
            "<search>capital of France</search>",
            "<original_evidence>Paris is the capital</original_evidence><answer>Paris</answer>",
        ],
        "capital of Italy": ["<answer>Rome city</answer>"],
        "tallest mountain": ["<search>mountain</search>", "<answer>Everest</answer>"],
    },
}
QUESTIONS = [
    ("capital of France", "Paris"),
    ("capital of Italy", "Rome"),
    ("tallest mountain", "Mount Everest"),
]


@pytest.mark.parametrize("name", sorted(SCRIPTS))
def test_exported_reward_equals_in_harness_reward(name):
    method = get_method(name)
    ctx, _backend, _ret = context(SCRIPTS[name])
    examples = [example(i, q, a) for i, (q, a) in enumerate(QUESTIONS)]
    trajs = method.solve(examples, ctx)
    models = {"reader": ScriptedReader({"Paris is the capital": ["Paris"] * 4})}
    reward = method.reward_names()[0]
    ours = method.rewards(trajs, name=reward, ctx=RewardContext(models=models))
    for e, t, r in zip(examples, trajs, ours, strict=True):
        out = verl_compute_score(
            name,
            reward,
            e.dataset,
            t.response,
            {"target": list(e.answers)},
            {"id": e.id, "question": e.question},
            models=models,
        )
        assert out["score"] == pytest.approx(r.total), (name, t.response)
    assert any(r.total > 0 for r in ours)  # the scripts exercise a rewarded branch


def test_verl_tool_response_blocks_are_not_model_text():
    # an answer inside a verl tool response must not be read as the model's answer
    text = "<search>x</search><tool_response><answer>Paris</answer></tool_response>"
    out = verl_compute_score("search_r1", "em", "nq", text, {"target": ["Paris"]}, {})
    assert out["score"] == 0.0


def test_export_files_parse(tmp_path: Path):
    from harness.cli import main

    out = tmp_path / "job"
    assert (
        main(
            [
                "export-verl",
                "--method",
                "search_r1",
                "--recipe",
                "cpu-smoke",
                "--out",
                str(out),
                "--test-limit",
                "2",
            ]
        )
        == 0
    )
    train = pq.read_table(out / "data" / "train.parquet").to_pylist()
    test = pq.read_table(out / "data" / "test.parquet").to_pylist()
    assert len(test) == 6 and train
    row = test[0]
    assert row["prompt"][0]["role"] == "user" and "<search> query </search>" in row["prompt"][0]["content"]
    assert row["reward_model"]["ground_truth"]["target"] and row["ability"] == "fact-reasoning"
    script = (out / "run.sh").read_text()
    assert "verl.trainer.main_ppo" in script and "custom_reward_function.name=compute_score" in script
    assert "actor_rollout_ref.rollout.n=" in script
    assert "verl.tools.search_tool.SearchTool" in (out / "search_tool_config.yaml").read_text()
    job = json.loads((out / "job.json").read_text())
    assert job["method"] == "search_r1"
    spec = importlib.util.spec_from_file_location("exported_reward", out / "reward.py")
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    got = mod.compute_score(
        row["data_source"],
        f"<answer>{row['reward_model']['ground_truth']['target'][0]}</answer>",
        row["reward_model"]["ground_truth"],
        row["extra_info"],
    )
    assert got["score"] == 1.0
