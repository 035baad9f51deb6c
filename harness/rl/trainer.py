"""The RL trainer: GRPO / Dr. GRPO / DAPO / REINFORCE++ / PPO (GAE critic) on a transformers
policy, on CPU or GPU.

One training step:

1. take ``train_batch_size`` questions, roll each out ``group_size`` times with the **same rollout
   engine as evaluation** (``method.solve`` with ``ctx.training=True``: token ids and a loss mask
   that is 0 on every observation token), sampling at the recipe's temperature;
2. score every trajectory with the method's reward in force at this step (multi-stage recipes
   switch rewards by step); DAPO overlong shaping; dynamic sampling (drop groups by a filter
   and roll out more, up to a cap);
3. advantages (``harness.rl.advantages``), optionally with KL-in-reward; for PPO
   (``adv_estimator='gae'``) the critic (:mod:`harness.rl.ppo`) values every model token first,
   and each mini-batch updates the critic (clipped value loss) before the policy, which waits
   ``critic.warmup_steps`` steps;
4. ``ppo_epochs`` passes over mini-batches of ``mini_batch_size`` groups, each a gradient-
   accumulated sum over micro-batches, with the clipped policy loss, KL-as-loss and entropy
   bonus aggregated by the recipe's explicit ``loss_agg_mode``; observation tokens are masked out
   of the loss and the KL;
5. log per-step metrics to the console and DuckDB (``train_steps``); checkpoint.

A run resumes from its last checkpoint (model, optimizer, scheduler, step, data order, RNG):
``harness train ... --resume``. The final checkpoint is a plain Hugging Face directory that
``harness run --model DIR`` evaluates.
"""

from __future__ import annotations

import copy
import json
import math
import random
import shutil
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import torch

from harness.errors import ConfigError
from harness.eval.protocol import Protocol
from harness.method import RewardBreakdown, RewardContext, RunContext, TrainableMethod
from harness.rl.advantages import AdvantageBatch, compute_advantages, gae_advantages_returns
from harness.rl.checkpoint import (
    PROGRESS_FILE,
    Critic,
    Cursor,
    Learner,
    keep_policy,
    restore_checkpoint,
    restore_policy,
    save_checkpoint,
)
from harness.rl.dapo import DynamicSampler, GroupRewards, overlong_penalty
from harness.rl.kl import kl_loss, kl_penalty_reward, kl_values
from harness.rl.losses import POLICY_LOSSES, agg_loss, agg_units
from harness.rl.masked import masked_mean
from harness.rl.recipe import Recipe
from harness.rl.sequences import Trunk, TrunkCache, frozen_depth, sequence_logprobs
from harness.types import QAExample, SamplingParams, Trajectory


@dataclass
class Group:
    """The G rollouts of one question with their rewards."""

    example: QAExample
    trajectories: list[Trajectory]
    rewards: list[RewardBreakdown]
    group_rewards: GroupRewards


@dataclass
class StepResult:
    step: int
    metrics: dict[str, float]


@dataclass
class TrainResult:
    checkpoint: Path
    steps: list[StepResult] = field(default_factory=list)
    run_id: str = ""


# Recipe.trunk_dtype -> the dtype the frozen trunk is computed in (None: the model's own)
TRUNK_DTYPES: dict[str, torch.dtype | None] = {"model": None, "bfloat16": torch.bfloat16}


def rollout_protocol(base: Protocol, recipe: Recipe) -> Protocol:
    """The protocol rollouts use while training: the base environment with the recipe's budgets."""
    dec = base.decoding.model_copy(update={"max_new_tokens": recipe.max_new_tokens}).model_dump()
    return base.with_(
        top_k=recipe.top_k, max_turns=recipe.max_turns, max_obs_tokens=recipe.max_obs_tokens, decoding=dec
    )


def _lr_lambda(recipe: Recipe, total_updates: int) -> Callable[[int], float]:
    a = recipe.algo
    warm = (
        a.lr_warmup_steps if a.lr_warmup_steps is not None else int(round(a.lr_warmup_ratio * total_updates))
    )

    def f(n: int) -> float:
        if warm > 0 and n < warm:
            return (n + 1) / warm
        if a.lr_schedule == "constant":
            return 1.0
        progress = min(1.0, (n - warm) / max(1, total_updates - warm))
        return a.min_lr_ratio + (1 - a.min_lr_ratio) * 0.5 * (1 + math.cos(math.pi * progress))

    return f


@dataclass(frozen=True)
class _UpdateBatch:
    """The trajectories of one update laid out once: token ids, their group index (B,) and loss
    masks (B, T) on the trainer's device."""

    prompts: list[list[int]]
    responses: list[list[int]]
    gids: torch.Tensor
    mask: torch.Tensor
    engine: torch.Tensor | None = None  # (B, T) the rollout engine's log-probs (NaN: none), or None
    trunks: TrunkCache | None = None  # the frozen trunk of each micro-batch (harness.rl.sequences)
    share_prompts: bool = False  # one forward per group's prompt (sequence_logprobs share_prompts)

    @classmethod
    def of(
        cls,
        groups: list[Group],
        *,
        device: Any,
        drop_truncated: bool,
        policy: Any = None,
        pad_id: int = 0,
        trunk_dtype: torch.dtype | None = None,
        share_prompts: bool = False,
    ) -> _UpdateBatch:
        """``policy``: share its frozen trunk (:func:`~harness.rl.sequences.frozen_depth` layers)
        between the update's passes, computed in ``trunk_dtype`` (None: the model's);
        ``share_prompts``: every pass runs a group's prompt once."""
        trajs = [t for g in groups for t in g.trajectories]
        prompts = [list(t.prompt_ids or []) for t in trajs]
        responses = [list(t.response_ids or []) for t in trajs]
        depth = frozen_depth(policy) if policy is not None else 0
        return cls(
            prompts=prompts,
            responses=responses,
            gids=torch.tensor(
                [i for i, g in enumerate(groups) for _ in g.trajectories], dtype=torch.long, device=device
            ),
            mask=loss_masks(trajs, device=device, drop_truncated=drop_truncated),
            engine=engine_logprobs(trajs, device=device),
            trunks=TrunkCache(
                policy,
                prompts,
                responses,
                pad_id=pad_id,
                depth=depth,
                dtype=trunk_dtype,
                share_prompts=share_prompts,
            )
            if depth
            else None,
            share_prompts=share_prompts,
        )

    def trunk(self, rows: list[int]) -> Trunk | None:
        """The frozen trunk of micro-batch ``rows``, or None (no frozen layers: the full forward)."""
        return self.trunks(rows) if self.trunks is not None else None

    def pairs(self, rows: list[int]) -> tuple[list[list[int]], list[list[int]]]:
        return [self.prompts[i] for i in rows], [self.responses[i] for i in rows]

    def pad(self, x: torch.Tensor) -> torch.Tensor:
        """(b, t) -> (b, T): right-pad with 0 to the batch's response width."""
        return torch.nn.functional.pad(x, (0, self.mask.shape[1] - x.shape[1]))

    def per_chunk(self, size: int, fn: Callable[[list[int]], torch.Tensor]) -> torch.Tensor:
        """``fn`` over consecutive chunks of ``size`` rows, padded and concatenated to (B, T)."""
        n = len(self.prompts)
        return torch.cat([self.pad(fn(list(range(i, min(i + size, n))))) for i in range(0, n, size)])


class Trainer:
    def __init__(
        self,
        method: TrainableMethod,
        recipe: Recipe,
        *,
        model: str,
        out_dir: Path,
        protocol: Protocol,
        retriever: Any,
        store: Any = None,
        resume: bool = False,
        progress: bool = True,
        log: Callable[[str], None] = print,
        aux_models: dict[str, Any] | None = None,
        examples: list[QAExample] | None = None,
        run_id: str = "",
        data_dir: Path | None = None,
        device: str = "auto",
        rollout_backend: str = "transformers",
        rollout_threads: int | None = None,
        rollout_weights: str = "packaged",
        rollout_engines: int = 1,
        keep_every: int = 0,
    ):
        from harness.device import resolve_device

        self.method = method
        self.recipe = recipe
        self.model_name = model
        self.out_dir = Path(out_dir)
        self.protocol = rollout_protocol(protocol, recipe)
        self.retriever = retriever
        self.store = store
        self.resume = resume
        self.progress = progress
        self.log = log
        self.aux_models = aux_models or {}
        self._examples = examples
        self.algo = recipe.algo
        self.run_id = run_id
        self.data_dir = data_dir
        self.device = resolve_device(device)
        if rollout_backend not in ("transformers", "llamacpp", "vllm"):
            raise ConfigError(
                f"rollout backend {rollout_backend!r} is not one of transformers, llamacpp, vllm "
                "(harness train --rollout-backend)"
            )
        if rollout_backend == "llamacpp":  # before the policy is loaded (minutes), not after
            from harness.rl.rollout_engine import check_llamacpp_rollout

            check_llamacpp_rollout(recipe, model, rollout_weights)
        self.rollout_backend = rollout_backend
        self.rollout_threads = rollout_threads
        self.rollout_weights = rollout_weights
        self.rollout_engines = rollout_engines
        if keep_every < 0:
            raise ConfigError(f"--keep-every {keep_every}: give 0 (keep none) or a number of steps")
        # the policy to out_dir/kept/step-N every N steps and at the last (0: never)
        self.keep_every = keep_every
        self._rollout_lp: torch.Tensor | None = None  # see _update
        self._old_pending: set[int] = set()  # rows whose old log-probs the loss forward fills (_update)
        self._drawn: list[str] = []  # the questions rolled out, in first-drawn order
        self._drawn_set: set[str] = set()

    # -- set-up ------------------------------------------------------------------------------
    def _load_policy(self) -> tuple[Any, Any, Any]:
        policy, ref, tok = load_policy(
            self.model_name, self.recipe, with_reference=self.algo.needs_reference_model, device=self.device
        )
        if self.resume:
            restore_policy(self.out_dir, policy, device=self.device)
        policy.train()
        return policy, ref, tok

    def _examples_list(self) -> list[QAExample]:
        exs = self._examples if self._examples is not None else training_examples(self.recipe, self.data_dir)
        return rl_examples(self.recipe, exs, self.model_name)

    # -- rollouts ----------------------------------------------------------------------------
    def _rollout_groups(self, ctx: RunContext, examples: list[QAExample], step: int, rnd: int) -> list[Group]:
        g = self.algo.group_size
        expanded = [e for e in examples for _ in range(g)]
        ctx.sampling = SamplingParams(
            temperature=self.algo.temperature,
            top_p=self.algo.top_p,
            seed=self.recipe.seed * 1_000_003 + step * 1_009 + rnd * 101,
        )
        trajs = self.method.solve(expanded, ctx)
        ctx.backend.drop_prefix_cache()  # the cached KV of these rollouts is not needed by the update
        reward_name = self.recipe.reward_at(step)
        rctx = RewardContext(step=step, models=self.aux_models, total_steps=self.recipe.steps)
        rewards = self.method.rewards(trajs, name=reward_name, ctx=rctx)
        dev = self.device
        totals = torch.tensor([r.total for r in rewards], dtype=torch.float32, device=dev)
        outcome = totals.clone()
        ov = self.algo.overlong
        if ov.soft_penalty:
            lengths = torch.tensor([sum(t.loss_mask or []) for t in trajs], device=dev)
            totals = totals + overlong_penalty(
                lengths, max_len=ov.max_len, cache_len=ov.cache_len, penalty_factor=ov.penalty_factor
            )
        groups = []
        names = sorted({k for r in rewards for k in r.components})
        for i, e in enumerate(examples):
            sl = slice(i * g, (i + 1) * g)
            values = {"total": totals[sl], "outcome": outcome[sl]}
            for n in names:
                values[n] = torch.tensor(
                    [r.components.get(n, 0.0) for r in rewards[sl]], dtype=torch.float32, device=dev
                )
            groups.append(Group(e, trajs[sl], rewards[sl], GroupRewards(values)))
        return groups

    # -- main loop ---------------------------------------------------------------------------
    def train(self) -> TrainResult:
        from harness.llm.base import BackendSpec, pad_token_id
        from harness.llm.transformers_backend import TransformersBackend

        torch.manual_seed(self.recipe.seed)
        policy, ref, tok = self._load_policy()
        pad_id = pad_token_id(tok, self.model_name)
        engine: Any = None  # the rollout engine: LlamaCppRollout or VLLMRollout (sync, suspend, close)
        if self.rollout_backend == "llamacpp":
            from harness.rl.rollout_engine import LlamaCppRollout

            engine = LlamaCppRollout(
                self.model_name,
                self.recipe,
                self.out_dir,
                threads=self.rollout_threads,
                # one slot: requests in order, so each group's rollouts reuse their prompt's cached
                # prefix; 8 slots on 1 thread prefilled 16,203 tokens against 9,530 for one round of
                # 4 x 8 cpu-sft-grpo rollouts and cost 143 against 102 engine CPU-s (docs/training.md)
                parallel=1,
                weights=self.rollout_weights,
                engines=self.rollout_engines,
            )
            backend: Any = engine.backend
        elif self.rollout_backend == "vllm":
            from harness.rl.rollout_engine import VLLMRollout

            engine = VLLMRollout(
                self.model_name,
                self.recipe,
                parallel=max(self.recipe.micro_batch_size, 8),
                device=self.device,
            )
            backend = engine.backend
        else:
            backend = TransformersBackend.from_model(
                policy,
                tok,
                BackendSpec(
                    kind="transformers",
                    model=self.model_name,
                    max_batch_size=max(self.recipe.micro_batch_size, 8),
                ),
            )
        try:
            return self._train(policy, ref, tok, pad_id, backend, engine)
        finally:
            if engine is not None:
                engine.close()

    def _train(self, policy, ref, tok, pad_id: int, backend: Any, engine: Any) -> TrainResult:
        ctx = RunContext(backend=backend, protocol=self.protocol, retriever=self.retriever, training=True)
        params = [p for p in policy.parameters() if p.requires_grad]
        a = self.algo
        opt = make_adamw(params, lr=a.lr, betas=a.adam_betas, weight_decay=a.weight_decay)
        total_updates = self.recipe.steps * a.updates_per_step
        sched = torch.optim.lr_scheduler.LambdaLR(opt, _lr_lambda(self.recipe, total_updates))
        critic = self._make_critic(policy, total_updates) if a.critic is not None else None
        learner = Learner(policy, ref, pad_id, opt, sched, params, critic)

        examples = self._examples_list()
        order = list(range(len(examples)))
        random.Random(self.recipe.seed).shuffle(order)
        cursor = Cursor(step=0, pos=0, order=order)
        if self.resume:
            cursor = restore_checkpoint(self.out_dir, learner, device=self.device, log=self.log) or cursor

        def next_examples(n: int) -> list[QAExample]:
            out = [examples[cursor.order[(cursor.pos + i) % len(cursor.order)]] for i in range(n)]
            cursor.pos += n
            return out

        result = TrainResult(checkpoint=self.out_dir / "final", run_id=self.run_id)
        if engine is not None:
            engine.suspend()  # each step's sync starts it; a held-out evaluation gets the cores first
        heldout_start = self._heldout(policy, cursor.step, None) if cursor.step == 0 else None
        for step in range(cursor.step, self.recipe.steps):
            t0 = time.perf_counter()
            # the current policy reaches the engine (llamacpp: its LoRA as a GGUF adapter)
            t_sync = engine.sync(policy) if engine is not None else 0.0
            groups, generated, ds_metrics = self._roll_step(ctx, step, next_examples)
            if engine is not None:
                engine.suspend()  # the update (and a held-out evaluation) gets the cores
            t_roll = time.perf_counter() - t0
            metrics: dict[str, float] = {}
            kept: dict[str, float] = {}
            if groups:
                t_upd, cpu_upd = time.perf_counter(), time.process_time()
                metrics.update(self._update(learner, groups, step))
                # the learner's wall and CPU seconds (this process: a llama.cpp engine's are not in it)
                metrics["seconds_update"] = time.perf_counter() - t_upd
                metrics["cpu_seconds_update"] = time.process_time() - cpu_upd
                kept = self._rollout_metrics(groups)
                metrics.update(kept)
            else:
                self.log(
                    f"step {step + 1}: dynamic sampling kept no group in {ds_metrics['ds_rounds']:.0f} rounds; no update"
                )
            # what the policy did on everything it generated: under dynamic sampling the kept groups
            # are a biased sample (filtered on their rewards), so learning curves read these; when
            # every generated group was kept (no filter, or none dropped) they are the same numbers
            sampled = kept if len(groups) == len(generated) else self._rollout_metrics(generated)
            metrics.update({f"sampled/{k}": v for k, v in sampled.items()})
            metrics.update(ds_metrics)
            metrics.update(
                {
                    "seconds": time.perf_counter() - t0,
                    "seconds_rollout": t_roll,
                    "seconds_sync": t_sync,
                    "lr": sched.get_last_lr()[0],
                }
            )
            result.steps.append(StepResult(step, metrics))
            self._log_step(step, metrics, len(groups), len(generated))
            if self.store is not None and result.run_id:
                self.store.add_train_steps(result.run_id, step, metrics)
            self._heldout(policy, step + 1, heldout_start)
            if self.keep_every and ((step + 1) % self.keep_every == 0 or step + 1 == self.recipe.steps):
                keep_policy(
                    self.out_dir, policy, step + 1, recipe=self.recipe, run_id=self.run_id, log=self.log
                )
            if (
                self.recipe.save_every
                and (step + 1) % self.recipe.save_every == 0
                and step + 1 < self.recipe.steps
            ):
                cursor.step = step + 1
                save_checkpoint(
                    self.out_dir, learner, cursor, recipe=self.recipe, run_id=self.run_id, log=self.log
                )
        self._save_final(policy, tok)
        return result

    def _roll_step(
        self, ctx: RunContext, step: int, next_examples: Callable[[int], list[QAExample]]
    ) -> tuple[list[Group], list[Group], dict[str, float]]:
        """One step's rollouts: (the groups trained on, every group generated, the dynamic
        sampling's rounds / dropped share / capped flag)."""
        a = self.algo
        ds = a.dynamic_sampling
        rounds, dropped_frac, capped = 1, 0.0, False
        generated: list[Group] = []  # every group rolled out this step, kept or not

        def roll(r: int) -> list[Group]:
            out = self._rollout_groups(ctx, next_examples(a.train_batch_size), step, r)
            generated.extend(out)
            self._record_questions(step, r, [g.example.id for g in out])
            return out

        if ds.enabled:
            sampler: DynamicSampler[Group] = DynamicSampler(
                group_filter=ds.build_filter(),
                target_groups=a.train_batch_size,
                max_rounds=ds.max_rounds,
                rewards_of=lambda grp: grp.group_rewards,
            )
            res = sampler.sample(roll)
            groups, rounds, dropped_frac, capped = res.groups, res.rounds, res.dropped_fraction, res.capped
        else:
            groups = roll(0)
        ds_metrics = {"ds_rounds": float(rounds), "ds_dropped_frac": dropped_frac, "ds_capped": float(capped)}
        return groups, generated, ds_metrics

    def _log_step(self, step: int, metrics: dict[str, float], kept: int, generated: int) -> None:
        line = (
            f"step {step + 1}/{self.recipe.steps} reward {metrics['sampled/reward/total_mean']:.3f} "
            f"(std {metrics['sampled/reward/total_std']:.3f}; trained on {kept}/{generated} "
            f"groups) searches {metrics['sampled/searches_mean']:.2f} "
            f"len {metrics['sampled/response_len_mean']:.0f} kl {metrics.get('kl', 0.0):.4f} "
            f"clip {metrics.get('clip_frac', 0.0):.3f} {metrics['seconds']:.1f}s"
        )
        if no_learning_signal(metrics, critic=self.recipe.algo.critic is not None):
            line += (
                "; no learning signal: every group's rollouts got the same reward, so every "
                "group-normalised advantage is 0"
            )
        self.log(line)

    def _heldout(self, policy: Any, step: int, start: Any) -> Any:
        """The recipe's held-out evaluation after ``step`` steps (0: the warm start), every
        ``recipe.heldout_every`` steps (:func:`harness.rl.heldout_eval.heldout_at_step`, which
        returns None off that schedule); off when the recipe sets no ``heldout_every``."""
        if not self.recipe.heldout_every:
            return None
        from harness.rl.heldout_eval import heldout_at_step

        return heldout_at_step(
            self.recipe,
            self.model_name,
            policy,
            step,
            self.out_dir,
            store=self.store,
            run_id=self.run_id,
            start=start,
            threads=self.rollout_threads,
            data_dir=self.data_dir,
            log=self.log,
        )

    def _rollout_metrics(self, groups: list[Group]) -> dict[str, float]:
        trajs = [t for g in groups for t in g.trajectories]
        totals = torch.cat([g.group_rewards["total"] for g in groups])
        m = {
            "reward/total_mean": float(totals.mean()),
            "reward/total_std": float(totals.std(unbiased=False)),
            "zero_variance_groups": float(
                sum(bool((g.group_rewards["total"] == g.group_rewards["total"][0]).all()) for g in groups)
                / len(groups)
            ),
            "searches_mean": sum(t.n_retrievals for t in trajs) / len(trajs),
            "response_len_mean": sum(sum(t.loss_mask or []) for t in trajs) / len(trajs),
            "answered_frac": sum(t.extraction_status in ("ok", "multiple_answers") for t in trajs)
            / len(trajs),
        }
        for name in groups[0].group_rewards.values:
            if name not in ("total",):
                v = torch.cat([g.group_rewards[name] for g in groups])
                m[f"reward/{name}_mean"] = float(v.mean())
        return m

    def _make_critic(self, policy: Any, total_updates: int) -> Critic:
        from harness.rl.ppo import ValueModel

        c = self.algo.critic
        assert c is not None
        model = ValueModel.from_policy(policy)
        params = [p for p in model.parameters() if p.requires_grad]
        opt = make_adamw(params, lr=c.lr, betas=c.adam_betas, weight_decay=c.weight_decay)
        warm = (
            c.lr_warmup_steps
            if c.lr_warmup_steps is not None
            else int(round(c.lr_warmup_ratio * total_updates))
        )
        sched = torch.optim.lr_scheduler.LambdaLR(opt, lambda n: (n + 1) / warm if n < warm else 1.0)
        return Critic(model=model, opt=opt, sched=sched, params=params)

    # long: one step's update in the order verl's ray_trainer runs it (old and reference log-probs,
    # values, KL in the reward, advantages, then the epochs of mini-batch updates); every part reads
    # the batch and the fixed log-probs built at its top
    def _update(self, learner: Learner, groups: list[Group], step: int) -> dict[str, float]:
        """One training step's update: fixed log-probs (old policy, reference) and values, the
        advantages, then ``ppo_epochs`` passes of one optimizer step per mini-batch of groups (the
        critic's first, when there is one)."""
        a = self.algo
        policy, ref, pad_id, critic = learner.policy, learner.ref, learner.pad_id, learner.critic
        opt, sched, params = learner.opt, learner.sched, learner.params
        b = _UpdateBatch.of(
            groups,
            device=self.device,
            drop_truncated=a.overlong.filter_truncated,
            policy=policy,
            pad_id=pad_id,
            trunk_dtype=TRUNK_DTYPES[self.recipe.trunk_dtype],
            # exact up to float rounding; gradient checkpointing turns off the KV cache it needs
            share_prompts=not self.recipe.gradient_checkpointing,
        )
        g = a.group_size
        minis = [
            [
                r
                for gi in range(s0, min(s0 + a.mini_batch_size, len(groups)))
                for r in range(gi * g, (gi + 1) * g)
            ]
            for s0 in range(0, len(groups), a.mini_batch_size)
        ]
        update_actor = a.critic is None or step >= a.critic.warmup_steps
        early = self._on_policy_rows(minis) if update_actor else []
        old_logp, ref_logp = self._fixed_logprobs(policy, ref, b, pad_id, minis, set(early))
        self._old_pending = set(early) if old_logp is not None else set()
        # the learner's log-probs under the rollout policy, to compare with the engine's: the fixed
        # old log-probs when there are any, else filled by the single update's micro-batches
        self._rollout_lp = None
        if b.engine is not None and a.temperature == 1.0 and old_logp is None:
            self._rollout_lp = torch.zeros_like(b.mask)
        old_values = returns = None
        if critic is not None:
            from harness.rl.ppo import sequence_values

            with torch.no_grad():
                old_values = b.mask * b.per_chunk(
                    self.recipe.micro_batch_size,
                    lambda c: sequence_values(critic.model, *b.pairs(c), pad_id=pad_id),
                )
        token_rewards = None
        if a.kl_placement == "reward":
            token_rewards = kl_penalty_reward(
                old_logp, ref_logp, b.mask, estimator=a.kl_estimator, coef=a.kl_coef
            )
        adjust = self.method.advantage_adjust(
            [r for g in groups for r in g.rewards], b.gids, name=self.recipe.reward_at(step)
        )
        scores = torch.cat([g.group_rewards["total"] for g in groups])
        adv_batch = AdvantageBatch(
            scores=scores, group=b.gids, response_mask=b.mask, token_rewards=token_rewards, values=old_values
        )
        adv = compute_advantages(a.adv_estimator, adv_batch, a.advantage_params(), adjust)
        if critic is not None:
            returns = gae_advantages_returns(adv_batch, a.advantage_params())[1].float()

        stats: dict[str, list[float]] = {
            k: []
            for k in (
                *("clip_frac", "clip_frac_low", "clip_frac_high", "dual_clip_frac", "approx_kl"),
                *(
                    "ratio_mean",
                    "ratio_min",
                    "ratio_max",
                    "policy_tokens",
                    "entropy",
                    "kl",
                    "loss",
                    "grad_norm",
                ),
            )
        }

        if critic is not None:
            for k in ("vf_loss", "vf_clip_frac", "values_mean", "returns_mean", "grad_norm"):
                stats[f"critic/{k}"] = []
        for _epoch in range(a.ppo_epochs):
            for rows in minis:
                if critic is not None:
                    self._critic_update(
                        critic, b.prompts, b.responses, rows, b.mask, old_values, returns, pad_id, stats
                    )
                if not update_actor:  # critic warm-up: the policy waits
                    continue
                units = agg_units(b.mask[rows], a.loss_agg_mode)
                opt.zero_grad(set_to_none=True)
                mb = self.recipe.micro_batch_size
                for c0 in range(0, len(rows), mb):
                    c = rows[c0 : c0 + mb]
                    loss = self._micro_loss(policy, b, c, pad_id, adv, old_logp, ref_logp, units, stats)
                    loss.backward()
                if a.grad_clip is not None:
                    stats["grad_norm"].append(float(torch.nn.utils.clip_grad_norm_(params, a.grad_clip)))
                opt.step()
                sched.step()
        # the clipped loss's ratio range over the step; token counts add up; the rest are means
        reduce = {"ratio_min": min, "ratio_max": max, "policy_tokens": sum}
        out = {k: (reduce.get(k, lambda x: sum(x) / len(x))(v) if v else 0.0) for k, v in stats.items()}
        learner_lp = old_logp if old_logp is not None else (self._rollout_lp if update_actor else None)
        if b.engine is not None and a.temperature == 1.0 and learner_lp is not None:
            out.update(engine_mismatch(learner_lp, b.engine, b.mask))
        if critic is not None:
            out["actor_updated"] = float(update_actor)
            out["critic/lr"] = critic.sched.get_last_lr()[0]
        return out

    def _on_policy_rows(self, minis: list[list[int]]) -> list[int]:
        """The rows whose old log-probs the loss forward takes as its own: the first mini-batch of
        the first epoch is trained before any optimizer step, by the policy that generated it, so
        its old log-probs are its own detached ones (verl v0.6.0 verl/workers/actor/dp_actor.py
        lines 390 and 430-433 do so for a step of one on-policy mini-batch), and the separate pass
        runs only over the later mini-batches. None with a KL in the reward (it needs every old
        log-prob before the update) or a critic (whose warm-up may hold the actor back)."""
        a = self.algo
        return list(minis[0]) if a.critic is None and a.kl_placement != "reward" else []

    def _fixed_logprobs(
        self, policy, ref, b: _UpdateBatch, pad_id: int, minis: list[list[int]], from_loss: set[int]
    ) -> tuple[torch.Tensor | None, torch.Tensor | None]:
        """The log-probs that stay fixed through the update, without gradients: the rollout
        policy's (needed for more than one update per step, or for a KL in the reward) and the
        reference model's (KL), each (B, T) over the loss mask. The rollout policy's are computed
        per micro-batch of the mini-batches ``minis`` (the update's own, so each shares its frozen
        trunk), except for the rows in ``from_loss``: 0 here, the loss forward fills them
        (:meth:`_micro_loss`)."""
        a = self.algo
        mb = self.recipe.micro_batch_size
        old_logp = ref_logp = None
        with torch.no_grad():
            if a.updates_per_step > 1 or a.kl_placement == "reward":
                old_logp = torch.zeros_like(b.mask)
                for rows in minis:
                    for c0 in range(0, len(rows), mb):
                        c = [r for r in rows[c0 : c0 + mb] if r not in from_loss]
                        if c:
                            old_logp[c] = b.pad(self._old_chunk(policy, b, c, pad_id))
            if a.needs_reference_model:
                ref_logp = b.per_chunk(
                    mb,
                    lambda c: self._ref_logprobs(
                        policy, ref, *b.pairs(c), pad_id, b.mask[c], b.trunk(c), b.share_prompts
                    ),
                )
        return old_logp, ref_logp

    def _old_chunk(self, policy, b: _UpdateBatch, c: list[int], pad_id: int) -> torch.Tensor:
        """The rollout policy's log-probs of rows ``c`` (the policy before this step's updates)."""
        a = self.algo
        return sequence_logprobs(
            policy,
            *b.pairs(c),
            pad_id=pad_id,
            temperature=a.temperature,
            with_entropy=False,
            keep=b.mask[c],
            trunk=b.trunk(c),
            share_prompts=b.share_prompts,
        )[0]

    def _micro_loss(
        self,
        policy,
        b: _UpdateBatch,
        rows: list[int],
        pad_id: int,
        adv: torch.Tensor,
        old_logp: torch.Tensor | None,
        ref_logp: torch.Tensor | None,
        units: float,
        stats: dict[str, list[float]],
    ) -> torch.Tensor:
        """The loss of one micro-batch (``rows``), already scaled to its share of the mini-batch
        (``units``): the recipe's policy loss (:data:`harness.rl.losses.POLICY_LOSSES`), plus
        ``kl_coef`` x KL for a KL in the loss, minus ``entropy_coef`` x entropy; logs its stats."""
        a = self.algo
        m = b.mask[rows]
        prompts, responses = b.pairs(rows)
        logp, ent = sequence_logprobs(
            policy,
            prompts,
            responses,
            pad_id=pad_id,
            temperature=a.temperature,
            with_entropy=True,
            mask=m[:, : max(len(r) for r in responses) or 1],
            entropy_grad=bool(a.entropy_coef),
            keep=m,
            trunk=b.trunk(rows),
            share_prompts=b.share_prompts,
        )
        logp = b.pad(logp)
        if old_logp is not None and self._old_pending.intersection(rows):
            # rows of the first mini-batch, before any optimizer step: the rollout policy is this one
            pending = [i for i, r in enumerate(rows) if r in self._old_pending]
            old_logp[[rows[i] for i in pending]] = logp.detach()[pending]
            self._old_pending.difference_update(rows)
        old = old_logp[rows] if old_logp is not None else logp.detach()
        if self._rollout_lp is not None:
            self._rollout_lp[rows] = logp.detach()
        loss, st = POLICY_LOSSES.get(a.policy_loss)(logp, old, adv[rows], m, a, units)
        if a.kl_placement == "loss":
            assert ref_logp is not None
            ref = ref_logp[rows]
            kl = kl_loss(
                logp,
                ref,
                m,
                estimator=a.kl_estimator,
                agg_mode=a.loss_agg_mode,
                norm_length=a.loss_norm_length,
                num_units=units,
            )
            loss = loss + a.kl_coef * kl
            stats["kl"].append(
                float(masked_mean(kl_values(logp.detach(), ref, m, estimator=a.kl_estimator), m))
            )
        if ent is not None:
            ent = b.pad(ent)
            if a.entropy_coef:
                loss = loss - a.entropy_coef * agg_loss(
                    ent, m, a.loss_agg_mode, norm_length=a.loss_norm_length, num_units=units
                )
            stats["entropy"].append(float(masked_mean(ent.detach(), m)))
        for k in (
            "clip_frac",
            "clip_frac_low",
            "clip_frac_high",
            "dual_clip_frac",
            "approx_kl",
            "ratio_mean",
        ):
            stats[k].append(getattr(st, k))
        stats["ratio_min"].append(st.ratio_min)
        stats["ratio_max"].append(st.ratio_max)
        stats["policy_tokens"].append(float(st.num_tokens))
        stats["loss"].append(float(loss.detach()))
        return loss

    def _critic_update(
        self, critic: Critic, prompts, responses, rows, mask, old_values, returns, pad_id, stats
    ) -> None:
        """One optimizer step of the critic on a mini-batch: the clipped value loss, token-mean
        over the mini-batch's model tokens, accumulated over micro-batches."""
        from harness.rl.ppo import sequence_values, value_loss

        c = self.algo.critic
        assert c is not None
        mb = self.recipe.micro_batch_size
        units = agg_units(mask[rows], "token-mean")
        t_len = mask.shape[1]
        critic.opt.zero_grad(set_to_none=True)
        for c0 in range(0, len(rows), mb):
            idx = rows[c0 : c0 + mb]
            v = sequence_values(
                critic.model, [prompts[i] for i in idx], [responses[i] for i in idx], pad_id=pad_id
            )
            v = torch.nn.functional.pad(v, (0, t_len - v.shape[1]))
            loss, st = value_loss(
                v,
                old_values[idx],
                returns[idx],
                mask[idx],
                cliprange_value=c.cliprange_value,
                num_units=units,
            )
            loss.backward()
            stats["critic/vf_loss"].append(float(loss.detach()))
            stats["critic/vf_clip_frac"].append(st.clip_frac)
            stats["critic/values_mean"].append(st.values_mean)
            stats["critic/returns_mean"].append(st.returns_mean)
        if c.grad_clip is not None:
            stats["critic/grad_norm"].append(
                float(torch.nn.utils.clip_grad_norm_(critic.params, c.grad_clip))
            )
        critic.opt.step()
        critic.sched.step()

    def _ref_logprobs(
        self, policy, ref, prompts, responses, pad_id, keep, trunk=None, share_prompts=False
    ) -> torch.Tensor:
        """The reference's log-probs; ``trunk``: the policy's frozen trunk of these pairs, which is
        the LoRA reference's too (the adapter-free base below the first adapted layer)."""
        a = self.algo
        kw = dict(
            pad_id=pad_id,
            temperature=a.temperature,
            with_entropy=False,
            keep=keep,
            share_prompts=share_prompts,
        )
        if ref is not None:
            return sequence_logprobs(ref, prompts, responses, **kw)[0]
        with policy.disable_adapter():  # LoRA: the reference is the base model
            return sequence_logprobs(policy, prompts, responses, trunk=trunk, **kw)[0]

    # -- checkpoints ---------------------------------------------------------------------------
    def _record_questions(self, step: int, rnd: int, ids: list[str]) -> None:
        """Append the questions one rollout round drew to ``out_dir/rl_questions.jsonl`` (step and
        round numbered from 0; a resumed run appends the steps it repeats again)."""
        self.out_dir.mkdir(parents=True, exist_ok=True)
        with (self.out_dir / "rl_questions.jsonl").open("a") as f:
            f.write(json.dumps({"step": step, "round": rnd, "ids": ids}) + "\n")
        self._drawn.extend(i for i in ids if i not in self._drawn_set)
        self._drawn_set.update(ids)

    def _save_final(self, policy, tok) -> None:
        save_final(
            policy,
            tok,
            self.out_dir,
            self.recipe,
            self.method.name,
            self.model_name,
            log=self.log,
            questions=list(self._drawn),
        )


def load_policy(
    model_name: str, recipe: Recipe, *, with_reference: bool, device: Any = "cpu"
) -> tuple[Any, Any, Any]:
    """(policy, frozen reference copy or None, tokenizer) of ``model_name`` in the recipe's dtype
    (``auto``: :func:`harness.device.resolve_dtype`) on ``device``, with the recipe's LoRA adapters
    when it has them (the reference is then the adapter-free base, so no copy is made) and
    gradient checkpointing when the recipe asks for it."""
    from transformers import AutoModelForCausalLM, AutoTokenizer

    from harness.device import resolve_device, resolve_dtype
    from harness.llm.model_files import resolve_model

    device = resolve_device(device) if isinstance(device, str) else device
    base_dir = resolve_model(model_name)
    dtype = resolve_dtype(recipe.dtype, device)
    tok = AutoTokenizer.from_pretrained(str(base_dir))
    policy = AutoModelForCausalLM.from_pretrained(str(base_dir), dtype=dtype).to(device)
    if recipe.gradient_checkpointing:
        # non-reentrant: works with frozen embeddings (LoRA) without enable_input_require_grads.
        # transformers renamed gradient_* to activation_* (5.24 has both; the old names go in v6),
        # earlier versions have only the old ones
        kwargs = {"use_reentrant": False}
        if hasattr(policy, "activation_checkpointing_enable"):
            policy.activation_checkpointing_enable(activation_checkpointing_kwargs=kwargs)
        else:
            policy.gradient_checkpointing_enable(gradient_checkpointing_kwargs=kwargs)
        policy.config.use_cache = False
    ref = None
    if with_reference and recipe.lora is None:
        ref = copy.deepcopy(policy).eval()
        for p in ref.parameters():
            p.requires_grad_(False)
    if recipe.lora is not None:
        from peft import LoraConfig as PeftLora
        from peft import get_peft_model

        lc = recipe.lora
        policy = get_peft_model(
            policy,
            PeftLora(
                r=lc.rank,
                lora_alpha=lc.alpha,
                lora_dropout=lc.dropout,
                target_modules=list(lc.target_modules),
                layers_to_transform=list(lc.layers) if lc.layers is not None else None,
                task_type="CAUSAL_LM",
            ),
        )
        if recipe.adapted_dtype != "model":
            from harness.rl.sequences import low_precision_bases

            low_precision = TRUNK_DTYPES[recipe.adapted_dtype]
            assert low_precision is not None  # "model" is the only key mapping to None
            low_precision_bases(policy, low_precision)
    policy.train()
    return policy, ref, tok


def saved_policy(model: str, saved: Path, *, device: Any = "cpu") -> tuple[Any, Any, int]:
    """(policy, recipe, step) of a saved training checkpoint folder (``harness train``'s
    ``<out>/checkpoint``, or a copy of it kept at some step): ``model`` (the run's ``--model``) with
    the recipe's LoRA adapters, loaded with the saved ``policy_state.pt``; the recipe and step are
    the folder's (``recipe.json``, ``progress.json``). Why: a run may defer its held-out
    evaluations (each costs half an hour on 2 CPU cores) and evaluate its kept checkpoints with
    :func:`harness.rl.heldout_eval.evaluate_step` afterwards."""
    saved = Path(saved)
    files = [saved / "recipe.json", saved / PROGRESS_FILE, saved / "policy_state.pt"]
    missing = [f.name for f in files if not f.is_file()]
    if missing:
        raise ConfigError(f"{saved}: not a saved training checkpoint (no {', '.join(missing)})")
    recipe = Recipe.model_validate_json(files[0].read_text())
    step = int(json.loads(files[1].read_text())["step"])
    policy, _ref, _tok = load_policy(model, recipe, with_reference=False, device=device)
    policy.load_state_dict(torch.load(files[2], map_location=device, weights_only=True))
    policy.eval()
    return policy, recipe, step


def start_policy(model: str, recipe: Recipe, *, device: Any = "cpu") -> Any:
    """The policy a run of ``recipe`` from ``model`` holds before its first update (its step 0):
    ``model`` with the recipe's LoRA adapters initialised as :meth:`Trainer.train` does (seeded
    with ``recipe.seed``; LoRA's B is zero, so it is ``model`` itself). Why: a run that deferred
    its held-out evaluations evaluates its step 0 afterwards as well (more samples, say)."""
    torch.manual_seed(recipe.seed)
    policy, _ref, _tok = load_policy(model, recipe, with_reference=False, device=device)
    policy.eval()
    return policy


def make_adamw(params: list[Any], *, lr: float, betas: Any, weight_decay: float) -> torch.optim.AdamW:
    """AdamW over ``params``; on a GPU torch's fused kernel (TRL's default there too), which keeps
    no full-size intermediates (the default multi-tensor version holds e.g. sqrt(v) for every
    parameter at once). With it and 64 MB LM-head chunks (:mod:`harness.rl.sequences`), a GRPO step
    of the 1.4B shape in ``scripts/gpu_check.py`` peaked at 11.0 GiB (bf16) and 21.8 GiB (fp32) on
    one H200 instead of 13.0 and 25.9. The CPU keeps the default implementation, whose numerics the
    committed CPU results were made with."""
    fused = bool(params) and params[0].device.type == "cuda"
    return torch.optim.AdamW(params, lr=lr, betas=betas, weight_decay=weight_decay, fused=fused or None)


def loss_masks(trajs: list[Trajectory], *, device: Any, drop_truncated: bool = False) -> torch.Tensor:
    """(B, T) float loss masks of ``trajs`` (1 on model tokens, 0 on observations and padding), on
    ``device``; ``drop_truncated``: a truncated trajectory's row is all 0 (DAPO's overlong filter)."""
    t_len = max(max(len(t.response_ids or []) for t in trajs), 1)
    rows = [
        [0.0] * t_len
        if drop_truncated and t.extraction_status == "truncated"
        else list(map(float, t.loss_mask or [])) + [0.0] * (t_len - len(t.loss_mask or []))
        for t in trajs
    ]
    return torch.tensor(rows, dtype=torch.float32, device=device)


def engine_logprobs(trajs: list[Trajectory], *, device: Any) -> torch.Tensor | None:
    """(B, T) the rollout engine's log-prob of each response token (NaN where it reported none,
    and on padding), or None when no trajectory carries any."""
    if all(t.engine_logprobs is None for t in trajs):
        return None
    t_len = max(max(len(t.response_ids or []) for t in trajs), 1)
    rows = []
    for t in trajs:
        lp = (
            list(t.engine_logprobs)
            if t.engine_logprobs is not None
            else [math.nan] * len(t.response_ids or [])
        )
        rows.append(lp + [math.nan] * (t_len - len(lp)))
    return torch.tensor(rows, dtype=torch.float32, device=device)


def engine_mismatch(learner: torch.Tensor, engine: torch.Tensor, mask: torch.Tensor) -> dict[str, float]:
    """How far the rollout engine's log-probs are from the learner's on the sampled model tokens
    (mask 1, engine value known): ``engine/logp_abs_diff`` the mean |logp_engine - logp_learner|,
    and the spread of the per-token importance ratio ``pi_learner / pi_engine`` (``engine/ratio_std``,
    ``engine/ratio_min``, ``engine/ratio_max``; a truncated importance correction would cap it),
    over ``engine/tokens`` tokens."""
    keep = (mask > 0) & ~torch.isnan(engine)
    n = int(keep.sum())
    if n == 0:
        return {"engine/tokens": 0.0}
    d = (learner.float() - engine)[keep]
    ratio = torch.exp(d)
    return {
        "engine/tokens": float(n),
        "engine/logp_abs_diff": float(d.abs().mean()),
        "engine/ratio_std": float(ratio.std(unbiased=False)),
        "engine/ratio_min": float(ratio.min()),
        "engine/ratio_max": float(ratio.max()),
    }


def training_examples(recipe: Recipe, data_dir: Path | None = None) -> list[QAExample]:
    """The recipe's training questions: the ``train`` part of its split (when it names one) of its
    bench, then its selection; a held-out question of the split is never among them."""
    from harness.data.benches import get_bench, load_bench

    if recipe.split is not None:
        from harness.rl.split import load_split, refuse_heldout, split_examples

        split = load_split(recipe.split)
        if split.bench != recipe.bench:
            raise ConfigError(
                f"recipe {recipe.name!r}: split {recipe.split!r} partitions bench {split.bench!r}, "
                f"not the recipe's bench {recipe.bench!r}"
            )
        out = recipe.selection.apply(split_examples(recipe.split, "train", data_dir))
        refuse_heldout(recipe.split, out)
    else:
        out = []
        for _entry, exs in load_bench(get_bench(recipe.bench), recipe.selection, data_dir=data_dir):
            out.extend(exs)
    if not out:
        raise ConfigError(f"recipe {recipe.name!r}: bench {recipe.bench!r} selected no questions")
    return out


def rl_examples(recipe: Recipe, examples: list[QAExample], model: str) -> list[QAExample]:
    """The RL stage's questions out of the training questions ``examples``: with an ``sft`` block
    in the recipe, those its warm-up does not take (:func:`harness.rl.split.stage_questions`:
    one seeded shuffle, SFT the first ``sft.n_questions``, RL the rest); and never a question the
    starting checkpoint says it was trained on (``questions`` of its ``harness_train.json``, which
    ``harness sft`` writes), whatever recipe made it."""
    from harness.rl.split import stage_questions

    out = list(examples)
    if recipe.sft is not None:
        out = list(stage_questions(out, seed=recipe.seed, sft_n=recipe.sft.n_questions).rl)
    record = Path(model) / "harness_train.json"
    if record.is_file():
        trained = set(json.loads(record.read_text()).get("questions") or ())
        out = [e for e in out if e.id not in trained]
    if not out:
        raise ConfigError(
            f"recipe {recipe.name!r}: no training question is left for RL after the warm-up's "
            f"({'sft.n_questions' if recipe.sft is not None else record}); lower sft.n_questions"
        )
    return out


def no_learning_signal(metrics: dict[str, float], *, critic: bool) -> bool:
    """Whether a step's update had nothing to learn from: groups were trained on, every one of them
    with one reward for all its rollouts (``zero_variance_groups`` 1), and the advantages are
    group-relative (no critic), so each is 0 and only the KL term, if any, moves the policy."""
    return not critic and metrics.get("zero_variance_groups") == 1.0


def evaluate_command(method: str, checkpoint: Path) -> str:
    """The ``harness run`` line that evaluates ``checkpoint`` with ``method``, runnable as printed
    (issue 61: the line printed before lacked ``--method``, which ``harness run --model`` asks for):
    the first question of each dataset of the default bench, as the main job runs (with
    ``--limit 5`` it took 31 min on a loaded 2-core machine: 2 min a question on transformers)."""
    import shlex

    return f"harness run --method {method} --model {shlex.quote(str(checkpoint))} --limit 1"


def save_final(
    policy: Any,
    tok: Any,
    out_dir: Path,
    recipe: Recipe,
    method: str,
    base_model: str,
    *,
    stage: str = "rl",
    log: Callable[[str], None] = print,
    questions: list[str] | None = None,
) -> Path:
    """Write ``out_dir/final``: a plain Hugging Face directory (LoRA merged) that ``harness run
    --model`` evaluates, with the recipe and what produced it (``questions``: the ids of the
    training questions the stage used, recorded in ``harness_train.json``); atomic (written
    beside, renamed)."""
    final = out_dir / "final"
    tmp = out_dir / "final.tmp"
    shutil.rmtree(tmp, ignore_errors=True)
    if recipe.lora is not None:
        from harness.rl.sequences import full_precision_bases

        full_precision_bases(policy)  # the merge changes the base weights their rounded copies came from
    model = policy.merge_and_unload() if recipe.lora is not None else policy
    model.save_pretrained(tmp)
    tok.save_pretrained(tmp)
    (tmp / "recipe.json").write_text(recipe.model_dump_json(indent=2))
    (tmp / "harness_train.json").write_text(
        json.dumps(
            {
                "method": method,
                "base_model": base_model,
                "recipe": recipe.name,
                "stage": stage,
                "steps": recipe.steps,
                **({"questions": questions} if questions is not None else {}),
            }
        )
    )
    shutil.rmtree(final, ignore_errors=True)
    tmp.rename(final)
    log(f"final checkpoint: {final}  (evaluate it with: {evaluate_command(method, final)})")
    return final
