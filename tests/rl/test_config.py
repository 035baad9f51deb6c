"""AlgoConfig: presets are valid and cite the values they claim; contradictions are refused."""

from __future__ import annotations

import pytest

from harness.errors import ConfigError
from harness.rl.config import AlgoConfig, preset, preset_names
from harness.rl.dapo import AllOf, DropZeroVariance, ThresholdFilter


def test_presets_hold_the_published_values():
    g = preset("grpo")
    assert (g.adv_estimator, g.norm_adv_by_std, g.loss_agg_mode) == ("grpo", True, "seq-mean-token-mean")
    assert (g.kl_placement, g.kl_estimator, g.kl_coef, g.lr, g.group_size) == ("loss", "k3", 0.04, 1e-6, 64)
    d = preset("dr_grpo")
    assert (d.adv_estimator, d.norm_adv_by_std, d.loss_agg_mode, d.loss_norm_length) == (
        "dr_grpo",
        False,
        "seq-mean-token-sum-norm",
        3000,
    )
    assert not d.needs_reference_model and d.updates_per_step == 8
    p = preset("dapo")
    assert (p.clip_low, p.clip_high, p.loss_agg_mode, p.kl_placement) == (0.2, 0.28, "token-mean", "none")
    assert (p.overlong.max_len, p.overlong.cache_len, p.overlong.penalty_factor) == (20480, 4096, 1.0)
    assert p.dynamic_sampling.enabled and p.dynamic_sampling.max_rounds == 10
    assert p.dynamic_sampling.build_filter() == DropZeroVariance("outcome")
    assert p.updates_per_step == 16
    r = preset("reinforce_pp")
    assert (r.adv_estimator, r.kl_estimator, r.kl_coef, r.lr) == ("reinforce_pp", "k2", 0.001, 3e-6)
    o = preset("ppo")
    assert (o.adv_estimator, o.group_size, o.gamma, o.kl_placement, o.kl_estimator, o.kl_coef) == (
        "gae",
        1,
        1.0,
        "reward",
        "k1",
        0.001,
    )
    c = o.critic
    assert c is not None and (c.lam, c.lr, c.cliprange_value, c.warmup_steps) == (1.0, 1e-5, 0.5, 0)
    assert set(preset_names()) == {"grpo", "dr_grpo", "dapo", "reinforce_pp", "ppo"}


def test_no_field_has_a_default():
    assert all(f.is_required() for f in AlgoConfig.model_fields.values())
    data = preset("grpo").model_dump()
    del data["loss_agg_mode"]
    with pytest.raises(ConfigError, match="loss_agg_mode"):
        AlgoConfig.parse(data)


@pytest.mark.parametrize(
    ("changes", "message"),
    [
        ({"adv_estimator": "dr_grpo"}, "norm_adv_by_std=true applies to adv_estimator 'grpo' only"),
        ({"loss_agg_mode": "seq-mean-token-sum-norm"}, "loss_norm_length is required"),
        ({"loss_norm_length": 100}, "loss_norm_length is required"),
        ({"kl_placement": "none"}, "kl_coef=0"),
        ({"kl_coef": 0.0}, "reference model for nothing"),
        ({"mini_batch_size": 5}, "must divide"),
        ({"lr_warmup_ratio": 0.1}, "exactly one of lr_warmup_steps"),
        ({"min_lr_ratio": 0.1}, "cosine schedule only"),
        ({"dual_clip_c": 1.0}, "dual_clip_c"),
        ({"loss_agg_mode": "token-sum"}, "loss_agg_mode"),
        ({"kl_estimator": "full"}, "kl_estimator"),
        ({"unknown_flag": 1}, "unknown_flag"),
    ],
)
def test_contradictions_are_refused(changes, message):
    with pytest.raises(ConfigError, match=message):
        preset("grpo").replace(**changes)


def test_nested_sections_validate():
    with pytest.raises(ConfigError, match="soft_penalty=true needs"):
        preset("grpo").replace(overlong={**preset("grpo").overlong.model_dump(), "soft_penalty": True})
    with pytest.raises(ConfigError, match="needs at least one filter"):
        preset("grpo").replace(dynamic_sampling={"enabled": True, "max_rounds": 3, "filters": ()})
    with pytest.raises(ConfigError, match="lower < upper"):
        preset("grpo").replace(
            dynamic_sampling={
                "enabled": True,
                "max_rounds": 3,
                "filters": ({"kind": "threshold", "metric": "f1", "lower": None, "upper": 0.9},),
            }
        )


def test_tiresrag_style_filters_build():
    cfg = preset("grpo").replace(
        dynamic_sampling={
            "enabled": True,
            "max_rounds": 5,
            "filters": (
                {"kind": "threshold", "metric": "f1", "lower": 0.1, "upper": 0.9},
                {"kind": "zero_variance", "metric": "total", "lower": None, "upper": None},
            ),
        }
    )
    f = cfg.dynamic_sampling.build_filter()
    assert f == AllOf((ThresholdFilter("f1", 0.1, 0.9), DropZeroVariance("total")))
    with pytest.raises(ConfigError, match="disabled"):
        preset("grpo").dynamic_sampling.build_filter()


def test_replace_and_advantage_params():
    cfg = preset("reinforce_pp").replace(kl_placement="reward", kl_estimator="k1", kl_coef=0.01)
    assert cfg.kl_placement == "reward" and cfg.needs_reference_model
    p = cfg.advantage_params()
    assert (p.norm_by_std, p.std_unbiased, p.eps, p.gamma) == (False, True, 1e-8, 1.0)
    # round trip through a plain mapping (recipe files)
    assert AlgoConfig.parse(preset("dapo").model_dump()) == preset("dapo")
