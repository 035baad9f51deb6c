"""TIRESRAG-R1's evaluation protocols (registered from ``methods/tiresrag_r1/__init__.py``):
``tiresrag_r1-eval``, the harness-standard one (the training loop, last answer), and
``tiresrag_r1-released``, the released evaluation (first answer)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

from harness.api import Decoding, Protocol, mini

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


# -- the released evaluation (probe2/TIRESRAG-R1@a457873, evaluation/: a FlashRAG fork run by
# evaluation/scripts/evaluation.sh with prompt_type "ours" and evaluation/src/eval_config.yaml) ------
# Paths below are relative to that commit; "pipeline" = evaluation/FlashRAG/flashrag/pipeline/active_pipeline.py.

RELEASED_PROTOCOL_NAME = "tiresrag_r1-released"
RELEASED_TOP_K = 7  # pipeline:114 `topk = 7 #config.get("topk", 7)` (hard-coded)
RELEASED_MAX_NEW_TOKENS = 8192  # eval_config.yaml:29 max_tokens: 8192
RELEASED_REPETITION_PENALTY = 1.05  # eval_config.yaml:34
RELEASED_SEED = (
    2024  # eval_config.yaml:7, passed to vLLM (evaluation/FlashRAG/flashrag/generator/generator.py:232)
)
# pipeline:110 max_iterations defaults to 100 generations (eval_config.yaml sets none): a search in
# the 100th is never answered, so at most 99 retrievals are read.
RELEASED_MAX_RETRIEVALS = 99
# eval_config.yaml:35 (minus the special tokens that are EOS here): the released loop stops at the
# first </answer>, so its prediction is the first answer.
RELEASED_STOPS = ("</search>", "</answer>", "<|end_of_query|>")
RELEASED_EMPTY_QUERY = "I don't know."  # pipeline:340-348 (an empty query ends with this prediction)


@dataclass(frozen=True)
class EvalMode:
    """How ``TiresRAG.solve`` runs under a protocol. ``harness`` (every protocol but the released
    one): the training loop's stops, the last answer. ``released``: stop at ``</answer>`` too, the
    released loop's prediction (:func:`methods.tiresrag_r1.method.released_prediction`), the
    released query parse and observation wrapper, an empty query answered "I don't know."."""

    name: Literal["harness", "released"]
    stops: tuple[str, ...]


HARNESS_MODE = EvalMode("harness", ("</search>",))  # Code (experience_maker.py): </search> and EOS
RELEASED_MODE = EvalMode("released", RELEASED_STOPS)


def eval_mode(protocol: Protocol) -> EvalMode:
    """The released evaluation runs under the protocol named ``tiresrag_r1-released`` only (a key
    on the name inside the paper's folder; the method's spec records the mode, so a run's spec
    hash says which one ran)."""
    return RELEASED_MODE if protocol.name == RELEASED_PROTOCOL_NAME else HARNESS_MODE


def released_protocol() -> Protocol:
    """TIRESRAG-R1's released evaluation (``ItSearchPipeline``, prompt_type ``ours``): top-7, greedy
    (``do_sample: False`` -> temperature 0, generator.py:228-231; vLLM ignores the listed top-p 0.95
    and top-k 30 at temperature 0), 8,192 new tokens per generation, repetition penalty 1.05, at most
    99 retrievals, stop at the first ``</answer>``; on the closed corpus (the paper's KILT-2019 +
    BGE index is not packaged). Differences that remain: ``methods/tiresrag_r1/README.md``."""
    return mini().with_(
        name=RELEASED_PROTOCOL_NAME,
        description=(
            "TIRESRAG-R1 released eval (ItSearchPipeline: top-7, greedy, rep. penalty 1.05, 8192 "
            "tokens/generation, stop at </answer>: first answer) on the closed corpus"
        ),
        top_k=RELEASED_TOP_K,
        max_turns=RELEASED_MAX_RETRIEVALS,
        max_obs_tokens=8192,
        decoding=Decoding(
            temperature=0.0,
            top_p=1.0,
            max_new_tokens=RELEASED_MAX_NEW_TOKENS,
            seed=RELEASED_SEED,
            repetition_penalty=RELEASED_REPETITION_PENALTY,
        ).model_dump(),
    )
