"""A training run's resumable state, saved and restored side by side.

A checkpoint is the folder ``<out_dir>/checkpoint/``: the policy's weights (``policy_state.pt``),
the optimizer, scheduler, data cursor and torch RNG (``trainer_state.pt``), the critic's weights
when PPO has one (``critic_state.pt``), the recipe (``recipe.json``) and what ``harness train
--resume`` says it resumes from without loading any of it (``progress.json``). It is written into
``checkpoint.tmp`` and renamed into place, so a stop mid-write leaves the previous one whole.

:class:`Learner` is the typed state one step updates (policy, reference, optimizer, schedule,
trainable parameters, critic); :class:`Cursor` is where the run is in its data (the next step, the
position in the shuffled order, the order itself). :func:`save_checkpoint` writes both and
:func:`restore_checkpoint` reads them back, so what is saved and what is restored are one screen
apart.
"""

from __future__ import annotations

import json
import shutil
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

import torch

if TYPE_CHECKING:
    from harness.rl.recipe import Recipe

CHECKPOINT_DIR = "checkpoint"
PROGRESS_FILE = "progress.json"  # in a checkpoint: its step, the recipe's steps, the run that saved it


@dataclass
class Critic:
    """PPO's value model with its optimizer and schedule (``algo.adv_estimator == 'gae'``)."""

    model: Any
    opt: Any
    sched: Any
    params: list[Any]


@dataclass
class Learner:
    """What a training step updates: the policy (and its frozen reference, or None), the
    optimizer and learning-rate schedule over ``params`` (the trainable LoRA weights), the pad id
    of the tokenizer, and the critic when the algorithm has one."""

    policy: Any
    ref: Any
    pad_id: int
    opt: torch.optim.Optimizer
    sched: Any
    params: list[Any]
    critic: Critic | None = None


@dataclass
class Cursor:
    """Where a run is in its data: ``step`` is the next step to run (0-based), ``pos`` the next
    index into ``order``, the run's shuffled order of its training examples."""

    step: int
    pos: int
    order: list[int]


def save_checkpoint(
    out_dir: Path,
    learner: Learner,
    cursor: Cursor,
    *,
    recipe: Recipe,
    run_id: str,
    log: Callable[[str], None] = print,
) -> Path:
    """Write ``out_dir/checkpoint`` (through ``checkpoint.tmp``, renamed into place)."""
    final = Path(out_dir) / CHECKPOINT_DIR
    tmp = Path(out_dir) / f"{CHECKPOINT_DIR}.tmp"
    shutil.rmtree(tmp, ignore_errors=True)
    tmp.mkdir(parents=True)
    critic = learner.critic
    _write_policy(tmp, learner.policy, cursor.step, recipe=recipe, run_id=run_id)
    torch.save(
        {
            "optimizer": learner.opt.state_dict(),
            "scheduler": learner.sched.state_dict(),
            "step": cursor.step,
            "pos": cursor.pos,
            "order": cursor.order,
            "torch_rng": torch.get_rng_state(),
            **(
                {"critic_optimizer": critic.opt.state_dict(), "critic_scheduler": critic.sched.state_dict()}
                if critic is not None
                else {}
            ),
        },
        tmp / "trainer_state.pt",
    )
    if critic is not None:
        torch.save(critic.model.state_dict(), tmp / "critic_state.pt")
    shutil.rmtree(final, ignore_errors=True)
    tmp.rename(final)
    log(f"checkpoint: {final} (step {cursor.step})")
    return final


def _write_policy(folder: Path, policy: Any, step: int, *, recipe: Recipe, run_id: str) -> None:
    """The files a checkpoint and a kept policy share: the policy's weights, the recipe, and the
    progress file (what `harness train --resume` says it resumes from, read without loading the
    state; the step a kept policy was trained to)."""
    torch.save(policy.state_dict(), folder / "policy_state.pt")
    (folder / "recipe.json").write_text(recipe.model_dump_json(indent=2))
    (folder / PROGRESS_FILE).write_text(json.dumps({"step": step, "steps": recipe.steps, "run_id": run_id}))


KEPT_DIR = "kept"  # under a run's out dir: step-<N>/ per kept policy (keep_policy)


def keep_policy(
    out_dir: Path, policy: Any, step: int, *, recipe: Recipe, run_id: str, log: Callable[[str], None] = print
) -> Path:
    """Write ``out_dir/kept/step-<step>``: the policy's weights, the recipe and the progress file,
    as a checkpoint has them (no optimizer state: nothing resumes from it), kept when the next
    checkpoint replaces the last. Why: a run that defers its held-out evaluations (``harness train
    --keep-every``) evaluates these afterwards (``scripts/eval_heldout.py step``); the final
    checkpoint has its LoRA merged, so the last step is kept too."""
    final = Path(out_dir) / KEPT_DIR / f"step-{step}"
    tmp = final.with_name(f"{final.name}.tmp")
    shutil.rmtree(tmp, ignore_errors=True)
    tmp.mkdir(parents=True)
    _write_policy(tmp, policy, step, recipe=recipe, run_id=run_id)
    shutil.rmtree(final, ignore_errors=True)
    tmp.rename(final)
    log(f"kept: {final}")
    return final


def restore_policy(out_dir: Path, policy: Any, *, device: Any) -> bool:
    """Load the checkpoint's policy weights into ``policy`` (on ``device``); False when there is
    no checkpoint. Done before the optimizer is built over the policy's parameters."""
    ckpt = Path(out_dir) / CHECKPOINT_DIR
    if not (ckpt / "trainer_state.pt").exists():
        return False
    policy.load_state_dict(torch.load(ckpt / "policy_state.pt", map_location=device, weights_only=True))
    return True


def restore_checkpoint(
    out_dir: Path, learner: Learner, *, device: Any, log: Callable[[str], None] = print
) -> Cursor | None:
    """Load the optimizer, schedule, critic and torch RNG saved by :func:`save_checkpoint` into
    ``learner`` and return the saved cursor; None when there is no checkpoint."""
    state_path = Path(out_dir) / CHECKPOINT_DIR / "trainer_state.pt"
    if not state_path.exists():
        return None
    # optimizer state onto the policy's device; the RNG state and data order stay CPU objects
    st = torch.load(state_path, map_location=device, weights_only=False)
    learner.opt.load_state_dict(st["optimizer"])
    learner.sched.load_state_dict(st["scheduler"])
    torch.set_rng_state(st["torch_rng"].cpu())  # cpu: torch's CPU generator state
    critic = learner.critic
    if critic is not None:
        critic.model.load_state_dict(
            torch.load(state_path.parent / "critic_state.pt", map_location=device, weights_only=True)
        )
        critic.opt.load_state_dict(st["critic_optimizer"])
        critic.sched.load_state_dict(st["critic_scheduler"])
    log(f"resumed from {state_path} at step {st['step']}")
    return Cursor(step=st["step"], pos=st["pos"], order=st["order"])


def saved_checkpoint(out_dir: Path) -> tuple[Path, dict[str, Any]] | None:
    """The checkpoint ``--resume`` continues from under ``out_dir`` and what it says of itself
    (``step``, ``steps``, ``run_id``; ``{}`` for one saved before it said so), or None when nothing
    was saved."""
    ckpt = Path(out_dir) / CHECKPOINT_DIR
    if not (ckpt / "trainer_state.pt").exists():
        return None
    try:
        progress = json.loads((ckpt / PROGRESS_FILE).read_text())
    except (OSError, ValueError):
        progress = {}
    return ckpt, progress if isinstance(progress, dict) else {}
