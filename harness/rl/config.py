"""``AlgoConfig``: every knob of the RL algorithm, explicit, with no defaults.

No field has a default value: a recipe states every flag (the TRL lesson: its loss aggregation
default silently changed to "dapo"). Start from a preset (``grpo()``, ``dr_grpo()``, ``dapo()``,
``reinforce_pp()``; each value cites its source) and override with
``cfg.model_copy(update={...})`` or ``AlgoConfig.model_validate({...})``. Contradictory settings
are refused with a ``ConfigError`` naming the fields.

Units: ``group_size`` trajectories per prompt; ``train_batch_size`` and ``mini_batch_size`` count
*prompts* (groups), as verl's ``data.train_batch_size`` / ``ppo_mini_batch_size`` do; an optimizer
update sees ``mini_batch_size * group_size`` trajectories; one training step makes
``ppo_epochs * train_batch_size / mini_batch_size`` updates.
"""

from __future__ import annotations

from typing import Literal

from pydantic import BaseModel, ConfigDict, Field, ValidationError, model_validator

from harness.errors import ConfigError
from harness.rl.advantages import AdvantageParams
from harness.rl.dapo import AllOf, DropZeroVariance, GroupFilter, ThresholdFilter
from harness.rl.kl import KlEstimatorName
from harness.rl.losses import POLICY_LOSSES, AggMode

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
        return AdvantageParams(
            norm_by_std=self.norm_adv_by_std,
            std_unbiased=self.adv_std_unbiased,
            eps=self.adv_eps,
            gamma=self.gamma,
            lam=self.critic.lam if self.critic is not None else 1.0,
        )


_NO_OVERLONG = {
    "soft_penalty": False,
    "max_len": None,
    "cache_len": None,
    "penalty_factor": None,
    "filter_truncated": False,
}
_NO_DYNAMIC = {"enabled": False, "max_rounds": None, "filters": ()}
# verl's actor defaults, used where a paper states nothing: optim.weight_decay=0.01 and
# clip_ratio=0.2 (verl/trainer/config/actor/actor.yaml), grad_clip=1.0 (dp_actor.yaml),
# AdamW betas (0.9, 0.999).
_VERL_OPTIM = {"adam_betas": (0.9, 0.999), "weight_decay": 0.01, "grad_clip": 1.0}


def grpo() -> AlgoConfig:
    """GRPO as in DeepSeekMath (Shao et al. 2024, arXiv 2402.03300, §4.1-4.2).

    Paper: lr 1e-6; KL coefficient 0.04 in the loss with the unbiased estimator of Eq. 4 (= k3);
    64 outputs per question; "training batch size 1024" (read here as 1024 outputs = 16 prompts
    x 64); one policy update per exploration stage (ppo_epochs 1, mini = train batch);
    advantages (r - mean)/std (§4.1.2); loss 1/G sum_i 1/|o_i| sum_t (Eq. 3) = seq-mean-token-mean.
    Not in the paper, from verl: std unbiased + eps 1e-6 (``compute_grpo_outcome_advantage``),
    clip 0.2 (``actor.clip_ratio``), temperature 1.0 / top_p 1.0, no warm-up, constant lr,
    optimiser defaults. No dual clip (verl's default 3.0 is not part of GRPO).
    """
    return AlgoConfig(
        adv_estimator="grpo",
        group_size=64,
        norm_adv_by_std=True,
        adv_std_unbiased=True,
        adv_eps=1e-6,
        gamma=1.0,
        critic=None,
        policy_loss="clipped",
        clip_low=0.2,
        clip_high=0.2,
        dual_clip_c=None,
        loss_agg_mode="seq-mean-token-mean",
        loss_norm_length=None,
        kl_placement="loss",
        kl_estimator="k3",
        kl_coef=0.04,
        entropy_coef=0.0,
        overlong=OverlongConfig(**_NO_OVERLONG),
        dynamic_sampling=DynamicSamplingConfig(**_NO_DYNAMIC),
        train_batch_size=16,
        mini_batch_size=16,
        ppo_epochs=1,
        lr=1e-6,
        lr_schedule="constant",
        lr_warmup_steps=0,
        lr_warmup_ratio=None,
        min_lr_ratio=0.0,
        temperature=1.0,
        top_p=1.0,
        **_VERL_OPTIM,
    )


def dr_grpo() -> AlgoConfig:
    """Dr. GRPO (Liu et al. 2025, arXiv 2503.20783), values from the authors' recipe
    sail-sg/understand-r1-zero ``examples/qwen2.5-math-7b.sh`` (``--critic_type drgrpo``).

    Advantage R - mean_g (no std); loss sum over tokens / the generation budget
    (``--generate_max_length 3000``) then mean over sequences = ``seq-mean-token-sum-norm`` with
    ``loss_norm_length=3000``; ``--beta 0`` (no KL, no reference model); ``--num_samples 8``;
    ``--rollout_batch_size 128`` prompts; ``--train_batch_size 128`` samples per update = 16
    prompts (our reading of oat's units: 8 updates per step); ``--num_ppo_epochs 1``;
    ``--learning_rate 1e-6 --lr_scheduler constant``; ``--temperature 1 --top_p 1``. Clip 0.2 is
    oat's default; optimiser defaults from verl (the script sets none). ``adv_eps`` and
    ``adv_std_unbiased`` are not read by ``dr_grpo``.
    """
    return AlgoConfig(
        adv_estimator="dr_grpo",
        group_size=8,
        norm_adv_by_std=False,
        adv_std_unbiased=True,
        adv_eps=1e-6,
        gamma=1.0,
        critic=None,
        policy_loss="clipped",
        clip_low=0.2,
        clip_high=0.2,
        dual_clip_c=None,
        loss_agg_mode="seq-mean-token-sum-norm",
        loss_norm_length=3000,
        kl_placement="none",
        kl_estimator="k3",
        kl_coef=0.0,
        entropy_coef=0.0,
        overlong=OverlongConfig(**_NO_OVERLONG),
        dynamic_sampling=DynamicSamplingConfig(**_NO_DYNAMIC),
        train_batch_size=128,
        mini_batch_size=16,
        ppo_epochs=1,
        lr=1e-6,
        lr_schedule="constant",
        lr_warmup_steps=0,
        lr_warmup_ratio=None,
        min_lr_ratio=0.0,
        temperature=1.0,
        top_p=1.0,
        **_VERL_OPTIM,
    )


def dapo() -> AlgoConfig:
    """DAPO (Yu et al. 2025, arXiv 2503.14476), values from the released verl recipe
    ``recipe/dapo/run_dapo_qwen2.5_32b.sh``, which matches the paper.

    GRPO advantages (std, verl's unbiased std + 1e-6); clip-higher 0.2 / 0.28; token-mean loss;
    no KL (``kl_coef=0``, ``kl_loss_coef=0``); 16 responses per prompt; 512 prompts per step,
    mini-batch 32 prompts (16 updates per step); dynamic sampling on, filter on accuracy
    (``filter_groups.metric=acc`` -> our ``outcome``), ``max_num_gen_batches=10``; soft overlong
    punishment with ``max_response_length=20480``, ``overlong_buffer.len=4096``,
    ``penalty_factor=1.0``; lr 1e-6, ``lr_warmup_steps=10``, ``weight_decay=0.1``,
    ``grad_clip=1.0``; entropy 0; temperature 1.0, top_p 1.0. Overlong *filtering* is off as in
    the recipe (the paper's Table 3 also lists it; set ``overlong.filter_truncated`` to add it).
    No dual clip (verl applies its default c=3.0; the paper's objective has none).
    """
    return AlgoConfig(
        adv_estimator="grpo",
        group_size=16,
        norm_adv_by_std=True,
        adv_std_unbiased=True,
        adv_eps=1e-6,
        gamma=1.0,
        critic=None,
        policy_loss="clipped",
        clip_low=0.2,
        clip_high=0.28,
        dual_clip_c=None,
        loss_agg_mode="token-mean",
        loss_norm_length=None,
        kl_placement="none",
        kl_estimator="k3",
        kl_coef=0.0,
        entropy_coef=0.0,
        overlong=OverlongConfig(
            soft_penalty=True, max_len=20480, cache_len=4096, penalty_factor=1.0, filter_truncated=False
        ),
        dynamic_sampling=DynamicSamplingConfig(
            enabled=True,
            max_rounds=10,
            filters=(GroupFilterConfig(kind="zero_variance", metric="outcome", lower=None, upper=None),),
        ),
        train_batch_size=512,
        mini_batch_size=32,
        ppo_epochs=1,
        lr=1e-6,
        lr_schedule="constant",
        lr_warmup_steps=10,
        lr_warmup_ratio=None,
        min_lr_ratio=0.0,
        adam_betas=(0.9, 0.999),
        weight_decay=0.1,
        grad_clip=1.0,
        temperature=1.0,
        top_p=1.0,
    )


def reinforce_pp() -> AlgoConfig:
    """REINFORCE++ (Hu 2025, arXiv 2501.03262) as verl's example
    ``examples/reinforce_plus_plus_trainer/run_qwen2-7b_math_rf.sh`` runs it.

    ``adv_estimator=reinforce_plus_plus`` (token returns whitened over the batch; gamma 1.0 and
    whitening eps 1e-8 with unbiased variance are verl's defaults); lr 3e-6; 1024 prompts per
    step and per mini-batch; n=8; KL as loss, ``kl_loss_type=mse`` (= k2), coef 0.001;
    ``use_kl_in_reward=False``; entropy 0; clip 0.2, token-mean, temperature 1.0 (verl
    defaults). The paper's own variant puts a k1 KL penalty in the reward instead: use
    ``replace(kl_placement="reward", kl_estimator="k1", kl_coef=...)``.
    """
    return AlgoConfig(
        adv_estimator="reinforce_pp",
        group_size=8,
        norm_adv_by_std=False,
        adv_std_unbiased=True,
        adv_eps=1e-8,
        gamma=1.0,
        critic=None,
        policy_loss="clipped",
        clip_low=0.2,
        clip_high=0.2,
        dual_clip_c=None,
        loss_agg_mode="token-mean",
        loss_norm_length=None,
        kl_placement="loss",
        kl_estimator="k2",
        kl_coef=0.001,
        entropy_coef=0.0,
        overlong=OverlongConfig(**_NO_OVERLONG),
        dynamic_sampling=DynamicSamplingConfig(**_NO_DYNAMIC),
        train_batch_size=1024,
        mini_batch_size=1024,
        ppo_epochs=1,
        lr=3e-6,
        lr_schedule="constant",
        lr_warmup_steps=0,
        lr_warmup_ratio=None,
        min_lr_ratio=0.0,
        temperature=1.0,
        top_p=1.0,
        **_VERL_OPTIM,
    )


def ppo() -> AlgoConfig:
    """PPO with a critic (Schulman et al. 2017, arXiv 1707.06347; GAE arXiv 1506.02438) as verl's
    ``main_ppo`` runs it with ``algorithm.adv_estimator=gae`` and its ``ppo_trainer.yaml`` defaults:
    gamma 1.0, lam 1.0; one rollout per prompt (``rollout.n=1``); advantages whitened over the
    batch (unbiased variance, eps 1e-8, ``verl_F.masked_whiten``); actor clip 0.2, token-mean,
    entropy 0.001 (``actor.entropy_coeff``), no KL loss (``use_kl_loss=False``) but a k1 KL
    penalty in the reward (``kl_penalty=kl``, ``kl_ctrl.kl_coef=0.001``, fixed); actor lr 1e-6,
    constant, no warm-up; critic lr 1e-5, no warm-up (``critic.optim.lr_warmup_steps_ratio=0``),
    ``critic.cliprange_value=0.5``, ``critic.grad_clip=1.0``, ``trainer.critic_warmup=0``;
    ``ppo_mini_batch_size=256`` of ``train_batch_size=1024``, ``ppo_epochs=1``; temperature 1.0,
    top_p 1.0; optimiser defaults as the other presets.
    """
    return AlgoConfig(
        adv_estimator="gae",
        group_size=1,
        norm_adv_by_std=False,
        adv_std_unbiased=True,
        adv_eps=1e-8,
        gamma=1.0,
        critic=CriticConfig(
            lam=1.0,
            lr=1e-5,
            lr_warmup_steps=None,
            lr_warmup_ratio=0.0,
            cliprange_value=0.5,
            warmup_steps=0,
            adam_betas=(0.9, 0.999),
            weight_decay=0.01,
            grad_clip=1.0,
        ),
        policy_loss="clipped",
        clip_low=0.2,
        clip_high=0.2,
        dual_clip_c=None,
        loss_agg_mode="token-mean",
        loss_norm_length=None,
        kl_placement="reward",
        kl_estimator="k1",
        kl_coef=0.001,
        entropy_coef=0.001,
        overlong=OverlongConfig(**_NO_OVERLONG),
        dynamic_sampling=DynamicSamplingConfig(**_NO_DYNAMIC),
        train_batch_size=1024,
        mini_batch_size=256,
        ppo_epochs=1,
        lr=1e-6,
        lr_schedule="constant",
        lr_warmup_steps=0,
        lr_warmup_ratio=None,
        min_lr_ratio=0.0,
        temperature=1.0,
        top_p=1.0,
        **_VERL_OPTIM,
    )


PRESETS = {"grpo": grpo, "dr_grpo": dr_grpo, "dapo": dapo, "reinforce_pp": reinforce_pp, "ppo": ppo}
