"""Export a method's training job to verl (Ray, multi-GPU, multi-node): the way to train at scale.

``harness export-verl --method M --out DIR`` writes:

- ``data/train.parquet`` and ``data/test.parquet`` in verl's RL dataset format (``data_source``,
  ``prompt`` chat messages, ``ability``, ``reward_model.ground_truth.target``, ``extra_info``,
  ``agent_name``), built with the method's own prompt;
- ``reward.py``: a verl custom reward function with verl's ``compute_score(data_source,
  solution_str, ground_truth, extra_info)`` signature that calls **our** reward code, so the same
  reward is optimised at scale as here (a test checks the values agree);
- ``search_tool_config.yaml``: verl's ``SearchTool`` pointed at ``harness serve-retriever``
  (Search-R1's ``/retrieve`` dialect, which verl's tool speaks);
- ``run.sh``: the launch command with the recipe's hyperparameters as verl overrides;
- ``job.json``: the recipe and protocol exported, for the record.

The reward reconstructs the trajectory from the decoded response: observation blocks (the
method's own observation tags, and verl's ``<tool_response>`` blocks) are removed so that the
answer is read from the model's own text only, exactly as the in-harness engine does.
"""

from __future__ import annotations

import functools
import json
import re
import shlex
from pathlib import Path
from typing import Any

from harness.errors import ConfigError
from harness.method import RewardContext, TrainableMethod
from harness.types import QAExample, Trajectory, Turn

VERL_OBS_BLOCKS = (("<tool_response>", "</tool_response>"),)


def _strip_blocks(text: str, blocks: list[tuple[str, str]]) -> tuple[str, int]:
    n = 0
    for open_, close in blocks:
        pattern = re.compile(re.escape(open_) + r".*?" + re.escape(close), re.DOTALL)
        text, k = pattern.subn("", text)
        n += k
    return text, n


@functools.cache
def _trainable(method_name: str) -> tuple[TrainableMethod, Any]:
    """The method and its rollout config, built once per process: verl calls the reward once per
    trajectory, and building a method costs milliseconds."""
    from harness.methods_registry import get_method
    from harness.protocol import mini

    method = get_method(method_name)
    if not isinstance(method, TrainableMethod):
        raise ConfigError(f"{method_name!r} is not a trainable method")
    return method, method.rollout_config(mini())  # type: ignore[attr-defined]


def trajectory_from_text(method_name: str, solution_str: str, example: QAExample) -> Trajectory:
    """The trajectory a decoded verl response stands for, as our engine would have recorded it
    (model text = the response without observation blocks or correction messages)."""
    _method, cfg = _trainable(method_name)
    d = cfg.dialect
    blocks = [(d.obs_prefix.strip(), d.obs_suffix.strip()), *VERL_OBS_BLOCKS]
    model_text, n_obs = _strip_blocks(solution_str, blocks)
    if d.invalid_message.strip():
        model_text = model_text.replace(d.invalid_message, "")
    ex = cfg.extract(model_text)
    turns = [Turn(index=0, kind="generate", text=model_text)]
    turns += [Turn(index=i + 1, kind="retrieve") for i in range(n_obs)]
    return Trajectory(
        example_id=example.id,
        dataset=example.dataset,
        question=example.question,
        answers=list(example.answers),
        turns=turns,
        prediction=ex.prediction,
        extraction_status=ex.status,
        response=solution_str,
    )


def verl_compute_score(
    method_name: str,
    reward_name: str,
    data_source: str,
    solution_str: str,
    ground_truth: Any,
    extra_info: dict[str, Any] | None = None,
    models: dict[str, Any] | None = None,
) -> dict[str, float]:
    """verl's reward signature -> our reward. Returns ``{"score": total, **components}`` (verl
    logs the extra keys)."""
    method, _cfg = _trainable(method_name)
    info = extra_info or {}
    target = ground_truth["target"] if isinstance(ground_truth, dict) else ground_truth
    answers = tuple(str(a) for a in (target if isinstance(target, list | tuple) else list(target)))
    example = QAExample(
        id=str(info.get("id", "")),
        dataset=data_source,
        split=str(info.get("split", "")),
        question=str(info.get("question", "")),
        answers=answers,
    )
    traj = trajectory_from_text(method_name, solution_str, example)
    r = method.reward(traj, name=reward_name, ctx=RewardContext(step=0, models=models or {}))
    return {"score": float(r.total), **{k: float(v) for k, v in r.components.items()}}


def aux_models_from_job(job_json: Path) -> dict[str, Any]:
    """Build the recipe's auxiliary models (role -> backend) recorded in an exported ``job.json``.
    At scale these are OpenAI-compatible servers (``vllm serve``); edit job.json to point at yours."""
    from harness.llm.base import BackendSpec, make_backend

    job = json.loads(Path(job_json).read_text())
    specs = job["recipe"].get("aux_models", {})
    return {role: make_backend(BackendSpec.model_validate(spec)) for role, spec in specs.items()}


REWARD_PY = '''"""verl custom reward for {method} (generated by `harness export-verl`).

verl config: custom_reward_function.path=<this file> custom_reward_function.name=compute_score
Needs the harness installed in verl's environment (pip install rar-harness).
"""

from pathlib import Path

from harness.export_verl import aux_models_from_job, verl_compute_score

METHOD = {method!r}
REWARD = {reward!r}
_MODELS = None  # auxiliary models of the reward (e.g. R-Search's reader), from job.json's recipe


def compute_score(data_source, solution_str, ground_truth, extra_info=None, **kwargs):
    global _MODELS
    if _MODELS is None:
        _MODELS = aux_models_from_job(Path(__file__).with_name("job.json"))
    return verl_compute_score(METHOD, REWARD, data_source, solution_str, ground_truth, extra_info, models=_MODELS)
'''

TOOL_CONFIG = """# verl SearchTool -> `harness serve-retriever` (Search-R1's /retrieve dialect)
tools:
  - class_name: verl.tools.search_tool.SearchTool
    config:
      retrieval_service_url: {url}
      topk: {top_k}
      num_workers: 120
      rate_limit: 120
      timeout: 30
      type: native
    tool_schema:
      type: function
      function:
        name: search
        description: Searches the corpus for relevant passages for the given queries.
        parameters:
          type: object
          properties:
            query_list:
              type: array
              item:
                type: string
              description: A list of fully-formed semantic queries.
          required:
            - query_list
"""


def verl_overrides(recipe: Any, out: Path, *, n_gpus: int, model_path: str) -> list[str]:
    """The recipe's hyperparameters as verl Hydra overrides (``verl.trainer.main_ppo``)."""
    a = recipe.algo
    adv = {
        "grpo": "grpo",
        "dr_grpo": "grpo",
        "reinforce_pp": "reinforce_plus_plus",
        "reinforce_pp_baseline": "reinforce_plus_plus_baseline",
        "rloo": "rloo",
    }[a.adv_estimator]
    ov = [
        f"algorithm.adv_estimator={adv}",
        f"algorithm.norm_adv_by_std_in_grpo={str(a.norm_adv_by_std).lower()}",
        f"data.train_files={out / 'data' / 'train.parquet'}",
        f"data.val_files={out / 'data' / 'test.parquet'}",
        f"data.train_batch_size={a.train_batch_size}",
        f"data.max_response_length={recipe.max_new_tokens * (recipe.max_turns + 1) + recipe.max_obs_tokens * recipe.max_turns}",
        "data.return_raw_chat=true",
        f"actor_rollout_ref.model.path={model_path}",
        f"actor_rollout_ref.actor.optim.lr={a.lr}",
        f"actor_rollout_ref.actor.optim.weight_decay={a.weight_decay}",
        f"actor_rollout_ref.actor.ppo_mini_batch_size={a.mini_batch_size}",
        f"actor_rollout_ref.actor.ppo_epochs={a.ppo_epochs}",
        f"actor_rollout_ref.actor.clip_ratio_low={a.clip_low}",
        f"actor_rollout_ref.actor.clip_ratio_high={a.clip_high}",
        f"actor_rollout_ref.actor.loss_agg_mode={a.loss_agg_mode}",
        f"actor_rollout_ref.actor.entropy_coeff={a.entropy_coef}",
        f"actor_rollout_ref.actor.use_kl_loss={str(a.kl_placement == 'loss').lower()}",
        f"actor_rollout_ref.actor.kl_loss_coef={a.kl_coef if a.kl_placement == 'loss' else 0.0}",
        f"actor_rollout_ref.actor.kl_loss_type={a.kl_estimator}",
        f"algorithm.use_kl_in_reward={str(a.kl_placement == 'reward').lower()}",
        f"algorithm.kl_ctrl.kl_coef={a.kl_coef if a.kl_placement == 'reward' else 0.0}",
        f"actor_rollout_ref.rollout.n={a.group_size}",
        f"actor_rollout_ref.rollout.temperature={a.temperature}",
        f"actor_rollout_ref.rollout.top_p={a.top_p}",
        "actor_rollout_ref.rollout.name=sglang",
        "actor_rollout_ref.rollout.multi_turn.enable=true",
        f"actor_rollout_ref.rollout.multi_turn.max_assistant_turns={recipe.max_turns + 1}",
        f"actor_rollout_ref.rollout.multi_turn.tool_config_path={out / 'search_tool_config.yaml'}",
        f"custom_reward_function.path={out / 'reward.py'}",
        "custom_reward_function.name=compute_score",
        f"trainer.total_training_steps={recipe.steps}",
        f"trainer.n_gpus_per_node={n_gpus}",
    ]
    if a.grad_clip is not None:
        ov.append(f"actor_rollout_ref.actor.grad_clip={a.grad_clip}")
    if a.loss_norm_length is not None:
        ov.append(f"actor_rollout_ref.actor.loss_scale_factor={a.loss_norm_length}")
    return ov


def _rows(
    method: TrainableMethod, examples: list[QAExample], split: str, reward: str
) -> list[dict[str, Any]]:
    rows = []
    for i, e in enumerate(examples):
        rows.append(
            {
                "data_source": e.dataset,
                "prompt": method.prompt_messages(e.question, training=True),
                "ability": "fact-reasoning",
                "reward_model": {"style": "rule", "ground_truth": {"target": list(e.answers)}},
                "extra_info": {
                    "split": split,
                    "index": i,
                    "id": e.id,
                    "question": e.question,
                    "method": method.name,
                    "reward": reward,
                },
                "agent_name": "tool_agent",
            }
        )
    return rows


def export_verl(
    method: TrainableMethod,
    recipe: Any,
    out: Path,
    *,
    retriever_url: str,
    test_bench: str,
    test_limit: int | None,
    n_gpus: int,
    model_path: str,
    data_dir: Path | None = None,
) -> list[Path]:
    import pyarrow as pa
    import pyarrow.parquet as pq

    from harness.data.benches import Selection, get_bench, load_bench

    out = Path(out).resolve()
    (out / "data").mkdir(parents=True, exist_ok=True)
    reward = recipe.reward_at(0)
    train = [
        e for _, exs in load_bench(get_bench(recipe.bench), recipe.selection, data_dir=data_dir) for e in exs
    ]
    sel = Selection(mode="first", n=test_limit) if test_limit else Selection()
    test = [e for _, exs in load_bench(get_bench(test_bench), sel) for e in exs]
    for name, examples, split in (("train", train, "train"), ("test", test, "test")):
        pq.write_table(
            pa.Table.from_pylist(_rows(method, examples, split, reward)), out / "data" / f"{name}.parquet"
        )
    (out / "reward.py").write_text(REWARD_PY.format(method=method.name, reward=reward))
    (out / "search_tool_config.yaml").write_text(TOOL_CONFIG.format(url=retriever_url, top_k=recipe.top_k))
    overrides = verl_overrides(recipe, out, n_gpus=n_gpus, model_path=model_path)
    script = [
        "#!/usr/bin/env bash",
        f"# verl job for {method.name} (recipe {recipe.name}); generated by `harness export-verl`.",
        "# 1) start the retriever on the node(s) that run rollouts:",
        "#      harness serve-retriever --host 127.0.0.1 --port 8000 --protocol searchr1 --corpus wiki-18.jsonl &",
        "# 2) then:",
        "set -euo pipefail",
        "python3 -m verl.trainer.main_ppo \\",
        *[f"    {shlex.quote(o)} \\" for o in overrides],
        '    "$@"',
    ]
    (out / "run.sh").write_text("\n".join(script) + "\n")
    (out / "run.sh").chmod(0o755)
    (out / "job.json").write_text(
        json.dumps(
            {
                "method": method.name,
                "recipe": recipe.model_dump(mode="json"),
                "retriever_url": retriever_url,
                "n_train": len(train),
                "n_test": len(test),
            },
            indent=2,
        )
    )
    return [
        out / "data" / "train.parquet",
        out / "data" / "test.parquet",
        out / "reward.py",
        out / "search_tool_config.yaml",
        out / "run.sh",
        out / "job.json",
    ]
