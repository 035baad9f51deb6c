"""R-Search's evaluation protocols (registered from ``methods/r_search/__init__.py``): ``r_search-eval``
(the released settings with the training observation wrapper and a cap of 10 searches) and
``r_search-released`` (the released evaluation loop as released).
Tags: [P] the paper, [C] the released code at QingFei1/R-Search@ecba08d, [D] derived by us."""

from __future__ import annotations

from harness.api import Decoding, Protocol, mini

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


# -- the released evaluation, exactly (QingFei1/R-Search@ecba08d src/eval/main.py) -----------------
RELEASED_PROTOCOL_NAME = "r_search-released"
RELEASED_TOP_K = 5  # [C] main.py:15 --retrieve_top_k 5
RELEASED_TEMPERATURE, RELEASED_TOP_P = 0.1, 0.9  # [C] main.py:19, :21
RELEASED_MAX_NEW_TOKENS = 1024  # [C] main.py:20 --max_tokens, per generation (main.py:120)
# [C] main.py:92 `while True` (the cap at main.py:114 is commented out): no search cap. Ours: a
# guard of 50 searches [D], recorded as ended_by max_turns when it binds.
RELEASED_MAX_SEARCHES = 50
# [C] main.py:195: "Acc" (acc_score, utils.py:18-30), "F1" (f1_scorer: no yes/no rule = our
# f1_squad), "EM" (compute_exact = our em)
RELEASED_METRICS = ("acc_substring_lower",)


def released_protocol() -> Protocol:
    """R-Search's released evaluation ([C] src/eval/main.py) on the packaged closed corpus: top-5,
    T 0.1 / top-p 0.9, 1024 tokens per generation, no observation truncation, the evaluation
    observation wrapper ``\\n\\n{turn.strip()}<observation>{docs}</observation>\\n\\n`` (main.py:139),
    a search guard of 50 [D]; scores the default metrics plus R-Search's "Acc"
    (``acc_substring_lower``). Differences that remain: ``methods/r_search/README.md``."""
    from harness.api import metric_versions

    base = mini()
    return base.with_(
        name=RELEASED_PROTOCOL_NAME,
        description=(
            "R-Search released eval (top-5, T 0.1, top-p 0.9, 1024 tokens/turn, eval observation "
            "wrapper, no obs cap, <=50 searches, + Acc) on the closed corpus"
        ),
        top_k=RELEASED_TOP_K,
        max_turns=RELEASED_MAX_SEARCHES,
        max_obs_tokens=EVAL_MAX_OBS_TOKENS,
        decoding=Decoding(
            temperature=RELEASED_TEMPERATURE,
            top_p=RELEASED_TOP_P,
            max_new_tokens=RELEASED_MAX_NEW_TOKENS,
            seed=EVAL_SEED,
        ).model_dump(),
        metrics={**base.metrics, **metric_versions(RELEASED_METRICS)},
    )
