"""Search-o1 (Li et al., "Search-o1: Agentic Search-Enhanced Large Reasoning Models", arXiv
2501.05366), from its released code (sunnynexus/Search-o1 6ced48f: ``scripts/run_search_o1.py``,
``scripts/prompts.py``, ``scripts/evaluate.py``).

The model reasons and may write ``<|begin_search_query|> q <|end_search_query|>``; generation stops
at the closing tag (``stop=[END_SEARCH_QUERY, eos]``). A segment that ends with a non-empty query
is a search; any other segment ends the trajectory (run_search_o1.py: "If no search query needs to
be executed, mark the sequence as finished"). For each search the top-k passages go through the
**Reason-in-Documents** step: one extra LLM call (batched over the searching questions) with
Search-o1's ``get_webpage_to_reasonchain_instruction`` over the previous reasoning steps, the query
and the passages; the text after ``**Final Information**`` is what returns to the reasoning chain,
as ``\\n\\n<|begin_search_result|>{info}<|end_search_result|>\\n\\n``. The answer is the last
``\\boxed{...}`` of the model's own text (``evaluate.extract_answer`` mode ``qa``; an inner
``\\text{}`` unwrapped, parentheses stripped).

Mapping onto the harness:

* The rollout is :func:`harness.rollout.engine.run_tag_rollouts` with :data:`DIALECT` (Search-o1's
  tags and its search-or-finish rule) and :func:`reason_in_documents` as the ``observation_fn``;
  each Reason-in-Documents call is an ``llm_call`` turn the engine records right after its
  ``retrieve`` turn.
* The search cap is the protocol's turn budget (``protocol.max_turns``), stated in the prompt as
  Search-o1 states its ``MAX_SEARCH_LIMIT``; Search-o1's own defaults are 5 searches for NQ/TriviaQA
  and 10 for the multi-hop sets, top-10 web pages (run_search_o1.py ``main``). Under a protocol every
  agentic method gets the same budget and top-k (Search-R1 ran Search-o1 with its top-3 retriever).
* The cap counts executed searches, not turns (the loop hook :class:`SearchBudget`), as Search-o1's
  ``search_count`` does. A search over the cap is answered with Search-o1's
  :data:`OVER_LIMIT_MESSAGE` ("The maximum search limit is exceeded. You are not allowed to
  search.", inside the result tags with Search-o1's single newlines) and the model continues; the
  loop stops after :data:`MAX_TURN` = 15 generation rounds (``--max_turn`` default; the multi-hop
  sets set it to 15 too), whatever the protocol. A search in the 15th round is still executed and
  read, as in Search-o1, and the trajectory ends there.
* A query the trajectory already retrieved gets :data:`REPEATED_QUERY_MESSAGE` ("You have searched
  this query. Please refer to previous results.") without retrieval or Reason-in-Documents and
  without counting against the cap (the loop hook :class:`RepeatedQuery`); over the cap, the
  over-limit message wins (Search-o1 checks the cap first). Both messages are ``message`` turns (statuses ``over_budget`` / ``repeat_query``),
  not retrievals, and are counted in ``meta`` (``over_limit_searches`` / ``repeated_queries``).
* Passages are shown as Search-o1 shows web pages (``**Web Page {i}:**`` + the page's JSON), with
  the fields a corpus passage has: ``id``, ``title``, ``context`` (the passage text, cut at
  ``max_doc_len`` = 3000 characters).
* ``**Final Information**`` is accepted at the very start of the Reason-in-Documents output too;
  Search-o1 looks for it after a newline only, which would discard an output that opens with it.
  An output without it becomes "No helpful information found." (Search-o1's rule), counted by the
  turn status ``no_final_information``.
* Decoding is the protocol's (greedy by default, as Search-R1 evaluates its baselines); Search-o1
  samples (temperature 0.7, top-p 0.8, top-k 20). Both calls use ``protocol.decoding.max_new_tokens``
  (Search-o1 uses one ``max_tokens`` for both too). Search-o1's released evaluation is the variant
  ``search_o1_released`` under the protocols ``search_o1-released-singlehop`` / ``-multihop``
  (its Reason-in-Documents call decodes with T 0.7, top-p 0.8, top-k 20 and repetition penalty
  1.05 whatever the reasoning's decoding, run_search_o1.py:304-312); docs/baselines.md lists what
  still differs from the release.
* Search-o1's ``evaluate.py --apply_backoff`` (replace an answer without ``\\boxed{}`` by a
  direct-generation answer) is not implemented: such a trajectory has no answer and its status says
  so.
* The instruction is Search-o1's multi-hop one for HotpotQA, 2Wiki, MuSiQue and Bamboogle and its
  single-hop one otherwise (run_search_o1.py); the task text is the non-QwQ
  ``get_task_instruction_openqa`` ("You should think step by step"). Both go in one user message of
  the chat template, with the question as given (no '?' added).
"""

from __future__ import annotations

import json
import re
import time
from collections.abc import Sequence
from dataclasses import asdict, dataclass

from harness.api import (
    RENDERERS,
    Budget,
    ConfigError,
    Hit,
    Method,
    MethodSpec,
    Observation,
    Protocol,
    QAExample,
    Refusal,
    RolloutState,
    RunContext,
    SamplingParams,
    TagDialect,
    TagRolloutConfig,
    Trajectory,
    Turn,
    TurnPolicy,
    extract_boxed,
    run_tag_rollouts,
)

BEGIN_SEARCH_QUERY = "<|begin_search_query|>"
END_SEARCH_QUERY = "<|end_search_query|>"
BEGIN_SEARCH_RESULT = "<|begin_search_result|>"
END_SEARCH_RESULT = "<|end_search_result|>"

# scripts/prompts.py get_singleqa_search_o1_instruction / get_multiqa_search_o1_instruction, verbatim
# with MAX_SEARCH_LIMIT as {max_search_limit}.
SINGLEQA_INSTRUCTION = (
    "You are a reasoning assistant with the ability to perform web searches to help you answer the "
    "user's question accurately. You have special tools:\n\n- To perform a search: write "
    "<|begin_search_query|> your query here <|end_search_query|>.\nThen, the system will search "
    "and analyze relevant web pages, then provide you with helpful information in the format "
    "<|begin_search_result|> ...search results... <|end_search_result|>.\n\nYou can repeat the "
    "search process multiple times if necessary. The maximum number of search attempts is limited "
    "to {max_search_limit}.\n\nOnce you have all the information you need, continue your "
    'reasoning.\n\nExample:\nQuestion: "Who got the first Nobel Prize in Physics?"\nAssistant '
    "thinking steps:\n- I need to find out who was awarded the first Nobel Prize in Physics.\n\n"
    "Assistant:\n<|begin_search_query|>first Nobel Prize in Physics winner<|end_search_query|>\n\n"
    "(System returns processed information from relevant web pages)\n\nAssistant continues "
    "reasoning with the new information...\n\nRemember:\n- Use <|begin_search_query|> to request a "
    "web search and end with <|end_search_query|>.\n- When done searching, continue your "
    "reasoning.\n\n"
)

MULTIQA_INSTRUCTION = (
    "You are a reasoning assistant with the ability to perform web searches to help you answer the "
    "user's question accurately. You have special tools:\n\n- To perform a search: write "
    "<|begin_search_query|> your query here <|end_search_query|>.\nThen, the system will search "
    "and analyze relevant web pages, then provide you with helpful information in the format "
    "<|begin_search_result|> ...search results... <|end_search_result|>.\n\nYou can repeat the "
    "search process multiple times if necessary. The maximum number of search attempts is limited "
    "to {max_search_limit}.\n\nOnce you have all the information you need, continue your "
    'reasoning.\n\nExample:\nQuestion: "Alice David is the voice of Lara Croft in a video game '
    'developed by which company?"\nAssistant thinking steps:\n- I need to find out who voices '
    "Lara Croft in the video game.\n- Then, I need to determine which company developed that video "
    "game.\n\nAssistant:\n<|begin_search_query|>Alice David Lara Croft voice<|end_search_query|>\n"
    "\n(System returns processed information from relevant web pages)\n\nAssistant thinks: The "
    "search results indicate that Alice David is the voice of Lara Croft in a specific video game. "
    "Now, I need to find out which company developed that game.\n\nAssistant:\n"
    "<|begin_search_query|>video game developed by Alice David Lara Croft<|end_search_query|>\n\n"
    "(System returns processed information from relevant web pages)\n\nAssistant continues "
    "reasoning with the new information...\n\nRemember:\n- Use <|begin_search_query|> to request a "
    "web search and end with <|end_search_query|>.\n- When done searching, continue your "
    "reasoning.\n\n"
)

# scripts/prompts.py get_task_instruction_openqa (the non-QwQ branch), verbatim.
TASK_INSTRUCTION = (
    "Please answer the following question. You should think step by step to solve it.\n\nProvide "
    "your final answer in the format \\boxed{{YOUR_ANSWER}}.\n\nQuestion:\n{question}\n\n"
)

# scripts/prompts.py get_webpage_to_reasonchain_instruction (Reason-in-Documents), verbatim.
REASON_IN_DOCUMENTS = (
    "**Task Instruction:**\n\nYou are tasked with reading and analyzing web pages based on the "
    "following inputs: **Previous Reasoning Steps**, **Current Search Query**, and **Searched Web "
    "Pages**. Your objective is to extract relevant and helpful information for **Current Search "
    "Query** from the **Searched Web Pages** and seamlessly integrate this information into the "
    "**Previous Reasoning Steps** to continue reasoning for the original question.\n\n"
    "**Guidelines:**\n\n1. **Analyze the Searched Web Pages:**\n- Carefully review the content of "
    "each searched web page.\n- Identify factual information that is relevant to the **Current "
    "Search Query** and can aid in the reasoning process for the original question.\n\n2. "
    "**Extract Relevant Information:**\n- Select the information from the Searched Web Pages that "
    "directly contributes to advancing the **Previous Reasoning Steps**.\n- Ensure that the "
    "extracted information is accurate and relevant.\n\n3. **Output Format:**\n- **If the web "
    "pages provide helpful information for current search query:** Present the information "
    "beginning with `**Final Information**` as shown below.\n**Final Information**\n\n[Helpful "
    "information]\n\n- **If the web pages do not provide any helpful information for current "
    "search query:** Output the following text.\n\n**Final Information**\n\nNo helpful information "
    "found.\n\n**Inputs:**\n- **Previous Reasoning Steps:**  \n{prev_reasoning}\n\n- **Current "
    "Search Query:**  \n{search_query}\n\n- **Searched Web Pages:**  \n{document}\n\nNow you "
    "should analyze each web page and find helpful information based on the current search query "
    '"{search_query}" and previous reasoning steps.\n'
)

# run_search_o1.py: the whole text appended for a search over MAX_SEARCH_LIMIT, and for a query
# already executed (``limit_message``), verbatim.
OVER_LIMIT_MESSAGE = (
    f"\n{BEGIN_SEARCH_RESULT}\nThe maximum search limit is exceeded. You are not allowed to search.\n"
    f"{END_SEARCH_RESULT}\n"
)
REPEATED_QUERY_MESSAGE = f"\n{BEGIN_SEARCH_RESULT}\nYou have searched this query. Please refer to previous results.\n{END_SEARCH_RESULT}\n"
MAX_TURN = 15  # run_search_o1.py --max_turn default (and its value for the multi-hop sets): generation rounds
NO_INFORMATION = "No helpful information found."  # evaluate.extract_answer(mode="infogen") default
MAX_DOC_LEN = 3000  # run_search_o1.py: max_doc_len = 3000 characters per document for QA sets
# the protocols of Search-o1's released evaluation (baselines/protocol.py), one per search cap
RELEASED_PROTOCOLS = ("search_o1-released-singlehop", "search_o1-released-multihop")
MULTIHOP_DATASETS = frozenset({"hotpotqa", "2wikimultihopqa", "musique", "bamboogle"})
# run_search_o1.py:304-312: generate_webpage_to_reasonchain_batch's own SamplingParams
RID_TEMPERATURE = 0.7
RID_TOP_P = 0.8
RID_TOP_K = 20
RID_REPETITION_PENALTY = 1.05


@dataclass(frozen=True)
class SearchO1Dialect(TagDialect):
    """Search-o1's protocol: stop only at the closing query tag; a segment that ends with a
    non-empty query is a search, anything else finishes (there is no answer tag; the answer is the
    last ``\\boxed{}``)."""

    @property
    def stops(self) -> list[str]:
        return [self.query_close]

    def parse_action(self, segment: str) -> tuple[str, str]:
        spans = re.findall(
            re.escape(self.query_open) + r"(.*?)" + re.escape(self.query_close), segment, re.DOTALL
        )
        if spans and spans[-1].strip() and segment.rstrip().endswith(self.query_close):
            return "search", spans[-1].strip()
        return "answer", ""


# The result is returned as f"\n\n{BEGIN_SEARCH_RESULT}{analysis}{END_SEARCH_RESULT}\n\n" (run_search_o1.py).
DIALECT = SearchO1Dialect(
    name="search_o1",
    query_open=BEGIN_SEARCH_QUERY,
    query_close=END_SEARCH_QUERY,
    answer_open="\\boxed{",
    answer_close="}",
    obs_prefix="\n\n" + BEGIN_SEARCH_RESULT,
    obs_suffix=END_SEARCH_RESULT + "\n\n",
    invalid_message="",  # never used: every segment is a search or the end
)


def retrieved_queries(state: RolloutState) -> list[str]:
    """The queries this trajectory has retrieved so far (refused searches are not retrievals)."""
    return [t.query for t in state.turns if t.kind == "retrieve" and t.query is not None]


@dataclass(frozen=True)
class SearchBudget(Budget):
    """Search-o1's cap (run_search_o1.py): ``max_turns`` counts executed searches; a search over the
    cap is answered with ``message`` and the model goes on, for at most ``max_generations``
    generation rounds (``--max_turn``); a search in the last round is still executed."""

    max_generations: int
    message: str

    def __post_init__(self) -> None:
        if self.max_generations < 1:
            raise ConfigError(f"SearchBudget: max_generations must be >= 1, got {self.max_generations!r}")

    def rounds(self, max_turns: int) -> int:
        return self.max_generations

    def can_search(self, round_no: int, max_turns: int) -> bool:
        return True

    def over_budget(self, state: RolloutState, max_turns: int) -> Refusal | None:
        if len(retrieved_queries(state)) >= max_turns:
            return Refusal("over_budget", self.message)
        return None


@dataclass(frozen=True)
class RepeatedQuery(TurnPolicy):
    """A query this trajectory already retrieved is answered with ``message`` instead of a
    retrieval (run_search_o1.py ``executed_search_queries``); status ``repeat_query``."""

    message: str

    def refuse(self, state: RolloutState, query: str) -> Refusal | None:
        if query in retrieved_queries(state):
            return Refusal("repeat_query", self.message)
        return None


def make_prompt(question: str, dataset: str, max_searches: int) -> list[dict[str, str]]:
    """One user message: the search instruction (multi-hop or single-hop) + the task instruction."""
    instruction = MULTIQA_INSTRUCTION if dataset in MULTIHOP_DATASETS else SINGLEQA_INSTRUCTION
    content = instruction.format(max_search_limit=max_searches) + TASK_INSTRUCTION.format(question=question)
    return [{"role": "user", "content": content}]


def previous_steps(output: str) -> str:
    """The reasoning so far as numbered steps, long histories elided: the first step, the last four
    and every step with a search query or result are kept (run_search_o1.py, before
    ``generate_webpage_to_reasonchain_batch``)."""
    lines = output.replace("\n\n", "\n").split("\n")
    parts = "".join(f"Step {i + 1}: {line}\n\n" for i, line in enumerate(lines)).split("\n\n")
    if len(parts) <= 5:
        return "\n\n".join(parts).strip("\n")
    text = ""
    for i, step in enumerate(parts):
        if i == 0 or i >= len(parts) - 4 or BEGIN_SEARCH_QUERY in step or BEGIN_SEARCH_RESULT in step:
            text += step + "\n\n"
        elif not text.endswith("\n\n...\n\n"):
            text += "...\n\n"
    return text.strip("\n")


def format_documents(hits: Sequence[Hit]) -> str:
    """``**Web Page {i}:**`` + the page's JSON (indent 2), one per passage (run_search_o1.py)."""
    out = []
    for i, h in enumerate(hits, 1):
        info = {"id": i, "title": h.title, "context": h.text[:MAX_DOC_LEN]}
        out.append(f"**Web Page {i}:**\n" + json.dumps(info, ensure_ascii=False, indent=2) + "\n")
    return "".join(out)


def extract_information(output: str) -> tuple[str, bool]:
    """The Reason-in-Documents result: the text after the last ``**Final Information**`` with its
    newlines removed, else after ``**Modified Reasoning Steps**``, else "No helpful information
    found." (``evaluate.extract_answer`` mode ``infogen``). Returns (text, marker found)."""
    text = "\n" + output  # also accept the marker at the very start (see the module docstring)
    if "\n**Final Information**" in text:
        return text.split("\n**Final Information**")[-1].replace("\n", "").strip("`").strip(), True
    if "\n**Modified Reasoning Steps**" in text:
        return text.split("\n**Modified Reasoning Steps**")[-1].strip("`").strip(), True
    return NO_INFORMATION, False


def reason_in_documents(
    states: list[RolloutState], queries: list[str], hits: list[list[Hit]], ctx: RunContext
) -> list[Observation]:
    """The engine's ``observation_fn``: one batched Reason-in-Documents call for every executed
    search (the loop hooks answer repeated and over-cap queries without one), decoded as the
    reasoning is (``ctx.sampling``); each observation carries its call as an ``llm_call`` turn,
    recorded after the ``retrieve`` turn."""
    return _reason_in_documents(states, queries, hits, ctx, ctx.sampling)


def released_rid_sampling(seed: int | None) -> SamplingParams:
    """Search-o1's own decoding of the Reason-in-Documents call, whatever the reasoning's
    (run_search_o1.py:304-312: temperature 0.7, top-p 0.8, top-k 20, repetition penalty 1.05)."""
    return SamplingParams(
        temperature=RID_TEMPERATURE,
        top_p=RID_TOP_P,
        top_k=RID_TOP_K,
        repetition_penalty=RID_REPETITION_PENALTY,
        seed=seed,
    )


def reason_in_documents_released(
    states: list[RolloutState], queries: list[str], hits: list[list[Hit]], ctx: RunContext
) -> list[Observation]:
    """:func:`reason_in_documents` with Search-o1's fixed Reason-in-Documents decoding
    (:func:`released_rid_sampling`, seeded with the run's seed)."""
    return _reason_in_documents(states, queries, hits, ctx, released_rid_sampling(ctx.sampling.seed))


def _reason_in_documents(
    states: list[RolloutState],
    queries: list[str],
    hits: list[list[Hit]],
    ctx: RunContext,
    sampling: SamplingParams,
) -> list[Observation]:
    prompts = [
        ctx.backend.chat_prompt(
            [
                {
                    "role": "user",
                    "content": REASON_IN_DOCUMENTS.format(
                        prev_reasoning=previous_steps(s.response),
                        search_query=q,
                        document=format_documents(h),
                    ),
                }
            ]
        )
        for s, q, h in zip(states, queries, hits, strict=True)
    ]
    t0 = time.perf_counter()
    comps = ctx.backend.generate(prompts, stop=[], max_new_tokens=ctx.max_new_tokens, sampling=sampling)
    latency = (time.perf_counter() - t0) / len(prompts)
    observations: list[Observation] = []
    for c in comps:
        info, found = extract_information(c.text)
        call = Turn(
            index=-1,  # numbered by the engine when it records the turn
            kind="llm_call",
            latency_s=latency,
            **c.turn_fields(),
            status="ok" if found else "no_final_information",
        )
        observations.append((info, (call,)))
    return observations


class SearchO1(Method):
    name = "search_o1"
    description = (
        "agentic search in <|begin_search_query|> tags, Reason-in-Documents per search, \\boxed{} answer"
    )
    source = "Li et al. 2025, arXiv 2501.05366 (sunnynexus/Search-o1 run_search_o1.py, prompts.py)"
    observation_fn = staticmethod(reason_in_documents)

    def spec(self, protocol: Protocol) -> MethodSpec:
        return MethodSpec(
            name=self.name,
            prompts={
                "singleqa_instruction": SINGLEQA_INSTRUCTION,
                "multiqa_instruction": MULTIQA_INSTRUCTION,
                "task": TASK_INSTRUCTION,
                "reason_in_documents": REASON_IN_DOCUMENTS,
                "repeated_query": REPEATED_QUERY_MESSAGE,
                "over_limit": OVER_LIMIT_MESSAGE,
            },
            dialect=asdict(DIALECT),
            renderer="search_o1: **Web Page {i}:** + JSON {id, title, context}, then Reason-in-Documents",
            extractor="last \\boxed{} of the model's own text (\\text{} unwrapped)",
            params={
                "top_k": protocol.top_k,
                "max_searches": protocol.max_turns,
                "max_obs_tokens": protocol.max_obs_tokens,
                "max_new_tokens": protocol.decoding.max_new_tokens,
                "max_doc_len": MAX_DOC_LEN,
                "multihop_datasets": sorted(MULTIHOP_DATASETS),
                "budget": "searches",
                "max_generations": MAX_TURN,
                "backoff": False,
            },
        )

    def rollout_config(self, protocol: Protocol) -> TagRolloutConfig:
        return TagRolloutConfig.from_protocol(
            protocol,
            DIALECT,
            RENDERERS.get("search_r1"),  # unused: the observation function renders
            extractor=extract_boxed,
            observation_fn=self.observation_fn,
            budget=SearchBudget(max_generations=MAX_TURN, message=OVER_LIMIT_MESSAGE),
            policy=RepeatedQuery(REPEATED_QUERY_MESSAGE),
        )

    def solve(self, examples: list[QAExample], ctx: RunContext) -> list[Trajectory]:
        ctx.require_retriever(self.name)
        limit = ctx.protocol.max_turns
        prompts = [ctx.backend.chat_prompt(make_prompt(e.question, e.dataset, limit)) for e in examples]
        trajs = run_tag_rollouts(prompts, examples, ctx, self.rollout_config(ctx.protocol))
        for t in trajs:
            t.meta["reason_in_documents_calls"] = sum(1 for x in t.turns if x.kind == "llm_call")
            t.meta["repeated_queries"] = sum(
                1 for x in t.turns if x.status == "repeat_query" and x.kind == "message"
            )
            t.meta["over_limit_searches"] = sum(1 for x in t.turns if x.status == "over_budget")
            t.meta["backoff"] = False
        return trajs


class SearchO1Released(SearchO1):
    """Search-o1 as its release evaluates it, scored under the protocols
    ``search_o1-released-singlehop`` / ``search_o1-released-multihop`` (:mod:`baselines.protocol`:
    the reasoning's decoding, top-10, 8,192 tokens, 5 or 10 searches). What the method itself does
    differently: the Reason-in-Documents call decodes with Search-o1's fixed setting
    (:func:`released_rid_sampling`: T 0.7, top-p 0.8, top-k 20, repetition penalty 1.05;
    run_search_o1.py:304-312), not the reasoning's. docs/baselines.md lists what still differs."""

    name = "search_o1_released"
    description = "Search-o1, released evaluation: Reason-in-Documents at T 0.7/top-p 0.8/top-k 20/rep. 1.05"
    source = "Li et al. 2025, arXiv 2501.05366 (sunnynexus/Search-o1@6ced48f scripts/run_search_o1.py)"
    own_protocols = RELEASED_PROTOCOLS
    observation_fn = staticmethod(reason_in_documents_released)

    def spec(self, protocol: Protocol) -> MethodSpec:
        base = super().spec(protocol)
        rid = released_rid_sampling(None)
        params = {
            **base.params,
            "reason_in_documents_sampling": {
                "temperature": rid.temperature,
                "top_p": rid.top_p,
                "top_k": rid.top_k,
                "repetition_penalty": rid.repetition_penalty,
            },
        }
        return base.model_copy(update={"name": self.name, "params": params})
