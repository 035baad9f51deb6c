"""``Recipe.adapted_dtype: bfloat16`` (harness.rl.sequences.low_precision_bases): the frozen base
product of each LoRA-adapted linear in bfloat16, the adapter's in float32 added after it. What
matters for RL, each paired against the float32 forward: log-probs within bfloat16's rounding of
the exact ones; a small adapter update moves the log-probs as it moves them in float32, where
plain autocast loses most of it (which is why this exists); checkpoints keep the float32 weights,
and undoing it restores the exact forward."""

from __future__ import annotations

import copy
from pathlib import Path

import pytest
import torch

import tests.rl.test_trainer as toy
from harness.errors import ConfigError
from harness.rl.recipe import LoraConfig
from harness.rl.sequences import full_precision_bases, low_precision_bases, sequence_logprobs
from tests.rl.test_trainer import toy_recipe
from tests.support.numeric import max_rel_diff

toy_model_dir = toy.toy_model_dir  # the fixture: a tiny random Llama over a word vocabulary


def _policy(model_dir: Path, adapted_dtype: str = "model"):
    from harness.rl.trainer import load_policy

    recipe = toy_recipe(1).model_copy(
        update={
            "lora": LoraConfig(rank=4, alpha=8.0, dropout=0.0, layers=(1,)),
            "adapted_dtype": adapted_dtype,
        }
    )
    torch.manual_seed(0)
    policy, _, _ = load_policy(str(model_dir), recipe, with_reference=False)
    torch.manual_seed(1)
    with torch.no_grad():
        for name, p in policy.named_parameters():
            if "lora_B" in name:  # peft starts B at 0: make the adapter change the output
                p.normal_(std=0.5)
    return policy


def _pairs():
    g = torch.Generator().manual_seed(3)
    prompts = [torch.randint(4, 64, (7,), generator=g).tolist()] * 3
    responses = [torch.randint(4, 64, (n,), generator=g).tolist() for n in (5, 9, 6)]
    return prompts, responses


def _logp(policy) -> torch.Tensor:
    prompts, responses = _pairs()
    with torch.no_grad():
        lp, _ = sequence_logprobs(policy, prompts, responses, pad_id=0, temperature=1.0, with_entropy=False)
    mask = torch.zeros_like(lp, dtype=torch.bool)
    for i, r in enumerate(responses):
        mask[i, : len(r)] = True
    return lp[mask]


def _nudge(policy, scale: float) -> None:
    """A small optimizer-like update of every adapter weight (B moved by ``scale`` of itself)."""
    g = torch.Generator().manual_seed(5)
    with torch.no_grad():
        for name, p in policy.named_parameters():
            if "lora_B" in name:
                p.add_(torch.randn(p.shape, generator=g) * scale * p.abs().mean())


def test_log_probs_stay_within_bfloat16_rounding_of_the_exact_ones(toy_model_dir: Path):
    exact, low = _policy(toy_model_dir), _policy(toy_model_dir, "bfloat16")
    a, b = _logp(exact), _logp(low)
    assert not torch.equal(a, b)  # the bases did run in bfloat16
    # bfloat16 keeps 8 significant bits (relative rounding 2^-9 per product); measured 0.003 nats
    assert float((a - b).abs().mean()) <= 0.05, float((a - b).abs().mean())
    assert max_rel_diff(a, b) <= 0.05


def test_a_small_adapter_update_moves_the_log_probs_as_in_float32(toy_model_dir: Path):
    """The ratio of a PPO step reads log_new - log_old. Here the adapter's product is float32 and
    both sides round the frozen bases alike, so an update of the adapter (B moved by 1% of itself)
    moves the log-probs as in float32, up to the rounding of the inputs of the bfloat16 products
    after it (measured: 2.6% of the largest move); under plain CPU autocast the same update is
    largely lost (61%: the adapter's product is rounded into the base's output)."""
    exact, low = _policy(toy_model_dir), _policy(toy_model_dir, "bfloat16")
    auto = _policy(toy_model_dir)
    before = {"exact": _logp(exact), "low": _logp(low)}
    with torch.autocast("cpu", dtype=torch.bfloat16):
        before["auto"] = _logp(auto)
    for p in (exact, low, auto):
        _nudge(p, 1e-2)
    delta = {"exact": _logp(exact) - before["exact"], "low": _logp(low) - before["low"]}
    with torch.autocast("cpu", dtype=torch.bfloat16):
        delta["auto"] = _logp(auto) - before["auto"]
    assert float(delta["exact"].abs().max()) > 1e-3
    assert max_rel_diff(delta["low"], delta["exact"]) <= 0.1, delta  # the update, as float32 sees it
    assert max_rel_diff(delta["auto"], delta["exact"]) > 0.3, delta  # what autocast does to it


def test_checkpoints_keep_float32_weights_and_undoing_restores_the_exact_forward(toy_model_dir: Path):
    exact, low = _policy(toy_model_dir), _policy(toy_model_dir, "bfloat16")
    a, b = exact.state_dict(), low.state_dict()
    assert list(a) == list(b) and all(b[k].dtype == a[k].dtype and torch.equal(a[k], b[k]) for k in a)
    assert low_precision_bases(copy.deepcopy(exact), torch.float32) == 0  # already in that dtype
    assert full_precision_bases(low) == 4  # q, k, v, o: toy_recipe's LoRA targets of layer 1
    assert torch.equal(_logp(low), _logp(exact))
    assert full_precision_bases(low) == 0


def test_adapted_dtype_without_lora_is_refused():
    with pytest.raises(ConfigError, match="adapted_dtype applies to LoRA-adapted linears"):
        toy_recipe(1).with_overrides(['adapted_dtype="bfloat16"'])
