"""SuRe (Kim et al., "SuRe: Summarizing Retrievals using Answer Candidates for Open-domain QA of
LLMs", ICLR 2024), as FlashRAG implements it (``flashrag/pipeline/branching_pipeline.py``
``SuRePipeline``, read at RUC-NLPIR/FlashRAG 1ee5249; the R-Search and TIRESRAG-R1 papers ran their
SuRe baselines with FlashRAG: R-Search paper §4.2, TIRESRAG-R1 paper §5 and App. C.3).

Per question (batched across the questions of a batch, one backend call per step):

1. retrieve top-k for the question;
2. **candidates**: one call with the passages asks for two answer candidates "(a) xx, (b) yy";
   every ``(label) text`` span is a candidate (FlashRAG ``parse_candidates``: regex
   ``\\((\\w+)\\)\\s*([^()]+)``, first line of each, commas removed);
3. **candidate-conditioned summaries**: one call per candidate writes a passage from the
   retrieved passages that supports that candidate;
4. **validation** (pointwise): one call per candidate asks whether its summary supports it;
   score 1 if the reply contains "true", else 0;
5. **ranking** (pairwise): one call per ordered pair (i, j), i != j, with summary i as "Passage 1"
   and summary j as "Passage 2"; ``score[i][j]`` is 1 if the reply names passage 1, 0 if it names
   passage 2, 0.5 otherwise; a candidate's ranking score is its row sum;
6. the answer is the candidate with the largest validation + ranking score (the first on a tie,
   ``np.argmax``).

LLM calls per question with K candidates: 1 + K + K + K(K-1) (7 for the usual K = 2); every one is
a turn of the trajectory (the candidate call ``generate``, the others ``llm_call``), and the scores
are in ``trajectory.meta["sure"]``.

Differences from FlashRAG, with reasons:

* Prompt text: FlashRAG writes each prompt as adjacent string literals and loses the space at
  several joins ("After readingthe passages", "(b)yy", "provide amore informative"). We restore
  those spaces, which gives the wording of the SuRe repository (bbuing9/ICLR24_SuRe
  ``functions/gen_candidates.py``, ``gen_summary.py``, ``verification.py``); nothing else changes.
* A candidate that is empty after FlashRAG's clean-up (e.g. "(a) ,") is dropped; FlashRAG keeps it
  and could answer "".
* No candidate at all: no answer (status ``no_answer``), as FlashRAG ("No valid predictions!").

Settings: every call gets 32 new tokens, greedy, no stop string: FlashRAG's uniform
``generation_params`` (max_tokens 32, FlashRAG ``docs/original_docs/baseline_details.md``) apply to
all of SuRe's calls, summaries
included. (The SuRe repository generates up to 512 tokens per call; FlashRAG's benchmark row, and the
RL papers' SuRe rows run with FlashRAG, use 32.) Prompts are single user turns of the chat template
(FlashRAG ``PromptTemplate`` with an empty system prompt, for chat models); passages are shown as
``Passage #{i} Title: {title}\\nPassage #{i} Text: {text}\\n\\n`` with the title the first line of
``contents`` as stored (FlashRAG ``format_ref``); top-k is the protocol's.
"""

from __future__ import annotations

import itertools
import re
import time
from collections.abc import Sequence
from dataclasses import dataclass, field

from harness.api import Completion, Hit, Method, MethodSpec, Protocol, QAExample, RunContext, Trajectory, Turn

# FlashRAG SuRePipeline.load_prompts, verbatim but for the restored spaces (see above).
CANDIDATES_PROMPT = (
    "Below are {N} passages related to the question at the end. After reading the passages, "
    "provide two correct candidates for the answer to the question at the end. Each answer should "
    "be in the form: (a) xx, (b) yy, and should not exceed 3 words for each candidate.\n\n"
    "{reference}Question: {question}\nAnswer:"
)

SUMMARY_PROMPT = (
    "Reference:\n{reference}\nYour job is to act as a professional writer. You need to write a "
    "good-quality passage that can support the given prediction about the question only based on "
    "the information in the provided supporting passages.\nNow, let's start. After you write, "
    "please write [DONE] to indicate you are done. Do not write a prefix (e.g., 'Response:') while "
    "writing a passage.\nQuestion: {question}\nPrediction: {pred}\nPassage:"
)

VALIDATION_PROMPT = (
    "Question: {question}\nPrediction: {pred}\nPassage: {summary}\nDoes the passage correctly "
    "support the prediction? Choices: [True,False].\nAnswer:"
)

RANKING_PROMPT = (
    "Question: Given the following passages, determine which one provides a more informative "
    "answer to the subsequent question.\nPassage 1: {summary1}\nPassage 2: {summary2}\nTarget "
    "Question: {question}\nYour Task:\nIdentify which passage (Passage 1 or Passage 2) is more "
    "relevant and informative to answer the question at hand. Choices: [Passage 1,Passage 2].\n"
    "Answer:"
)

MAX_NEW_TOKENS = 32  # FlashRAG uniform generation_params.max_tokens (baseline_details.md), every SuRe call
_CANDIDATE_RE = re.compile(r"\((\w+)\)\s*([^()]+)")  # FlashRAG SuRePipeline.parse_candidates


def format_passages(hits: Sequence[Hit]) -> str:
    """FlashRAG ``SuRePipeline.format_ref``."""
    out = []
    for i, h in enumerate(hits, 1):
        title, _, text = h.contents.partition("\n")
        out.append(f"Passage #{i} Title: {title}\nPassage #{i} Text: {text}\n\n")
    return "".join(out)


def parse_candidates(response: str) -> list[str]:
    """Every ``(label) text`` span: its first line, commas removed, stripped; empty ones dropped."""
    spans = _CANDIDATE_RE.findall(response.strip("\n").strip())
    cands = [text.split("\n")[0].strip().replace(",", "").strip() for _, text in spans]
    return [c for c in cands if c]


def parse_validation(response: str) -> float:
    """1 if the reply contains "true" (any case), else 0 (FlashRAG ``parse_validation``)."""
    return 1.0 if "true" in response.strip().lower() else 0.0


def parse_ranking(response: str) -> float:
    """1 if the reply names passage 1, 0 if passage 2, 0.5 otherwise (FlashRAG ``parse_ranking``)."""
    text = response.strip().lower()
    if "passage 1" in text:
        return 1.0
    if "passage 2" in text:
        return 0.0
    return 0.5


def select(validation: Sequence[float], ranking: Sequence[Sequence[float]]) -> tuple[list[float], int]:
    """Total score of each candidate (validation + row sum of the pairwise matrix) and the index of
    the best (the first on a tie)."""
    totals = [v + sum(row) for v, row in zip(validation, ranking, strict=True)]
    return totals, max(range(len(totals)), key=lambda i: (totals[i], -i))


@dataclass
class _Question:
    example: QAExample
    hits: list[Hit]
    turns: list[Turn] = field(default_factory=list)
    candidates: list[str] = field(default_factory=list)
    candidate_finish: str = ""
    summaries: list[str] = field(default_factory=list)
    validation: list[float] = field(default_factory=list)
    ranking: list[list[float]] = field(default_factory=list)
    prompt: str = ""
    response: str = ""

    @property
    def reference(self) -> str:
        return format_passages(self.hits)


def _user(ctx: RunContext, content: str) -> str:
    return ctx.backend.chat_prompt([{"role": "user", "content": content}])


def _call(ctx: RunContext, jobs: list[tuple[_Question, str]], kind: str, step: str) -> list[Completion]:
    """One batched generation for ``jobs`` (question, prompt); each call becomes a turn of its
    question (``status`` names the SuRe step)."""
    if not jobs:
        return []
    t0 = time.perf_counter()
    comps = ctx.backend.generate(
        [p for _, p in jobs], stop=[], max_new_tokens=MAX_NEW_TOKENS, sampling=ctx.sampling
    )
    latency = (time.perf_counter() - t0) / len(jobs)
    for (q, _), c in zip(jobs, comps, strict=True):
        q.turns.append(
            Turn(
                index=len(q.turns),
                kind=kind,  # type: ignore[arg-type]
                latency_s=latency,
                **c.turn_fields(),
                status=step,
            )
        )
    return comps


class SuRe(Method):
    name = "sure"
    description = "answer candidates, a candidate-conditioned summary each, validated and pairwise-ranked"
    source = "Kim et al. ICLR 2024, as FlashRAG SuRePipeline runs it (bbuing9/ICLR24_SuRe prompts)"

    def spec(self, protocol: Protocol) -> MethodSpec:
        return MethodSpec(
            name=self.name,
            prompts={
                "candidates": CANDIDATES_PROMPT,
                "summary": SUMMARY_PROMPT,
                "validation": VALIDATION_PROMPT,
                "ranking": RANKING_PROMPT,
            },
            renderer="sure: Passage #{i} Title: {first line}\\nPassage #{i} Text: {rest}\\n\\n",
            extractor="(label) text spans of the candidate reply; best validation + pairwise ranking score",
            params={
                "top_k": protocol.top_k,
                "max_new_tokens": MAX_NEW_TOKENS,
                "validation": "pointwise, 'true' in reply",
                "ranking": "pairwise over all ordered pairs, row sum",
            },
        )

    def solve(self, examples: list[QAExample], ctx: RunContext) -> list[Trajectory]:
        retriever = ctx.require_retriever(self.name)
        if not examples:
            return []
        t0 = time.perf_counter()
        hits = retriever.search([e.question for e in examples], ctx.protocol.top_k)
        latency = (time.perf_counter() - t0) / len(examples)
        qs = [_Question(example=e, hits=list(h)) for e, h in zip(examples, hits, strict=True)]
        for q in qs:
            q.turns.append(
                Turn(
                    index=0,
                    kind="retrieve",
                    query=q.example.question,
                    doc_ids=[x.doc_id for x in q.hits],
                    doc_scores=[x.score for x in q.hits],
                    latency_s=latency,
                )
            )

        # 1. candidates
        for q in qs:
            q.prompt = _user(
                ctx,
                CANDIDATES_PROMPT.format(N=len(q.hits), reference=q.reference, question=q.example.question),
            )
        for q, c in zip(qs, _call(ctx, [(q, q.prompt) for q in qs], "generate", "candidates"), strict=True):
            q.response, q.candidate_finish = c.text, c.finish_reason
            q.candidates = parse_candidates(c.text)
        live = [q for q in qs if q.candidates]

        # 2. one candidate-conditioned summary per candidate
        jobs = [
            (
                q,
                _user(
                    ctx, SUMMARY_PROMPT.format(reference=q.reference, question=q.example.question, pred=cand)
                ),
            )
            for q in live
            for cand in q.candidates
        ]
        for (q, _), c in zip(jobs, _call(ctx, jobs, "llm_call", "summary"), strict=True):
            q.summaries.append(c.text)

        # 3. pointwise validation of each (candidate, summary)
        jobs = [
            (q, _user(ctx, VALIDATION_PROMPT.format(question=q.example.question, pred=cand, summary=summ)))
            for q in live
            for cand, summ in zip(q.candidates, q.summaries, strict=True)
        ]
        for (q, _), c in zip(jobs, _call(ctx, jobs, "llm_call", "validation"), strict=True):
            q.validation.append(parse_validation(c.text))

        # 4. pairwise ranking over every ordered pair of summaries
        pairs = [(q, i, j) for q in live for i, j in itertools.permutations(range(len(q.candidates)), 2)]
        for q in live:
            q.ranking = [[0.0] * len(q.candidates) for _ in q.candidates]
        jobs = [
            (
                q,
                _user(
                    ctx,
                    RANKING_PROMPT.format(
                        question=q.example.question, summary1=q.summaries[i], summary2=q.summaries[j]
                    ),
                ),
            )
            for q, i, j in pairs
        ]
        for (q, i, j), c in zip(pairs, _call(ctx, jobs, "llm_call", "ranking"), strict=True):
            q.ranking[i][j] = parse_ranking(c.text)

        return [self._finish(q) for q in qs]

    @staticmethod
    def _finish(q: _Question) -> Trajectory:
        meta: dict[str, object] = {"prompt": q.prompt}
        if q.candidates:
            totals, best = select(q.validation, q.ranking)
            prediction, status = q.candidates[best], "ok"
            meta["sure"] = {
                "candidates": q.candidates,
                "summaries": q.summaries,
                "validation": q.validation,
                "ranking": q.ranking,
                "scores": totals,
                "chosen": best,
            }
        else:
            prediction = ""
            status = "truncated" if q.candidate_finish == "length" else "no_answer"
        return Trajectory(
            example_id=q.example.id,
            dataset=q.example.dataset,
            question=q.example.question,
            answers=list(q.example.answers),
            turns=q.turns,
            prediction=prediction,
            extraction_status=status,  # type: ignore[arg-type]
            response=q.response,
            meta=meta,
        )
