"""Search-R1: prompt and rollout control flow, the outcome-EM reward, recipes.

Search-R1's format-aware reward (``qa_em_format.compute_score_em`` with the v0.3
``train_grpo_format.sh`` values 0.2 / 0.1 / 0): every branch, and the format state machine.
"""

from __future__ import annotations

import pytest

from harness.errors import ConfigError
from harness.method import RewardContext
from methods.search_r1.method import PROMPT, SearchR1, valid_format
from methods.search_r1.render import SEARCH_R1_INVALID_MESSAGE
from tests.methods.helpers import PROTO, context, example, trajectory

M = SearchR1()
RCTX = RewardContext()


def test_solve_control_flow_prompt_search_and_stripped_observation():
    script = {
        "capital of France": [
            "<think>need it</think><search> capital of France </search>",
            "<answer> Paris </answer>",
        ],
        "capital of Italy": ["no tags", "<answer>Rome</answer>"],
    }
    ctx, be, ret = context(script)
    t1, t2 = M.solve([example(1, "capital of France"), example(2, "  capital of Italy", "Rome")], ctx)
    # one user message holding the whole template; the question stripped and given a '?'
    first_prompts = be.calls[0]
    assert first_prompts[0] == "<user>" + PROMPT.format(question="capital of France?") + "</user><assistant>"
    assert "Question: capital of Italy?\n" in first_prompts[1]
    assert ret.calls == [(["capital of France"], 3)]
    # the rendered documents are stripped before wrapping (generation.py: search_results.pop(0).strip())
    obs = t1.turns[1]
    assert obs.kind == "retrieve" and not obs.text.endswith("\n")
    assert '\n\n<information>Doc 1(Title: "Title 1") Text about capital of France number 1.\n' in t1.response
    assert "number 3.</information>\n\n" in t1.response
    assert t1.prediction == "Paris" and t1.extraction_status == "ok"
    assert SEARCH_R1_INVALID_MESSAGE in t2.response and t2.prediction == "Rome"


@pytest.mark.parametrize(
    "parts,answers,expected",
    [
        ([("<think>x</think><answer> paris </answer>", True)], ["Paris"], 1.0),  # SQuAD normalisation
        (
            [("<answer>Lyon</answer> <answer>The Paris</answer>", True)],
            ["Paris"],
            1.0,
        ),  # the last answer counts
        ([("<answer>Paris</answer> <answer>Lyon</answer>", True)], ["Paris"], 0.0),
        ([("<answer>Paris, France</answer>", True)], ["Paris"], 0.0),  # exact match, not cover
        ([("I think Paris.", True)], ["Paris"], 0.0),  # no answer tag
        # an answer tag inside a retrieved document is not the model's answer
        (
            [("<search>x</search>", True), ("<information><answer>Paris</answer></information>", False)],
            ["Paris"],
            0.0,
        ),
        ([("<answer>Rome</answer>", True)], ["Paris", "Rome"], 1.0),  # any gold alias
    ],
)
def test_outcome_em_reward(parts, answers, expected):
    r = M.reward(trajectory(parts, answers), name="em", ctx=RCTX)
    assert r.total == expected and r.components == {"outcome": expected}
    assert M.reward(trajectory(parts, answers), name="default", ctx=RCTX).total == expected


def test_prompt_example_answer_is_never_read():
    # the prompt contains "<answer> Beijing </answer>"; a trajectory without an answer scores 0 even for gold Beijing
    ctx, _be, _ret = context({"where": ["I do not know"] * 6})
    (t,) = M.solve([example(1, "where", "Beijing")], ctx)
    assert "<answer> Beijing </answer>" in t.meta["prompt"]
    assert M.reward(t, name="em", ctx=RCTX).total == 0.0


def test_unknown_reward_is_refused():
    with pytest.raises(ConfigError, match="no reward 'recall'"):  # ('f1' is one since issue 35)
        M.reward(trajectory([("<answer>x</answer>", True)], ["x"]), name="recall", ctx=RCTX)


def test_spec_records_protocol_settings():
    s = M.spec(PROTO)
    assert s.params["top_k"] == 3 and s.params["max_turns"] == 4 and s.prompts == {"user": PROMPT}
    assert s.spec_hash != M.spec(PROTO.with_(top_k=5)).spec_hash


def test_paper_recipe_values():
    r = M.recipes()["paper"]
    a = r.algo
    assert (a.adv_estimator, a.group_size, a.kl_placement, a.kl_estimator, a.kl_coef) == (
        "grpo",
        5,
        "loss",
        "low_var_kl",
        0.001,
    )
    assert (a.train_batch_size, a.lr, a.lr_warmup_ratio, a.temperature, a.top_p) == (
        512,
        1e-6,
        0.285,
        1.0,
        0.95,
    )
    assert (r.steps, r.max_new_tokens, r.max_turns, r.top_k, r.max_obs_tokens) == (500, 500, 4, 3, 500)
    assert r.reward_at(0) == "em"


M = SearchR1()
INFO = '\n\n<information>Doc 1(Title: "Paris") Paris is the capital of France.</information>\n\n'


@pytest.mark.parametrize(
    "response,ok",
    [
        ("<think>a</think><answer>b</answer>", True),
        ("<think>a</think>\n<search>q</search>" + INFO + "<think>b</think> <answer>c</answer>", True),
        (
            "<think>a</think><search>q</search>"
            + INFO
            + "<think>b</think><search>r</search>"
            + INFO
            + "<think>c</think><answer>d</answer>",
            True,
        ),
        ("<answer>b</answer>", False),  # no think first
        ("<think>a</think>so <answer>b</answer>", False),  # text between tags
        ("<think>a</think><answer>b</answer> done", False),  # text after the answer
        ("<think>a</think><search>q</search>", False),  # never answers
        ("<think>a</think><search>q</search><think>b</think><answer>c</answer>", False),  # no information
        ("<think>a<think>b</think><answer>c</answer>", False),  # unbalanced think
        ("<think>a</think><answer>b</answer><answer>c</answer>", False),  # two answers
        ("<think>a</think><search>q</search>" + INFO + "<answer>c</answer>", False),  # no think after info
        ("", False),
    ],
)
def test_valid_format_state_machine(response, ok):
    assert valid_format(response) is ok


VALID_RIGHT = [("<think>capital</think><answer> paris </answer>", True)]
VALID_WRONG = [("<think>capital</think><answer>Lyon</answer>", True)]
INVALID_RIGHT = [("It is <answer>Paris</answer>", True)]
INVALID_WRONG = [("It is <answer>Lyon</answer>", True)]
INVALID_NONE = [("It is Paris.", True)]
VALID_SEARCH_WRONG = [
    ("<think>a</think><search>capital of France</search>", True),
    (INFO, False),
    ("<think>b</think><answer>Lyon</answer>", True),
]
CORRECTED = [("Paris.", True), (SEARCH_R1_INVALID_MESSAGE, False), ("I give up.", True)]
VALID_EMPTY = [("<think>a</think><answer> </answer>", True)]


@pytest.mark.parametrize(
    "parts,total,valid,answered",
    [
        (VALID_RIGHT, 1.0, 1.0, 1.0),  # EM and a valid format: score
        (INVALID_RIGHT, 0.8, 0.0, 1.0),  # EM, invalid format: score - structure_format_score
        (VALID_WRONG, 0.2, 1.0, 1.0),  # wrong answer, valid format: structure_format_score
        (VALID_SEARCH_WRONG, 0.2, 1.0, 1.0),  # retrieval_score is 0 in the format scripts
        (VALID_EMPTY, 0.2, 1.0, 1.0),  # a blank answer span is an answer that does not match
        (INVALID_WRONG, 0.1, 0.0, 1.0),  # wrong answer, invalid format: final_format_score
        (INVALID_NONE, 0.0, 0.0, 0.0),  # no answer, invalid format
        # the correction message mentions "<answer> and </answer>"; it is not the model's answer
        # (the original reads it as the answer "and" and pays 0.1 for any invalid action)
        (CORRECTED, 0.0, 0.0, 0.0),
    ],
)
def test_format_reward_branches(parts, total, valid, answered):
    r = M.reward(trajectory(parts, ["Paris"]), name="em_format", ctx=RewardContext())
    assert r.total == pytest.approx(total)
    assert r.components["valid_format"] == valid and r.components["answered"] == answered
    assert r.components["outcome"] == (1.0 if total in (1.0, 0.8) else 0.0)


def test_cpu_learn_recipe_uses_the_format_reward_on_closed_corpus_questions():
    r = M.recipes()["cpu-learn"]
    assert r.reward_at(0) == "em_format" and r.bench == "mini-singlehop"
    assert (r.algo.group_size, r.algo.train_batch_size, r.algo.kl_placement) == (8, 2, "none")
    ds = r.algo.dynamic_sampling  # only groups with a spread of rewards are trained on
    assert ds.enabled and [(f.kind, f.metric) for f in ds.filters] == [("zero_variance", "total")]
    assert "train_grpo_format.sh" in r.sources["reward_stages"]


# -- em_format_upstream: the released answer rule (qa_em_format.extract_solution over prompt + response)


@pytest.mark.parametrize(
    "parts,answers,ours,upstream",
    [
        # no answer at all: upstream reads the prompt's example "<answer> Beijing </answer>"
        (INVALID_NONE, ["Paris"], 0.0, 0.1),
        (CORRECTED, ["Paris"], 0.0, 0.1),  # the correction message changes nothing upstream
        (INVALID_NONE, ["Beijing"], 0.0, 0.8),  # ... and pays EM when the gold is the example's
        # with an answer of its own, both read the model's last answer: identical
        (VALID_RIGHT, ["Paris"], 1.0, 1.0),
        (INVALID_WRONG, ["Paris"], 0.1, 0.1),
        (VALID_SEARCH_WRONG, ["Paris"], 0.2, 0.2),
    ],
)
def test_upstream_format_reward_pays_0_1_without_an_answer(parts, answers, ours, upstream):
    """Search-R1@a14dc3a verl/utils/reward_score/qa_em_format.py:124-136 (last of >= 2 <answer>
    matches) over prompt + response (verl/trainer/main_ppo_format.py:69-73): the prompt holds two."""
    t = trajectory(parts, answers)
    assert PROMPT.count("<answer>") == 2 and "<answer> Beijing </answer>" in PROMPT
    assert M.reward(t, name="em_format", ctx=RCTX).total == pytest.approx(ours)
    up = M.reward(t, name="em_format_upstream", ctx=RCTX)
    assert up.total == pytest.approx(upstream)
    assert up.components["answered"] == 1.0


def test_upstream_format_reward_is_a_named_variant_not_the_default():
    names = M.reward_names()
    assert names[0] == "em" and "em_format" in names and "em_format_upstream" in names
