"""ARENA's gold-context evaluation protocol, ``arena-gold-context`` (registered from ``methods/arena/__init__.py``)."""

from __future__ import annotations

from harness.api import Decoding, Protocol, mini

DEFAULT_N_REFERENCES = 10  # ours: datasets other than HotpotQA, 2Wiki, MuSiQue (method.N_REFERENCES)
EVAL_MAX_NEW_TOKENS = 1024  # Code: src/vllm_inference.py max_completion_length
TEMPERATURE = 0.9  # Paper App. E / Code: training and evaluation sampling temperature (src/vllm_inference.py)
PROTOCOL_NAME = "arena-gold-context"


def eval_protocol() -> Protocol:
    """ARENA's own evaluation (paper §4.1-4.2): each question's own paragraphs in the dataset's order (10 for
    HotpotQA / 2Wiki, 20 for MuSiQue; the labelled gold + BM25 substitute over the closed corpus
    for a question without them, see the module docstring), no agent retrieval
    (``max_turns=0``), sampled at T=0.9 with 1024 new tokens (vllm_inference.py), fixed seed (ours).
    ``top_k=10`` records the reference count of HotpotQA / 2Wiki (MuSiQue: 20). The corpus and
    retriever are the substitute's."""
    return mini().with_(
        name=PROTOCOL_NAME,
        description=(
            "ARENA gold-context reader setting (each question's own 10/20 paragraphs; gold + BM25 "
            "substitute where a question has none, counted), no agent retrieval, T 0.9, 1024 tokens; "
            "not comparable with open-retrieval rows"
        ),
        top_k=DEFAULT_N_REFERENCES,
        max_turns=0,
        decoding=Decoding(
            temperature=TEMPERATURE, top_p=1.0, max_new_tokens=EVAL_MAX_NEW_TOKENS
        ).model_dump(),
    )
