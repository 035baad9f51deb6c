"""Run by tests/vllm/test_vllm_rollout.py in its own process (one vLLM engine per process; the
session's other tests hold theirs): the vLLM rollout engine before and after a weight sync.

A LoRA policy over the model in argv[1] whose adapters are trained (B random) generates nothing
itself; the engine, started over the base weights, samples a completion for each prompt, and the
learner's log-probs of those very tokens are compared with the engine's, before and after
``VLLMRollout.sync(policy)``. Prints one JSON line."""

from __future__ import annotations

import json
import sys

import torch

from harness.llm.base import pad_token_id
from harness.methods_registry import get_method
from harness.rl.rollout_engine import VLLMRollout
from harness.rl.sequences import sequence_logprobs
from harness.rl.trainer import load_policy
from harness.types import SamplingParams
from methods.search_r1.method import make_prompt

QUESTIONS = [
    "Who wrote the novel Pride and Prejudice",
    "What is the capital city of Australia",
    "Which river flows through Cairo",
    "Who painted the ceiling of the Sistine Chapel",
]


def mismatch(
    rollout: VLLMRollout, policy, pad_id: int, prompts: list[str]
) -> tuple[float, int, list[list[int]]]:
    b = rollout.backend
    outs = b.generate(
        prompts,
        stop=["</search>", "</answer>"],
        max_new_tokens=24,
        sampling=SamplingParams(temperature=1.0, top_p=1.0, seed=0),
    )
    diffs = []
    for p, c in zip(prompts, outs, strict=True):
        assert c.logprobs is not None and len(c.logprobs) == len(c.token_ids), "engine log-probs missing"
        # the trainer's own computation of the learner's log-probs (harness.rl.sequences)
        with torch.no_grad():
            mine, _ = sequence_logprobs(
                policy,
                [list(b.prompt_ids(p))],
                [list(c.token_ids)],
                pad_id=pad_id,
                temperature=1.0,
                with_entropy=False,
            )
        diffs += [abs(x - y) for x, y in zip(c.logprobs, mine[0].tolist(), strict=True)]
    return sum(diffs) / len(diffs), len(diffs), [list(c.token_ids) for c in outs]


def main() -> None:
    model = sys.argv[1]
    recipe = get_method("search_r1").recipes()["cpu-grpo-long"]
    torch.manual_seed(0)
    policy, _, tok = load_policy(model, recipe, with_reference=False)
    pad_id = pad_token_id(tok, model)
    with torch.no_grad():
        for name, p in policy.named_parameters():
            if "lora_B" in name:
                p.normal_(0, 0.02)  # a trained policy: its adapters change the model
    policy.eval()
    rollout = VLLMRollout(model, recipe, parallel=4)
    try:
        prompts = [rollout.backend.chat_prompt(make_prompt(q)) for q in QUESTIONS]
        before, n_before, ids_before = mismatch(rollout, policy, pad_id, prompts)
        seconds = rollout.sync(policy)
        after, n_after, ids_after = mismatch(rollout, policy, pad_id, prompts)
    finally:
        rollout.close()
    print(
        json.dumps(
            {
                "before": before,
                "after": after,
                "tokens_before": n_before,
                "tokens_after": n_after,
                "sync_seconds": seconds,
                "same_tokens": ids_before == ids_after,
            }
        )
    )


if __name__ == "__main__":
    main()
