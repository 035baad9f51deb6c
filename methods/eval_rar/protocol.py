"""Eval-RAR's evaluation protocol, ``eval_rar-eval`` (registered from ``methods/eval_rar/__init__.py``)."""

from __future__ import annotations

from harness.api import Decoding, Protocol, mini

TOP_K = 3  # paper §5.1: top-3 documents
MAX_STEPS = 5  # N: not given; AutoRefine@8363788 cmd/train.sh max_turns=5
MAX_NEW_TOKENS = 512  # per segment; AutoRefine cmd/train.sh max_response_length
MAX_OBS_TOKENS = 512  # AutoRefine cmd/train.sh max_obs_length


def eval_protocol() -> Protocol:
    """Eval-RAR's evaluation settings on the packaged closed corpus: N=5 steps, 512 new tokens per
    step, 512 observation tokens, top-3, greedy (paper silent; AutoRefine cmd/train.sh). The paper's own
    corpus and retriever (wiki-18, E5) are those of the ``searchr1`` protocol."""
    return mini().with_(
        name="eval_rar-eval",
        description="Eval-RAR eval settings (5 steps, 512 tokens/step, 512 obs tokens, top-3, greedy) on the closed corpus",
        top_k=TOP_K,
        max_turns=MAX_STEPS,
        max_obs_tokens=MAX_OBS_TOKENS,
        decoding=Decoding(temperature=0.0, top_p=1.0, max_new_tokens=MAX_NEW_TOKENS).model_dump(),
    )
