"""Our policy loss and KL term equal TRL's ``GRPOTrainer`` loss (``_compute_loss``, the installed
TRL) for every loss type TRL shares with us, on the same model, batch and random old / reference
log-probs and advantages: the loss value and its gradient on the log-probs.

TRL ``loss_type``  ->  ours (``harness.rl.losses``): ``grpo`` -> ``seq-mean-token-mean``,
``bnpo`` -> ``token-mean``, ``dr_grpo`` -> ``seq-mean-token-sum-norm`` with ``norm_length`` =
``max_completion_length``, ``dapo`` -> ``token-mean`` over the generation batch's tokens
(``num_items_in_batch``). TRL adds ``beta`` x k3 KL per token before aggregating; ours aggregates
``kl_loss`` (``k3``) with the same mode, the same by linearity. TRL's default
``use_bias_correction_kl=True`` (the KL term times the importance ratio) is a mode we do not have:
compared with it off. The clip is TRL's ``epsilon`` /
``epsilon_high`` (ours ``clip_low`` / ``clip_high``), without dual clip (TRL has none; its ``delta``
is off). TRL's trainer is built on the 3.2M random Llama (tests/conftest.py ``tiny_dir``); its
forward (a fused LM head) is replaced by the test's log-probs, the same tensor ours gets. Float32
tolerance relative to magnitude (tests/support/numeric.py).
"""

from __future__ import annotations

from pathlib import Path

import pytest
import torch

from harness.rl.kl import kl_loss
from harness.rl.losses import policy_loss
from tests.support.numeric import assert_close_rel

pytest.importorskip("trl")

B, P, T = 4, 5, 9
MODES = {  # TRL loss_type -> (our aggregation mode, norm_length)
    "grpo": ("seq-mean-token-mean", None),
    "bnpo": ("token-mean", None),
    "dr_grpo": ("seq-mean-token-sum-norm", T),
    "dapo": ("token-mean", None),
}


def trl_trainer(model_dir: Path, out: Path, loss_type: str, beta: float):
    from datasets import Dataset
    from trl import GRPOConfig, GRPOTrainer

    cfg = GRPOConfig(
        output_dir=str(out),
        use_cpu=True,
        per_device_train_batch_size=B,
        num_generations=B,
        max_completion_length=T,
        beta=beta,
        loss_type=loss_type,
        epsilon=0.2,
        epsilon_high=0.28,
        # TRL's default (True) multiplies the KL term by the importance ratio (DeepSeek-V3.2's unbiased
        # reverse-KL gradient); ours and verl's KL loss have no such mode: compared with it off
        use_bias_correction_kl=False,
        temperature=1.0,
        report_to=[],
        save_strategy="no",
        seed=0,
        dataloader_num_workers=0,
    )
    trainer = GRPOTrainer(
        model=str(model_dir),
        reward_funcs=lambda completions, **kw: [0.0] * len(completions),
        args=cfg,
        train_dataset=Dataset.from_list([{"prompt": "hi"}] * B),
    )
    trainer.current_gradient_accumulation_steps = 1  # set by its training loop; one step, no accumulation
    return trainer


def batch(seed: int) -> dict[str, torch.Tensor]:
    g = torch.Generator().manual_seed(seed)
    completion_mask = torch.ones(B, T, dtype=torch.long)
    completion_mask[1, 6:] = 0  # shorter completions (EOS then padding)
    completion_mask[3, 4:] = 0
    log_prob = torch.randn(B, T, generator=g) * 0.5 - 2.0
    return {
        "prompt_ids": torch.randint(3, 1000, (B, P), generator=g),
        "prompt_mask": torch.ones(B, P, dtype=torch.long),
        "completion_ids": torch.randint(3, 1000, (B, T), generator=g),
        "completion_mask": completion_mask,
        "advantages": torch.randn(B, generator=g),
        "log_prob": log_prob,
        "old": log_prob + torch.randn(B, T, generator=g) * 0.3,  # ratios inside and outside the clip
        "ref": log_prob + torch.randn(B, T, generator=g) * 0.3,
    }


@pytest.mark.parametrize("beta", [0.0, 0.04])
@pytest.mark.parametrize("loss_type", list(MODES))
def test_trl_grpo_trainer_loss_equals_ours(loss_type, beta, tiny_dir: Path, tmp_path: Path):
    trainer = trl_trainer(tiny_dir, tmp_path, loss_type, beta)
    trainer.model.train()
    x = batch(0)
    mask = x["completion_mask"]
    # identical inputs: TRL's own forward (a fused LM head) is replaced by the same log-probs ours
    # get, so the comparison is of the loss maths (values and gradients on the log-probs)
    lp_theirs = x["log_prob"].clone().requires_grad_(True)
    trainer._get_per_token_logps_and_entropies = lambda *a, **k: (lp_theirs, torch.zeros(B, T), None)
    inputs = {
        **{k: x[k] for k in ("prompt_ids", "prompt_mask", "completion_ids", "completion_mask", "advantages")},
        "old_per_token_logps": x["old"],
        "ref_per_token_logps": x["ref"],
        "num_items_in_batch": mask.sum().float(),
    }
    theirs = trainer._compute_loss(trainer.model, inputs)
    (g_theirs,) = torch.autograd.grad(theirs, lp_theirs)

    mode, norm = MODES[loss_type]
    lp = x["log_prob"].clone().requires_grad_(True)
    adv = x["advantages"][:, None].expand(B, T)
    ours, _ = policy_loss(
        lp,
        x["old"],
        adv,
        mask,
        clip_low=0.2,
        clip_high=0.28,
        agg_mode=mode,
        dual_clip_c=None,
        norm_length=norm,
    )
    if beta:
        ours = ours + beta * kl_loss(lp, x["ref"], mask, estimator="k3", agg_mode=mode, norm_length=norm)
    (g_ours,) = torch.autograd.grad(ours, lp)

    assert_close_rel(ours.detach(), theirs.detach(), what=f"{loss_type} loss")
    assert_close_rel(g_ours * mask, g_theirs * mask, what=f"{loss_type} gradient")
    assert torch.count_nonzero(g_ours[mask == 0]) == 0 and float(g_ours.abs().max()) > 0
