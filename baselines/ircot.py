"""IRCoT (Trivedi et al., "Interleaving Retrieval with Chain-of-Thought Reasoning for
Knowledge-Intensive Multi-Step Questions", ACL 2023), as FlashRAG implements it
(``flashrag/pipeline/active_pipeline.py`` ``IRCOTPipeline``, read at RUC-NLPIR/FlashRAG 1ee5249).

Control flow (FlashRAG ``run_batch``), batched across the questions of a batch:

1. retrieve top-k for the question;
2. each iteration, every still-active question generates **one** thought (generation stops at
   ``"."`` or a newline; FlashRAG ``stop=['.', '\\n']``) from the prompt below, which shows the
   accumulated documents and the chain so far;
3. a thought containing ``"So the answer is:"`` ends that question's chain; otherwise the thought
   is the next retrieval query, its top-k are merged into the question's documents (each document
   once, with its best score) and the documents are re-ordered by **ascending** score (FlashRAG
   sorts with ``reverse=False``, so after the first merge the best document sits last, next to
   the question; the first prompt shows the question's hits in retriever order);
4. at most ``MAX_ITER`` thoughts; the answer is the text after "So the answer is:"
   (``ircot_pred_parse``).

The prompt is FlashRAG's: system = instruction + the one-shot demonstration (taken by FlashRAG
from IRCoT's 2WikiMultihopQA ``gold_with_3_distractors_context_cot_qa_codex.txt``), user =
documents as ``Wikipedia Title: {title}\\n{text}\\n\\n`` + ``Question: {question}\\nThought:``,
joined as plain text with a blank line (FlashRAG builds IRCoT with ``enable_chat=False`` for every
local framework, so no chat template), followed by the chain so far.

Choices where FlashRAG and the settings it documents disagree, or where we differ:

* ``MAX_ITER = 5``: FlashRAG's ``IRCOTPipeline`` defaults to ``max_iter=2`` and
  ``docs/original_docs/baseline_details.md`` says "Max iter is set to 2", but the script that runs
  the benchmark, ``examples/methods/run_exp.py`` ``ircot()``, builds ``IRCOTPipeline(config,
  max_iter=5)`` (all at RUC-NLPIR/FlashRAG@1ee5249). We take 5: it is what the executable reference
  runs, and the
  one-shot demonstration itself needs four thoughts ("... Pakistan." / "... Macedonia." / "Thus,
  ..." / "So the answer is: no."), so with 2 a chain in the demonstrated style can never reach its
  answer.
* Each thought keeps its full stop, as in FlashRAG (its vLLM generator sets
  ``include_stop_str_in_output=True`` whenever stop strings are given,
  ``flashrag/generator/generator.py``:237-240). We strip each thought and join the chain with one
  space after "Thought:"; FlashRAG appends the thoughts as generated (leading space included)
  right after "Thought:" (``flashrag/prompt/base_prompt.py``:155-163). Our retrieval query is the
  sentence stripped and without its full stop; FlashRAG searches the thought as generated.
* FlashRAG also retrieves for the thought generated in the last iteration, whose documents are
  never shown to the model; we skip that retrieval (it cannot change the answer and would inflate
  the retrieval count).
* A chain that ends without "So the answer is:" has no answer (status ``max_turns``). FlashRAG's
  ``ircot_pred_parse`` then uses the whole chain as the prediction; we do not fall back silently.
* FlashRAG middle-truncates every prompt to ``generator_max_input_len`` = 2048 tokens; we send it
  whole. The variant ``ircot_flashrag`` (:mod:`baselines.flashrag`, protocol ``flashrag``) does
  both as FlashRAG does, and takes its thoughts and queries as generated.
* An empty thought (the model stops at once, or writes only ".") ends the chain without an answer
  (status ``no_answer``, ``meta["ended_by"] = "empty_thought"``). There is nothing to search, and
  under greedy decoding (FlashRAG's only mode) the next iteration would see the same prompt and
  produce the same empty thought until ``MAX_ITER``; FlashRAG would search with the empty string.
* Top-k is the protocol's (FlashRAG's benchmark uses 5, Search-R1's baselines 3); 32 new tokens
  per thought is FlashRAG's uniform ``generation_params.max_tokens`` (``baseline_details.md``).
"""

from __future__ import annotations

import time
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

from harness.api import (
    Completion,
    Hit,
    Method,
    MethodSpec,
    Protocol,
    QAExample,
    RunContext,
    Trajectory,
    Turn,
    extract_after,
)

if TYPE_CHECKING:
    from harness.api import Retriever

# FlashRAG IRCOTPipeline.IRCOT_INSTRUCTION, verbatim.
INSTRUCTION = (
    "You serve as an intelligent assistant, adept at facilitating users through complex, multi-hop "
    "reasoning across multiple documents. This task is illustrated through demonstrations, each "
    "consisting of a document set paired with a relevant question and its multi-hop reasoning "
    "thoughts. Your task is to generate one thought for current step, DON'T generate the whole "
    'thoughts at once! If you reach what you believe to be the final step, start with "So the '
    'answer is:".'
)
# FlashRAG IRCOTPipeline.IRCOT_EXAMPLE, verbatim (the one-shot demonstration).
EXAMPLE = (
    "Wikipedia Title: Kurram Garhi\nKurram Garhi is a small village located near the city of "
    "Bannu, which is the part of Khyber Pakhtunkhwa province of Pakistan. Its population is "
    "approximately 35000. Barren hills are near this village. This village is on the border of "
    "Kurram Agency. Other nearby villages are Peppal, Surwangi and Amandi Kala.\n\nWikipedia "
    "Title: 2001–02 UEFA Champions League second group stage\nEight winners and eight runners- up "
    "from the first group stage were drawn into four groups of four teams, each containing two "
    "group winners and two runners- up. Teams from the same country or from the same first round "
    "group could not be drawn together. The top two teams in each group advanced to the quarter- "
    "finals.\n\nWikipedia Title: Satellite tournament\nA satellite tournament is either a minor "
    "tournament or event on a competitive sporting tour or one of a group of such tournaments that "
    "form a series played in the same country or region.\n\nWikipedia Title: Trojkrsti\nTrojkrsti "
    "is a village in Municipality of Prilep, Republic of Macedonia.\n\nWikipedia Title: Telephone "
    "numbers in Ascension Island\nCountry Code:+ 247< br> International Call Prefix: 00 Ascension "
    "Island does not share the same country code( +290) with the rest of St Helena.\n\nQuestion: "
    "Are both Kurram Garhi and Trojkrsti located in the same country?\nThought: Kurram Garhi is "
    "located in the country of Pakistan. Trojkrsti is located in the country of Republic of "
    "Macedonia. Thus, they are not in the same country. So the answer is: no.\n\n"
)

# FlashRAG IRCOTPipeline.__init__: the user prompt and the reference template.
USER = "{reference}Question: {question}\nThought:"
REFERENCE = "Wikipedia Title: {title}\n{text}\n\n"
ANSWER_MARKER = "So the answer is:"  # FlashRAG run_batch / ircot_pred_parse
STOP = [".", "\n"]  # FlashRAG run_batch: self.generator.generate(input_prompts, stop=['.', '\n'])
MAX_ITER = 5  # FlashRAG examples/methods/run_exp.py ircot(): IRCOTPipeline(config, max_iter=5); see above
MAX_NEW_TOKENS = 32  # FlashRAG uniform setting, generation_params.max_tokens = 32 (baseline_details.md)


def render_references(hits: Sequence[Hit]) -> str:
    """FlashRAG ``PromptTemplate.format_reference`` with IRCoT's template: the title is the first
    line of ``contents`` as stored (wiki-18 quotes kept, as FlashRAG shows them)."""
    out = []
    for h in hits:
        title, _, text = h.contents.partition("\n")
        out.append(REFERENCE.format(title=title, text=text))
    return "".join(out)


def build_prompt(question: str, docs: Sequence[Hit], thoughts: Sequence[str]) -> str:
    """FlashRAG ``PromptTemplate.get_string`` with ``enable_chat=False``: system and user joined by
    a blank line, then the chain so far (thoughts joined by a space)."""
    prompt = (
        f"{INSTRUCTION}\n\n{EXAMPLE}"
        + "\n\n"
        + USER.format(reference=render_references(docs), question=question)
    )
    chain = " ".join(thoughts)
    return f"{prompt} {chain}" if chain else prompt


class DocPool:
    """One question's accumulated documents (FlashRAG ``doc2score``/``id2doc``): every document
    once with its best score, in first-retrieved order until the first merge, then by ascending
    score (a stable sort, ties in first-retrieved order)."""

    def __init__(self, first: Sequence[Hit]):
        self.best: dict[str, Hit] = {}
        for h in first:
            self._add(h)
        self.shown: list[Hit] = list(first)

    def _add(self, h: Hit) -> None:
        old = self.best.get(h.doc_id)
        if old is None or h.score > old.score:
            self.best[h.doc_id] = h  # an existing key keeps its position

    def merge(self, hits: Sequence[Hit]) -> None:
        for h in hits:
            self._add(h)
        self.shown = sorted(self.best.values(), key=lambda h: h.score)


@dataclass
class _Chain:
    example: QAExample
    pool: DocPool | None = None
    thoughts: list[str] = field(default_factory=list)
    turns: list[Turn] = field(default_factory=list)
    done: bool = False
    ended_by: str = "max_iter"  # answer | empty_thought | max_iter
    prompt: str = ""
    truncated_prompts: int = 0  # prompts a variant cut to fit its input length (FlashRAG's setting)

    def add_turn(self, **kw: object) -> None:
        self.turns.append(Turn(index=len(self.turns), **kw))  # type: ignore[arg-type]


def _retrieve(retriever: Retriever, chains: list[_Chain], queries: list[str], k: int) -> None:
    t0 = time.perf_counter()
    hits = retriever.search(queries, k)
    latency = (time.perf_counter() - t0) / len(chains)
    for c, q, h in zip(chains, queries, hits, strict=True):
        if c.pool is None:
            c.pool = DocPool(h)
        else:
            c.pool.merge(h)
        c.add_turn(
            kind="retrieve",
            query=q,
            doc_ids=[x.doc_id for x in h],
            doc_scores=[x.score for x in h],
            latency_s=latency,
        )


class IRCoT(Method):
    name = "ircot"
    description = (
        "one CoT sentence per step, each sentence the next retrieval query, until 'So the answer is:'"
    )
    source = "Trivedi et al. ACL 2023, as FlashRAG IRCOTPipeline runs it (1-shot demo, max_iter=5)"

    def spec(self, protocol: Protocol) -> MethodSpec:
        return MethodSpec(
            name=self.name,
            prompts={"instruction": INSTRUCTION, "example": EXAMPLE, "user": USER, "reference": REFERENCE},
            renderer="ircot: Wikipedia Title: {first line}\\n{rest}\\n\\n, accumulated, ascending score",
            extractor=f"text after the last {ANSWER_MARKER!r} up to the end of its line",
            params={
                "top_k": protocol.top_k,
                "max_iter": MAX_ITER,
                "max_new_tokens": MAX_NEW_TOKENS,
                "stop": STOP,
                "chat_template": False,
                "retrieve_after_last_iteration": False,
                "empty_thought": "ends the chain",
            },
        )

    def solve(self, examples: list[QAExample], ctx: RunContext) -> list[Trajectory]:
        retriever = ctx.require_retriever(self.name)
        k = ctx.protocol.top_k
        chains = [_Chain(example=e) for e in examples]
        if not chains:
            return []
        _retrieve(retriever, chains, [e.question for e in examples], k)

        for iteration in range(MAX_ITER):
            active = [c for c in chains if not c.done]
            if not active:
                break
            prompts = [self.prompt(c, ctx) for c in active]
            t0 = time.perf_counter()
            comps = ctx.backend.generate(
                prompts, stop=STOP, max_new_tokens=MAX_NEW_TOKENS, sampling=ctx.sampling, include_stop=True
            )
            latency = (time.perf_counter() - t0) / len(active)
            searching: list[_Chain] = []
            queries: list[str] = []
            for c, p, comp in zip(active, prompts, comps, strict=True):
                c.prompt = p
                thought, query = self.read_thought(comp)
                if thought:
                    c.thoughts.append(thought)
                c.add_turn(
                    kind="generate",
                    latency_s=latency,
                    **comp.turn_fields(),
                    status="ok" if query else "empty_thought",
                )
                if ANSWER_MARKER in thought:
                    c.done, c.ended_by = True, "answer"
                elif not query:
                    c.done, c.ended_by = True, "empty_thought"
                elif iteration < MAX_ITER - 1:
                    searching.append(c)
                    queries.append(query)
            if searching:
                _retrieve(retriever, searching, queries, k)

        return [self._finish(c) for c in chains]

    def prompt(self, c: _Chain, ctx: RunContext) -> str:
        """The prompt of ``c``'s next thought."""
        return build_prompt(c.example.question, c.pool.shown, c.thoughts)  # type: ignore[union-attr]

    def read_thought(self, comp: Completion) -> tuple[str, str]:
        """(the thought kept in the chain, the retrieval query) of one generated thought: the
        stripped text, and the sentence without its full stop (FlashRAG's query)."""
        thought = comp.text.strip()
        return thought, thought.removesuffix(".").strip() if comp.stop == "." else thought

    def _finish(self, c: _Chain) -> Trajectory:
        chain = " ".join(c.thoughts)
        if c.ended_by == "answer":
            ex = extract_after(chain, ANSWER_MARKER)
            prediction, status = ex.prediction, ex.status
        elif c.ended_by == "empty_thought":
            prediction, status = "", "no_answer"
        else:
            prediction, status = "", "max_turns"
        return Trajectory(
            example_id=c.example.id,
            dataset=c.example.dataset,
            question=c.example.question,
            answers=list(c.example.answers),
            turns=c.turns,
            prediction=prediction,
            extraction_status=status,
            response=chain,
            meta={"prompt": c.prompt, "ended_by": c.ended_by},
        )
