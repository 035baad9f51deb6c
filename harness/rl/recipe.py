"""A training recipe: the RL algorithm plus everything else a paper fixes for training.

Paper modules build their recipes from these types; every value carries its provenance in
``sources`` (field path -> "paper §x" / "code: file" / "ours: why"), so a reader can tell what
was published from what we chose. ``harness train --recipe-override key=value`` edits any field.
"""

from __future__ import annotations

import json
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, ValidationError, model_validator

from harness.data.benches import Selection
from harness.errors import ConfigError
from harness.llm.base import BackendSpec
from harness.rl.config import AlgoConfig


class _Strict(BaseModel):
    model_config = ConfigDict(frozen=True, extra="forbid")


class RewardStage(_Strict):
    """From ``start_step`` on, the method's reward named ``reward`` is used (multi-stage schedules)."""

    start_step: int = Field(ge=0)
    reward: str


class LoraConfig(_Strict):
    """LoRA adapters (peft). ``layers``: the decoder layer indices that get adapters (peft
    ``layers_to_transform``), or null for all; adapting only the top layers also saves the
    backward pass through the frozen layers below them (CPU budgets)."""

    rank: int = Field(ge=1)
    alpha: float = Field(gt=0)
    dropout: float = Field(ge=0, lt=1)
    target_modules: tuple[str, ...] = ("q_proj", "k_proj", "v_proj", "o_proj")
    layers: tuple[int, ...] | None = None


class SftConfig(_Strict):
    """The supervised warm-up before RL (``harness sft``; :mod:`harness.rl.sft`).

    ``turns``: the model's turns of one demonstration, as templates over ``{question}`` and
    ``{answer}``; they are fed to the method's own rollout (engine, retriever, renderer) turn by
    turn in place of generations, so the retrieved observations are real and the token ids and
    loss mask are exactly those RL rollouts have. ``answer_in_observation``: keep only
    demonstrations whose observations contain a gold answer (normalised substring), and answer with
    that gold string (the model learns to read the answer off its retrieval, not to guess).
    ``n_questions``: the first N training questions (after a seeded shuffle), or null for all.
    ``batch_size`` demonstrations per optimizer step; ``micro_batch_size`` per forward/backward;
    ``epochs`` passes; AdamW (``lr``, ``weight_decay``, ``adam_betas``), linear warm-up over
    ``lr_warmup_steps`` optimizer steps then constant; ``grad_clip`` max global norm or null.
    Early stopping on a dev slice of the training split (never the held-out part): the last
    ``dev_questions`` of the warm-up's questions are not trained on; their demonstrations' token-mean
    NLL (``sft/dev_loss``, with the policy's per-token entropy on them, ``sft/dev_entropy``) is
    measured every ``eval_every`` optimizer steps, training stops after ``patience`` measurements
    without a lower loss, and the policy of the lowest one is what is saved. 0 / 0 / 0: off.
    """

    turns: tuple[str, ...] = Field(min_length=1)
    answer_in_observation: bool
    n_questions: int | None = Field(ge=1)
    epochs: int = Field(ge=1)
    batch_size: int = Field(ge=1)
    micro_batch_size: int = Field(ge=1)
    lr: float = Field(gt=0)
    lr_warmup_steps: int = Field(ge=0)
    weight_decay: float = Field(ge=0)
    adam_betas: tuple[float, float]
    grad_clip: float | None
    dev_questions: int = Field(default=0, ge=0)
    eval_every: int = Field(default=0, ge=0)
    patience: int = Field(default=0, ge=0)

    @model_validator(mode="after")
    def _check_early_stop(self) -> SftConfig:
        on = (self.dev_questions > 0, self.eval_every > 0, self.patience > 0)
        if any(on) and not all(on):
            raise ValueError(
                "sft early stopping needs dev_questions, eval_every and patience all > 0 (or all 0)"
            )
        if self.dev_questions and self.n_questions is not None and self.dev_questions >= self.n_questions:
            raise ValueError(
                f"sft.dev_questions {self.dev_questions} leaves no training question of sft.n_questions {self.n_questions}"
            )
        return self


# Upper bounds of a recipe's numbers (by field name, anywhere in the recipe; the rest get the
# defaults below): beyond them a value is a typo or a hostile recipe, and training would allocate
# without limit before failing (issue 45: algo.group_size=10**12 took 8 GB before it was killed).
# The papers' recipes sit far inside them (Search-R1: 512 prompts x 5 rollouts, 500 new tokens per turn; DAPO: 512 x 16).
NUMBER_BOUNDS: dict[str, float] = {
    "group_size": 1024,
    "train_batch_size": 65_536,
    "mini_batch_size": 65_536,
    "micro_batch_size": 65_536,
    "batch_size": 65_536,
    "ppo_epochs": 1000,
    "epochs": 10_000,
    "steps": 10_000_000,
    "max_new_tokens": 2**20,
    "max_obs_tokens": 2**20,
    "max_len": 2**20,
    "cache_len": 2**20,
    "loss_norm_length": 2**20,
    "max_turns": 1024,
    "top_k": 1000,
    "max_rounds": 10_000,
    "heldout_samples": 1024,
    "seed": 2**32 - 1,
    "lr": 10.0,
}
DEFAULT_INT_BOUND = 10**9
DEFAULT_FLOAT_BOUND = 1e9
MAX_ROLLOUTS_PER_STEP = 2**20  # group_size x train_batch_size


def _numbers(value: Any, path: str) -> Any:
    """(dotted path, number) of every int and float in ``value`` (models, mappings, sequences)."""
    if isinstance(value, BaseModel):
        for name in type(value).model_fields:
            yield from _numbers(getattr(value, name), f"{path}.{name}" if path else name)
    elif isinstance(value, dict):
        for k, v in value.items():
            yield from _numbers(v, f"{path}.{k}" if path else str(k))
    elif isinstance(value, list | tuple):
        for i, v in enumerate(value):
            yield from _numbers(v, f"{path}[{i}]")
    elif isinstance(value, int | float) and not isinstance(value, bool):
        yield path, value


def check_number_bounds(recipe: BaseModel) -> None:
    """A ``ValueError`` naming the first number of ``recipe`` outside :data:`NUMBER_BOUNDS` (or the
    defaults), or not finite; and when group_size x train_batch_size passes
    :data:`MAX_ROLLOUTS_PER_STEP`."""
    import math

    for path, v in _numbers(recipe, ""):
        if path.startswith("sources"):
            continue
        field = path.rsplit(".", 1)[-1].split("[", 1)[0]
        bound = NUMBER_BOUNDS.get(field, DEFAULT_INT_BOUND if isinstance(v, int) else DEFAULT_FLOAT_BOUND)
        if isinstance(v, float) and not math.isfinite(v):
            raise ValueError(f"{path} = {v} is not a finite number")
        if abs(v) > bound:
            raise ValueError(
                f"{path} = {v} is beyond its bound of {bound:g} (harness.rl.recipe.NUMBER_BOUNDS)"
            )
    algo = getattr(recipe, "algo", None)
    if algo is not None and algo.group_size * algo.train_batch_size > MAX_ROLLOUTS_PER_STEP:
        raise ValueError(
            f"algo.group_size x algo.train_batch_size = {algo.group_size * algo.train_batch_size} rollouts "
            f"per step is beyond the bound of {MAX_ROLLOUTS_PER_STEP}"
        )


class Recipe(_Strict):
    """Everything needed to train one method.

    Rollout: ``max_new_tokens`` per turn, ``max_turns`` search turns, ``top_k`` passages,
    ``max_obs_tokens`` per observation (Search-R1 defaults 500 / 4 / 3 / 500).
    Data: ``bench`` and ``selection`` name the training questions (the packaged sets hold
    dev/test questions only; users with the real train splits pass ``--data-dir``).
    ``micro_batch_size``: trajectories per forward/backward (gradient accumulation inside an
    optimizer update; does not change the maths).
    ``split``: a packaged train / held-out split (:mod:`harness.rl.split`); when set, training
    (RL and ``sft``) uses only its ``train`` questions of ``bench`` (then ``selection``), never a
    held-out one. ``sft``: the supervised warm-up ``harness sft`` runs before RL, or null.
    ``heldout_every``: evaluate the policy on the split's held-out questions every N RL steps (and
    at step 0) with :func:`harness.rl.heldout_eval.evaluate_heldout`; 0 = never. ``heldout_samples``:
    the k of mean@k EM / pass@k there (answers sampled a question at ``algo.temperature``; 0 =
    greedy EM only).
    """

    name: str
    method: str
    algo: AlgoConfig
    steps: int = Field(ge=1)
    bench: str
    selection: Selection = Selection()
    max_new_tokens: int = Field(ge=1)
    max_turns: int = Field(ge=0)
    top_k: int = Field(ge=1)
    max_obs_tokens: int = Field(ge=1)
    micro_batch_size: int = Field(ge=1)
    reward_stages: tuple[RewardStage, ...] = (RewardStage(start_step=0, reward="default"),)
    aux_models: dict[str, BackendSpec] = {}  # role ("reader", "judge", "embedder") -> model
    lora: LoraConfig | None = None
    dtype: Literal["auto", "float32", "bfloat16"] = "float32"
    # the dtype of the learner's frozen trunk (the layers below the first LoRA-adapted one, shared
    # by a step's passes; harness.rl.sequences): "model" (exactly the full forward) or "bfloat16"
    # (autocast; master LoRA weights, upper layers and optimizer stay in the model's dtype)
    trunk_dtype: Literal["model", "bfloat16"] = "model"
    # the dtype of the frozen base products inside the LoRA-adapted linears
    # (harness.rl.sequences.low_precision_bases): "model" (exact) or "bfloat16" (the base weight and
    # its input in bfloat16, the adapter's product in the model's dtype and added after, so every pass
    # of a step rounds the bases alike and the ratio follows the adapter's update, unlike autocast)
    adapted_dtype: Literal["model", "bfloat16"] = "model"
    # recompute each layer's activations in the backward pass (transformers' gradient
    # checkpointing): less memory for more compute; TRL's GRPOConfig turns it on by default
    gradient_checkpointing: bool = False
    seed: int = 0
    save_every: int = Field(default=0, ge=0)  # 0: only the final checkpoint
    split: str | None = None
    sft: SftConfig | None = None
    heldout_every: int = Field(default=0, ge=0)
    heldout_samples: int = Field(default=0, ge=0)
    sources: dict[str, str] = {}

    @model_validator(mode="before")
    @classmethod
    def _absent_stage_sources(cls, data: Any) -> Any:
        """An optional part left out (no split, no warm-up, no critic) has that as its provenance,
        so recipes that predate it need not name it."""
        if not isinstance(data, dict):
            return data
        src = dict(data.get("sources") or {})
        for key, text in (("split", "none: no held-out split"), ("sft", "none: no supervised warm-up")):
            if data.get(key) is None:
                src.setdefault(key, text)
        for key in ("heldout_every", "heldout_samples"):
            if not data.get(key):
                src.setdefault(key, "none: no held-out evaluation during training")
        if data.get("trunk_dtype", "model") == "model":
            src.setdefault("trunk_dtype", "none: the frozen trunk in the model's own dtype (exact)")
        if data.get("adapted_dtype", "model") == "model":
            src.setdefault(
                "adapted_dtype", "none: the adapted linears' base products in the model's dtype (exact)"
            )
        algo = data.get("algo")
        # anything but a mapping (``--recipe-override algo=5``) is left for the validation to refuse
        critic = (
            algo.critic
            if isinstance(algo, AlgoConfig)
            else algo.get("critic")
            if isinstance(algo, dict)
            else None
        )
        if critic is None:
            src.setdefault("algo.critic", "none: a critic-free estimator")
        return {**data, "sources": src}

    def model_copy(self, *, update: dict[str, Any] | None = None, deep: bool = False) -> Recipe:
        """A copy with ``update`` applied, validated (pydantic's ``model_copy`` skips validation,
        which would let a derived recipe break the checks above)."""
        if not update:
            return super().model_copy(deep=deep)
        data = {name: getattr(self, name) for name in type(self).model_fields}
        return type(self).model_validate({**data, **update})

    @model_validator(mode="after")
    def _check(self) -> Recipe:
        starts = [s.start_step for s in self.reward_stages]
        if not starts or starts[0] != 0 or starts != sorted(set(starts)):
            raise ValueError("reward_stages must start at step 0 with strictly increasing start_step")
        check_number_bounds(self)
        if self.adapted_dtype != "model" and self.lora is None:
            raise ValueError("adapted_dtype applies to LoRA-adapted linears: set lora, or leave it 'model'")
        if self.heldout_every and self.split is None:
            raise ValueError("heldout_every > 0 evaluates a split's held-out questions: set split")
        return self

    def reward_at(self, step: int) -> str:
        """The reward name in force at ``step`` (0-based)."""
        name = self.reward_stages[0].reward
        for s in self.reward_stages:
            if step >= s.start_step:
                name = s.reward
        return name

    def with_overrides(self, overrides: list[str]) -> Recipe:
        """Apply ``key=value`` overrides; dotted keys reach nested fields (``algo.lr=1e-5``);
        values are parsed as JSON when they parse, else taken as strings."""
        data: dict[str, Any] = self.model_dump(mode="json")
        for item in overrides:
            key, sep, raw = item.partition("=")
            if not sep or not key:
                raise ConfigError(f"recipe override {item!r} is not key=value")
            try:
                value: Any = json.loads(raw)
            except json.JSONDecodeError:
                value = raw
            except ValueError as e:  # e.g. an integer of more than 4,300 digits (Python's bound)
                reason = str(e).split(";")[0]
                raise ConfigError(
                    f"recipe override {key!r}: cannot read its value of {len(raw)} characters ({reason})"
                ) from None
            except RecursionError:
                raise ConfigError(
                    f"recipe override {key!r}: its JSON value is nested too deeply to read"
                ) from None
            node = data
            parts = key.split(".")
            for p in parts[:-1]:
                if not isinstance(node.get(p), dict):
                    raise ConfigError(f"recipe override {item!r}: {p!r} is not a section of the recipe")
                node = node[p]
            if parts[-1] not in node:
                raise ConfigError(
                    f"recipe override {item!r}: no field {parts[-1]!r} (known: {', '.join(node)})"
                )
            node[parts[-1]] = value
        try:
            return Recipe.model_validate(data)
        except ValidationError as e:
            problems = "; ".join(
                f"{'.'.join(map(str, err['loc'])) or 'recipe'}: {err['msg']}" for err in e.errors()[:3]
            )
            raise ConfigError(f"recipe {self.name!r} after overrides is invalid: {problems}") from None
        except RecursionError:
            raise ConfigError(f"recipe {self.name!r} after overrides is nested too deeply to read") from None
