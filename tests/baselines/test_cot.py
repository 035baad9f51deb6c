"""CoT: Search-R1's reasoning-then-<answer> prompt, one generation, the last <answer> span."""

from __future__ import annotations

from baselines.cot import PROMPT, CoT
from tests.baselines.helpers import context, example, protocol
from tests.support.scripted import ScriptedBackend


def test_prompt_generation_and_extraction():
    be = ScriptedBackend(
        {
            "capital of France": [
                "<think>France's capital</think> <answer>Lyon</answer><answer> Paris </answer>"
            ],
            "capital of Italy": ["<think>hmm</think> it is Rome"],
        }
    )
    ctx, ret = context(be, protocol(decoding={"max_new_tokens": 300}))
    t1, t2 = CoT().solve([example(1, " capital of France"), example(2, "capital of Italy", "Rome")], ctx)
    # one batched call, one user turn holding the template; question stripped, '?' added
    assert len(be.calls) == 1
    assert be.calls[0][0] == "<user>" + PROMPT.format(question="capital of France?") + "</user><assistant>"
    assert PROMPT.startswith("Answer the given question. You should first have a reasoning process in mind")
    assert t1.prediction == "Paris" and t1.extraction_status == "multiple_answers"
    assert t2.prediction == "" and t2.extraction_status == "no_answer"
    assert (t1.n_llm_calls, t1.n_retrievals) == (1, 0) and ret.calls == []
    assert t1.prompt_tokens == len(be.calls[0][0]) and t1.completion_tokens == len(t1.response)


def test_truncated_reasoning_is_counted():
    be = ScriptedBackend({"qq": ["<think>" + "x" * 100]})
    ctx, _ = context(be, protocol(decoding={"max_new_tokens": 20}))
    (t,) = CoT().solve([example(1, "qq")], ctx)
    assert t.extraction_status == "truncated" and t.turns[0].completion_tokens == 20
