"""TIRESRAG-R1's evaluation protocol, ``tiresrag_r1-eval`` (registered from ``methods/tiresrag_r1/__init__.py``)."""

from __future__ import annotations

from harness.protocol import Decoding, Protocol, mini

TOP_K = 5  # Paper §5 / Code (train): top-5 (the released eval hard-codes 7; ours: 5)
MAX_SEGMENT_TOKENS = 512  # Code: 512 new tokens per segment
MAX_RETRIEVALS = 8  # Code: 9 segments, at most 8 retrievals


def eval_protocol() -> Protocol:
    """TIRESRAG-R1's evaluation (ours where paper and released eval differ): the training loop, greedy,
    top-5, 512 tokens per segment, at most 8 retrievals, last answer; on the closed corpus (the
    paper's KILT-2019 + BGE index is not packaged). No observation cap (5 chunks)."""
    return mini().with_(
        name="tiresrag_r1-eval",
        description="TIRESRAG-R1 eval (training loop, greedy, top-5, 512 tokens/segment, <=8 retrievals) on the closed corpus",
        top_k=TOP_K,
        max_turns=MAX_RETRIEVALS,
        max_obs_tokens=8192,
        decoding=Decoding(temperature=0.0, top_p=1.0, max_new_tokens=MAX_SEGMENT_TOKENS).model_dump(),
    )
