"""The trajectory explorer labels every model call's prompt by turn, and says which it cannot show
(the store keeps one prompt per question; issue 36)."""

from __future__ import annotations

import pandas as pd

from leaderboards import views


def _turn(index: int, kind: str, text: str = "", prompt_tokens: int = 0) -> views.TurnView:
    return views.TurnView(index, kind, text, None, [], prompt_tokens, 0, 0, None, "ok")


def _sample(turns: list[views.TurnView], prompt: str | None, response: str = "") -> views.SampleView:
    return views.SampleView(
        run_id="r", dataset="d", sample_id="s", question="q", answers=[], prediction="", extraction_status="ok",
        error=None, gold_ids=[], metrics={}, turns=turns, judgements=pd.DataFrame(), prompt=prompt,
        response=response,
    )  # fmt: skip


def test_one_context_rollout_gets_each_generation_prompt():
    # the rollout engine: context = prompt + response (generations and observations interleaved)
    gen0, obs, gen1 = "<search> a </search>", "\n<information>doc</information>\n", "<answer> b </answer>"
    s = _sample(
        [_turn(0, "generate", gen0), _turn(1, "retrieve", obs), _turn(2, "generate", gen1)],
        "PROMPT:",
        gen0 + obs + gen1,
    )
    first, second = views.call_prompts(s)
    assert (first.turn, first.label, first.source, first.text) == (
        0,
        "turn 0 · generation",
        "stored",
        "PROMPT:",
    )
    assert (second.turn, second.label, second.source) == (2, "turn 2 · generation", "continued")
    assert second.text == "PROMPT:" + gen0 + obs


def test_a_prompt_holding_earlier_generations_is_the_last_calls():
    # IRCoT rebuilds the prompt each step (passages + thoughts so far) and stores the last one
    t1, t2 = " Riley is a producer.", " So the answer is: producer."
    s = _sample(
        [
            _turn(0, "retrieve"),
            _turn(1, "generate", t1, 780),
            _turn(2, "retrieve"),
            _turn(3, "generate", t2, 900),
        ],
        "Wikipedia Title: X\n...\nQ: who?\nA: Riley is a producer.",
        "Riley is a producer. So the answer is: producer.",
    )
    early, last = views.call_prompts(s)
    assert (early.turn, early.source, early.text) == (1, "missing", None)
    assert "780 prompt tokens" in early.note
    assert (last.turn, last.label, last.source) == (3, "turn 3 · generation", "stored")
    assert last.text == s.prompt


def test_side_calls_say_their_prompt_is_not_stored():
    # Search-o1: Reason-in-Documents is an llm_call turn whose prompt the store does not keep
    gen0, rid, gen1 = "<|begin_search_query|>x<|end_search_query|>", "Final Information: y", "answer"
    s = _sample(
        [_turn(0, "generate", gen0), _turn(1, "retrieve", "raw docs"), _turn(2, "llm_call", rid, 802),
         _turn(3, "generate", gen1)],
        "P",
        gen0 + "<|begin_search_result|>" + rid + "<|end_search_result|>" + gen1,
    )  # fmt: skip
    calls = views.call_prompts(s)
    assert [(c.turn, c.source) for c in calls] == [(0, "stored"), (2, "missing"), (3, "continued")]
    assert calls[1].label == "turn 2 · side call (llm_call)" and "802 prompt tokens" in calls[1].note
    assert calls[2].text == s.prompt + s.response[: s.response.index(gen1)]


def test_single_call_and_no_stored_prompt():
    one = views.call_prompts(_sample([_turn(0, "retrieve"), _turn(1, "generate", "x")], "P", "x"))
    assert [(c.turn, c.source, c.text) for c in one] == [(1, "stored", "P")]
    none = views.call_prompts(_sample([_turn(0, "generate", "x"), _turn(1, "generate", "y")], None, "xy"))
    assert [c.source for c in none] == ["missing", "missing"]
