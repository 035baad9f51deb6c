"""The released-evaluation protocols of the baselines (registered from ``baselines/__init__.py``).

* ``search_o1-released-singlehop`` / ``search_o1-released-multihop``: Search-o1's QA evaluation
  (sunnynexus/Search-o1@6ced48f ``scripts/run_search_o1.py``), for the variant
  ``search_o1_released``. The release sets the search cap per dataset (5 for NQ / TriviaQA, 10 for
  HotpotQA / 2Wiki / MuSiQue / Bamboogle, lines 199-205); a protocol has one turn budget, so there
  are two protocols, identical except for it.
* ``flashrag``: FlashRAG's benchmark setting (RUC-NLPIR/FlashRAG@1ee5249
  ``examples/methods/my_config.yaml``, ``docs/original_docs/baseline_details.md``), for the
  variants ``direct_flashrag``, ``naive_rag_flashrag`` and ``ircot_flashrag``.

Each is bound to its variants (``Method.own_protocols``): other methods are not scored under it.
"""

from __future__ import annotations

from harness.api import E5_BASE_V2, CorpusRef, Decoding, DenseSpec, Protocol, Selection, mini

# -- Search-o1 (run_search_o1.py at 6ced48f) --------------------------------------------------------
SEARCH_O1_TOP_K = 10  # lines 199-205: top_k = 10 for the QA sets
SEARCH_O1_SINGLEHOP_SEARCHES = 5  # line 200: MAX_SEARCH_LIMIT = 5 (nq, triviaqa)
SEARCH_O1_MULTIHOP_SEARCHES = 10  # lines 201-202: 10 for hotpotqa, musique, bamboogle, 2wiki
# lines 123-151: --temperature 0.7, --top_p 0.8, --top_k_sampling 20 (the reasoning's sampling)
SEARCH_O1_TEMPERATURE = 0.7
SEARCH_O1_TOP_P = 0.8
SEARCH_O1_TOP_K_SAMPLING = 20
# lines 210-212: repetition_penalty 1.05 for a QwQ model path, else 1.0 (the reasoning; the
# Reason-in-Documents call always uses 1.05, lines 304-312, in the variant itself)
SEARCH_O1_REPETITION_PENALTY = 1.0
SEARCH_O1_MAX_TOKENS = 8192  # lines 388-394: 8192 for a non-QwQ model (20480 for QwQ on QA sets)
# The observation is the Reason-in-Documents output, which the release never cuts; a cap equal to
# the token budget of that call never binds.
SEARCH_O1_MAX_OBS_TOKENS = SEARCH_O1_MAX_TOKENS


def _search_o1(name: str, searches: int, which: str) -> Protocol:
    return mini().with_(
        name=name,
        description=(
            f"Search-o1 released eval ({which}: <={searches} searches), top-10, T 0.7, top-p 0.8, "
            "top-k 20, 8192 tokens, on the closed corpus (the release searches Bing)"
        ),
        top_k=SEARCH_O1_TOP_K,
        max_turns=searches,
        max_obs_tokens=SEARCH_O1_MAX_OBS_TOKENS,
        decoding=Decoding(
            temperature=SEARCH_O1_TEMPERATURE,
            top_p=SEARCH_O1_TOP_P,
            top_k=SEARCH_O1_TOP_K_SAMPLING,
            repetition_penalty=SEARCH_O1_REPETITION_PENALTY,
            max_new_tokens=SEARCH_O1_MAX_TOKENS,
        ).model_dump(),
    )


def search_o1_released_singlehop() -> Protocol:
    """Search-o1's released QA evaluation for NQ / TriviaQA (5 searches; run_search_o1.py:199-205)
    with the non-QwQ decoding (T 0.7, top-p 0.8, top-k 20, 8192 tokens, no repetition penalty on
    the reasoning), on the packaged closed corpus with bm25s."""
    return _search_o1("search_o1-released-singlehop", SEARCH_O1_SINGLEHOP_SEARCHES, "single-hop")


def search_o1_released_multihop() -> Protocol:
    """:func:`search_o1_released_singlehop` with 10 searches (HotpotQA, 2Wiki, MuSiQue, Bamboogle;
    run_search_o1.py:201-202)."""
    return _search_o1("search_o1-released-multihop", SEARCH_O1_MULTIHOP_SEARCHES, "multi-hop")


# -- FlashRAG (examples/methods/my_config.yaml at 1ee5249) ------------------------------------------
FLASHRAG_TOP_K = 5  # my_config.yaml:55 retrieval_topk: 5
FLASHRAG_MAX_NEW_TOKENS = 32  # my_config.yaml:78-80 generation_params: do_sample False, max_tokens 32
FLASHRAG_SAMPLES = 1000  # baseline_details.md "Dataset Setting": the first 1000 samples of each set


def flashrag() -> Protocol:
    """FlashRAG's benchmark (``baseline_details.md`` "Global Setting"): wiki-18 (the DPR Wikipedia
    of December 2018) with e5-base-v2 Flat, top-5, greedy, 32 new tokens, the first 1000 questions
    of each set; the 2048-token input cut is the variants' (:mod:`baselines.flashrag`). The corpus
    hash comes from the user's wiki-18 file at run time (``--corpus``). Metrics: the standard set
    (``harness.protocol.STANDARD_METRICS``)."""
    return Protocol(
        name="flashrag",
        description="FlashRAG benchmark: wiki-18, e5-base-v2 Flat, top-5, greedy, 32 tokens, first 1000 per set",
        corpus=CorpusRef(id="wiki18", n_passages=21_015_324),
        retriever=DenseSpec(encoder=E5_BASE_V2, index_type="Flat"),
        top_k=FLASHRAG_TOP_K,
        decoding=Decoding(max_new_tokens=FLASHRAG_MAX_NEW_TOKENS).model_dump(),
        selection=Selection(mode="first", n=FLASHRAG_SAMPLES).model_dump(),
    )
