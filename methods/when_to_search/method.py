"""Learning When to Search ("Learning When to Search: Multi-Stage Reward Design for Efficient Agentic
RAG with Reasoning Language Models", anonymous ACL review submission; no code release). "paper §n",
"Eq. n", "Table n", "App. X" point into it; "[inferred]" = our reading of it; "[recommended]" = our choice
where it is silent.

An agent with ``<think>``, ``<search>``, ``<information>``, ``<reflect>`` and ``<answer>`` tags,
trained with DAPO on r_sum = r_a + r_s + r_f (Eq. 12):

- r_a, the answer reward coupled to the retrieval count RC (β = 0.3): stage 1 gives a wrong answer
  -1 + β·RC (learn to search), stage 2 gives a correct answer 1 - β·RC (search only when needed);
  "correct" is an LLM judge's YES (``ctx.model("judge", ...)``; the paper's Qwen3-235B-A22B, the
  prompt verbatim in ``methods/when_to_search/judge.py``);
- r_s, the search reward: with RC ≤ 1, 0 if the query is concise by keyword rules, else -1; with
  RC > 1, minus the mean pairwise cosine similarity of the queries (an embedding model);
- r_f, ±1 for the tag grammar.

The stage schedule is a multi-stage recipe (``reward_stages``: ``stage1`` from step 0, ``stage2``
from step 180 [recommended]; the paper gives no switch step, Tables 1-2 suggest 180). The retrieval
count is the trajectory's ``n_retrievals``.

Embedder. The recipes' ``aux_models`` are generation backends (``BackendSpec``), which cannot
describe a sentence encoder, so the reward reads an ``"embedder"`` from the reward context when
one is given (anything with ``encode(list[str]) -> (n, d) array``) and otherwise uses
:class:`MiniLMEmbedder`, the packaged all-MiniLM-L6-v2 loaded through
``harness.retrieval.encoder`` (the paper's Qwen3-Embedding, App. B.2, is not packaged).

The rollout uses :func:`harness.rollout.segments.run_segment_rollouts` (the shared engine cannot end a
trajectory on EOS without an answer, nor count an empty query as a retrieval; paper §3.2).
"""

from __future__ import annotations

import re
import string
from collections.abc import Sequence
from dataclasses import asdict, dataclass
from typing import Literal
from typing import Protocol as TypingProtocol

import numpy as np

from harness.api import (
    Completion,
    ConfigError,
    Hit,
    MethodSpec,
    Protocol,
    QAExample,
    RewardBreakdown,
    RewardContext,
    RunContext,
    SamplingParams,
    SegmentLoopConfig,
    TagDialect,
    TrainableMethod,
    Trajectory,
    extract_tagged,
    reward_fn,
    run_segment_rollouts,
    stopped_at,
)
from methods.when_to_search.protocol import eval_protocol as eval_protocol  # re-exported

# -- protocol (paper §3.2) ------------------------------------------------------------------------------

# [recommended] canonical rendering PROMPT_V1 of the paper's "Instruction for Trained RLM"
# (App. B.4): backticks removed, one sub-bullet per line; the words unchanged.
PROMPT_V1 = """\
Please answer the given question by following the structured reasoning protocol below:

1. Always begin with <think>...</think> to provide a brief internal reasoning sketch.
   - This reasoning must primarily rely on your internal knowledge and reasoning abilities.
   - If your internal knowledge is sufficient to answer the question, do not assume the need for external tools.
2. If your internal knowledge is sufficient to answer the question:
   - Provide a concise summary of your reasoning inside <reflect>...</reflect>.
   - Then give the final answer inside <answer>...</answer>.
   - Under no circumstances should you generate a <search> block if your internal knowledge is adequate.
3. Only if your internal knowledge is genuinely insufficient to answer the question:
   - Generate a brief keyword-based search query inside <search>...</search>. The query should be as concise as possible but must include sufficient factual clues, such as names, dates, locations, key concepts, etc.
   - The query should be a brief description with multiple keywords instead of a natural language question.
4. When the system returns information inside <information>...</information>:
   - If the information is reliable and sufficient, integrate it with your reasoning inside <reflect>...</reflect>.
   - Then provide the final concise answer inside <answer>...</answer>.
5. If the retrieved information is insufficient or contradicts your internal knowledge:
   - Explain the issue within <reflect>...</reflect>.
   - If necessary, generate a revised <search> query.
6. Final rule:
   - The final answer must be concise and clear, placed inside <answer></answer>.
   - Internal reasoning (in <think>) must always be the primary method; tool usage should be a last resort, not the default."""

# [recommended]: verl-tool's wrapper "\n\n<information>" + docs.strip() + "</information>\n\n".
W2S_DIALECT = TagDialect(
    name="when_to_search", obs_prefix="\n\n<information>", obs_suffix="</information>\n\n", invalid_message=""
)
STOPS = ("</search>", "</answer>")  # paper §3.2: action stop strings, kept in the output
MAX_RESPONSE_TOKENS = 16384  # paper Table 5: max_response_length (generated + observation tokens)
NO_RESULTS = "No results."  # [recommended]: an empty query is answered and counted

_SEARCH = re.compile(r"<search>(.*?)</search>", re.DOTALL)


def render_docs(hits: Sequence[Hit]) -> str:
    """[recommended] the paper's format (Table 7 example) ``Doc {i} (Title: {title}) {text}\\n``, the
    title being the
    first line of the wiki-18 contents as is (quotes kept, as in the paper's example)."""
    out = []
    for i, h in enumerate(hits, 1):
        title, _, text = h.contents.partition("\n")
        out.append(f"Doc {i} (Title: {title}) {text}\n")
    return "".join(out).strip()


def search_query(c: Completion) -> str | None:
    """Paper §3.2: a segment stopped at ``</search>`` is a search; the query is the last
    ``<search>…</search>`` stripped ("" when empty or without an opening tag). Anything else
    (``</answer>``, EOS, length) ends the trajectory."""
    if not stopped_at(c, "</search>"):
        return None
    found = _SEARCH.findall(c.text)
    return found[-1].strip() if found else ""


def make_prompt(question: str) -> list[dict[str, str]]:
    """[recommended]: one user message, no system message."""
    return [{"role": "user", "content": f"{PROMPT_V1}\n\nQuestion: {question}\n"}]


# -- rewards (paper §3.3) ----------------------------------------------------------------------------

BETA = 0.3  # paper Eqs. 10-11
JUDGE_SAMPLING = SamplingParams(temperature=0.0)  # [recommended]

Stage = Literal["stage1", "stage2", "unified", "none"]


def answer_reward(correct: bool, rc: int, stage: Stage, beta: float = BETA) -> float:
    """r_a (paper §3.3): stage 1 (Eq. 10) correct 1, wrong -1 + β·RC; stage 2 (Eq. 11) correct 1 - β·RC,
    wrong -1; ``unified`` (Table 2 [inferred]) correct 1 - β·RC, wrong -1 + β·RC; ``none`` 0
    ("w/o r_a"). No cap or clip."""
    if stage == "stage1":
        return 1.0 if correct else -1.0 + beta * rc
    if stage == "stage2":
        return 1.0 - beta * rc if correct else -1.0
    if stage == "unified":
        return 1.0 - beta * rc if correct else -1.0 + beta * rc
    if stage == "none":
        return 0.0
    raise ConfigError(f"unknown When-to-Search stage {stage!r}")


# [recommended] conciseness rule (paper §3.3 gives only its intent)
WH_AUX = frozenset(
    [
        "what",
        "who",
        "whom",
        "whose",
        "which",
        "when",
        "where",
        "why",
        "how",
        "is",
        "are",
        "was",
        "were",
        "do",
        "does",
        "did",
        "can",
        "could",
        "would",
        "should",
        "will",
        "has",
        "have",
        "had",
    ]
)
PREPS = frozenset(
    [
        "about",
        "above",
        "across",
        "after",
        "against",
        "along",
        "among",
        "around",
        "at",
        "before",
        "behind",
        "below",
        "beneath",
        "beside",
        "between",
        "beyond",
        "by",
        "during",
        "for",
        "from",
        "in",
        "inside",
        "into",
        "near",
        "of",
        "off",
        "on",
        "onto",
        "out",
        "over",
        "through",
        "to",
        "toward",
        "towards",
        "under",
        "until",
        "upon",
        "with",
        "within",
        "without",
    ]
)
FILLER = frozenset(
    [
        "a",
        "an",
        "the",
        "please",
        "tell",
        "me",
        "find",
        "search",
        "information",
        "know",
        "want",
        "give",
        "some",
        "any",
        "very",
        "really",
        "exactly",
        "actually",
        "also",
        "just",
    ]
)
MAX_QUERY_TOKENS = 12
MAX_PREPOSITIONS = 2
MAX_FUNCTION_WORD_SHARE = 0.4
_KEEP_INNER = "'-"
_DROP_INNER = str.maketrans("", "", "".join(c for c in string.punctuation if c not in _KEEP_INNER))


def query_tokens(q: str) -> list[str]:
    """Lower-cased whitespace tokens with punctuation removed, except apostrophes and hyphens
    inside a word [recommended]."""
    out = []
    for raw in q.lower().split():
        tok = raw.translate(_DROP_INNER).strip(_KEEP_INNER)
        if tok:
            out.append(tok)
    return out


def is_concise(q: str) -> bool:
    """[recommended] ``is_concise``: not empty, no "?", does not start with a question word or
    auxiliary, at most 12 tokens, at most 2 prepositions, prepositions + fillers ≤ 40 % of tokens."""
    toks = query_tokens(q)
    if not toks or "?" in q or toks[0] in WH_AUX or len(toks) > MAX_QUERY_TOKENS:
        return False
    n_prep = sum(t in PREPS for t in toks)
    n_fill = sum(t in FILLER for t in toks)
    if n_prep > MAX_PREPOSITIONS:
        return False
    return (n_prep + n_fill) / len(toks) <= MAX_FUNCTION_WORD_SHARE


class QueryEmbedder(TypingProtocol):
    """A sentence encoder for the search reward: one row per text."""

    def encode(self, texts: list[str]) -> np.ndarray: ...


class MiniLMEmbedder:
    """The packaged all-MiniLM-L6-v2 (mean pooling, L2-normalised), loaded once per process by
    ``harness.retrieval.encoder.load_encoder`` (offline, never a download)."""

    def encode(self, texts: list[str]) -> np.ndarray:
        from harness.api import MINILM, load_encoder

        return load_encoder(MINILM).encode_queries(texts)


def mean_pairwise_similarity(vectors: np.ndarray, mode: Literal["mean", "paper_literal"] = "mean") -> float:
    """avg_sim (Eqs. 7-8): cosine similarity averaged over the N(N-1)/2 unordered pairs
    [recommended]; ``paper_literal`` divides the i<j sum by N(N-1) as Eq. 8 prints (half)."""
    n = vectors.shape[0]
    if n < 2:
        raise ValueError("avg_sim needs at least two queries")
    e = vectors.astype(np.float64)
    e = e / np.linalg.norm(e, axis=1, keepdims=True)
    s = e @ e.T
    off = float(s.sum() - np.trace(s))  # ordered pairs i != j
    avg = off / (n * (n - 1))
    return avg / 2.0 if mode == "paper_literal" else avg


def search_reward(
    queries: Sequence[str], embedder: QueryEmbedder | None, mode: Literal["mean", "paper_literal"] = "mean"
) -> float:
    """r_s (Eq. 9): RC ≤ 1 -> 0 if every query is concise (RC = 0: vacuously) else -1; RC > 1 ->
    -avg_sim of the query embeddings."""
    if len(queries) <= 1:
        return 0.0 if all(is_concise(q) for q in queries) else -1.0
    if embedder is None:
        raise ConfigError("the When-to-Search search reward needs an embedder for RC > 1")
    return -mean_pairwise_similarity(np.asarray(embedder.encode(list(queries))), mode)


_BLOCK = re.compile(r"<(think|search|information|reflect|answer)>(.*?)</\1>", re.DOTALL)
_OPEN = re.compile(r"<(think|search|information|reflect|answer)>")
TAG_STRINGS = tuple(f"<{t}>" for t in ("think", "search", "information", "reflect", "answer")) + tuple(
    f"</{t}>" for t in ("think", "search", "information", "reflect", "answer")
)
_LETTER = {"think": "T", "search": "S", "information": "I", "reflect": "R", "answer": "A"}
# Eq. 6: T R A | T S I R (T? S I R)* A, the repeats ours
STRICT_GRAMMAR = re.compile(r"^(?:TRA|TSIR(?:T?SIR)*A)$")
LENIENT_GRAMMAR = re.compile(r"^T?(?:SIR?(?:T?SIR?)*)?R?A$")  # Eq. 6 lenient: T and the R before A optional


def block_sequence(response: str, *, strict: bool = True) -> str | None:
    """The response as a string of block letters (T S I R A), or None when it breaks the rules:
    text outside blocks (strict only; lenient skips it), an unclosed block, or a tag string inside
    a model-written block (``<information>`` blocks are the environment's and exempt)."""
    pos, seq = 0, []
    while True:
        while pos < len(response) and response[pos].isspace():
            pos += 1
        if pos >= len(response):
            return "".join(seq)
        m = _BLOCK.match(response, pos)
        if m is None:
            if strict:
                return None
            nxt = _OPEN.search(response, pos + 1)
            if nxt is None:
                return "".join(seq)
            pos = nxt.start()
            continue
        tag, content = m.group(1), m.group(2)
        if tag != "information" and any(s in content for s in TAG_STRINGS):
            return None
        seq.append(_LETTER[tag])
        pos = m.end()


def format_reward(response: str, *, strict: bool = True) -> float:
    """r_f (Eq. 6): 1 if the response (model text and observations) follows the grammar, else -1."""
    seq = block_sequence(response, strict=strict)
    grammar = STRICT_GRAMMAR if strict else LENIENT_GRAMMAR
    return 1.0 if seq is not None and grammar.match(seq) else -1.0


@dataclass(frozen=True)
class RewardVariant:
    stage: Stage
    search_reward: bool = True


REWARDS: dict[str, RewardVariant] = {
    "stage1": RewardVariant("stage1"),  # Eq. 10
    "stage2": RewardVariant("stage2"),  # Eq. 11
    "unified": RewardVariant("unified"),  # Table 2 "no stage" [inferred form]
    "stage1_no_search_reward": RewardVariant("stage1", search_reward=False),  # Table 4 "w/o r_s"
    "stage2_no_search_reward": RewardVariant("stage2", search_reward=False),  # Table 4 "w/o r_s"
    "no_answer_reward": RewardVariant("none"),  # Table 4 "w/o r_a"
}


def executed_queries(t: Trajectory) -> list[str]:
    """The queries of the executed retrievals, in order (a retrieval turn records its query; an
    exported trajectory rebuilt from text has none, and its first RC ``<search>`` blocks are used)."""
    turns = [x for x in t.turns if x.kind == "retrieve"]
    if all(x.query is not None for x in turns):
        return [x.query or "" for x in turns]
    return [q.strip() for q in _SEARCH.findall(t.model_text)][: len(turns)]


class WhenToSearch(TrainableMethod):
    name = "when_to_search"
    description = (
        "think/search/reflect/answer agent trained with multi-stage DAPO: answer reward coupled to the "
        "retrieval count, query conciseness/diversity reward, format reward, LLM-judge correctness"
    )
    source = "Learning When to Search (anonymous ACL submission; no code release)"

    def __init__(self, embedder: QueryEmbedder | None = None):
        self._embedder = embedder

    def spec(self, protocol: Protocol) -> MethodSpec:
        from methods.when_to_search.judge import WHEN_TO_SEARCH

        return MethodSpec(
            name=self.name,
            prompts={"user": PROMPT_V1},
            dialect=asdict(W2S_DIALECT),
            renderer="when_to_search: 'Doc {i} (Title: {title}) {text}', stripped",
            extractor="last <answer> of the model's own text",
            params={
                "top_k": protocol.top_k,
                "max_searches": protocol.max_turns,
                "max_obs_tokens": protocol.max_obs_tokens,
                "max_new_tokens": protocol.decoding.max_new_tokens,
                "max_response_tokens": MAX_RESPONSE_TOKENS,
                "stops": list(STOPS),
                "empty_query": NO_RESULTS,
                "beta": BETA,
                "judge_prompt": WHEN_TO_SEARCH.prompt_hash,
                "embedder": "reward context 'embedder', else the packaged all-MiniLM-L6-v2",
                "conciseness": {
                    "max_tokens": MAX_QUERY_TOKENS,
                    "max_prepositions": MAX_PREPOSITIONS,
                    "max_function_word_share": MAX_FUNCTION_WORD_SHARE,
                },
            },
        )

    def rollout_config(self, protocol: Protocol) -> SegmentLoopConfig:
        return SegmentLoopConfig(
            dialect=W2S_DIALECT,
            stops=STOPS,
            max_new_tokens=protocol.decoding.max_new_tokens,
            max_searches=protocol.max_turns,
            top_k=protocol.top_k,
            max_obs_tokens=protocol.max_obs_tokens,
            query_of=search_query,
            observe=render_docs,
            extractor=lambda text: extract_tagged(text, "<answer>", "</answer>"),
            empty_query="no_results",
            no_results=NO_RESULTS,
            max_response_tokens=MAX_RESPONSE_TOKENS,
        )

    def solve(self, examples: list[QAExample], ctx: RunContext) -> list[Trajectory]:
        prompts = [ctx.backend.chat_prompt(make_prompt(e.question)) for e in examples]
        return run_segment_rollouts(prompts, examples, ctx, self.rollout_config(ctx.protocol))

    # -- training ---------------------------------------------------------------------------------

    def prompt_messages(self, example: QAExample, *, training: bool) -> list[dict[str, str]]:
        return make_prompt(example.question)

    def embedder(self, ctx: RewardContext) -> QueryEmbedder:
        if "embedder" in ctx.models:
            return ctx.models["embedder"]
        if self._embedder is None:
            self._embedder = MiniLMEmbedder()
        return self._embedder

    def load_reward_models(self) -> None:
        """The search reward's packaged encoder, loaded now (``load_encoder`` keeps it per process)."""
        if self._embedder is None:
            self._embedder = MiniLMEmbedder()
        self._embedder.encode(["warm-up"])

    @reward_fn(*REWARDS, default=True, batched=True)
    def reward_variant(
        self, trajectories: list[Trajectory], *, name: str, ctx: RewardContext
    ) -> list[RewardBreakdown]:
        """r_sum = r_a + r_s + r_f (Eq. 12) per trajectory; the judge calls of the batch go out in
        one ``chat_batch``. Components: ``answer`` (r_a), ``search`` (r_s), ``format`` (r_f),
        ``correct`` and ``outcome`` (the judge's verdict, 0/1), ``rc``, ``judge_unparsed``,
        ``judge_error``."""
        v = REWARDS[name]
        preds = []
        for t in trajectories:
            ex = extract_tagged(t.model_text, "<answer>", "</answer>")
            preds.append(ex.prediction if ex.status in ("ok", "multiple_answers") else None)
        correct, unparsed, error = (
            self._judge(trajectories, preds, ctx)
            if v.stage != "none"
            else (
                [False] * len(trajectories),
                [False] * len(trajectories),
                [False] * len(trajectories),
            )
        )
        out = []
        for t, ok, unp, err in zip(trajectories, correct, unparsed, error, strict=True):
            rc = t.n_retrievals
            r_a = answer_reward(ok, rc, v.stage)
            queries = executed_queries(t)
            r_s = (
                search_reward(queries, self.embedder(ctx) if len(queries) > 1 else None)
                if v.search_reward
                else 0.0
            )
            r_f = format_reward(t.response)
            out.append(
                RewardBreakdown(
                    total=r_a + r_s + r_f,
                    components={
                        "answer": r_a,
                        "search": r_s,
                        "format": r_f,
                        "correct": float(ok),
                        "outcome": float(ok),
                        "rc": float(rc),
                        "judge_unparsed": float(unp),
                        "judge_error": float(err),
                    },
                )
            )
        return out

    def _judge(
        self, trajectories: list[Trajectory], preds: list[str | None], ctx: RewardContext
    ) -> tuple[list[bool], list[bool], list[bool]]:
        """The YES/NO judge (paper App. B.4) on each prediction; no answer -> wrong without a call. A reply
        whose first word is neither YES nor NO counts as NO (the paper's rule) and is counted."""
        from harness.api import RewardJudge
        from methods.when_to_search.judge import WHEN_TO_SEARCH

        def verdict(reply: str) -> bool | None:
            p = WHEN_TO_SEARCH.parser(reply)
            return p.verdict == "correct" if p.status == "ok" else None

        judge = RewardJudge(WHEN_TO_SEARCH, verdict, WHEN_TO_SEARCH.max_tokens, JUDGE_SAMPLING)
        replies = judge.ask(ctx, self.name, trajectories, preds)
        return (
            [r.value is True for r in replies],
            [r.status == "unparsable" for r in replies],
            [r.status == "error" for r in replies],
        )
