"""Learning When to Search: the rollout loop (paper §3.2), every reward branch with
worked values (§3.3, Eqs. 6-12), a scripted judge and embedder, and the multi-stage DAPO recipe (Table 5)."""

from __future__ import annotations

import numpy as np
import pytest

from harness.methods_registry import get_method
from harness.rl.dapo import DropZeroVariance
from harness.rollout.segments import SegmentLoopConfig, run_segment_rollouts
from harness.types import Trajectory, Turn
from harness.verl.reward import verl_compute_score
from methods.when_to_search.method import (
    PROMPT_V1,
    W2S_DIALECT,
    WhenToSearch,
    answer_reward,
    eval_protocol,
    executed_queries,
    format_reward,
    is_concise,
    mean_pairwise_similarity,
    query_tokens,
    render_docs,
    search_query,
    search_reward,
)
from tests.methods.helpers import (
    PROTO,
    ScriptedEmbedder,
    ScriptedJudge,
    context,
    example,
    reward_ctx,
    trajectory,
)

M = WhenToSearch()
Q = "What is the date of birth of Frederick of Liège's father?"

# -- r_a (Eqs. 10-11, β = 0.3) ------------------------------------------------------------------------

TABLE = {
    ("stage1", True): [1.0, 1.0, 1.0, 1.0, 1.0, 1.0],
    ("stage1", False): [-1.0, -0.7, -0.4, -0.1, 0.2, 0.5],
    ("stage2", True): [1.0, 0.7, 0.4, 0.1, -0.2, -0.5],
    ("stage2", False): [-1.0] * 6,
    ("unified", True): [1.0, 0.7, 0.4, 0.1, -0.2, -0.5],
    ("unified", False): [-1.0, -0.7, -0.4, -0.1, 0.2, 0.5],
    ("none", True): [0.0] * 6,
    ("none", False): [0.0] * 6,
}


@pytest.mark.parametrize("stage,correct", sorted(TABLE))
def test_answer_reward_table(stage, correct):
    assert [round(answer_reward(correct, rc, stage), 10) for rc in range(6)] == TABLE[(stage, correct)]


# -- r_s (Eqs. 7-9) -----------------------------------------------------------------------------------


@pytest.mark.parametrize(
    "q,ok",
    [
        ("Frederick of Liège father's date of birth", True),  # the paper's examples (§3.3)
        ("Albert III, Count of Namur birth date", True),
        ("when did Lavinia Norcross Dickinson's father die", False),  # question word first
        ("Lavinia Dickinson father death?", False),  # "?"
        ("", False),
        ("one two three four five six seven eight nine ten eleven twelve thirteen", False),  # > 12 tokens
        ("house of lords in london for members", False),  # 3 prepositions
        ("please tell me the capital", False),  # 4/5 function words > 40 %
        ("capital city of Netherlands today", True),  # 1/5 = 20 %
    ],
)
def test_conciseness_rule(q, ok):
    assert is_concise(q) is ok


def test_function_word_share_boundary():
    assert not is_concise("capital of the Netherlands")  # (1 + 1) / 4 = 0.5 > 0.4
    assert is_concise("Paris of the French Republic")  # (1 + 1) / 5 = 0.4, not above


def test_query_tokens_keep_inner_apostrophes_and_hyphens():
    assert query_tokens("Albert III, Count of Namur's well-known 'birth' date.") == [
        "albert",
        "iii",
        "count",
        "of",
        "namur's",
        "well-known",
        "birth",
        "date",
    ]


def test_mean_pairwise_similarity_and_paper_literal_half():
    v = np.array([[1.0, 0.0], [0.0, 1.0], [1.0, 1.0]])
    mean = (0.0 + 2 * (1 / np.sqrt(2))) / 3  # pairs (1,2) 0, (1,3) and (2,3) cos 45°
    assert mean_pairwise_similarity(v) == pytest.approx(mean)
    assert mean_pairwise_similarity(v, "paper_literal") == pytest.approx(mean / 2)


def test_search_reward_branches():
    emb = ScriptedEmbedder({"a": [1.0, 0.0], "b": [0.0, 2.0], "c": [3.0, 3.0]})
    assert search_reward([], emb) == 0.0  # RC = 0: vacuously concise
    assert search_reward(["Albert III birth date"], emb) == 0.0
    assert search_reward(["who was Albert III"], emb) == -1.0
    assert emb.calls == []  # no embedding for RC <= 1
    assert search_reward(["a", "b", "c"], emb) == pytest.approx(-(2 / np.sqrt(2)) / 3)
    assert search_reward(["a", "a"], emb) == pytest.approx(-1.0)


# -- r_f (Eq. 6) ---------------------------------------------------------------------------------------

INFO = '\n\n<information>Doc 1 (Title: "X") text with <answer>in a document</answer></information>\n\n'


@pytest.mark.parametrize(
    "response,strict,lenient",
    [
        ("<think>a</think><reflect>b</reflect><answer>c</answer>", 1.0, 1.0),  # T R A
        ("<think>a</think> <search>q</search>" + INFO + "<reflect>r</reflect>\n<answer>c</answer>", 1.0, 1.0),
        # the paper's own trajectory: a second search right after <reflect> (Table 9)
        ("<think>a</think><search>q</search>" + INFO + "<reflect>r</reflect><search>q2</search>" + INFO
         + "<reflect>r</reflect><answer>c</answer>", 1.0, 1.0),
        ("<think>a</think><search>q</search>" + INFO + "<reflect>r</reflect><think>t</think><search>q2</search>"
         + INFO + "<reflect>r</reflect><answer>c</answer>", 1.0, 1.0),
        ("<reflect>b</reflect><answer>c</answer>", -1.0, 1.0),  # no leading think
        ("<think>a</think><answer>c</answer>", -1.0, 1.0),  # no reflect before the answer
        ("<think>a</think>stray<reflect>b</reflect><answer>c</answer>", -1.0, 1.0),  # text outside blocks
        ("<think>a</think><reflect>b</reflect><answer>c</answer> trailing", -1.0, 1.0),
        ("<think>a <search>q</search></think><reflect>b</reflect><answer>c</answer>", -1.0, -1.0),  # nested tag
        ("<think>a</think><reflect>b</reflect><answer>c</answer><answer>d</answer>", -1.0, -1.0),  # two answers
        ("<think>a</think><search>q</search>" + INFO + "<reflect>r</reflect>", -1.0, -1.0),  # no answer
        ("<think>a</think><search>q</search><reflect>r</reflect><answer>c</answer>", -1.0, -1.0),  # no information
    ],
)  # fmt: skip
def test_format_reward(response, strict, lenient):
    assert format_reward(response) == strict
    assert format_reward(response, strict=False) == lenient


# -- the whole reward ---------------------------------------------------------------------------------

OBS = '\n\n<information>Doc 1 (Title: "Albert III") born 1027</information>\n\n'


def _parts(answer: str, queries: list[str]) -> list[tuple[str, bool]]:
    parts: list[tuple[str, bool]] = [("<think>unsure</think>", True)]
    for q in queries:
        parts += [(f"<search>{q}</search>", True), (OBS, False), ("<reflect>ok</reflect>", True)]
    if not queries:
        parts.append(("<reflect>I know it</reflect>", True))
    return parts + [(f"<answer>{answer}</answer>", True)]


def _judge():
    return ScriptedJudge(
        {"Prediction: 1027\n": ["YES"] * 9, "Prediction: 1030\n": ["NO"] * 9, "Prediction: soon": ["Maybe"]}
    )


def test_rewards_per_stage():
    one = trajectory(_parts("1027", ["Albert III birth date"]), ["1027"], Q)
    wrong4 = trajectory(_parts("1030", ["a b", "c d", "e f", "g h"]), ["1027"], Q)
    emb = ScriptedEmbedder({"a b": [1, 0], "c d": [1, 0], "e f": [1, 0], "g h": [1, 0]})
    ctx = reward_ctx(judge=_judge(), embedder=emb)
    s1 = M.rewards([one, wrong4], name="stage1", ctx=ctx)
    assert s1[0].total == pytest.approx(1.0 + 0.0 + 1.0)
    assert s1[1].components["answer"] == pytest.approx(0.2)  # -1 + 0.3 * 4
    assert s1[1].components["search"] == pytest.approx(-1.0)  # identical queries: avg_sim 1
    assert s1[1].total == pytest.approx(0.2 - 1.0 + 1.0)
    s2 = M.rewards([one, wrong4], name="stage2", ctx=ctx)
    assert [r.components["answer"] for r in s2] == pytest.approx([0.7, -1.0])
    assert [r.components["rc"] for r in s2] == [1.0, 4.0]
    no_rs = M.rewards([wrong4], name="stage1_no_search_reward", ctx=ctx)[0]
    assert no_rs.components["search"] == 0.0
    no_ra = M.rewards([one], name="no_answer_reward", ctx=reward_ctx(embedder=emb))[0]  # no judge needed
    assert no_ra.total == 1.0 and no_ra.components["answer"] == 0.0


def test_judge_prompt_and_unparsed_or_missing_answers():
    judge = _judge()
    no_answer = trajectory([("<think>x</think><reflect>y</reflect>", True)], ["1027"], Q)
    unsure = trajectory(_parts("soon", []), ["1027"], Q)
    right = trajectory(_parts("1027", []), ["1027", "The 1027 AD"], Q)
    out = M.rewards([no_answer, unsure, right], name="stage2", ctx=reward_ctx(judge=judge))
    assert [r.components["correct"] for r in out] == [0.0, 0.0, 1.0]
    assert [r.components["judge_unparsed"] for r in out] == [0.0, 1.0, 0.0]
    assert [r.components["format"] for r in out] == [-1.0, 1.0, 1.0]
    assert len(judge.batches[0]) == 2  # no answer: no call
    user = judge.batches[0][1][0]["content"]
    assert "Prediction: 1027\nReference Answers: 1027; 1027 ad\n" in user  # SQuAD-normalised, "; "-joined
    assert user.startswith("You are an evaluation assistant.") and "YES \u2192" in user


def test_queries_come_from_the_retrieval_turns():
    t = Trajectory(
        example_id="1",
        dataset="d",
        question="q",
        answers=["a"],
        turns=[
            Turn(0, "generate", text="<search>x</search>"),
            Turn(1, "retrieve", query="x"),
            Turn(2, "generate", text="<search>y</search>"),
        ],
    )
    assert executed_queries(t) == ["x"]  # the unexecuted second search is not counted
    rebuilt = trajectory(
        [("<search> x </search>", True), ("obs", False), ("<search>y</search>", True)], ["a"]
    )
    assert executed_queries(rebuilt) == ["x"]


# -- the rollout ---------------------------------------------------------------------------------------


def test_rollout_search_then_answer():
    script = {
        Q: [
            "<think>?</think><search> Albert III birth </search>",
            "<reflect>ok</reflect><answer>1027</answer>",
        ]
    }
    ctx, backend, retriever = context(script)
    (t,) = M.solve([example(1, Q, "1027")], ctx)
    assert backend.calls[0][0] == f"<user>{PROMPT_V1}\n\nQuestion: {Q}\n</user><assistant>"
    assert retriever.calls == [(["Albert III birth"], PROTO.top_k)]
    assert (
        '</search>\n\n<information>Doc 1 (Title: "Title 1") Text about Albert III birth number 1.\nDoc 2'
        in t.response
    )
    assert "number 3.</information>\n\n<reflect>" in t.response  # rendered documents stripped
    assert (t.prediction, t.meta["ended_by"], t.n_retrievals) == ("1027", "answer", 1)


def test_rollout_ends_on_eos_without_a_correction():
    ctx, backend, _r = context({Q: ["<think>I just stop</think>", "never"]})
    (t,) = M.solve([example(1, Q)], ctx)
    assert len(backend.calls) == 1 and t.response == "<think>I just stop</think>"
    assert t.extraction_status == "no_answer" and t.meta["ended_by"] == "eos"


def test_empty_query_is_counted_and_the_sixth_search_is_not_run():
    ctx, _b, retriever = context({Q: ["<search>  </search>", "<answer>x</answer>"]})
    (t,) = M.solve([example(1, Q)], ctx)
    assert retriever.calls == [] and t.n_retrievals == 1
    assert "</search>\n\n<information>No results.</information>\n\n<answer>" in t.response
    ctx, _b, retriever = context({Q: ["<search>q</search>"] * 8}, protocol=PROTO.with_(max_turns=5))
    (t,) = M.solve([example(1, Q)], ctx)
    assert len(retriever.calls) == 5 and t.n_retrievals == 5  # at most 5 executed searches (Table 5)
    assert t.meta["ended_by"] == "max_turns" and t.extraction_status == "max_turns"


def test_total_response_budget():
    cfg = SegmentLoopConfig(
        dialect=W2S_DIALECT,
        stops=("</search>", "</answer>"),
        max_new_tokens=100,
        max_searches=5,
        top_k=1,
        max_obs_tokens=None,
        query_of=search_query,
        observe=render_docs,
        extractor=M.rollout_config(PROTO).extractor,
        empty_query="no_results",
        no_results="No results.",
        max_response_tokens=60,
    )
    ctx, backend, _r = context({Q: ["<search>q</search>", "<answer>late</answer>"]})
    (t,) = run_segment_rollouts(["P " + Q], [example(1, Q)], ctx, cfg)
    assert len(backend.calls) == 1  # 18 generated + 60+ observation tokens: nothing left
    assert t.meta["ended_by"] == "length" and t.extraction_status == "truncated"


def test_recipe_schedule_and_dapo():
    r = M.recipes()["paper"]
    assert [r.reward_at(s) for s in (0, 179, 180, 499)] == ["stage1", "stage1", "stage2", "stage2"]
    a = r.algo
    assert (a.group_size, a.train_batch_size, a.lr, a.kl_coef, a.clip_low, a.clip_high) == (
        32,
        32,
        1e-6,
        1e-4,
        0.2,
        0.3,
    )
    assert a.loss_agg_mode == "token-mean" and a.overlong.filter_truncated and not a.overlong.soft_penalty
    assert a.dynamic_sampling.build_filter() == DropZeroVariance(metric="total")
    assert r.aux_models["judge"].model == "Qwen/Qwen3-235B-A22B-Instruct-2507"
    smoke = M.recipes()["cpu-smoke"]
    assert [smoke.reward_at(s) for s in range(3)] == ["stage1", "stage1", "stage2"]
    p = eval_protocol()
    assert (p.top_k, p.max_turns, p.max_obs_tokens, p.decoding.max_new_tokens) == (5, 5, 4096, 8192)


EXPORT_SCRIPT = {
    "capital of France": [
        "<think>?</think><search>France capital</search>",
        "<reflect>ok</reflect><answer>Paris</answer>",
    ],
    "capital of Italy": ["<think>known</think><reflect>Rome</reflect><answer>Milan</answer>"],
    "tallest mountain": [
        "<think>?</think><search>tallest mountain</search>",
        "<reflect>more</reflect><search>Everest height</search>",
        "<reflect>ok</reflect><answer>Everest</answer>",
    ],
}
EXPORT_QUESTIONS = [
    ("capital of France", "Paris"),
    ("capital of Italy", "Rome"),
    ("tallest mountain", "Mount Everest"),
]


@pytest.mark.parametrize("reward", ["stage1", "stage2"])
def test_verl_exported_reward_equals_in_harness_reward(reward):
    """verl export: the reward rebuilt from the decoded response equals ours, executed queries included."""
    method = get_method("when_to_search")
    ctx, _backend, _ret = context(EXPORT_SCRIPT)
    examples = [example(i, q, a) for i, (q, a) in enumerate(EXPORT_QUESTIONS)]
    trajs = method.solve(examples, ctx)
    judged = {
        "Prediction: paris\n": ["YES"] * 2,
        "Prediction: milan\n": ["NO"] * 2,
        "Prediction: everest\n": ["YES"] * 2,
    }
    models = {
        "judge": ScriptedJudge(judged),
        "embedder": ScriptedEmbedder({"tallest mountain": [1.0, 0.0], "Everest height": [0.6, 0.8]}),
    }
    ours = method.rewards(trajs, name=reward, ctx=reward_ctx(**models))
    for e, t, r in zip(examples, trajs, ours, strict=True):
        out = verl_compute_score(
            "when_to_search",
            reward,
            e.dataset,
            t.response,
            {"target": list(e.answers)},
            {"question": e.question},
            models,
        )
        assert out["score"] == pytest.approx(r.total), t.response
        assert out["rc"] == r.components["rc"]
    assert ours[2].components["search"] == pytest.approx(-0.6)  # two queries, cosine 0.6
