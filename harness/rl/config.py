"""``AlgoConfig``: every knob of the RL algorithm, explicit, with no defaults.

No field has a default value: a recipe states every flag (the TRL lesson: its loss aggregation
default silently changed to "dapo"). Start from a preset (``preset("grpo")``, ``"dr_grpo"``,
``"dapo"``, ``"reinforce_pp"``, ``"ppo"``: ``harness/rl/presets.yaml``, each citing its source) and
override with
``cfg.model_copy(update={...})`` or ``AlgoConfig.model_validate({...})``. Contradictory settings
are refused with a ``ConfigError`` naming the fields.

Units: ``group_size`` trajectories per prompt; ``train_batch_size`` and ``mini_batch_size`` count
*prompts* (groups), as verl's ``data.train_batch_size`` / ``ppo_mini_batch_size`` do; an optimizer
update sees ``mini_batch_size * group_size`` trajectories; one training step makes
``ppo_epochs * train_batch_size / mini_batch_size`` updates.
"""

from __future__ import annotations

from functools import cache
from pathlib import Path
from typing import TYPE_CHECKING, Literal

import yaml
from pydantic import BaseModel, ConfigDict, Field, ValidationError, model_validator

from harness.errors import ConfigError
from harness.rl.names import POLICY_LOSSES, AggMode, KlEstimatorName

if TYPE_CHECKING:  # imported where built: they import torch, and validating a recipe must not
    from harness.rl.advantages import AdvantageParams
    from harness.rl.dapo import GroupFilter

AdvEstimatorName = Literal["grpo", "dr_grpo", "reinforce_pp", "reinforce_pp_baseline", "rloo", "gae"]


class _Strict(BaseModel):
    model_config = ConfigDict(frozen=True, extra="forbid")


class CriticConfig(_Strict):
    """The critic of PPO (``adv_estimator='gae'``; :mod:`harness.rl.ppo`), every field explicit.

    ``lam``: GAE's lambda (the discount is ``AlgoConfig.gamma``). The critic is a copy of the
    policy's initial backbone with a scalar value head, trained by the clipped value loss
    ``0.5 * token-mean(max((V - R)^2, (clip(V, V_old +- cliprange_value) - R)^2))`` over the model
    tokens (verl ``compute_value_loss``), with its own AdamW (``lr``, ``adam_betas``,
    ``weight_decay``), warm-up (exactly one of ``lr_warmup_steps`` / ``lr_warmup_ratio`` of its
    optimizer steps, then constant) and ``grad_clip`` (or null). ``warmup_steps``: training steps
    during which only the critic is updated (verl ``trainer.critic_warmup``).
    """

    lam: float = Field(ge=0, le=1)
    lr: float = Field(gt=0)
    lr_warmup_steps: int | None
    lr_warmup_ratio: float | None
    cliprange_value: float = Field(gt=0)
    warmup_steps: int = Field(ge=0)
    adam_betas: tuple[float, float]
    weight_decay: float = Field(ge=0)
    grad_clip: float | None

    @model_validator(mode="after")
    def _check(self) -> CriticConfig:
        if (self.lr_warmup_steps is None) == (self.lr_warmup_ratio is None):
            raise ValueError(
                "critic: set exactly one of lr_warmup_steps and lr_warmup_ratio (the other null)"
            )
        if self.lr_warmup_ratio is not None and not 0 <= self.lr_warmup_ratio <= 1:
            raise ValueError("critic.lr_warmup_ratio must be in [0, 1]")
        if self.lr_warmup_steps is not None and self.lr_warmup_steps < 0:
            raise ValueError("critic.lr_warmup_steps must be >= 0")
        if self.grad_clip is not None and self.grad_clip <= 0:
            raise ValueError("critic.grad_clip must be > 0 (or null for none)")
        return self


class OverlongConfig(_Strict):
    """Overlong handling (DAPO §3.4).

    soft_penalty: add ``dapo.overlong_penalty`` to the reward.
    max_len: generation budget L_max in tokens (required iff soft_penalty).
    cache_len: soft punishment window L_cache in tokens (required iff soft_penalty).
    penalty_factor: scale of the penalty, -factor at L_max (required iff soft_penalty).
    filter_truncated: zero the loss mask of samples truncated by the length budget.
    """

    soft_penalty: bool
    max_len: int | None
    cache_len: int | None
    penalty_factor: float | None
    filter_truncated: bool

    @model_validator(mode="after")
    def _check(self) -> OverlongConfig:
        fields = {"max_len": self.max_len, "cache_len": self.cache_len, "penalty_factor": self.penalty_factor}
        if self.soft_penalty:
            missing = [k for k, v in fields.items() if v is None]
            if missing:
                raise ValueError(f"overlong.soft_penalty=true needs {', '.join(missing)}")
            assert self.max_len is not None and self.cache_len is not None and self.penalty_factor is not None
            if not 0 < self.cache_len <= self.max_len:
                raise ValueError(
                    f"overlong needs 0 < cache_len <= max_len, got {self.cache_len}, {self.max_len}"
                )
            if self.penalty_factor < 0:
                raise ValueError("overlong.penalty_factor must be >= 0")
        else:
            given = [k for k, v in fields.items() if v is not None]
            if given:
                raise ValueError(f"overlong.soft_penalty=false but {', '.join(given)} set; set them to null")
        return self


class GroupFilterConfig(_Strict):
    """A dynamic-sampling group filter (see ``harness.rl.dapo``).

    kind: ``zero_variance`` (drop groups whose ``metric`` is constant) or ``threshold`` (keep iff
        max > lower and min < upper).
    metric: the reward name the filter reads: ``total``, ``outcome`` or a method component.
    lower / upper: bounds for ``threshold`` (required there, null for ``zero_variance``).
    """

    kind: Literal["zero_variance", "threshold"]
    metric: str
    lower: float | None
    upper: float | None

    @model_validator(mode="after")
    def _check(self) -> GroupFilterConfig:
        if self.kind == "threshold":
            if self.lower is None or self.upper is None or not self.lower < self.upper:
                raise ValueError("a threshold group filter needs lower < upper")
        elif self.lower is not None or self.upper is not None:
            raise ValueError("a zero_variance group filter takes no lower/upper; set them to null")
        return self

    def build(self) -> GroupFilter:
        from harness.rl.dapo import DropZeroVariance, ThresholdFilter

        if self.kind == "zero_variance":
            return DropZeroVariance(metric=self.metric)
        assert self.lower is not None and self.upper is not None
        return ThresholdFilter(metric=self.metric, lower=self.lower, upper=self.upper)


class DynamicSamplingConfig(_Strict):
    """Dynamic sampling (DAPO, arXiv 2503.14476 §3.2): regenerate until ``train_batch_size`` groups pass the filters.

    enabled: on/off. max_rounds: cap on generation rounds per step (>= 1; required iff enabled).
    filters: group filters, all of which must keep a group (non-empty iff enabled).
    """

    enabled: bool
    max_rounds: int | None
    filters: tuple[GroupFilterConfig, ...]

    @model_validator(mode="after")
    def _check(self) -> DynamicSamplingConfig:
        if self.enabled:
            if self.max_rounds is None or self.max_rounds < 1:
                raise ValueError("dynamic_sampling.enabled=true needs max_rounds >= 1")
            if not self.filters:
                raise ValueError("dynamic_sampling.enabled=true needs at least one filter")
        elif self.max_rounds is not None or self.filters:
            raise ValueError("dynamic_sampling.enabled=false takes max_rounds=null and no filters")
        return self

    def build_filter(self) -> GroupFilter:
        if not self.enabled:
            raise ConfigError("dynamic sampling is disabled; there is no group filter to build")
        from harness.rl.dapo import AllOf

        built = tuple(f.build() for f in self.filters)
        return built[0] if len(built) == 1 else AllOf(filters=built)


class AlgoConfig(_Strict):
    """The RL algorithm, every field explicit (see the module docstring for units).

    Advantages
        adv_estimator: one of ``harness.rl.advantages.ADV_ESTIMATORS``.
        group_size: trajectories sampled per prompt (G).
        norm_adv_by_std: divide by the group std; only ``grpo`` may set it True.
        adv_std_unbiased: std/variance divisor n-1 (True, torch.std and verl) or n (False).
        adv_eps: ``grpo``: A = (R - mean)/(std + eps); whitening estimators: / sqrt(var + eps).
        gamma: discount of ``reinforce_pp`` and ``gae`` (read by no other estimator).
        critic: ``CriticConfig`` (GAE's lambda, the value model's training) for ``gae``, and
            only there; null for every critic-free estimator.
    Policy loss
        clip_low / clip_high: ratio clip range [1 - clip_low, 1 + clip_high] (DAPO clip-higher
            when clip_high > clip_low).
        dual_clip_c: cap on the ratio for negative advantages (> 1), or null for none.
        loss_agg_mode: ``token-mean`` | ``seq-mean-token-mean`` | ``seq-mean-token-sum`` |
            ``seq-mean-token-sum-norm`` (formulas in ``harness.rl.losses``).
        loss_norm_length: the constant of ``seq-mean-token-sum-norm`` (required there, else null).
    KL to the reference model
        kl_placement: ``loss`` (kl_coef * kl_loss added to the loss), ``reward`` (-kl_coef * KL
            per token in the reward) or ``none`` (no reference model).
        kl_estimator: ``k1`` | ``k2`` | ``k3`` | ``low_var_kl`` (= k3) | ``abs``.
        kl_coef: beta; > 0 unless kl_placement is ``none``, where it must be 0.
    Other terms and data
        entropy_coef: loss -= entropy_coef * entropy (aggregated with loss_agg_mode); 0 = off.
        overlong: ``OverlongConfig``. dynamic_sampling: ``DynamicSamplingConfig``.
    Updates
        train_batch_size: prompts per training step. mini_batch_size: prompts per optimizer
            update (divides train_batch_size). ppo_epochs: passes over each step's batch.
    Optimiser (AdamW)
        lr; lr_schedule (``constant`` | ``cosine``); exactly one of lr_warmup_steps (optimizer
        steps) and lr_warmup_ratio (fraction of all optimizer steps), the other null;
        min_lr_ratio: cosine floor as a fraction of lr (0 for constant); adam_betas;
        weight_decay; grad_clip: max global grad norm, or null for none.
    Rollout sampling
        temperature / top_p: used when sampling, and the temperature again when computing
        log-probs (logits / temperature), so the ratio is taken under the sampling distribution.
    """

    adv_estimator: AdvEstimatorName
    group_size: int = Field(ge=1)
    norm_adv_by_std: bool
    adv_std_unbiased: bool
    adv_eps: float = Field(ge=0)
    gamma: float = Field(gt=0, le=1)
    critic: CriticConfig | None

    # a name in harness.rl.losses.POLICY_LOSSES; "clipped" is PPO's clipped surrogate (verl's
    # loss_mode "vanilla"), which clip_low / clip_high / dual_clip_c parameterise
    policy_loss: str
    clip_low: float = Field(gt=0, lt=1)
    clip_high: float = Field(gt=0)
    dual_clip_c: float | None
    loss_agg_mode: AggMode
    loss_norm_length: int | None

    kl_placement: Literal["loss", "reward", "none"]
    kl_estimator: KlEstimatorName
    kl_coef: float = Field(ge=0)

    entropy_coef: float = Field(ge=0)
    overlong: OverlongConfig
    dynamic_sampling: DynamicSamplingConfig

    train_batch_size: int = Field(ge=1)
    mini_batch_size: int = Field(ge=1)
    ppo_epochs: int = Field(ge=1)

    lr: float = Field(gt=0)
    lr_schedule: Literal["constant", "cosine"]
    lr_warmup_steps: int | None
    lr_warmup_ratio: float | None
    min_lr_ratio: float = Field(ge=0, le=1)
    adam_betas: tuple[float, float]
    weight_decay: float = Field(ge=0)
    grad_clip: float | None

    temperature: float = Field(gt=0)
    top_p: float = Field(gt=0, le=1)

    @model_validator(mode="after")
    def _check(self) -> AlgoConfig:
        if self.policy_loss not in POLICY_LOSSES:
            raise ValueError(
                f"unknown policy_loss {self.policy_loss!r}; registered: {', '.join(POLICY_LOSSES.names())}"
            )
        if (self.adv_estimator == "gae") != (self.critic is not None):
            raise ValueError(
                "a critic config is required by, and only by, adv_estimator 'gae' "
                f"(got adv_estimator={self.adv_estimator!r}, critic={'set' if self.critic else 'null'})"
            )
        if self.adv_estimator == "gae" and self.dynamic_sampling.enabled:
            raise ValueError("dynamic sampling filters groups; adv_estimator 'gae' has none (group_size 1)")
        if self.norm_adv_by_std and self.adv_estimator != "grpo":
            raise ValueError(
                f"norm_adv_by_std=true applies to adv_estimator 'grpo' only, not {self.adv_estimator!r}"
            )
        if (self.loss_agg_mode == "seq-mean-token-sum-norm") != (self.loss_norm_length is not None):
            raise ValueError(
                "loss_norm_length is required by, and only by, loss_agg_mode 'seq-mean-token-sum-norm'"
            )
        if self.loss_norm_length is not None and self.loss_norm_length < 1:
            raise ValueError("loss_norm_length must be >= 1")
        if self.dual_clip_c is not None and self.dual_clip_c <= 1:
            raise ValueError("dual_clip_c must be > 1 (or null)")
        if self.kl_placement == "none" and self.kl_coef != 0:
            raise ValueError("kl_placement='none' needs kl_coef=0")
        if self.kl_placement != "none" and self.kl_coef == 0:
            raise ValueError(
                f"kl_coef=0 with kl_placement={self.kl_placement!r} would run a reference model for nothing; "
                "set kl_placement='none'"
            )
        if self.train_batch_size % self.mini_batch_size:
            raise ValueError(
                f"mini_batch_size {self.mini_batch_size} must divide train_batch_size {self.train_batch_size}"
            )
        if (self.lr_warmup_steps is None) == (self.lr_warmup_ratio is None):
            raise ValueError("set exactly one of lr_warmup_steps and lr_warmup_ratio (the other null)")
        if self.lr_warmup_steps is not None and self.lr_warmup_steps < 0:
            raise ValueError("lr_warmup_steps must be >= 0")
        if self.lr_warmup_ratio is not None and not 0 <= self.lr_warmup_ratio <= 1:
            raise ValueError("lr_warmup_ratio must be in [0, 1]")
        if self.lr_schedule == "constant" and self.min_lr_ratio != 0:
            raise ValueError("min_lr_ratio applies to the cosine schedule only; set 0 for 'constant'")
        if self.grad_clip is not None and self.grad_clip <= 0:
            raise ValueError("grad_clip must be > 0 (or null for none)")
        return self

    @classmethod
    def parse(cls, data: dict) -> AlgoConfig:
        """Validate a plain mapping (e.g. a recipe file); errors become one ``ConfigError``."""
        try:
            return cls.model_validate(data)
        except ValidationError as e:
            raise ConfigError(f"invalid RL algorithm config: {e}") from e

    def replace(self, **changes: object) -> AlgoConfig:
        """A validated copy with ``changes`` applied (``model_copy`` does not re-validate)."""
        return AlgoConfig.parse({**self.model_dump(), **changes})

    @property
    def needs_reference_model(self) -> bool:
        return self.kl_placement != "none"

    @property
    def updates_per_step(self) -> int:
        return self.ppo_epochs * (self.train_batch_size // self.mini_batch_size)

    def advantage_params(self) -> AdvantageParams:
        from harness.rl.advantages import AdvantageParams

        return AdvantageParams(
            norm_by_std=self.norm_adv_by_std,
            std_unbiased=self.adv_std_unbiased,
            eps=self.adv_eps,
            gamma=self.gamma,
            lam=self.critic.lam if self.critic is not None else 1.0,
        )


PRESETS_FILE = Path(__file__).with_name("presets.yaml")


@cache
def _preset_entries() -> dict[str, dict]:
    with open(PRESETS_FILE, encoding="utf-8") as f:
        return yaml.safe_load(f)


def preset_names() -> list[str]:
    """The algorithms of ``harness/rl/presets.yaml``, in file order."""
    return list(_preset_entries())


def preset(name: str) -> AlgoConfig:
    """The ``AlgoConfig`` of algorithm ``name`` as its authors released it (``presets.yaml``: each
    entry's ``source`` cites the values; ``extends`` starts from another entry)."""
    entries = _preset_entries()
    if name not in entries:
        raise ConfigError(f"unknown algorithm preset {name!r}; known: {', '.join(entries)} ({PRESETS_FILE})")
    chain, seen = [], set()
    while name is not None:
        if name in seen:
            raise ConfigError(f"{PRESETS_FILE}: cycle in extends at {name!r}")
        seen.add(name)
        chain.append(entries[name])
        name = entries[name].get("extends")
    data: dict = {}
    for entry in reversed(chain):
        data.update(entry["algo"])
    return AlgoConfig.parse(data)
