"""search_r1_rag: Search-R1's own RAG baseline (PeterGriffinJin/Search-R1@a14dc3a
``scripts/data_process/nq_rag.py``): the prompt verbatim, top-k from the protocol (``--topk``
default 3 = ``searchr1``), documents as ``format_reference``, the last ``<answer>`` taken."""

from __future__ import annotations

import re

from baselines.search_r1_rag import PROMPT, SearchR1RAG
from harness.eval.protocol import preset
from tests.baselines.helpers import context, example, protocol
from tests.support.scripted import ScriptedBackend

# nq_rag.py lines 34-38 (make_prefix, template "base"), verbatim, and line 60 (--topk default)
MAKE_PREFIX = '''\
        prefix = f"""Answer the given question with some potentially useful context. \\
You should analyze the question carefully, evaluate the given context (which may or may not be useful), and then generate an accurate and well-reasoned response. \\
You should first have a reasoning process in mind and then provides the answer. \\
Show your reasoning in <think> </think> tags and return the final answer in <answer> </answer> tags, for example <answer> Beijing </answer>. \\
Question: {question} Context: {context} \\n"""
'''
TOPK = "    parser.add_argument('--topk', type=int, default=3)"


def test_prompt_is_nq_rag_make_prefix_verbatim():
    body = MAKE_PREFIX.split('f"""', 1)[1].rsplit('"""', 1)[0]
    # a backslash-newline continues the line; "\n" is a newline
    assert body.replace("\\\n", "").replace("\\n", "\n") == PROMPT


def test_top_k_and_budget_are_the_protocols():
    p = preset("searchr1")
    assert p.top_k == int(re.search(r"default=(\d+)", TOPK).group(1)) == 3
    spec = SearchR1RAG().spec(p)
    assert spec.params == {"top_k": 3, "max_new_tokens": p.decoding.max_new_tokens}


def test_one_retrieval_then_the_last_answer_of_the_reply():
    q = "capital of france"
    be = ScriptedBackend(
        {q: ["<think>Doc 1 says so.</think> <answer>Lyon</answer> <answer> Paris </answer>"]}
    )
    ctx, ret = context(be, protocol(top_k=3))
    (t,) = SearchR1RAG().solve([example(1, q)], ctx)
    assert ret.calls == [([q], 3)]
    sent = be.calls[0][0]
    # the question stripped with a '?' added (nq_rag.py:101-103); documents as format_reference
    assert f'Question: {q}? Context: Doc 1(Title: "Title 1") Text about {q} number 1.\nDoc 2(' in sent
    assert sent.startswith("<user>Answer the given question with some potentially useful context.")
    assert sent.endswith(" \n</user><assistant>")  # one user message of the chat template
    assert t.prediction == "Paris" and t.extraction_status == "multiple_answers"
    assert [x.kind for x in t.turns] == ["retrieve", "generate"]


def test_a_reply_without_an_answer_has_none():
    be = ScriptedBackend({}, default="<think>not sure</think>")
    ctx, _ = context(be)
    (t,) = SearchR1RAG().solve([example(1, "q")], ctx)
    assert t.prediction == "" and t.extraction_status == "no_answer"
