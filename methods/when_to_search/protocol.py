"""When-to-Search's evaluation protocol, ``when_to_search-eval`` (registered from ``methods/when_to_search/__init__.py``)."""

from __future__ import annotations

from harness.api import Decoding, Protocol, mini

TOP_K = 5  # paper §4.2
MAX_TURNS = 5  # paper Table 5: max_turns (read as at most 5 executed searches [recommended])
MAX_ACTION_TOKENS = 8192  # paper Table 5: max_action_length (tokens per generation call)
MAX_OBS_TOKENS = 4096  # paper Table 5: max_obs_length (an observation is cut, keeping its start)


def eval_protocol() -> Protocol:
    """The paper's rollout limits at evaluation (Table 5; greedy [recommended]) on the closed corpus (the
    paper's September-2025 Wikipedia + e5 index is not packaged): top-5, at most 5 searches,
    8192 tokens per turn, 4096-token observations."""
    return mini().with_(
        name="when_to_search-eval",
        description="When-to-Search eval (top-5, <=5 searches, 8192 tokens/turn, 4096 obs tokens, greedy) on the closed corpus",
        top_k=TOP_K,
        max_turns=MAX_TURNS,
        max_obs_tokens=MAX_OBS_TOKENS,
        decoding=Decoding(temperature=0.0, top_p=1.0, max_new_tokens=MAX_ACTION_TOKENS).model_dump(),
    )
