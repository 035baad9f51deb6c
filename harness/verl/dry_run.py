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

and exits 0 with one line per check. So a user checks an export on a laptop, with verl installed
without its GPU extras (``pip install --no-deps verl`` plus its pure-Python imports, as
``tox -e verl``), before booking GPUs. Nothing here starts Ray, a model or a server.
"""

from __future__ import annotations

import sys
from typing import Any

from harness.errors import ConfigError
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
        for entry in OmegaConf.load(resolve_config_path(path)):
            cls = hydra.utils.get_class(entry["_target_"])
            lines.append(f"agent loop: {entry['name']} -> {cls.__module__}.{cls.__qualname__}")
    return lines


def main(argv: list[str] | None = None) -> int:
    version = require_verl("run.sh --dry-run")
    import verl.trainer.main_ppo as main_ppo

    report: list[str] = []

    def launch(config: Any, task_runner_class: Any) -> None:  # in place of run_ppo (Ray, workers)
        report.extend(check_loaded(config))

    args = list(sys.argv[1:] if argv is None else argv)
    saved = sys.argv, main_ppo.run_ppo
    main_ppo.run_ppo = launch
    sys.argv = [main_ppo.__file__, *args, *HYDRA_QUIET]
    try:
        main_ppo.main()  # Hydra composes; validate_config runs; then `launch`
    finally:
        sys.argv, main_ppo.run_ppo = saved
    if not report:
        raise ConfigError("verl's main_ppo returned without reaching the launch: nothing was checked")
    print(f"dry run: verl {version} composed the config and validate_config passed")
    for line in report:
        print(f"dry run: {line}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
