"""Our RL maths equal verl's own ``verl.trainer.ppo.core_algos`` on identical random inputs
(``tox -e verl``; skipped where verl is not installed): every advantage estimator, the clipped
policy loss under every loss-aggregation mode (values and gradients), the KL estimators and the
entropy bonus. verl is what ``harness export-verl`` trains with, so the maths of an exported job is
the maths of ``harness train``; a change upstream shows up here as a failing test.

Inputs: 3 groups of 4 trajectories, 11 response positions, masks with observation holes (0 inside
a response) and right padding, every row with at least one valid token; scores and token values
random. Known, documented differences are excluded by construction and named where they are:
a group of size 1 (verl hands the lone sample its raw score, we give 0; docs/training.md).
Tolerance: float32, relative to the largest magnitude (tests/support/numeric.py).
"""

from __future__ import annotations

from dataclasses import replace
from types import SimpleNamespace

import numpy as np
import pytest
import torch

from tests.support.verl import import_verl_or_skip  # noqa: E402

import_verl_or_skip()

from verl.trainer.ppo import core_algos  # noqa: E402

from harness.methods_registry import METHODS, get_method  # noqa: E402
from harness.rl.advantages import (  # noqa: E402
    ADV_ESTIMATORS,
    AdvantageBatch,
    AdvantageParams,
    compute_advantages,
    gae_advantages_returns,
)
from harness.rl.config import preset  # noqa: E402
from harness.rl.kl import KL_ESTIMATORS, kl_values  # noqa: E402
from harness.rl.losses import AGG_MODES, agg_loss, entropy_from_logits, policy_loss  # noqa: E402
from harness.verl.job import NO_DUAL_CLIP, verl_overrides  # noqa: E402
from tests.support.numeric import assert_close_rel  # noqa: E402

pytestmark = pytest.mark.verl

B, T, GROUP = 12, 11, 4


def inputs(seed: int) -> SimpleNamespace:
    g = torch.Generator().manual_seed(seed)
    lengths = torch.randint(3, T + 1, (B,), generator=g)
    mask = (torch.arange(T)[None, :] < lengths[:, None]).float()
    holes = (torch.rand(B, T, generator=g) < 0.25) & (torch.arange(T)[None, :] > 0)  # observation tokens
    mask = mask * (~holes).float()
    mask[:, 0] = 1.0  # every row has a valid token
    scores = torch.randn(B, generator=g)
    last = (mask * torch.arange(T)[None, :]).argmax(dim=1)
    token_rewards = torch.zeros(B, T)
    token_rewards[torch.arange(B), last] = scores  # verl's reward manager: the score on the last valid token
    return SimpleNamespace(
        mask=mask,
        scores=scores,
        token_rewards=token_rewards,
        group=torch.arange(B) // GROUP,
        index=np.array([f"p{i // GROUP}" for i in range(B)], dtype=object),
        values=torch.randn(B, T, generator=g),
        log_prob=torch.randn(B, T, generator=g) * 0.5 - 1.0,
        old_log_prob=torch.randn(B, T, generator=g) * 0.5 - 1.0,
        advantages=torch.randn(B, T, generator=g),
        logits=torch.randn(B, T, 7, generator=g),
    )


def recipe_algos() -> list:
    """The AlgoConfig of every recipe of every trainable method, and the presets the docs name."""
    out = []
    for name in METHODS.names():
        if METHODS.get(name).trained:
            out += [r.algo for r in get_method(name).recipes().values()]
    return out + [preset("ppo")]


def params_for(estimator: str) -> AdvantageParams:
    """The advantage settings of the first recipe that uses ``estimator`` (else verl's defaults),
    with verl's unbiased std: verl has no other, and a recipe with ``adv_std_unbiased: false``
    (TIRESRAG-R1's) lists that as an export limitation (tested below)."""
    for algo in recipe_algos():
        if algo.adv_estimator == estimator:
            return replace(algo.advantage_params(), std_unbiased=True)
    return AdvantageParams(norm_by_std=estimator == "grpo", std_unbiased=True, eps=1e-6, gamma=1.0, lam=1.0)


def test_a_biased_std_is_an_export_limitation():
    from harness.verl.job import limitations

    method = get_method("tiresrag_r1")
    recipe = method.recipes()["paper"]
    assert not recipe.algo.adv_std_unbiased
    assert any("adv_std_unbiased=false is not exported" in x for x in limitations(method, recipe))


def verl_advantages(name: str, x: SimpleNamespace, p: AdvantageParams) -> torch.Tensor:
    rewards, mask = x.token_rewards.clone(), x.mask
    if name in ("grpo", "dr_grpo"):
        adv, _ = core_algos.compute_grpo_outcome_advantage(
            rewards, mask, x.index, epsilon=p.eps, norm_adv_by_std_in_grpo=name == "grpo"
        )
    elif name == "rloo":
        adv, _ = core_algos.compute_rloo_outcome_advantage(rewards, mask, x.index, epsilon=p.eps)
    elif name == "reinforce_pp_baseline":
        adv, _ = core_algos.compute_reinforce_plus_plus_baseline_outcome_advantage(rewards, mask, x.index)
    elif name == "reinforce_pp":
        adv, _ = core_algos.compute_reinforce_plus_plus_outcome_advantage(
            rewards, mask, config=SimpleNamespace(gamma=p.gamma)
        )
    elif name == "gae":
        adv, _ = core_algos.compute_gae_advantage_return(rewards, x.values, mask, p.gamma, p.lam)
    else:
        raise AssertionError(f"no verl counterpart named for {name!r}")
    return adv


def test_every_estimator_and_every_recipe_estimator_has_a_verl_counterpart():
    used = {a.adv_estimator for a in recipe_algos()}
    assert used <= set(ADV_ESTIMATORS.names())
    assert set(ADV_ESTIMATORS.names()) == {
        "grpo",
        "dr_grpo",
        "rloo",
        "reinforce_pp",
        "reinforce_pp_baseline",
        "gae",
    }


@pytest.mark.parametrize("seed", [0, 1, 2])
@pytest.mark.parametrize("name", ["grpo", "dr_grpo", "rloo", "reinforce_pp", "reinforce_pp_baseline", "gae"])
def test_advantages_equal_verls(name, seed):
    x = inputs(seed)
    p = params_for(name)
    if name == "dr_grpo":
        assert not p.norm_by_std
    ours = compute_advantages(
        name,
        AdvantageBatch(
            scores=x.scores,
            group=x.group,
            response_mask=x.mask,
            values=x.values if name == "gae" else None,
        ),
        p,
    )
    theirs = verl_advantages(name, x, p)
    valid = x.mask.bool()
    assert_close_rel(ours[valid], theirs[valid].float(), what=f"{name} advantages")
    assert torch.count_nonzero(ours[~valid]) == 0
    assert float(ours[valid].abs().max()) > 0.1  # not a trivially zero comparison


def test_gae_returns_equal_verls():
    x = inputs(3)
    p = params_for("gae")
    _, ours = gae_advantages_returns(
        AdvantageBatch(scores=x.scores, group=x.group, response_mask=x.mask, values=x.values), p
    )
    _, theirs = core_algos.compute_gae_advantage_return(x.token_rewards, x.values, x.mask, p.gamma, p.lam)
    valid = x.mask.bool()
    assert_close_rel(ours[valid].float(), theirs[valid], what="gae returns")


def verl_actor_config(clip_low: float, clip_high: float, dual_clip_c: float | None, **batch_info):
    """What verl's vanilla loss reads of the actor config (``clip_ratio*``, ``global_batch_info``),
    as ``harness export-verl`` sets it (``clip_ratio_c`` 1e9 when the recipe has no dual clip)."""
    from omegaconf import OmegaConf

    return OmegaConf.create(
        {
            "clip_ratio": clip_low,
            "clip_ratio_low": clip_low,
            "clip_ratio_high": clip_high,
            "clip_ratio_c": dual_clip_c if dual_clip_c is not None else NO_DUAL_CLIP,
            "global_batch_info": batch_info,
        }
    )


# every (clip_low, clip_high, dual clip) a recipe uses, and the dual-clip branch
CLIPS = sorted(
    {(a.clip_low, a.clip_high, a.dual_clip_c) for a in recipe_algos()} | {(0.2, 0.2, 3.0)}, key=str
)


@pytest.mark.parametrize("mode", AGG_MODES)
@pytest.mark.parametrize("clips", CLIPS)
def test_clipped_policy_loss_and_its_gradient_equal_verls_vanilla(mode, clips):
    x = inputs(4)
    clip_low, clip_high, dual = clips
    # ratios far outside the clip range on both sides, so that every branch is taken
    log_prob = (x.old_log_prob + torch.linspace(-2.0, 2.0, B * T).reshape(B, T)).requires_grad_(True)
    norm = T if mode == "seq-mean-token-sum-norm" else None
    ours, _ = policy_loss(
        log_prob,
        x.old_log_prob,
        x.advantages,
        x.mask,
        clip_low=clip_low,
        clip_high=clip_high,
        agg_mode=mode,
        dual_clip_c=dual,
        norm_length=norm,
    )
    (g_ours,) = torch.autograd.grad(ours, log_prob)
    lp = log_prob.detach().clone().requires_grad_(True)
    info = {"loss_scale_factor": norm} if norm else {}
    theirs, _ = core_algos.compute_policy_loss_vanilla(
        x.old_log_prob, lp, x.advantages, x.mask, loss_agg_mode=mode, config=verl_actor_config(*clips, **info)
    )
    (g_theirs,) = torch.autograd.grad(theirs, lp)
    assert_close_rel(ours, theirs, what=f"{mode} {clips} loss")
    assert_close_rel(g_ours, g_theirs, what=f"{mode} {clips} gradient")
    assert float(g_ours.abs().max()) > 0


def test_the_export_sets_verls_dual_clip_as_compared(tmp_path):
    for algo in (preset("ppo"), preset("ppo").replace(dual_clip_c=3.0)):
        recipe = get_method("search_r1").recipes()["cpu-smoke"].model_copy(update={"algo": algo})
        ov = verl_overrides(recipe, tmp_path, n_gpus=1, model_path="m")
        want = algo.dual_clip_c if algo.dual_clip_c is not None else NO_DUAL_CLIP
        assert f"actor_rollout_ref.actor.clip_ratio_c={want:g}" in ov


def test_the_recipes_aggregation_modes_are_among_those_compared():
    assert {a.loss_agg_mode for a in recipe_algos()} <= set(AGG_MODES)


@pytest.mark.parametrize("mode", AGG_MODES)
def test_agg_loss_equals_verls(mode):
    x = inputs(5)
    loss_mat = torch.randn(B, T, generator=torch.Generator().manual_seed(9))
    norm = T if mode == "seq-mean-token-sum-norm" else None
    ours = agg_loss(loss_mat, x.mask, mode, norm_length=norm)
    theirs = core_algos.agg_loss(loss_mat, x.mask, mode, loss_scale_factor=norm)
    assert_close_rel(ours, theirs, what=mode)


@pytest.mark.parametrize("name", KL_ESTIMATORS.names())
def test_kl_estimators_and_their_gradients_equal_verls(name):
    x = inputs(6)
    lp = (x.log_prob * 8).requires_grad_(True)  # log ratios beyond the +-20 clamp too
    ref = x.old_log_prob * 8
    ours = kl_values(lp, ref, x.mask, estimator=name)
    (g_ours,) = torch.autograd.grad(ours.sum(), lp)
    lp2 = lp.detach().clone().requires_grad_(True)
    theirs = core_algos.kl_penalty(lp2, ref, name) * x.mask
    (g_theirs,) = torch.autograd.grad(theirs.sum(), lp2)
    assert_close_rel(ours, theirs, what=f"{name} values")
    assert_close_rel(g_ours, g_theirs, what=f"{name} gradients")


@pytest.mark.parametrize("mode", ["token-mean", "seq-mean-token-mean"])
def test_entropy_bonus_and_its_gradient_equal_verls(mode):
    x = inputs(7)
    logits = x.logits.clone().requires_grad_(True)
    ours = agg_loss(entropy_from_logits(logits, x.mask), x.mask, mode)
    (g_ours,) = torch.autograd.grad(ours, logits)
    logits2 = x.logits.clone().requires_grad_(True)
    theirs = core_algos.compute_entropy_loss(logits2, x.mask, loss_agg_mode=mode)
    (g_theirs,) = torch.autograd.grad(theirs, logits2)
    assert_close_rel(ours, theirs, what=f"entropy {mode}")
    assert_close_rel(g_ours, g_theirs, what=f"entropy gradient {mode}")
