"""Search-R1's own RAG baseline (the "RAG" row of arXiv 2503.09516 v5 Table 2), a variant of
``naive_rag``: the prompt of PeterGriffinJin/Search-R1@a14dc3a ``scripts/data_process/nq_rag.py``
(``make_prefix``, lines 27-41, template ``base``) with think/answer tags, the top-3 documents as
``Doc {i}(Title: {title}) {text}`` (``format_reference``, lines 44-52: the renderer
``search_r1``), the question stripped with a '?' added (lines 101-103), one user message of the
chat template; the answer is the last ``<answer>`` of the model's reply, scored with EM like
Search-R1's methods. Top-k is the protocol's (``--topk`` default 3, line 60 = protocol
``searchr1``); the reply gets ``protocol.decoding.max_new_tokens`` tokens (500 under ``searchr1``).

Difference from the released code: Search-R1 scores the last ``<answer>`` of prompt + response
and only with two or more matches (``verl/utils/reward_score/qa_em.py`` lines 62-82); this
prompt's "in <answer> </answer> tags, for example <answer> Beijing </answer>" supplies two, so a
reply without an answer is scored as "Beijing" there. Here it has no answer (status
``no_answer``): the same EM except for questions whose gold answer is "Beijing".
"""

from __future__ import annotations

from baselines.naive_rag import add_retrieve_turns, retrieve
from harness.api import (
    RENDERERS,
    Extraction,
    Method,
    MethodSpec,
    Protocol,
    QAExample,
    RunContext,
    Trajectory,
    answer_once,
    extract_tagged,
    format_question,
)

# nq_rag.py make_prefix, template "base", verbatim (the backslash-continued f-string joined).
PROMPT = (
    "Answer the given question with some potentially useful context. You should analyze the question "
    "carefully, evaluate the given context (which may or may not be useful), and then generate an "
    "accurate and well-reasoned response. You should first have a reasoning process in mind and then "
    "provides the answer. Show your reasoning in <think> </think> tags and return the final answer in "
    "<answer> </answer> tags, for example <answer> Beijing </answer>. Question: {question} Context: "
    "{context} \n"
)
RENDERER = "search_r1"  # nq_rag.py format_reference: Doc {i}(Title: {title}) {text}\n


def extract_answer(model_text: str) -> Extraction:
    """The last ``<answer>`` span of the model's own reply."""
    return extract_tagged(model_text, "<answer>", "</answer>")


class SearchR1RAG(Method):
    name = "search_r1_rag"
    description = "retrieve top-k once; Search-R1's RAG prompt (think/answer tags), last <answer>"
    source = "Jin et al. 2025, arXiv 2503.09516 v5 Table 2 RAG (Search-R1 scripts/data_process/nq_rag.py)"

    def spec(self, protocol: Protocol) -> MethodSpec:
        return MethodSpec(
            name=self.name,
            prompts={"user": PROMPT},
            renderer=RENDERER,
            extractor="last <answer> of the model's own reply",
            params={"max_new_tokens": protocol.decoding.max_new_tokens, "top_k": protocol.top_k},
        )

    def solve(self, examples: list[QAExample], ctx: RunContext) -> list[Trajectory]:
        hits, latency = retrieve(examples, ctx, self.name)
        render = RENDERERS.get(RENDERER)
        prompts = [
            ctx.backend.chat_prompt(
                [
                    {
                        "role": "user",
                        "content": PROMPT.format(question=format_question(e.question), context=render(h)),
                    }
                ]
            )
            for e, h in zip(examples, hits, strict=True)
        ]
        trajs = answer_once(
            prompts, examples, ctx, max_new_tokens=ctx.max_new_tokens, extractor=extract_answer
        )
        add_retrieve_turns(trajs, examples, hits, latency)
        return trajs
