"""Search-R1's format-aware reward (``qa_em_format.compute_score_em`` with the v0.3
``train_grpo_format.sh`` values 0.2 / 0.1 / 0): every branch, and the format state machine."""

from __future__ import annotations

import pytest

from harness.method import RewardContext
from methods.search_r1.method import SearchR1, valid_format
from methods.search_r1.render import SEARCH_R1_INVALID_MESSAGE
from tests.methods.helpers import trajectory

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
