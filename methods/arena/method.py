"""ARENA (Ren, Xu, Wang, Li, Ma, Liu: "Effective and Transparent RAG: Adaptive-Reward Reinforcement
Learning for Decision Traceability", arXiv 2505.13258; code ren258/ARENA). "Paper" = the
paper (§n, Table n, App. X); "Code" = the released code at ren258/ARENA@53f9569, files under ``src/``.

ARENA trains the RAG *generator* only. The model gets a question and a fixed, numbered list of
paragraphs (the dataset's own distractor-setting contexts: 10 for HotpotQA / 2Wiki, 20 for
MuSiQue) and answers in three sections: ``<relevance>`` (the reference numbers it relies on),
``<analysis>`` and ``<answer>``. The reward is format + exact match + relevance (1 / 0.5 / 0 against
the gold supporting paragraphs) + a bonus of 10 when all three are perfect (paper §3.3); GRPO with the
k2 KL estimator ("KL stabilisation", paper §3.2). No retrieval call, one turn, no observation masking.

Evaluation is a **gold-context** setting: the gold paragraphs are always among the references, so
its scores are not comparable with open-retrieval rows. It has its own protocol,
``arena-gold-context`` (:func:`eval_protocol`; ``Arena.own_protocols``): :meth:`Arena.spec` and
:meth:`Arena.solve` refuse any other protocol outside training, the runner refuses other methods
under it, and ``harness run --method all`` runs ARENA under it as a separate run with its own
summary table. The agent never calls the retriever (``uses_retrieval = False``).

The references (paper §4.4) are the question's **own paragraphs in the dataset's order**
(``example.meta["context"]``, read with :func:`harness.data.example_context`): the packaged
data keeps them for every HotpotQA (1,405), 2Wiki (166) and MuSiQue (292) question whose
source ships its context (``corpus/contexts.jsonl.gz``, DATA.md), which is every question of
``mini-multihop``; a user's full files keep theirs (``load_file``). Gold reference numbers follow
the code's rule (data_generator.py): the first reference that is each gold paragraph (same closed-corpus
passage, or same title and text), -1 when none is.

A question without its own context but with gold paragraphs (PopQA's closed subset, files
without ``context``) gets a documented **substitute** (:class:`ClosedCorpusContexts`): its gold
paragraphs plus the top BM25 paragraphs of the closed corpus for the question (gold excluded) up
to the paper's count, in a fixed pseudo-random order keyed by the question id. Every trajectory
records which (``meta["arena_context"]``: ``"dataset"`` or ``"gold+bm25"``) and the run summary
counts the substitutes. A question with neither cannot be answered (:meth:`Arena.cannot_answer`):
an explicit run refuses it before starting, ``--method all`` leaves it out of ARENA's run and
says how many. The training export (:meth:`Arena.prompt_messages`) never substitutes: a
question without its own context is refused there.
"""

from __future__ import annotations

import hashlib
import json
import random
import re
from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any, ClassVar, Literal
from typing import Protocol as TypingProtocol

from harness.api import (
    ConfigError,
    ContextParagraph,
    Extraction,
    MethodSpec,
    Protocol,
    QAExample,
    RewardBreakdown,
    RewardContext,
    RunContext,
    SamplingParams,
    TrainableMethod,
    Trajectory,
    answer_once,
    example_context,
    has_context,
    normalize_answer_r1searcher,
    reward_fn,
)
from methods.arena.protocol import DEFAULT_N_REFERENCES, PROTOCOL_NAME
from methods.arena.protocol import eval_protocol as eval_protocol  # re-exported

# -- prompts (verbatim) ---------------------------------------------------------------------------

# Code (src/data_generator.py): the template of the released code, used to reproduce the released models.
# The first line ends with "references. " (one trailing space); the string ends with a newline.
PROMPT_CODE = (
    "A conversation between User and Assistant. The user asks a question and give some references. "
    "The assistant should answer the question based on the references. \n"
    "User's input will always contain:\n"
    "\n"
    "<question>\n"
    "[The question to answer]\n"
    "</question>\n"
    "\n"
    "<references>\n"
    "[References starting with numbers]\n"
    "</references>\n"
    "\n"
    "Assistant's response must contain EXACTLY three sections:\n"
    "\n"
    "<relevance>\n"
    "[List ONLY reference numbers that provide useful information in square brackets, e.g. [1,5]]\n"
    "</relevance>\n"
    "\n"
    "<analysis>\n"
    "[Combine information from relevant references to build the answer. Explicitly mention which "
    "references support each claim]\n"
    "</analysis>\n"
    "\n"
    "<answer>\n"
    "[Answer with ONLY a short phrase or single word. No explanations]\n"
    "</answer>\n"
    "\n"
    "**User**:\n"
    "\n"
    "<question>\n"
    "{question}\n"
    "</question>\n"
    "\n"
    "<references>\n"
    "{references}\n"
    "</references>\n"
)
# Paper Table 1, kept as an alternative template id (``template="paper"``).
PROMPT_PAPER = (
    "A conversation between User and Assistant. The user asks a question and gives some references. The "
    "assistant should answer the question based on the references.\n"
    "User's input will always contain:\n"
    "<question>[ the question to answer ]</question>\n"
    "<references>[ references starting with numbers ]</references>\n"
    "Assistant's response must contain EXACTLY three sections:\n"
    "<relevance> [list ONLY reference numbers that provide useful information in square brackets, e.g. "
    "[1,5]]</relevance>\n"
    "<analysis>[ combine information from relevant references to build the answer. Explicitly mention which "
    "references support each claim ]</analysis>\n"
    "<answer>[ answer with ONLY a short phrase or single word. no explanations ]</answer>\n"
    "User:\n"
    "<question>{question}</question>\n"
    "<references>{references}</references>"
)
PROMPTS = {"code": PROMPT_CODE, "paper": PROMPT_PAPER}

# -- constants --------------------------------------------------------------------------------------

# Paper §4.1 / §5.1: the dataset-provided paragraphs, 10 for HotpotQA and 2Wiki, 20 for MuSiQue.
N_REFERENCES = {"hotpotqa": 10, "2wikimultihopqa": 10, "musique": 20}
BONUS = 10.0  # Paper §3.3: bonus when format, accuracy and relevance are all perfect
WEIGHTS = (1.0, 1.0, 1.0, 1.0)  # Paper §3.3: format, accuracy, relevance, bonus, all weight 1
SUBSTITUTE_SEED = "arena-substitute-order-v1"  # ours: salt of the reference order of the substitute

# The judge of the Table 6 "GPT-4o judge" accuracy-reward variant (App. G), and of evaluation (App. C.3):
# GPT-4o 2024-11-20, named in recipes.yaml (paper-judge-reward).
JUDGE_SAMPLING = SamplingParams(temperature=0.0)  # Paper App. C: temperature 0.0
JUDGE_MAX_TOKENS = 16  # ours: a yes/no reply

# -- normalisation, extraction, reward parts (Code: src/rewards.py) --------------------------------


def arena_norm(s: str) -> str:
    """ARENA's normaliser (App. C.1; evaluate.py): ``_`` -> space, lower-case, every punctuation character
    (ASCII plus ‘ ’ ´ `) -> space, articles -> space, whitespace collapsed. This is R1-Searcher's
    normaliser without its True/False -> yes/no mapping, which ARENA does not have."""
    if s in ("True", "False"):  # the one input where R1-Searcher's mapping would differ
        return s.lower()
    return normalize_answer_r1searcher(s)


# Code (src/evaluate.py): anchored at the first character; no "<" inside the sections; MULTILINE, so "$" also
# matches before a newline (text after a newline following </answer> is accepted).
FORMAT_RE = re.compile(
    r"^<relevance>[^<]*</relevance>\s*<analysis>[^<]*</analysis>\s*<answer>[^<]*</answer>$",
    re.DOTALL | re.MULTILINE,
)


def r_format(completion: str) -> float:
    """R_format ∈ {0, 1} (paper §3.3): the code's regex, with its quirks."""
    return 1.0 if FORMAT_RE.match(completion) else 0.0


def extract_section(tag: str, completion: str) -> str | None:
    """Code: the first ``<tag>\\s*(.*?)\\s*</tag>`` (DOTALL); None when there is none."""
    m = re.search(rf"<{tag}>\s*(.*?)\s*</{tag}>", completion, re.DOTALL)
    return m.group(1) if m else None


def extract_answer(completion: str) -> Extraction:
    """The prediction (evaluate.py): the content of the **first** ``<answer>…</answer>``, else ""."""
    spans = re.findall(r"<answer>\s*(.*?)\s*</answer>", completion, re.DOTALL)
    if not spans:
        return Extraction("", "unclosed_tag" if "<answer>" in completion else "no_answer")
    if not spans[0]:
        return Extraction("", "empty_answer")
    return Extraction(spans[0], "ok" if len(spans) == 1 else "multiple_answers")


def r_acc(answer: str, golds: Sequence[str]) -> float:
    """R_acc ∈ {0, 1} (paper §3.3): ARENA-normalised exact match against any gold."""
    a = arena_norm(answer)
    return 1.0 if any(a == arena_norm(g) for g in golds) else 0.0


def arena_f1(answer: str, golds: Sequence[str]) -> float:
    """Token F1 under :func:`arena_norm`, max over golds, no yes/no special case (paper App. C.2); the
    accuracy reward of the Table 6 "F1" variant."""
    pred = arena_norm(answer).split()
    best = 0.0
    for g in golds:
        gold = arena_norm(g).split()
        same = sum((Counter(pred) & Counter(gold)).values())
        if same == 0:
            continue
        p, r = same / len(pred), same / len(gold)
        best = max(best, 2 * p * r / (p + r))
    return best


def parse_relevance(text: str | None) -> list | None:
    """The ``<relevance>`` content as upstream reads it (src/evaluate.py:82-94, ``relevance_score``,
    which src/rewards.py imports): ``sorted(set(json.loads(text)))``; None where that raises
    (missing, not JSON, not iterable, unhashable or unorderable items: upstream's bare ``except``
    scores 0). Numbers compare by value, as in Python: ``[1.0, 3.0]`` and ``[true, 3]`` equal
    ``[1, 3]`` (upstream gives them 1); ``["1", "3"]`` matches no integer id."""
    if text is None:
        return None
    try:
        return sorted(set(json.loads(text)))
    except (ValueError, TypeError, RecursionError):
        return None


def r_rel(completion: str, gold_ids: Sequence[int]) -> float:
    """R_rel ∈ {1, 0.5, 0} (paper §3.3; upstream src/evaluate.py:82-94): the predicted set equals
    the gold set -> 1; overlaps it -> 0.5 (subsets, supersets, partial overlaps); else, or
    unparseable -> 0."""
    pred = parse_relevance(extract_section("relevance", completion))
    if pred is None:
        return 0.0
    gold = sorted(set(gold_ids))
    if pred == gold:
        return 1.0
    return 0.5 if set(pred) & set(gold) else 0.0


def combine(
    f: float, a: float, r: float, weights: tuple[float, float, float, float] = WEIGHTS
) -> RewardBreakdown:
    """R = w_f·R_format + w_a·R_acc + w_r·R_rel + w_b·R_bonus (Paper §3.3), R_bonus = 10 iff
    R_format = R_acc = R_rel = 1. Reachable with unit weights: {0, .5, 1, 1.5, 2, 2.5, 13}."""
    bonus = BONUS if (f == 1.0 and a == 1.0 and r == 1.0) else 0.0
    total = weights[0] * f + weights[1] * a + weights[2] * r + weights[3] * bonus
    return RewardBreakdown(
        total=total,
        components={"format": f, "accuracy": a, "relevance": r, "bonus": bonus, "outcome": a},
    )


def judge_reply_score(reply: str) -> float:
    """The training-time GPT-4o judge parse of the code's commented-out path (rewards.py): starts with
    "yes" -> 1, starts with "no" -> 0, else contains "yes" -> 1, contains "no" -> 0, else 0.5."""
    low = reply.strip().lower()
    if low.startswith("yes"):
        return 1.0
    if low.startswith("no"):
        return 0.0
    if "yes" in low:
        return 1.0
    if "no" in low:
        return 0.0
    return 0.5


# -- the references ---------------------------------------------------------------------------------


@dataclass(frozen=True)
class Reference:
    passage_id: str | None
    title: str
    text: str


@dataclass(frozen=True)
class ArenaContext:
    """One question's numbered references and the 1-based numbers of its gold paragraphs."""

    references: tuple[Reference, ...]
    gold_ids: tuple[int, ...]
    source: Literal["dataset", "gold+bm25"]


class ContextProvider(TypingProtocol):
    def contexts(self, examples: Sequence[QAExample], protocol: Protocol) -> list[ArenaContext]: ...


def format_references(refs: Sequence[Reference], *, include_titles: bool = False) -> str:
    """Code (data_generator.py): ``"\\n".join(f"{i}. {text}")`` numbered from 1; a single reference is shown
    without a number; titles are not shown (as the code; ``include_titles`` flag, default off)."""
    texts = [f"{r.title}: {r.text}" if include_titles else r.text for r in refs]
    if len(texts) == 1:
        return texts[0]
    return "\n".join(f"{i}. {t}" for i, t in enumerate(texts, 1))


def _norm_ws(s: str) -> str:
    return " ".join(s.split())


def _require_gold(e: QAExample) -> tuple[Reference, ...]:
    if not e.supporting or any(s.text is None for s in e.supporting):
        raise ConfigError(
            f"ARENA needs each question's gold supporting paragraphs (with text); {e.dataset} question "
            f"{e.id!r} has none. Run it on a bench whose questions carry them (mini-multihop)."
        )
    return tuple(Reference(s.passage_id, s.title, s.text or "") for s in e.supporting)


def _same_paragraph(ref: ContextParagraph, gold: Reference) -> bool:
    if ref.passage_id is not None and gold.passage_id is not None:
        return ref.passage_id == gold.passage_id
    return ref.title == gold.title and _norm_ws(ref.text) == _norm_ws(gold.text)


def dataset_context(e: QAExample) -> ArenaContext:
    """The paper's setting (§4.4): the example's own paragraphs in the dataset's order
    (``meta["context"]``, repeats kept); gold ids = the first reference that is each gold
    paragraph (data_generator.py; -1 when one is not found, which makes a full match impossible, as in the
    code). ConfigError when the example has no own context or no gold paragraphs."""
    paragraphs = example_context(e)
    if paragraphs is None:
        raise ConfigError(
            f"ARENA: {e.dataset} question {e.id!r} has no paragraphs of its own (meta['context']); the "
            f"packaged HotpotQA, 2Wiki and MuSiQue questions of the mini-multihop bench have them"
        )
    gold = _require_gold(e)
    ids = [next((i for i, p in enumerate(paragraphs, 1) if _same_paragraph(p, g)), -1) for g in gold]
    refs = tuple(Reference(p.passage_id, p.title, p.text) for p in paragraphs)
    return ArenaContext(refs, tuple(sorted(set(ids))), "dataset")


def substitute_order(example_id: str, n: int) -> list[int]:
    """A fixed permutation of ``range(n)`` keyed by the question id (sha256-seeded; no Python
    hash randomisation), so gold paragraphs are not always first."""
    seed = int.from_bytes(hashlib.sha256(f"{SUBSTITUTE_SEED}:{example_id}".encode()).digest()[:8], "big")
    order = list(range(n))
    random.Random(seed).shuffle(order)
    return order


class ClosedCorpusContexts:
    """The references of each question (see the module docstring): its own paragraphs
    (``meta["context"]``) when it has them, else the substitute, gold + BM25 distractors from the
    protocol's closed corpus.

    ``retriever``: what ranks distractors (default: the protocol's retriever over the packaged
    closed corpus, with the persistent result cache). It is the *harness's* context provider, not
    an agent action: trajectories record no retrieval turn."""

    def __init__(self, retriever: Any = None):
        self._retriever = retriever

    def _distractor_retriever(self, protocol: Protocol) -> Any:
        if self._retriever is None:
            if protocol.corpus.id != "closed":
                raise ConfigError(
                    f"ARENA's reference substitute draws distractors from the packaged closed corpus, but protocol "
                    f"{protocol.name!r} uses corpus {protocol.corpus.id!r}; use --protocol {PROTOCOL_NAME}"
                )
            from harness.api import CachedRetriever, ResultCache, make_protocol_retriever

            self._retriever = CachedRetriever(make_protocol_retriever(protocol, None), ResultCache.default())
        return self._retriever

    def contexts(self, examples: Sequence[QAExample], protocol: Protocol) -> list[ArenaContext]:
        out: list[ArenaContext | None] = [None] * len(examples)
        todo: list[int] = []
        for i, e in enumerate(examples):
            if has_context(e):
                out[i] = dataset_context(e)
            else:
                _require_gold(e)
                todo.append(i)
        if todo:
            retriever = self._distractor_retriever(protocol)
            need = {i: N_REFERENCES.get(examples[i].dataset, DEFAULT_N_REFERENCES) for i in todo}
            # ask for enough hits that the gold paragraphs can be skipped
            k = max(need[i] + len(examples[i].supporting or ()) for i in todo)
            hits = retriever.search([examples[i].question for i in todo], k)
            for i, h in zip(todo, hits, strict=True):
                out[i] = substitute_context(examples[i], h, need[i])
        return [c for c in out if c is not None]


def substitute_context(e: QAExample, hits: Sequence[Any], n: int) -> ArenaContext:
    """Gold paragraphs + the best-ranked non-gold hits up to ``n`` references, ordered by
    :func:`substitute_order`; gold ids are the gold paragraphs' positions."""
    gold = _require_gold(e)
    gold_pids = {g.passage_id for g in gold}
    distract = [Reference(h.doc_id, h.title, h.text) for h in hits if h.doc_id not in gold_pids]
    pool = list(gold) + distract[: max(0, n - len(gold))]
    order = substitute_order(e.id, len(pool))
    refs = tuple(pool[j] for j in order)
    gold_ids = tuple(sorted(pos for pos, j in enumerate(order, 1) if j < len(gold)))
    return ArenaContext(refs, gold_ids, "gold+bm25")


def make_prompt(question: str, refs: Sequence[Reference], *, template: str = "code") -> list[dict[str, str]]:
    """One user message, no system message (data_generator.py: the model's default chat template adds its
    own system line)."""
    text = PROMPTS[template].format(question=question, references=format_references(refs))
    return [{"role": "user", "content": text}]


# -- the method ---------------------------------------------------------------------------------------


def _wrong_protocol(protocol: Protocol) -> ConfigError:
    return ConfigError(
        f"method 'arena' answers from each question's own paragraphs (a gold-context setting) and is "
        f"scored only under --protocol {PROTOCOL_NAME}, never mixed with open-retrieval rows "
        f"(got protocol {protocol.name!r})"
    )


REWARDS = ("arena", "arena_f1", "arena_judge")


class Arena(TrainableMethod):
    name = "arena"
    description = (
        "generator-only RAG on the gold-context setting: <relevance>/<analysis>/<answer>; "
        "format + EM + relevance + bonus, GRPO with k2 KL"
    )
    source = "Ren et al. 2025, ARENA, arXiv 2505.13258 (ren258/ARENA)"
    uses_retrieval: ClassVar[bool] = False
    own_protocols: ClassVar[tuple[str, ...]] = (PROTOCOL_NAME,)
    reference_source_key: ClassVar[str] = "arena_context"  # the meta key solve() records

    def __init__(self, contexts: ContextProvider | None = None, *, template: str = "code"):
        if template not in PROMPTS:
            raise ConfigError(f"ARENA template {template!r}; known: {', '.join(PROMPTS)}")
        self._contexts = contexts
        self.template = template

    @property
    def context_provider(self) -> ContextProvider:
        if self._contexts is None:
            self._contexts = ClosedCorpusContexts()
        return self._contexts

    def spec(self, protocol: Protocol) -> MethodSpec:
        # refuse an open-retrieval protocol before a run is recorded (training rollouts have no
        # search turns: max_turns 0, the recipe's)
        if protocol.name != PROTOCOL_NAME and protocol.max_turns != 0:
            raise _wrong_protocol(protocol)
        return MethodSpec(
            name=self.name,
            prompts={"user": PROMPTS[self.template]},
            renderer="arena: '{i}. {text}' per reference, no titles",
            extractor="first <answer> of the completion",
            params={
                "template": self.template,
                "references": dict(N_REFERENCES),
                "references_default": DEFAULT_N_REFERENCES,
                "references_source": "the example's own paragraphs in the dataset's order "
                "(meta['context']); without them, gold + BM25 distractors of the closed corpus in a "
                "fixed order keyed by the question id (labelled per trajectory)",
                "substitute_order_salt": SUBSTITUTE_SEED,
                "max_new_tokens": protocol.decoding.max_new_tokens,
                "stop": [],
                "bonus": BONUS,
                "weights": list(WEIGHTS),
            },
        )

    def cannot_answer(self, example: QAExample) -> str | None:
        """ARENA reads paragraphs: a question needs its own context, or gold paragraphs with text
        for the substitute (and gold paragraphs for the reference numbers in either case)."""
        if not example.supporting or any(s.text is None for s in example.supporting):
            return (
                "no gold supporting paragraphs (ARENA reads each question's own paragraphs, gold among them)"
            )
        return None

    def prompt_messages(self, example: QAExample, *, training: bool) -> list[dict[str, str]]:
        """ARENA's prompt (data_generator.py; one user message) with the example's own numbered
        paragraphs; the
        same for training and evaluation. An export never uses the BM25 substitute: a question
        without its own context (``meta["context"]``) is a ConfigError naming it."""
        if not has_context(example):
            raise ConfigError(
                f"ARENA's prompt needs the question's own paragraphs; {example.dataset} question "
                f"{example.id!r} has none (meta['context']). Export questions loaded with their context: "
                f"the packaged HotpotQA / 2Wiki / MuSiQue questions of mini-multihop, or your own files "
                f"with 'context' / 'paragraphs' (--data-dir)"
            )
        return make_prompt(example.question, dataset_context(example).references, template=self.template)

    def demonstration_fields(self, example: QAExample, protocol: Protocol) -> dict[str, str]:
        """``{relevance}``: the gold reference numbers as ARENA writes them (``[1, 3]``, what R_rel
        scores 1), for a warm-up demonstration in ARENA's own format (``recipe.sft.turns``)."""
        (context,) = self.context_provider.contexts([example], protocol)
        return {"relevance": json.dumps(list(context.gold_ids))}

    def rollout_config(self, protocol: Protocol) -> None:
        """None: the agent answers in one completion, without search turns."""
        return None

    def solve(self, examples: list[QAExample], ctx: RunContext) -> list[Trajectory]:
        if not ctx.training and ctx.protocol.name != PROTOCOL_NAME:
            raise _wrong_protocol(ctx.protocol)
        contexts = self.context_provider.contexts(examples, ctx.protocol)
        prompts = [
            ctx.backend.chat_prompt(make_prompt(e.question, c.references, template=self.template))
            for e, c in zip(examples, contexts, strict=True)
        ]
        out = answer_once(prompts, examples, ctx, max_new_tokens=ctx.max_new_tokens, extractor=extract_answer)
        for t, c in zip(out, contexts, strict=True):
            t.meta.update(
                {
                    "arena_gold_ids": list(c.gold_ids),
                    "arena_reference_ids": [r.passage_id for r in c.references],
                    self.reference_source_key: c.source,
                }
            )
        return out

    # -- training ---------------------------------------------------------------------------------

    # arena: paper §3.3 (EM accuracy); arena_f1 / arena_judge: the Table 6 accuracy-reward variants (App. G)
    @reward_fn(*REWARDS, default=True, batched=True)
    def reward_variant(
        self, trajectories: list[Trajectory], *, name: str, ctx: RewardContext
    ) -> list[RewardBreakdown]:
        answers = [extract_section("answer", t.response) or "" for t in trajectories]
        acc: list[float] = []
        extra: list[dict[str, float]] = [{} for _ in trajectories]
        if name == "arena":
            acc = [r_acc(a, t.answers) for a, t in zip(answers, trajectories, strict=True)]
        elif name == "arena_f1":
            acc = [arena_f1(a, t.answers) if a else 0.0 for a, t in zip(answers, trajectories, strict=True)]
        else:
            acc = self._judge_accuracy(trajectories, answers, ctx, extra)
        out = []
        for t, a, x in zip(trajectories, acc, extra, strict=True):
            gold = t.meta.get("arena_gold_ids")
            if gold is None:
                raise ConfigError(
                    "ARENA's relevance reward needs the gold reference numbers its rollout recorded "
                    f"(trajectory.meta['arena_gold_ids']); trajectory {t.example_id!r} has none"
                )
            r = combine(r_format(t.response), a, r_rel(t.response, gold))
            out.append(RewardBreakdown(total=r.total, components={**r.components, **x}))
        return out

    def _judge_accuracy(
        self,
        trajectories: list[Trajectory],
        answers: list[str],
        ctx: RewardContext,
        extra: list[dict[str, float]],
    ) -> list[float]:
        """GPT-4o-judge accuracy (Table 6 variant): the Table 8 prompt on the extracted answer; an
        empty answer scores 0 without a call (gpt_eval.py); a failed request scores 0 and is counted."""
        from harness.api import RewardJudge
        from methods.arena.judge import ARENA as ARENA_JUDGE

        judge = RewardJudge(ARENA_JUDGE, judge_reply_score, JUDGE_MAX_TOKENS, JUDGE_SAMPLING)
        replies = judge.ask(ctx, self.name, trajectories, [a or None for a in answers])
        for x, r in zip(extra, replies, strict=True):
            x["judge_error"] = float(r.status == "error")
        return [r.value if r.value is not None else 0.0 for r in replies]
