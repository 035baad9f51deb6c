"""The engine's optional knobs with a scripted backend: a search budget counted in searches (with
an over-budget message and a generation-round cap), a repeated-query message, and one extra
generation after every observation (exact turns, statuses, messages, retrievals, loss masks)."""

from __future__ import annotations

import pytest

from baselines.search_o1 import RepeatedQuery, SearchBudget
from harness.errors import ConfigError
from harness.protocol import CorpusRef, Protocol
from harness.rollout.base import RunContext
from harness.rollout.engine import TagRolloutConfig, run_tag_rollouts
from harness.rollout.hooks import TurnBudget
from harness.rollout.render import RENDERERS
from harness.types import QAExample
from methods.eval_rar.method import EvaluateAfterObservation
from methods.search_r1.render import SEARCH_R1_DIALECT
from tests.support.scripted import RecordingRetriever, ScriptedBackend

PROTO = Protocol(name="t", corpus=CorpusRef(id="t", content_hash="0" * 64, n_passages=1))
EXAMPLE = QAExample(id="1", dataset="toy", split="test", question="qq", answers=("Paris",))
OVER = "\n<information>\nNo more searches.\n</information>\n"
REPEAT = "\n<information>\nAlready searched.\n</information>\n"
EVAL_STOP = "</evaluate>"


def cfg(**kw) -> TagRolloutConfig:
    base = dict(
        dialect=SEARCH_R1_DIALECT,
        renderer=RENDERERS.get("search_r1"),
        top_k=2,
        max_turns=2,
        max_obs_tokens=500,
        max_new_tokens=200,
    )
    base.update(kw)
    return TagRolloutConfig(**base)


def run(outputs: list[str], training: bool = False, **kw):
    be = ScriptedBackend({"qq": outputs})
    ret = RecordingRetriever()
    ctx = RunContext(backend=be, protocol=PROTO, retriever=ret, training=training)
    (t,) = run_tag_rollouts(["Q: qq\n"], [EXAMPLE], ctx, cfg(**kw))
    return t, be, ret


def obs(query: str) -> str:
    body = RENDERERS.get("search_r1")(RecordingRetriever().search([query], 2)[0])
    return "\n\n<information>" + body + "</information>\n\n"


def kept(t) -> str:
    return "".join(chr(i) for i, m in zip(t.response_ids, t.loss_mask, strict=True) if m)


SEARCHES = dict(budget=SearchBudget(max_generations=6, message=OVER))
REPEATS = dict(policy=RepeatedQuery(REPEAT))
EVALUATES = dict(policy=EvaluateAfterObservation(EVAL_STOP))


def test_search_budget_counts_searches_and_the_model_continues_after_the_over_budget_message():
    outs = ["<search>a</search>", "<search>b</search>", "<search>c</search>", "<answer>Paris</answer>"]
    t, be, ret = run(outs, **SEARCHES)
    assert [q for qs, _ in ret.calls for q in qs] == ["a", "b"]
    assert [(x.kind, x.status, x.query) for x in t.turns] == [
        ("generate", "ok", None), ("retrieve", "ok", "a"),
        ("generate", "ok", None), ("retrieve", "ok", "b"),
        ("generate", "search_after_budget", None), ("message", "over_budget", "c"),
        ("generate", "ok", None),
    ]  # fmt: skip
    assert t.turns[5].text == OVER and t.turns[5].observation_tokens == len(OVER)
    assert t.response == outs[0] + obs("a") + outs[1] + obs("b") + outs[2] + OVER + outs[3]
    assert t.n_retrievals == 2 and t.n_llm_calls == 4 and len(be.calls) == 4
    assert t.prediction == "Paris" and t.extraction_status == "ok"


def test_search_budget_stops_after_max_generations_and_runs_the_last_search():
    t, be, ret = run(["<search>a</search>", "<search>b</search>", "<search>c</search>"], max_turns=5,
                     budget=SearchBudget(max_generations=2, message=""))  # fmt: skip
    assert len(be.calls) == 2 and ret.n_queries == 2  # the second round's search is executed
    assert [x.kind for x in t.turns] == ["generate", "retrieve", "generate", "retrieve"]
    assert t.extraction_status == "max_turns" and t.prediction == ""


def test_over_budget_is_checked_before_repeat_and_neither_counts_as_a_retrieval():
    outs = ["<search>a</search>", "<search>a</search>", "<search>b</search>", "<search>a</search>",
            "<search>c</search>", "<answer>x</answer>"]  # fmt: skip
    t, _be, ret = run(outs, **REPEATS, **SEARCHES)
    assert [q for qs, _ in ret.calls for q in qs] == ["a", "b"]  # the repeat did not use the budget
    assert [(x.status, x.query) for x in t.turns if x.kind == "message"] == [
        ("repeat_query", "a"),
        ("over_budget", "a"),  # a repeat over the cap gets the over-budget message
        ("over_budget", "c"),
    ]
    assert [x.status for x in t.turns if x.kind == "generate"] == [
        "ok", "repeat_query", "ok", "search_after_budget", "search_after_budget", "ok",
    ]  # fmt: skip
    assert t.n_retrievals == 2 and t.prediction == "x"


def test_repeat_message_under_the_turn_budget_uses_a_turn_but_no_retrieval():
    t, be, ret = run(["<search>a</search>", "<search>a</search>", "<search>b</search>"],
                     **REPEATS)  # fmt: skip
    # turns budget (2) + final turn: the repeat costs a turn, the final turn's search ends it
    assert ret.n_queries == 1 and len(be.calls) == 3
    assert [(x.kind, x.status) for x in t.turns] == [
        ("generate", "ok"), ("retrieve", "ok"),
        ("generate", "repeat_query"), ("message", "repeat_query"),
        ("generate", "search_after_budget"),
    ]  # fmt: skip
    assert (
        t.response == "<search>a</search>" + obs("a") + "<search>a</search>" + REPEAT + "<search>b</search>"
    )
    assert t.extraction_status == "max_turns"


def test_messages_are_masked_in_training():
    outs = ["<search>a</search>", "<search>a</search>", "<search>b</search>", "<search>c</search>",
            "<answer>x</answer>"]  # fmt: skip
    t, _be, _ret = run(outs, training=True, **REPEATS, **SEARCHES)
    assert "".join(map(chr, t.response_ids)) == t.response
    expected = [1] * len(outs[0]) + [0] * len(obs("a")) + [1] * len(outs[1]) + [0] * len(REPEAT)
    expected += [1] * len(outs[2]) + [0] * len(obs("b")) + [1] * len(outs[3]) + [0] * len(OVER)
    expected += [1] * len(outs[4])
    assert t.loss_mask == expected
    assert kept(t) == "".join(outs)


def test_budget_settings_that_contradict_each_other_are_refused():
    # a search budget needs at least one generation round (and states its rounds and message)
    with pytest.raises(ConfigError, match="SearchBudget: max_generations must be >= 1, got 0"):
        SearchBudget(max_generations=0, message=OVER)
    with pytest.raises(TypeError, match="max_generations"):
        SearchBudget(message=OVER)  # type: ignore[call-arg]
    # generation rounds and an over-budget message belong to the search budget, not the turn budget
    with pytest.raises(TypeError, match="max_generations"):
        TurnBudget(max_generations=3)  # type: ignore[call-arg]
    with pytest.raises(TypeError, match="message"):
        TurnBudget(message=OVER)  # type: ignore[call-arg]


# -- one extra generation after every observation (Eval-RAR mode B) ---------------------------------


def test_after_observation_step_is_generated_right_after_each_observation():
    outs = [
        "<search>a</search>",
        "<evaluate>not yet</evaluate> trailing text is not generated",
        "<search>b</search>",
        "<evaluate>enough</evaluate>",
        "<answer>Paris</answer>",
    ]
    t, be, ret = run(outs, max_turns=3, **EVALUATES)
    assert len(be.calls) == 5 and ret.n_queries == 2
    ev1, ev2 = "<evaluate>not yet</evaluate>", "<evaluate>enough</evaluate>"
    assert t.response == outs[0] + obs("a") + ev1 + outs[2] + obs("b") + ev2 + outs[4]
    assert [(x.kind, x.status, x.stop_reason) for x in t.turns] == [
        ("generate", "ok", "</search>"), ("retrieve", "ok", None), ("generate", "ok", EVAL_STOP),
        ("generate", "ok", "</search>"), ("retrieve", "ok", None), ("generate", "ok", EVAL_STOP),
        ("generate", "ok", "</answer>"),
    ]  # fmt: skip
    assert t.n_retrievals == 2 and t.n_llm_calls == 5 and t.prediction == "Paris"
    # the sub-step continues the context right after the observation
    assert be.calls[1] == ["Q: qq\n" + outs[0] + obs("a")]


def test_after_observation_step_follows_the_last_turn_search_too():
    # no final turn: the last turn's search is executed, then its evaluation step, then the end
    t, be, ret = run(["<search>a</search>", "<evaluate>e</evaluate>"], max_turns=1, budget=TurnBudget(final_turn=False),
                     **EVALUATES)  # fmt: skip
    assert len(be.calls) == 2 and ret.n_queries == 1
    assert [x.kind for x in t.turns] == ["generate", "retrieve", "generate"]
    assert t.extraction_status == "max_turns"


@pytest.mark.parametrize(
    "step,status,done",
    [
        ("<evaluate>ok</evaluate><answer>Paris</answer>", "ok", False),  # cut at </evaluate>
        ("<answer>Paris</answer> then more", "ok", True),  # an answer in the sub-step ends it
        ("<search>b</search>", "unexecuted_search", False),  # stopped at the safety stop, not run
        ("<evaluate>" + "y" * 300, "truncated", False),
        ("no evaluation at all", "missing_stop", False),
    ],
)
def test_after_observation_step_statuses(step, status, done):
    t, be, ret = run(["<search>a</search>", step, "<answer>Rome</answer>"], **EVALUATES)
    assert ret.n_queries == 1
    assert t.turns[2].kind == "generate" and t.turns[2].status == status
    assert len(be.calls) == (2 if done else 3)
    assert t.prediction == ("Paris" if done else "Rome")


def test_after_observation_step_is_model_text_in_training():
    outs = ["<search>a</search>", "<evaluate>e</evaluate>", "<answer>x</answer>"]
    t, _be, _ret = run(outs, training=True, **EVALUATES)
    assert "".join(map(chr, t.response_ids)) == t.response
    assert t.loss_mask == [1] * len(outs[0]) + [0] * len(obs("a")) + [1] * len(outs[1] + outs[2])
    assert kept(t) == "".join(outs)
