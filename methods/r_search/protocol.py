"""R-Search's evaluation protocol, ``r_search-eval`` (registered from ``methods/r_search/__init__.py``).
Tags: [P] the paper, [C] the released code at QingFei1/R-Search@ecba08d, [D] derived by us."""

from __future__ import annotations

from harness.protocol import Decoding, Protocol, mini

EVAL_TOP_K = 5  # [P] top-5 for every method at evaluation (training: top-3, recipes.yaml)
EVAL_MAX_NEW_TOKENS = 1024  # [C] per generation
# Evaluation has no search cap and no observation truncation in the code [C]; our guard
# is a cap of 10 searches [D]; 8192 tokens (the training context cap)
# never binds for five passages.
EVAL_MAX_SEARCHES = 10
EVAL_MAX_OBS_TOKENS = 8192
EVAL_SEED = 44  # [C] src/eval/main.py seed_everything(44)
EVAL_PROTOCOL_NAME = "r_search-eval"


def eval_protocol() -> Protocol:
    """R-Search's evaluation settings (paper §4.3, App. A.3; [C] src/eval/main.py) on the packaged
    closed corpus: top-5,
    temperature 0.1 / top-p 0.9, 1024 tokens per generation, no observation truncation, and a cap
    of 10 searches where the code has none [D]. The paper's corpora (wiki-18, IRCoT
    per-dataset corpora) and E5 retriever are not packaged."""
    return mini().with_(
        name=EVAL_PROTOCOL_NAME,
        description=(
            "R-Search eval settings (top-5, T 0.1, top-p 0.9, 1024 tokens/turn, <=10 searches, "
            "no obs cap) on the closed corpus"
        ),
        top_k=EVAL_TOP_K,
        max_turns=EVAL_MAX_SEARCHES,
        max_obs_tokens=EVAL_MAX_OBS_TOKENS,
        decoding=Decoding(
            temperature=0.1, top_p=0.9, max_new_tokens=EVAL_MAX_NEW_TOKENS, seed=EVAL_SEED
        ).model_dump(),
    )
