"""The exported reward's first batch in a fresh process, as verl scores it: verl's own reward
manager (``load_reward_manager``, whose ``run_single`` runs ``compute_score`` in threads) over 32
rows at once (``asyncio.gather``), for every method whose reward has a helper model (R-Search's
reader, TIRESRAG-R1's judge, When to Search's judge and encoder) on its ``cpu-smoke`` recipe (the
packaged models, in process). Every row must score, and score what the same manager gives when the
rows are scored again one at a time. Before the helper models were loaded once under a lock,
every thread of the first batch loaded them at once and transformers failed ("Cannot copy out of
meta tensor")."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from tests.support.verl import import_verl_or_skip

import_verl_or_skip()

pytestmark = [pytest.mark.verl, pytest.mark.integration]

ROOT = Path(__file__).resolve().parents[2]
ROWS = 32
# helper models that sample (their scores differ between two passes by design): the first batch must
# score every row with the reward's components, but is not compared value by value
SAMPLED = {"tiresrag_r1": "its judge samples at temperature 0.6 (JUDGE_SAMPLING: the paper's code)"}

# in the fresh process: verl's config from run.sh, its reward manager, 32 rows at once, then one by one
SCRIPT = textwrap.dedent(
    """
    import asyncio, json, sys
    from pathlib import Path

    import numpy as np
    import pyarrow.parquet as pq
    import torch
    from transformers import AutoTokenizer
    from verl.protocol import DataProto
    from verl.trainer.ppo.reward import load_reward_manager

    from hydra import compose, initialize_config_dir, initialize_config_module

    job, responses, n, stage = Path(sys.argv[1]), json.loads(sys.argv[2]), int(sys.argv[3]), json.loads(sys.argv[4])
    stage = [o for o in stage if not o.startswith("--config")]
    if (job / "verl_job.yaml").is_file():
        with initialize_config_dir(str(job), version_base=None):
            config = compose("verl_job", overrides=stage)
    else:
        with initialize_config_module("verl.trainer.config", version_base=None):
            config = compose("ppo_trainer", overrides=stage)
    tok = AutoTokenizer.from_pretrained(config.actor_rollout_ref.model.path)
    rows = pq.read_table(job / "data" / "train.parquet").to_pylist()

    assert len(rows) == len(responses)

    def item(i):
        row, text = rows[i % len(rows)], responses[i % len(rows)]
        ids = tok(text, add_special_tokens=False)["input_ids"]
        prompt = [tok.eos_token_id] * 3
        return DataProto.from_dict(
            tensors={
                "prompts": torch.tensor([prompt]),
                "responses": torch.tensor([ids]),
                "attention_mask": torch.ones(1, len(prompt) + len(ids), dtype=torch.long),
            },
            non_tensors={k: np.array([row[k]], dtype=object) for k in ("data_source", "reward_model", "extra_info")},
        )

    async def score():
        manager = load_reward_manager(config, tok)
        first = await asyncio.gather(*(manager.run_single(item(i)) for i in range(n)), return_exceptions=True)
        again = [await manager.run_single(item(i)) for i in range(len(rows))]  # one by one, warm
        return first, again

    first, again = asyncio.run(score())
    print(json.dumps({
        "first": [r["reward_score"] if isinstance(r, dict) else f"{type(r).__name__}: {r}" for r in first],
        "keys": [sorted(r["reward_extra_info"]) if isinstance(r, dict) else None for r in first],
        "again": [r["reward_score"] for r in again],
        "again_keys": [sorted(r["reward_extra_info"]) for r in again],
    }))
    """
)


def helper_model_methods() -> list[str]:
    """Trainable methods whose cpu-smoke reward has a helper model: recipe aux models, or a model the
    method's rewards load themselves (it overrides ``load_reward_models``)."""
    from harness.method import TrainableMethod
    from harness.methods_registry import METHODS, get_method

    out = []
    for name in sorted(n for n in METHODS.names() if METHODS.get(n).trained):
        method = get_method(name)
        own = type(method).load_reward_models is not TrainableMethod.load_reward_models
        if method.recipes()["cpu-smoke"].aux_models or own:
            out.append(name)
    return out


def test_the_methods_with_helper_models_are_the_three_known():
    assert helper_model_methods() == ["r_search", "tiresrag_r1", "when_to_search"]


@pytest.mark.parametrize("name", helper_model_methods())
def test_a_fresh_process_scores_a_concurrent_first_batch_right(name, tmp_path: Path, smollm2_dir: Path):
    from harness.methods_registry import get_method
    from harness.verl.job import write_verl_job
    from tests.verl.test_export_verl import examples, run_case
    from tests.verl.test_real_verl import stage_overrides

    method = get_method(name)
    out = tmp_path / "J"
    write_verl_job(
        *(method, method.recipes()["cpu-smoke"], out, examples(), examples()[:1]),
        retriever_url="http://127.0.0.1:9/retrieve",
        n_gpus=1,
        model_path=str(smollm2_dir),
    )
    # the scripted trajectories of the method's conformance case (searches, evidence, answers), so
    # the reader / judge / encoder really run
    _, _, trajs, _ = run_case(name)
    responses = [t.response for t in trajs]
    env = {
        **os.environ,
        "PYTHONPATH": os.pathsep.join([str(ROOT), *filter(None, [os.environ.get("PYTHONPATH")])]),
    }
    run = subprocess.run(
        [
            *(sys.executable, "-c", SCRIPT, str(out), json.dumps(responses), str(ROWS)),
            json.dumps(stage_overrides(out / "run.sh")[0]),
        ],
        capture_output=True,
        text=True,
        timeout=900,
        cwd=tmp_path,
        env=env,
    )
    assert run.returncode == 0, run.stderr[-3000:]
    got = json.loads(run.stdout.strip().splitlines()[-1])
    failed = [x for x in got["first"] if isinstance(x, str)]
    assert not failed, f"{len(failed)}/{ROWS} of the first batch failed: {failed[0]}"
    n = len(got["again"])  # the 3 questions with their scripted responses; row i is pair i % 3
    assert got["keys"] == [got["again_keys"][i % n] for i in range(ROWS)]
    if name not in SAMPLED:
        assert got["first"] == [got["again"][i % n] for i in range(ROWS)]
        assert len(set(got["again"])) > 1  # the rows do not all score alike
