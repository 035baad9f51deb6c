"""The records that flow through the harness.

Everything here is a plain typed dataclass: examples come out of ``harness.data``,
hits out of ``harness.retrieval``, completions out of ``harness.llm`` and trajectories
out of the rollout engine into scoring and the store. Nothing paper-specific lives here.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass, field
from typing import Any, Literal

from harness.errors import ConfigError


@dataclass(frozen=True)
class Evidence:
    """A gold supporting passage for a question.

    ``title`` is always known; ``text`` when the source carries the paragraph;
    ``passage_id`` is its id in the packaged closed corpus when it is there.
    ``hop`` is the 0-based reasoning step it supports (MuSiQue decompositions), when known.
    """

    title: str
    text: str | None = None
    passage_id: str | None = None
    hop: int | None = None

    def to_dict(self) -> dict[str, Any]:
        return {k: v for k, v in asdict(self).items() if v is not None}

    @classmethod
    def from_dict(cls, d: dict[str, Any]) -> Evidence:
        return cls(title=d["title"], text=d.get("text"), passage_id=d.get("passage_id"), hop=d.get("hop"))


@dataclass(frozen=True)
class QAExample:
    """One question with its gold answers (aliases included; the first is the canonical one)."""

    id: str
    dataset: str
    split: str
    question: str
    answers: tuple[str, ...]
    supporting: tuple[Evidence, ...] | None = None
    hops: int | None = None
    qtype: str | None = None
    meta: dict[str, Any] = field(default_factory=dict, compare=False, hash=False)

    def to_dict(self) -> dict[str, Any]:
        d: dict[str, Any] = {
            "id": self.id,
            "dataset": self.dataset,
            "split": self.split,
            "question": self.question,
            "answers": list(self.answers),
        }
        if self.supporting is not None:
            d["supporting"] = [e.to_dict() for e in self.supporting]
        if self.hops is not None:
            d["hops"] = self.hops
        if self.qtype is not None:
            d["qtype"] = self.qtype
        if self.meta:
            d["meta"] = self.meta
        return d

    @classmethod
    def from_dict(cls, d: dict[str, Any]) -> QAExample:
        sup = d.get("supporting")
        return cls(
            id=str(d["id"]),
            dataset=d["dataset"],
            split=d["split"],
            question=d["question"],
            answers=tuple(d["answers"]),
            supporting=None if sup is None else tuple(Evidence.from_dict(e) for e in sup),
            hops=d.get("hops"),
            qtype=d.get("qtype"),
            meta=d.get("meta") or {},
        )

    @property
    def gold_passage_ids(self) -> list[str]:
        return [e.passage_id for e in (self.supporting or ()) if e.passage_id is not None]


def split_contents(contents: str) -> tuple[str, str]:
    """Split a wiki-18 ``contents`` string (``"Title"\\ntext``) into (title, text).

    The title loses its surrounding double quotes, as pyserini and FlashRAG do.
    """
    first, _, rest = contents.partition("\n")
    return first.strip().strip('"'), rest


def join_contents(title: str, text: str) -> str:
    """Build a wiki-18 ``contents`` string: the title in double quotes, a newline, the text."""
    return f'"{title}"\n{text}'


# A remote hit that could not be mapped to a corpus passage id (harness.retrieval.client.PassageIds)
# is stored as this prefix + a hash of its text; retrieval metrics are not computed over such ids.
UNMAPPED_ID_PREFIX = "unmapped:"


def is_unmapped_id(doc_id: str) -> bool:
    return doc_id.startswith(UNMAPPED_ID_PREFIX)


@dataclass(frozen=True)
class Hit:
    """One retrieved passage: corpus id, wiki-18 ``contents`` and the retriever's score."""

    doc_id: str
    contents: str
    score: float

    @property
    def title(self) -> str:
        return split_contents(self.contents)[0]

    @property
    def text(self) -> str:
        return split_contents(self.contents)[1]


FinishReason = Literal["stop", "length", "eos", "error"]


@dataclass(frozen=True)
class SamplingParams:
    """Decoding settings. ``temperature == 0`` means greedy.

    ``top_k``: sample among the k most likely tokens; 0 = off (all tokens), the value that means
    "off" in transformers, vLLM and llama.cpp alike. ``repetition_penalty``: CTRL's penalty
    (arXiv 1909.05858, section 4.1), as transformers' ``RepetitionPenaltyLogitsProcessor`` and
    vLLM apply it: the logit of every token already in the prompt or the generated text is divided
    by it when positive and multiplied by it when negative, before temperature, top-k and top-p
    (also under greedy decoding); 1.0 = off. docs/decoding.md says what each backend sends.
    """

    temperature: float = 0.0
    top_p: float = 1.0
    top_k: int = 0
    seed: int | None = None
    repetition_penalty: float = 1.0

    def __post_init__(self) -> None:
        if self.top_k < 0:
            raise ConfigError(f"SamplingParams.top_k must be 0 (off) or positive, got {self.top_k}")
        if not self.repetition_penalty > 0:
            raise ConfigError(
                f"SamplingParams.repetition_penalty must be positive (1.0 = off), got {self.repetition_penalty}"
            )

    @property
    def greedy(self) -> bool:
        return self.temperature == 0.0


@dataclass
class Completion:
    """One generation with exact token counts from the model's own tokenizer.

    ``text`` excludes the matched stop string unless the backend was asked to keep it
    (``include_stop``); ``stop`` records which stop string ended generation (None if none did).
    ``token_ids`` are the generated token ids when the backend exposes them (needed for training).
    ``prefill_tokens`` counts the prompt tokens the backend actually computed: ``prompt_tokens``
    minus those whose KV it reused from an earlier call (a prefix cache); None when the backend
    cannot tell.
    """

    text: str
    prompt_tokens: int
    completion_tokens: int
    finish_reason: FinishReason
    stop: str | None = None
    token_ids: list[int] | None = None
    logprobs: list[float] | None = None
    latency_s: float = 0.0
    prefill_tokens: int | None = None
    # why the request failed, with finish_reason "error" (after the backend's retries)
    error: str | None = None

    def turn_fields(self) -> dict[str, Any]:
        """The fields a :class:`Turn` records of this generation (text, token counts, why it stopped)."""
        return {
            "text": self.text,
            "prompt_tokens": self.prompt_tokens,
            "prefill_tokens": self.prefill_tokens,
            "completion_tokens": self.completion_tokens,
            "stop_reason": self.stop or self.finish_reason,
            "error": self.error,
        }


# "message": environment text the rollout engine inserted: in place of a retrieval (a repeated query,
# a search over the search cap; its ``query`` is the refused one) or after a turn with no valid
# action (the dialect's correction message, status ``correction``); its status says why
TurnKind = Literal["generate", "retrieve", "llm_call", "judge", "message"]


@dataclass
class Turn:
    """One step of a trajectory: a generation, a retrieval, or an auxiliary LLM call.

    ``prefill_tokens``: of ``prompt_tokens``, those the backend computed (the rest came from its
    prefix cache); None when unknown or not a generation."""

    index: int
    kind: TurnKind
    text: str = ""
    prompt_tokens: int = 0
    prefill_tokens: int | None = None
    completion_tokens: int = 0
    observation_tokens: int = 0
    query: str | None = None
    doc_ids: list[str] = field(default_factory=list)
    doc_scores: list[float] = field(default_factory=list)
    latency_s: float = 0.0
    stop_reason: str | None = None
    status: str = "ok"
    # a failed request (stop_reason "error"): why; the runner stores the sample as an error
    error: str | None = None


ExtractionStatus = Literal[
    "ok",  # exactly the expected answer span found in the model's own tokens
    "no_answer",  # the model never produced an answer
    "multiple_answers",  # several answer spans; the last was taken (counted, not hidden)
    "unclosed_tag",  # an answer tag was opened but not closed
    "empty_answer",  # the answer span is empty
    "max_turns",  # the turn budget ran out before an answer
    "truncated",  # generation hit the token limit before an answer
    "final_turn_fallback",  # no answer span; a method's documented fallback (the final turn) is scored
    "error",  # the sample failed; see Trajectory.error
]


@dataclass
class Trajectory:
    """Everything one method did for one question, and what it answered."""

    example_id: str
    dataset: str
    question: str
    answers: list[str]
    turns: list[Turn] = field(default_factory=list)
    prediction: str = ""
    extraction_status: ExtractionStatus = "no_answer"
    response: str = ""  # the full text the model produced (its own tokens, observations interleaved)
    error: str | None = None
    # training only: token ids of the whole response and a parallel 0/1 mask (0 on observation tokens)
    prompt_ids: list[int] | None = None
    response_ids: list[int] | None = None
    loss_mask: list[int] | None = None
    # training only, when the rollout backend reports them: the engine's log-prob of each response
    # token (NaN on observation tokens and where it did not report one), parallel to response_ids
    engine_logprobs: list[float] | None = None
    meta: dict[str, Any] = field(default_factory=dict)
    # named alternative predictions, e.g. {"first_answer": "..."} when a paper's released evaluation
    # reads another answer than ``prediction``: each is scored with the answer metrics under
    # ``metric[name]`` (harness.eval.scoring.alt_metric_name) and stored in the sample's meta_json
    # under "alt_predictions"; ``prediction`` and its metrics are unchanged
    alt_predictions: dict[str, str] = field(default_factory=dict)

    @property
    def model_text(self) -> str:
        """The model's own text: every generated segment in order, without observations or
        correction messages (the engines' ``generate`` turns hold exactly the generated text)."""
        return "".join(t.text for t in self.turns if t.kind == "generate")

    @property
    def n_retrievals(self) -> int:
        return sum(1 for t in self.turns if t.kind == "retrieve")

    @property
    def n_llm_calls(self) -> int:
        return sum(1 for t in self.turns if t.kind in ("generate", "llm_call"))

    @property
    def prompt_tokens(self) -> int:
        return sum(t.prompt_tokens for t in self.turns)

    @property
    def completion_tokens(self) -> int:
        return sum(t.completion_tokens for t in self.turns)

    @property
    def retrieved_doc_ids(self) -> list[str]:
        """Every retrieved doc id, in order of retrieval, without duplicates."""
        seen: dict[str, None] = {}
        for t in self.turns:
            for d in t.doc_ids:
                seen.setdefault(d, None)
        return list(seen)
