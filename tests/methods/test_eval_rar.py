"""Eval-RAR: prompt, Algorithm-1 control flow (mode A and the strict mode B evaluation sub-step)
and every branch of the reward (paper Eqs. 2-5)."""

from __future__ import annotations

import pytest

from harness.method import RewardContext
from harness.rollout.hooks import TurnPolicy
from methods.eval_rar.method import (
    INVALID_MESSAGE,
    PROMPT,
    R_EVAL,
    EvalRAR,
    EvalRARModeB,
    EvaluateAfterObservation,
    eval_protocol,
    eval_rar_reward,
    evaluation_text,
)
from tests.methods.helpers import PROTO, context, example, trajectory

M = EvalRAR()
RCTX = RewardContext()

# The paper's worked example (Table 3), with abbreviated documents.
Q = "When did the person who gave the Checkers speech die?"
GOLD = ["April 22, 1994"]
THINK = (
    "<think>The target question refers to a historical figure who delivered a speech involving a 'Checkers' "
    "reference. I need to identify this person first and then find out when they passed away.</think>"
)
S1 = "<search>When did the person who gave the Checkers speech die</search>"
INFO1 = '\n\n<information>Doc 1(Title: "Checkers speech") ... Doc 3(Title: "Checkers speech") ...</information>\n\n'
EV1 = (
    "<evaluate>From the information gathered, the target person delivering the Checkers speech is Richard Nixon. "
    "Now, the main concern is to find the death date of Richard Nixon.</evaluate>"
)
S2 = "<search>When did Richard Nixon die</search>"
INFO2 = (
    '\n\n<information>Doc 1(Title: "Death and state funeral of Richard Nixon") Death and state funeral of '
    "Richard Nixon On April 22, 1994 ...</information>\n\n"
)
EV2 = (
    "<evaluate>With the target person identified as Richard Nixon and the date of death confirmed, we can now "
    "answer the target question.</evaluate>"
)


def worked(answer: str, ev2: str = EV2) -> list[tuple[str, bool]]:
    return [(THINK + S1, True), (INFO1, False), (EV1 + S2, True), (INFO2, False), (ev2 + answer, True)]


def total(parts, golds=GOLD, name="eval_rar") -> float:
    return M.reward(trajectory(parts, golds, Q), name=name, ctx=RCTX).total


def test_worked_example_correct_answer_gets_one():
    r = M.reward(trajectory(worked("<answer>April 22, 1994</answer>"), GOLD, Q), name="default", ctx=RCTX)
    assert r.total == 1.0
    assert r.components == {"outcome": 1.0, "evaluation": 0.0, "has_answer": 1.0, "evaluate_blocks": 2.0}


def test_search_r1_answer_of_the_worked_example_gets_zero():
    # Search-R1's wrong answer; the evaluations name Nixon, not the date: no evaluation reward
    assert total(worked("<answer>September 23, 1952</answer>")) == 0.0


def test_wrong_answer_with_gold_in_an_evaluation_gets_r_eval():
    ev2 = "<evaluate>Nixon died on April 22, 1994, as Doc 1 says.</evaluate>"
    assert R_EVAL == 0.1
    assert total(worked("<answer>1994</answer>", ev2)) == 0.1
    # the ablation "w/o evaluation reward" (Table 2) keeps only R_ans
    assert total(worked("<answer>1994</answer>", ev2), name="outcome_em") == 0.0


def test_correct_answer_overrides_evaluation_reward():
    ev2 = "<evaluate>Nixon died on April 22, 1994.</evaluate>"
    assert total(worked("<answer> april 22 1994 </answer>", ev2)) == 1.0  # SQuAD normalisation of the answer


def test_gold_only_in_retrieved_documents_does_not_count():
    # INFO2 contains "April 22, 1994"; the evaluation text is read from the model's own text only
    assert "April 22, 1994" in INFO2
    assert total(worked("<answer>1995</answer>")) == 0.0


def test_no_answer_paper_formula_vs_autorefine_code():
    ev2 = "<evaluate>He died April 22, 1994.</evaluate>"
    parts = worked("", ev2)
    assert total(parts) == 0.1  # paper Eq. 5 literally (the default)
    assert total(parts, name="eval_rar_requires_answer") == 0.0  # AutoRefine's code
    # with an answer present both agree
    assert total(worked("<answer>x</answer>", ev2), name="eval_rar_requires_answer") == 0.1


def test_evaluation_concatenation_and_normalisation():
    gen = "<evaluate> The Richard </evaluate> text <evaluate>Nixon! </evaluate>"
    assert evaluation_text(gen) == "The Richard Nixon!"
    # the gold spans two blocks: Concat with one space, then SQuAD normalisation (paper Eqs. 3-4)
    assert eval_rar_reward(gen + "<answer>no</answer>", ["Richard Nixon"]).total == 0.1
    # substring without word boundary (AutoRefine's cover_em_check): gold "1" is inside "1994"
    assert eval_rar_reward("<evaluate>in 1994</evaluate><answer>x</answer>", ["1"]).total == 0.1
    # an unclosed <evaluate> block is not an evaluation
    assert eval_rar_reward("<evaluate>April 22, 1994<answer>x</answer>", GOLD).total == 0.0
    # a gold normalising to "" never counts (the band "!!!")
    assert eval_rar_reward("<evaluate>anything</evaluate><answer>x</answer>", ["!!!"]).total == 0.0


def test_prompt_tag_mentions_are_not_evaluations():
    # the prompt contains "<evaluate> and </evaluate>" and "<answer> Donald Trump </answer>"
    assert "<evaluate> and </evaluate>" in PROMPT and "<answer> Donald Trump </answer>" in PROMPT
    ctx, _be, _ret = context({"Checkers": ["I am not sure."] * 5})
    (t,) = M.solve([example(1, Q, "and", "Donald Trump")], ctx)
    assert M.reward(t, name="eval_rar", ctx=RCTX).total == 0.0


def test_solve_follows_algorithm_1():
    script = {
        "Checkers": [
            THINK + S1,
            EV1 + "no action here",  # invalid: the paper's short message, costs a step
            S2,
            EV2 + "<answer>April 22, 1994</answer>",
        ]
    }
    ctx, be, ret = context(script, PROTO.with_(max_turns=5))
    (t,) = M.solve([example(1, Q, *GOLD)], ctx)
    assert be.calls[0][0] == "<user>" + PROMPT.format(question=Q) + "</user><assistant>"
    assert [q for qs, _ in ret.calls for q in qs] == [
        "When did the person who gave the Checkers speech die",
        "When did Richard Nixon die",
    ]
    assert ret.calls[0][1] == 3
    assert INVALID_MESSAGE == "\nMy action is wrong. Let me try again.\n" and INVALID_MESSAGE in t.response
    assert "My previous action is invalid" not in t.response
    assert t.prediction == "April 22, 1994"
    assert M.reward(t, name="eval_rar", ctx=RCTX).total == 1.0


def test_step_budget_has_no_final_turn():
    # N = 3 steps: three generations, every search executed (Algorithm 1), no fourth generation
    ctx, be, ret = context({"Checkers": [S1, S1, S1, S1]}, PROTO.with_(max_turns=3))
    (t,) = M.solve([example(1, Q, *GOLD)], ctx)
    assert len(be.calls) == 3 and ret.n_queries == 3
    assert t.extraction_status == "max_turns"
    assert M.spec(PROTO).params["final_turn"] is False


def test_training_mode_masks_information_and_message():
    ctx, _be, _ret = context({"Checkers": [S1, "junk", "<answer>x</answer>"]}, training=True)
    (t,) = M.solve([example(1, Q, *GOLD)], ctx)
    kept = "".join(chr(i) for i, m in zip(t.response_ids, t.loss_mask, strict=True) if m)
    assert kept == S1 + "junk<answer>x</answer>"


ANSWER = "<answer>April 22, 1994</answer>"


def test_mode_b_generates_the_evaluation_separately_and_gives_mode_a_token_stream():
    # a compliant model: mode B's evaluation sub-step stops at </evaluate>, the step continues in
    # the next call; the model's text is mode A's, in five generations instead of three
    script_b = {"Checkers": [THINK + S1, EV1 + S2, S2, EV2 + ANSWER, ANSWER]}
    ctx, be, ret = context(script_b, PROTO.with_(max_turns=5))
    (b,) = EvalRARModeB().solve([example(1, Q, *GOLD)], ctx)
    assert [q for qs, _ in ret.calls for q in qs] == [
        "When did the person who gave the Checkers speech die",
        "When did Richard Nixon die",
    ]
    assert [(x.kind, x.stop_reason, x.status) for x in b.turns] == [
        ("generate", "</search>", "ok"), ("retrieve", None, "ok"), ("generate", "</evaluate>", "ok"),
        ("generate", "</search>", "ok"), ("retrieve", None, "ok"), ("generate", "</evaluate>", "ok"),
        ("generate", "</answer>", "ok"),
    ]  # fmt: skip
    # the sub-step continues right after the information
    info1 = "\n\n<information>" + b.turns[1].text + "</information>\n\n"
    assert be.calls[1][0] == be.calls[0][0] + THINK + S1 + info1
    assert len(be.calls) == 5 and b.n_retrievals == 2

    ctx_a, be_a, _ret = context({"Checkers": [THINK + S1, EV1 + S2, EV2 + ANSWER]}, PROTO.with_(max_turns=5))
    (a,) = M.solve([example(1, Q, *GOLD)], ctx_a)
    assert len(be_a.calls) == 3
    assert b.model_text == a.model_text == THINK + S1 + EV1 + S2 + EV2 + ANSWER
    assert b.response == a.response
    assert M.reward(b, name="eval_rar", ctx=RCTX).total == 1.0


def test_mode_b_evaluates_after_the_last_step_search():
    # N = 2: mode A ends right after the second search's information; mode B still evaluates it
    ev2 = "<evaluate>Nixon died on April 22, 1994.</evaluate>"
    ctx, be, ret = context({"Checkers": [S1, EV1 + S2, S2, ev2]}, PROTO.with_(max_turns=2))
    (b,) = EvalRARModeB().solve([example(1, Q, *GOLD)], ctx)
    assert ret.n_queries == 2 and len(be.calls) == 4
    assert b.turns[-1].kind == "generate" and b.turns[-1].text == ev2
    assert b.extraction_status == "max_turns"
    rb = M.reward(b, name="eval_rar", ctx=RCTX)
    assert (rb.total, rb.components["evaluate_blocks"]) == (R_EVAL, 2.0)  # no answer, gold evaluated

    ctx, be, ret = context({"Checkers": [S1, EV1 + S2, ev2]}, PROTO.with_(max_turns=2))
    (a,) = M.solve([example(1, Q, *GOLD)], ctx)
    assert ret.n_queries == 2 and len(be.calls) == 2 and a.turns[-1].kind == "retrieve"
    assert M.reward(a, name="eval_rar", ctx=RCTX).components["evaluate_blocks"] == 1.0


def test_mode_b_missing_evaluation_is_not_penalised_and_training_mask():
    # the sub-step ends without </evaluate>: recorded (missing_stop), no correction message (mode A
    # would call that segment an invalid action), and the next step follows
    ctx, be, _ret = context({"Checkers": [S1, "Not sure yet.", ANSWER]}, training=True)
    (t,) = EvalRARModeB().solve([example(1, Q, *GOLD)], ctx)
    assert len(be.calls) == 3 and t.prediction == "April 22, 1994"
    assert [(x.kind, x.status) for x in t.turns] == [
        ("generate", "ok"), ("retrieve", "ok"), ("generate", "missing_stop"), ("generate", "ok"),
    ]  # fmt: skip
    assert INVALID_MESSAGE not in t.response
    own = S1 + "Not sure yet." + ANSWER
    assert "".join(chr(i) for i, m in zip(t.response_ids, t.loss_mask, strict=True) if m) == own
    assert t.loss_mask.count(0) == len(t.response) - len(own) > 0


def test_mode_b_is_a_separate_method_with_the_same_recipes():
    b = EvalRARModeB()
    assert (b.name, M.evaluate_mode, b.evaluate_mode) == ("eval_rar_b", "A", "B")
    assert b.rollout_config(PROTO).policy == EvaluateAfterObservation("</evaluate>")
    assert M.rollout_config(PROTO).policy == TurnPolicy()  # no step after the observation
    assert b.spec(PROTO).params["evaluate_step"].startswith("mode B")
    assert M.spec(PROTO).params["evaluate_step"].startswith("mode A")
    assert set(b.recipes()) == set(M.recipes()) and b.recipes()["paper"].method == "eval_rar_b"
    assert b.reported() == []


def test_eval_protocol():
    p = eval_protocol()
    assert (p.name, p.top_k, p.max_turns, p.max_obs_tokens) == ("eval_rar-eval", 3, 5, 512)
    assert (p.decoding.temperature, p.decoding.max_new_tokens) == (0.0, 512)


@pytest.mark.parametrize("name", ["paper", "paper-no-eval-reward"])
def test_paper_recipes(name):
    r = M.recipes()[name]
    a = r.algo
    assert (a.group_size, a.train_batch_size, a.lr, a.kl_coef, a.clip_low, a.clip_high) == (
        5,
        512,
        1e-6,
        0.001,
        0.2,
        0.2,
    )
    assert (r.steps, r.top_k, r.max_turns, r.micro_batch_size) == (200, 3, 5, 16)
    assert r.reward_at(0) == {"paper": "eval_rar", "paper-no-eval-reward": "outcome_em"}[name]
