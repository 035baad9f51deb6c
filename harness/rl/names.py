"""The names a recipe may use for its KL estimator, loss aggregation and policy loss, without
importing torch: ``harness.rl.config`` validates a recipe with them, so a command that refuses a
recipe (``harness train`` with a recipe that has no LoRA, issue 60) answers before torch is
imported. The torch code that implements each name lives in ``harness.rl.kl`` and
``harness.rl.losses``, which re-export these."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, Literal, get_args

from harness.registry import Registry

KlEstimatorName = Literal["k1", "k2", "k3", "low_var_kl", "abs"]

AggMode = Literal["token-mean", "seq-mean-token-mean", "seq-mean-token-sum", "seq-mean-token-sum-norm"]
AGG_MODES: tuple[str, ...] = get_args(AggMode)

# each a harness.rl.losses.PolicyLossFn; not named here: that alias is made of torch types
POLICY_LOSSES: Registry[Callable[..., Any]] = Registry("policy loss")
"""Policy losses by name (``AlgoConfig.policy_loss``), registered the way advantage estimators
are (:data:`harness.rl.advantages.ADV_ESTIMATORS`): ``POLICY_LOSSES.register("name", fn)`` with a
:data:`harness.rl.losses.PolicyLossFn`. The built-in one is registered lazily: its module (and
torch) is imported on its first lookup, not when a recipe is validated."""
POLICY_LOSSES.register_lazy("clipped", "harness.rl.losses:clipped_policy_loss")
