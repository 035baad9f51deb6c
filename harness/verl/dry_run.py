"""``run.sh --dry-run``: compose and validate an exported job's config with verl's own code, then exit.

``python -m harness.verl.dry_run [--config-path=DIR --config-name=NAME] OVERRIDE...`` takes
exactly the arguments ``run.sh`` gives ``python3 -m verl.trainer.main_ppo`` and runs verl's own
``main_ppo.main``: Hydra composes ``ppo_trainer`` with the overrides (an unknown key fails there),
then verl's ``validate_config`` checks batch sizes, micro-batch sizes, the actor / critic configs.
Where ``main_ppo`` would start Ray and the workers (``run_ppo``), this instead

- loads the custom reward the way verl's reward loop does (``get_custom_reward_fn``), which must
  find it (verl falls back to its own per-dataset scores otherwise) and imports it (the exported
  ``reward.py`` checks the installed verl's version);
- for a job with an agent loop, reads ``agent_loop_config_path`` as verl's ``AgentLoopWorker``
  does and resolves each ``_target_`` class (ours checks the version too);

- checks the rollout server settings against what the harness agent loop sends (stop strings
  every turn: the server must hold its tokenizer, :func:`check_rollout`);
- for a recipe in several reward stages, checks that this stage resumes from the checkpoint the
  previous stage saves at its last step (:func:`check_stage`);
- names what of the recipe verl does not run as the harness trainer does, with the value used
  (``job.json`` ``limitations``);

and exits 0 with one line per check. A failed check, or verl not installed, is one line on
stderr and exit status 2. So a user checks an export on a laptop, with verl installed without its
GPU extras (``pip install -e '.[verl]'``, or ``--no-deps`` verl plus its pure-Python imports as
``tox -e verl``), before booking GPUs. Nothing here starts Ray, a model or a server.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Any

from harness.errors import ConfigError, HarnessError
from harness.verl.versions import require_verl

# Hydra writes no output directory or log file for a dry run
HYDRA_QUIET = [
    "hydra.output_subdir=null",
    "hydra.run.dir=.",
    "hydra/job_logging=disabled",
    "hydra/hydra_logging=disabled",
]


def check_loaded(config: Any) -> list[str]:
    """Load what verl loads from ``config`` at start-up (reward function, agent loop classes)."""
    import hydra
    from omegaconf import OmegaConf
    from verl.trainer.ppo.reward import get_custom_reward_fn
    from verl.utils.import_utils import resolve_config_path

    lines = []
    reward = config.reward.get("custom_reward_function") or {}
    fn = get_custom_reward_fn(config)
    if fn is None:
        raise ConfigError(
            "reward.custom_reward_function.path is not set: verl would score with its own per-dataset "
            "rewards; export the job again with `harness export-verl`"
        )
    lines.append(
        f"reward: {reward.get('path')}:{reward.get('name')} (kwargs {dict(reward.get('reward_kwargs') or {})})"
    )
    path = config.actor_rollout_ref.rollout.agent.get("agent_loop_config_path")
    if path:
        yaml_path = Path(resolve_config_path(path))
        for entry in OmegaConf.load(yaml_path):
            cls = hydra.utils.get_class(entry["_target_"])
            lines.append(f"agent loop: {entry['name']} -> {cls.__module__}.{cls.__qualname__}")
            if "job" in entry:  # the loop reads it relative to the yaml's folder
                job = Path(str(entry["job"]))
                job = job if job.is_absolute() else yaml_path.parent / job
                if not job.is_file():
                    raise ConfigError(
                        f"{yaml_path}: agent loop {entry['name']!r} names job {job}, which is missing"
                    )
                lines.append(f"agent loop job: {job}")
    for data in ("train_files", "val_files"):
        files = config.data.get(data)
        for f in [files] if isinstance(files, str) else list(files or []):
            if not Path(str(f)).is_file():
                raise ConfigError(
                    f"data.{data}: {f} is missing; pass run.sh --data-dir DIR (the folder of the parquet files)"
                )
    return lines


# What the harness agent loop sends each turn: the dialect's stop strings, which a server matches on
# decoded text. verl 0.9.1's vLLM server always loads the tokenizer (vllm_async_server.py passes
# skip_tokenizer_init False); its SGLang server passes rollout.skip_tokenizer_init (default True)
# on, and SGLang then decodes stop strings with a tokenizer it never loaded (sglang 0.5.12, the
# release verl 0.9.1's extra pins: Req.tail_str) or refuses the request (later releases).
TOKENIZER_FORCED = {"vllm": True, "sglang": False}


def check_rollout(config: Any) -> str:
    """The rollout server can serve the agent loop's requests; one line saying so, or ConfigError."""
    rollout = config.actor_rollout_ref.rollout
    name = str(rollout.name)
    if name not in TOKENIZER_FORCED:
        raise ConfigError(
            f"actor_rollout_ref.rollout.name={name}: the export is checked for {', '.join(TOKENIZER_FORCED)} "
            "only; set one of them"
        )
    sends_stops = bool(rollout.agent.get("agent_loop_config_path"))
    has_tokenizer = TOKENIZER_FORCED[name] or not bool(rollout.get("skip_tokenizer_init"))
    if sends_stops and not has_tokenizer:
        raise ConfigError(
            f"actor_rollout_ref.rollout.name={name} with skip_tokenizer_init=true: the server has no tokenizer "
            "to match the stop strings the harness agent loop sends every turn; set "
            "actor_rollout_ref.rollout.skip_tokenizer_init=false (as exported), or rollout.name=vllm"
        )
    where = "always, in verl's vLLM server" if TOKENIZER_FORCED[name] else "skip_tokenizer_init=false"
    return f"rollout: {name} with its tokenizer loaded ({where}): the agent loop's stop strings are served"


def job_of(config: Any) -> dict[str, Any] | None:
    """The exported ``job.json`` beside the job's ``reward.py``, or None (a hand-made config)."""
    path = (config.reward.get("custom_reward_function") or {}).get("path")
    job = Path(str(path)).with_name("job.json") if path else None
    return json.loads(job.read_text()) if job is not None and job.is_file() else None


def check_stage(config: Any, job: dict[str, Any]) -> list[str]:
    """For a job in several reward stages: this stage (found by its last step) saves at its end, and
    a later stage resumes from the checkpoint the previous stage saved at its last step."""
    stages = job.get("reward_stages") or []
    if len(stages) < 2:
        return []
    t = config.trainer
    ends = [int(s["until_step"]) for s in stages]
    end = int(t.total_training_steps)
    if end not in ends:
        raise ConfigError(
            f"trainer.total_training_steps={end} ends none of the job's stages (steps {ends}); run run.sh as exported"
        )
    i = ends.index(end)
    where = f"stage {i + 1}/{len(stages)}"
    if int(t.save_freq) <= 0:
        raise ConfigError(
            f"{where}: trainer.save_freq={t.save_freq} saves no checkpoint (verl saves only with save_freq > 0), "
            "so the next stage would start from the base model; set trainer.save_freq > 0"
        )
    ckpt = Path(str(t.default_local_dir)).resolve()
    lines = [
        f"{where}: saves {ckpt / f'global_step_{end}'} at its last step (trainer.save_freq={t.save_freq})"
    ]
    if i > 0:
        want = ckpt / f"global_step_{ends[i - 1]}"
        got = Path(str(t.get("resume_from_path") or "")).resolve()
        if t.resume_mode != "resume_path" or got != want:
            raise ConfigError(
                f"{where}: resumes from {t.get('resume_from_path')!r} (resume_mode={t.resume_mode}), not from "
                f"{want}, the checkpoint stage {i} saves at its last step; run run.sh as exported"
            )
        lines.append(f"{where}: resumes from {want}, stage {i}'s last checkpoint")
    return lines


def main(argv: list[str] | None = None) -> int:
    version = require_verl("run.sh --dry-run")
    import verl.trainer.main_ppo as main_ppo

    composed: list[Any] = []

    def launch(config: Any, task_runner_class: Any) -> None:  # in place of run_ppo (Ray, workers)
        composed.append(config)

    args = list(sys.argv[1:] if argv is None else argv)
    saved = sys.argv, main_ppo.run_ppo
    main_ppo.run_ppo = launch
    sys.argv = [main_ppo.__file__, *args, *HYDRA_QUIET]
    try:
        main_ppo.main()  # Hydra composes; validate_config runs; then `launch`
    finally:
        sys.argv, main_ppo.run_ppo = saved
    if not composed:
        raise ConfigError("verl's main_ppo returned without reaching the launch: nothing was checked")
    # our checks run outside Hydra's error handler, so a refusal is our one line
    config = composed[0]
    report = check_loaded(config)
    report.append(check_rollout(config))
    job = job_of(config)
    if job is not None:
        report += check_stage(config, job)
        report += [f"differs from the recipe: {x}" for x in job.get("limitations", [])]
    print(f"dry run: verl {version} composed the config and validate_config passed")
    for line in report:
        print(f"dry run: {line}")
    return 0


def run() -> int:
    """``python -m harness.verl.dry_run``: :func:`main`, with a refusal as one line on stderr."""
    try:
        return main()
    except HarnessError as e:
        message = str(e)
        print(
            message if message.startswith("run.sh --dry-run") else f"run.sh --dry-run: {message}",
            file=sys.stderr,
        )
        return 2


if __name__ == "__main__":
    sys.exit(run())
