"""TIRESRAG-R1: the think-retrieve-reflect loop, every reward branch and weighting formula with
values worked out from the paper's Eqs. 1-7, scripted judges for exact parses, the advantage hook and the
answer-F1 group filter."""

from __future__ import annotations

import math

import pytest
import torch

from harness.errors import ConfigError
from harness.method import RewardBreakdown
from harness.rl.dapo import GroupRewards, ThresholdFilter
from methods.tiresrag_r1.method import (
    SYSTEM_INSTRUCT,
    TiresRAG,
    a_schedule,
    base_prompt,
    cem_train,
    consistency_penalty,
    difficulty_weight,
    eval_protocol,
    f1_train,
    parse_sufficiency,
    parse_thinking,
    reflection_code,
    reflection_paper,
    render_docs,
)
from tests.methods.helpers import ScriptedJudge, context, example, reward_ctx, trajectory
from tests.support.numeric import assert_close_rel
from tests.support.scripted import RecordingRetriever

M = TiresRAG()
Q = "Who founded the company in Paris"


# -- the schedule and the weighting formulas -------------------------------------------------------


@pytest.mark.parametrize(
    "t,total,value",
    [(0, 75, 0.999), (37, 75, 0.955), (60, 75, 0.679), (67, 75, 0.512), (75, 75, 0.321)]
    + [(73, 146, 0.997), (116, 146, 0.823), (131, 146, 0.51), (146, 146, 0.188)],
)
def test_annealing_weight_matches_the_spec_values(t, total, value):
    assert round(a_schedule(t, total), 3) == value  # paper Eq. 5
    assert a_schedule(0.9 * total, total) == 0.5


@pytest.mark.parametrize(
    "mean_s,w", [(0.0, 1.4994), (0.2, 1.4955), (0.4, 1.4678), (0.6, 1.2993), (0.8, 0.8153), (1.0, 0.4834)]
)
def test_difficulty_weight_table(mean_s, w):
    assert round(difficulty_weight(mean_s), 4) == w  # paper Eq. 6, G = 5


def test_consistency_penalty_code_form_is_the_scaled_product():
    f1 = torch.tensor([1.0, 0.0, 0.5, 0.0, 1.0])
    th = torch.tensor([0.2, 0.9, 0.5, 0.1, 0.8])
    s = torch.tensor([1.0, 0.0, 0.0, 1.0, 1.0])
    a = 0.8
    p = consistency_penalty(f1, th, s, a, mode="code_scaled")

    def z(x):
        return (x - x.mean()) / (x.std(unbiased=False) + 1e-8)

    prod = z(f1.double()) * z(th.double()) * z(s.double())
    expected = torch.where(prod < 0, 0.1 * 0.18 * a * a * prod.abs(), torch.zeros_like(prod))  # Eq. 7
    assert_close_rel(p, expected, rel=1e-12)
    assert (p >= 0).all() and (p > 0).any() and (p == 0).any()
    unscaled = consistency_penalty(f1, th, s, a, mode="paper_unscaled")
    assert_close_rel(unscaled, torch.where(prod < 0, 0.1 * prod.abs(), torch.zeros_like(prod)), rel=1e-12)


def test_no_penalty_when_sufficiency_is_constant():
    p = consistency_penalty(
        torch.tensor([1.0, 0.0]), torch.tensor([0.3, 0.9]), torch.tensor([1.0, 1.0]), 1.0, mode="code_scaled"
    )
    assert p.tolist() == [0.0, 0.0]


# -- answer F1, cover EM, reflection --------------------------------------------------------------


def test_training_f1_and_cover():
    assert f1_train("True", "yes") == 1.0  # bool mapping
    assert f1_train("no", "no way") == 0.0  # yes/no rule
    assert f1_train("U.S. army", "u s") == pytest.approx(0.8)  # punctuation -> space: 3 vs 2 tokens
    assert cem_train("the city of Paris", "Paris") == 1.0 and cem_train("Lyon", "Paris") == 0.0


@pytest.mark.parametrize(
    "answers,value",
    [
        (["Lyon", "Paris"], 1.0),  # wrong -> right
        (["Paris", "Lyon"], -1.0),  # right -> wrong
        (["Paris", "Paris city"], 0.0),  # right -> right
        (["Lyon", "Nice"], 0.0),  # wrong -> wrong
        (["Lyon", "Nice", "Paris"], 1.0),  # first vs last
        (["Paris"], 0.0),  # no reflection
        ([], 0.0),
    ],
)
def test_reflection_reward_paper(answers, value):
    assert reflection_paper(answers, ["Paris"]) == value  # Eq. 4


@pytest.mark.parametrize(
    "answers,value",
    [
        (["Paris", "Paris"], 0.0),  # ok -> ok, F1 not lower
        (["Paris", "Paris France"], -1.0),  # ok -> ok (cover), F1 dropped 1 -> 2/3
        (["Paris", "Lyon"], -1.0),  # ok -> wrong
        (["Lyon", "Paris"], 0.0),  # wrong -> ok: 0, never +1
        (["Lyon", "Nice"], -1.0),  # wrong -> wrong
        (["Paris"], 0.0),
        (["Lyon"], -1.0),  # a single wrong answer is penalised
        ([], 0.0),
    ],
)
def test_reflection_reward_code(answers, value):
    assert reflection_code(answers, ["Paris"]) == value  # released code


# -- judge parsing ----------------------------------------------------------------------------------

SUFF_REPLY = (
    '<think>maybe {"sufficient context to the given answer": 0}</think>\n### EXPLANATION\nyes\n### JSON\n'
    '{ "Sufficient Context To The Given Answer": 1 }'
)


def test_sufficiency_parse_recommended_vs_code():
    assert parse_sufficiency(SUFF_REPLY, "recommended").value == 1.0  # think removed, last object
    assert parse_sufficiency(SUFF_REPLY, "code").value == 0.0  # first object of the raw reply
    bad = parse_sufficiency("I cannot tell", "recommended")
    assert (bad.value, bad.unparsed) == (0.0, True)


def test_thinking_parse_clips_only_in_the_recommended_form():
    assert parse_thinking("<think>hmm</think> 0.7", "recommended").value == 0.7
    assert parse_thinking("1.5", "recommended").value == 1.0
    assert parse_thinking("1.5", "code").value == 1.5
    bad = parse_thinking("great reasoning", "code")
    assert (bad.value, bad.unparsed) == (0.0, True)


# -- rewards on trajectories ----------------------------------------------------------------------

OBS = "\n\n<information>\n(1)Paris\nThe company was founded in Paris.\n</information>\n\n"
REFLECTED = [
    ("plan</think><search>founder</search>", True),
    (OBS, False),
    ("ok</think><answer>Lyon</answer><think>check again</think><answer>Paris</answer>", True),
]


def _judge(**kw):
    return ScriptedJudge({"### ANSWER": [SUFF_REPLY] * 8, "### MODEL THINKING PROCESS": ["0.7"] * 8}, **kw)


def test_total_reward_is_eq5():
    judge = _judge()
    (r,) = M.rewards(
        [trajectory(REFLECTED, ["Paris"], Q)], name="recommended", ctx=reward_ctx(0, 75, judge=judge)
    )
    a = 1 / (1 + math.exp((1 - 0.9 * 75) / 10))  # t counts from 1
    c = r.components
    assert (c["f1"], c["sufficiency"], c["thinking"], c["reflection"], c["n_answers"]) == (
        1.0,
        1.0,
        0.7,
        1.0,
        2.0,
    )
    assert c["a_t"] == pytest.approx(a)
    assert r.total == pytest.approx(1.0 + a * (0.6 * 0.7 + 0.3 * 1.0 + 0.3 * 1.0))
    assert c["judge_unparsed"] == 0.0 and c["outcome"] == 1.0
    # the judges see the answer-stripped response; thinking gets information vs the rest
    suff_user = judge.batches[0][0][-1]["content"]
    think_user = judge.batches[1][0][-1]["content"]
    assert "<answer>" not in suff_user and "founded in Paris" in suff_user
    assert judge.batches[0][0][0]["content"].startswith("You are an expert LLM evaluator")
    assert "### CONTEXT\n(1)Paris\nThe company was founded in Paris." in think_user
    assert "check again" in think_user and "founded in Paris" not in think_user.split("### QUESTION")[1]


def test_unparsed_and_failed_judge_replies_are_counted():
    judge = ScriptedJudge({"### ANSWER": ["no idea"], "### MODEL THINKING PROCESS": ["fine"]})
    (r,) = M.rewards(
        [trajectory(REFLECTED, ["Paris"], Q)], name="recommended", ctx=reward_ctx(0, 10, judge=judge)
    )
    assert (r.components["sufficiency"], r.components["thinking"], r.components["judge_unparsed"]) == (
        0,
        0,
        2,
    )
    failing = ScriptedJudge({"### MODEL THINKING PROCESS": ["0.5"]}, fail_on="### ANSWER")
    (r,) = M.rewards(
        [trajectory(REFLECTED, ["Paris"], Q)], name="recommended", ctx=reward_ctx(0, 10, judge=failing)
    )
    assert (r.components["judge_error"], r.components["thinking"]) == (1.0, 0.5)


def test_no_answer_paper_vs_code():
    parts = [("I think it was Paris maybe", True)]
    rec = M.rewards(
        [trajectory(parts, ["Paris"], Q)], name="recommended", ctx=reward_ctx(0, 10, judge=_judge())
    )[0]
    code = M.rewards([trajectory(parts, ["Paris"], Q)], name="code", ctx=reward_ctx(0, 10, judge=_judge()))[0]
    assert rec.components["f1"] == 0.0  # ours: prediction ""
    assert code.components["f1"] == pytest.approx(
        f1_train("I think it was Paris maybe", "Paris")
    )  # whole response
    assert code.components["reflection"] == 0.0  # no answer at all


def test_ablations_and_naive_grpo():
    t = trajectory(REFLECTED, ["Paris"], Q)
    ctx = reward_ctx(0, 75, judge=_judge())
    full = M.rewards([t], name="recommended", ctx=ctx)[0]
    no_r = M.rewards([t], name="no_reflect", ctx=ctx)[0]
    a = full.components["a_t"]
    assert full.total - no_r.total == pytest.approx(a * 0.3 * 1.0)
    naive = M.rewards([t], name="f1_only", ctx=reward_ctx())[0]  # no judge, no T needed
    assert naive.total == 1.0 and naive.components["a_t"] == 0.0


def test_annealing_needs_the_total_steps():
    with pytest.raises(ConfigError, match="total_steps"):
        M.rewards([trajectory(REFLECTED, ["Paris"], Q)], name="recommended", ctx=reward_ctx(judge=_judge()))


# -- the advantage hook and the group filter -------------------------------------------------------


def _bd(f1, th, s, a=1.0):
    return RewardBreakdown(total=0.0, components={"f1": f1, "thinking": th, "sufficiency": s, "a_t": a})


def test_advantage_adjust_is_a_minus_p_times_w():
    rewards = [_bd(1.0, 0.2, 1.0), _bd(0.0, 0.9, 0.0), _bd(0.5, 0.5, 0.0), _bd(1, 0.5, 1), _bd(0, 0.5, 1)]
    group = torch.tensor([0, 0, 0, 1, 1])
    adv = torch.tensor([0.5, -1.0, 0.3, 1.0, -1.0], dtype=torch.float64)
    out = M.advantage_adjust(rewards, group, name="recommended")(adv)
    p0 = consistency_penalty(
        torch.tensor([1.0, 0.0, 0.5]),
        torch.tensor([0.2, 0.9, 0.5]),
        torch.tensor([1.0, 0.0, 0.0]),
        1.0,
        mode="code_scaled",
    )
    w0, w1 = difficulty_weight(1 / 3), difficulty_weight(1.0)
    expected = torch.cat([(adv[:3] - p0) * w0, adv[3:] * w1])  # group 1: thinking constant -> no penalty
    assert torch.allclose(out, expected)
    assert M.advantage_adjust(rewards, group, name="f1_only") is None
    only_w = M.advantage_adjust(rewards, group, name="no_penalty")(adv)
    assert torch.allclose(only_w, torch.cat([adv[:3] * w0, adv[3:] * w1]))


def test_f1_group_filter_from_the_recipe():
    f = M.recipes()["paper"].algo.dynamic_sampling.build_filter()
    assert f == ThresholdFilter(metric="f1", lower=0.1, upper=0.9)

    def g(*v):
        return GroupRewards({"f1": torch.tensor(v)})

    # drop when every F1 <= 0.1 or every F1 >= 0.9 (paper §4.4)
    assert f([g(0.0, 0.1, 0.05), g(0.9, 1.0, 1.0), g(0.0, 0.5), g(0.0, 1.0), g(0.11, 0.0)]) == [
        False,
        False,
        True,
        True,
        True,
    ]


# -- the rollout --------------------------------------------------------------------------------------


def test_rollout_continues_after_the_first_answer():
    script = {
        Q: [
            'plan</think><search> "Who  founded"\n the company </search>',
            "ok</think><answer>Lyon</answer><think>let me verify</think><search>company founder city</search>",
            "<think>fixed</think><answer>Paris</answer>",
        ]
    }
    ctx, backend, retriever = context(script)
    (t,) = M.solve([example(1, Q, "Paris")], ctx)
    assert backend.calls[0][0].endswith("<assistant><think>")  # the <think> pre-fill
    assert backend.calls[0][0].startswith(f"<system>{SYSTEM_INSTRUCT}</system><user>{Q}</user>")
    assert [q for q, _k in retriever.calls] == [["Who founded the company"], ["company founder city"]]
    assert retriever.calls[0][1] == ctx.protocol.top_k
    assert (t.prediction, t.meta["first_answer"], t.meta["n_answers"], t.n_retrievals) == (
        "Paris",
        "Lyon",
        2,
        2,
    )
    assert (
        "</search>\n\n<information>\n(1)Title 1\nText about Who founded the comp number 1.\n(2)" in t.response
    )
    assert t.extraction_status == "multiple_answers"


def test_rollout_caps_retrievals_and_ends_on_an_empty_query():
    many = {Q: ["<search>q</search>"] * 10}
    ctx, _b, retriever = context(many)  # PROTO: max_turns 4
    (t,) = M.solve([example(1, Q)], ctx)
    assert len(retriever.calls) == 4 and t.n_retrievals == 4
    assert t.turns[-1].status == "search_after_budget" and t.extraction_status == "max_turns"
    ctx, _b, retriever = context({Q: ['<search> "" </search>', "never"]})
    (t,) = M.solve([example(1, Q)], ctx)
    assert (
        retriever.calls == [] and t.turns[-1].status == "empty_query" and t.meta["ended_by"] == "empty_query"
    )


def test_training_masks_observations():
    ctx, _b, _r = context({Q: ["<search>x</search>", "<answer>Paris</answer>"]}, training=True)
    (t,) = M.solve([example(1, Q)], ctx)
    text = "".join(map(chr, t.response_ids))
    assert text == t.response
    obs_start = text.index("\n\n<information>")
    obs_end = text.index("</information>\n\n") + len("</information>\n\n")
    assert set(t.loss_mask[obs_start:obs_end]) == {0}
    assert set(t.loss_mask[:obs_start]) == {1} and set(t.loss_mask[obs_end:]) == {1}


def test_renderer_and_prompts():
    assert render_docs([]) == "None"
    assert base_prompt("Q?").endswith("\n\nQuestion:Q?\n<think>")
    p = eval_protocol()
    assert (p.top_k, p.max_turns, p.decoding.max_new_tokens, p.decoding.temperature) == (5, 8, 512, 0.0)


# -- first and last answers scored separately ----------------------------------------------------------


def test_first_answer_is_an_alternative_prediction():
    ctx, _b, _r = context({Q: ["<answer>Lyon</answer><think>no</think><answer>Paris</answer>"]})
    (t,) = M.solve([example(1, Q, "Paris")], ctx)
    assert (t.prediction, t.alt_predictions) == ("Paris", {"first_answer": "Lyon"})
    ctx, _b, _r = context({Q: ["I do not know"]})
    (t,) = M.solve([example(1, Q, "Paris")], ctx)
    assert (t.prediction, t.alt_predictions, t.meta["first_answer"]) == ("", {"first_answer": ""}, None)


def test_run_scores_the_last_answer_as_em_and_the_first_as_em_first_answer(monkeypatch, tmp_path):
    """A real ``Runner`` run on the first question of each mini dataset, the model scripted to
    change its answer: ``em`` scores the last answer (ours), ``em[first_answer]`` the first (the
    released evaluation's, which stops at ``</answer>``); both per sample in DuckDB."""
    from harness.data.benches import Selection
    from harness.eval.protocol import preset
    from harness.eval.runner import RunConfig, Runner
    from harness.results.store import Store
    from tests.support.scripted import RecordingRetriever, ScriptedBackend

    script = {
        # first wrong, a search, last right
        "George Rankin's occupation": [
            "a</think><answer>farmer</answer><think>check</think><search>George Rankin</search>",
            "<think>ok</think><answer>politician</answer>",
        ],
        # first right, last wrong
        "Scott Derrickson and Ed Wood": [
            "x</think><answer>yes</answer><think>hmm</think><answer>no</answer>"
        ],
        "Silas Hardy or Lee Mantle": ["x</think><answer>Lee Mantle</answer>"],  # one answer: both
        "The Blackout All-Stars": ["x</think>no idea"],  # no answer: both ""
    }
    backend = ScriptedBackend(script)
    monkeypatch.setattr(Runner, "backend", lambda self: backend)
    monkeypatch.setattr(Runner, "retriever", lambda self, protocol=None: RecordingRetriever())
    proto = preset("mini").with_(selection=Selection(mode="first", n=1))
    db = tmp_path / "r.duckdb"
    (run,) = Runner(RunConfig(methods=["tiresrag_r1"], bench="mini", protocol=proto, db=db)).run([M])
    assert (run.n_total, run.n_errors) == (4, 0)
    df = Store(db).query(
        """SELECT s.dataset, s.prediction, json_extract_string(s.meta_json, '$.alt_predictions.first_answer')
                  AS first, m.metric, m.value
           FROM samples s JOIN sample_metrics m USING (run_id, dataset, sample_id)
           WHERE run_id = $r AND m.metric IN ('em', 'em[first_answer]', 'f1', 'f1[first_answer]')""",
        {"r": run.run_id},
    )
    got = {(r.dataset, r.metric): r.value for r in df.itertuples()}
    assert got == {
        ("popqa", "em"): 1.0,
        ("popqa", "em[first_answer]"): 0.0,
        ("popqa", "f1"): 1.0,
        ("popqa", "f1[first_answer]"): 0.0,
        ("hotpotqa", "em"): 0.0,
        ("hotpotqa", "em[first_answer]"): 1.0,
        ("hotpotqa", "f1"): 0.0,
        ("hotpotqa", "f1[first_answer]"): 1.0,
        ("2wikimultihopqa", "em"): 1.0,
        ("2wikimultihopqa", "em[first_answer]"): 1.0,
        ("2wikimultihopqa", "f1"): 1.0,
        ("2wikimultihopqa", "f1[first_answer]"): 1.0,
        ("musique", "em"): 0.0,
        ("musique", "em[first_answer]"): 0.0,
        ("musique", "f1"): 0.0,
        ("musique", "f1[first_answer]"): 0.0,
    }
    texts = {r.dataset: (r.prediction, r.first) for r in df.drop_duplicates("dataset").itertuples()}
    assert texts == {
        "popqa": ("politician", "farmer"),
        "hotpotqa": ("no", "yes"),
        "2wikimultihopqa": ("Lee Mantle", "Lee Mantle"),
        "musique": ("", ""),
    }


# -- the released evaluation: tiresrag_r1-released ------------------------------------------------------


def test_released_protocol_pins_the_released_itsearchpipeline_setting():
    """probe2/TIRESRAG-R1@a457873, run by evaluation/scripts/evaluation.sh (prompt_type "ours"):

    - evaluation/FlashRAG/flashrag/pipeline/active_pipeline.py:114  ``topk = 7 #config.get("topk", 7)``
    - evaluation/src/eval_config.yaml:27-35  ``do_sample: False``, ``max_tokens: 8192``,
      ``temperature: 0``, ``repetition_penalty: 1.05``,
      ``stop: [..., "</answer>", "</search>", ...]``; :7 ``seed: 2024``
    - active_pipeline.py:110  ``max_iterarion = config.get("max_iterations", 100)`` (not in the yaml)
    - active_pipeline.py:297-298  a segment that stopped at ``</answer>`` is the prediction: the first
      answer (the loop ends there)
    - active_pipeline.py:340-348  an empty query: ``"pred": "I don't know."``
    """
    from harness.eval.protocol import preset
    from methods.tiresrag_r1.protocol import RELEASED_EMPTY_QUERY, RELEASED_STOPS, eval_mode

    p = preset("tiresrag_r1-released")
    d = p.decoding
    assert (p.top_k, p.max_turns) == (7, 99)
    assert (d.temperature, d.max_new_tokens, d.repetition_penalty, d.seed) == (0.0, 8192, 1.05, 2024)
    assert d.sampling().repetition_penalty == 1.05
    assert "</answer>" in RELEASED_STOPS and "</search>" in RELEASED_STOPS
    assert RELEASED_EMPTY_QUERY == "I don't know."
    assert eval_mode(p).name == "released"
    # the harness-standard protocol is unchanged: top-5, 512 tokens, greedy, no penalty, last answer
    std = preset("tiresrag_r1-eval")
    assert (std.top_k, std.max_turns, std.decoding.max_new_tokens) == (5, 8, 512)
    assert std.decoding.repetition_penalty == 1.0 and eval_mode(std).name == "harness"
    assert std.protocol_id != p.protocol_id
    # the spec says which mode ran, so the two are never mixed on a leaderboard
    same_budgets = p.with_(name="renamed-copy")  # same fields, not the released name: harness mode
    assert M.spec(p).spec_hash != M.spec(same_budgets).spec_hash
    assert M.spec(p).params["eval_mode"] == "released" and "eval_mode" not in M.spec(std).params


def _released():
    from methods.tiresrag_r1.protocol import released_protocol

    return released_protocol()


def test_released_run_stops_at_the_first_answer_and_predicts_it():
    script = {
        Q: [
            '<search> "Who  founded" it </search>',
            "ok</think><answer>Lyon</answer><think>let me verify</think><answer>Paris</answer>",
        ]
    }
    script_copy = list(script[Q])
    ctx, backend, retriever = context(script, _released())
    (t,) = M.solve([example(1, Q, "Paris")], ctx)
    # released query: stripped, quotes and inner spaces kept (active_pipeline.py:99-102)
    assert retriever.calls == [(['"Who  founded" it'], 7)]
    # released observation: segment, "\n<information>\n", documents, "</information>\n\n" (:405-406)
    docs = render_docs(RecordingRetriever().search(['"Who  founded" it'], 7)[0])
    assert backend.calls[1][0] == (
        backend.calls[0][0] + script_copy[0] + "\n<information>\n" + docs + "</information>\n\n"
    )
    # generation stopped at the first </answer>: the prediction is the first answer
    assert (t.prediction, t.extraction_status, t.meta["ended_by"]) == ("Lyon", "ok", "answer")
    assert t.alt_predictions == {"first_answer": "Lyon"}
    # the harness-standard protocol on the same script: the last answer
    ctx, _b, _r = context({Q: script_copy[1:]}, eval_protocol())
    (t,) = M.solve([example(1, Q, "Paris")], ctx)
    assert (t.prediction, t.alt_predictions) == ("Paris", {"first_answer": "Lyon"})


@pytest.mark.parametrize(
    "segments,prediction,status",
    [
        (["x</think><search>   </search>", "never"], "I don't know.", "final_turn_fallback"),  # :340-348
        (["x</think><answer> Paris"], " Paris", "final_turn_fallback"),  # no </answer>: after <answer>, :363
        (
            ["I think. It Is PARIS"],
            " it is paris",
            "final_turn_fallback",
        ),  # no answer: after the last ".", :365
    ],
)
def test_released_prediction_rules(segments, prediction, status):
    ctx, _b, retriever = context({Q: segments}, _released())
    (t,) = M.solve([example(1, Q, "Paris")], ctx)
    assert (t.prediction, t.extraction_status) == (prediction, status)
    assert retriever.calls == []


def test_released_protocol_is_for_evaluation_only():
    ctx, _b, _r = context({Q: ["<answer>x</answer>"]}, _released(), training=True)
    with pytest.raises(ConfigError, match="released evaluation"):
        M.solve([example(1, Q)], ctx)


def test_run_under_the_released_protocol_scores_the_first_answer(monkeypatch, tmp_path):
    """A real ``Runner`` run under ``tiresrag_r1-released`` with the script of the run test above:
    generation stops at the first ``</answer>``, so ``em`` scores the first answer; an empty query
    is answered "I don't know." and a reply without an answer is scored on its last sentence."""
    from harness.data.benches import Selection
    from harness.eval.protocol import preset
    from harness.eval.runner import RunConfig, Runner
    from harness.results.store import Store
    from tests.support.scripted import RecordingRetriever, ScriptedBackend

    script = {
        "George Rankin's occupation": [
            "a</think><answer>farmer</answer><think>check</think><search>George Rankin</search>",
            "<think>ok</think><answer>politician</answer>",
        ],
        "Scott Derrickson and Ed Wood": [
            "x</think><answer>yes</answer><think>hmm</think><answer>no</answer>"
        ],
        "Silas Hardy or Lee Mantle": ["x</think><search>   </search>"],  # empty query
        "The Blackout All-Stars": ["x</think>No idea. Maybe Sony"],  # no answer
    }
    backend = ScriptedBackend(script)
    monkeypatch.setattr(Runner, "backend", lambda self: backend)
    monkeypatch.setattr(Runner, "retriever", lambda self, protocol=None: RecordingRetriever())
    proto = preset("tiresrag_r1-released").with_(selection=Selection(mode="first", n=1))
    db = tmp_path / "r.duckdb"
    (run,) = Runner(RunConfig(methods=["tiresrag_r1"], bench="mini", protocol=proto, db=db)).run([M])
    assert (run.n_total, run.n_errors) == (4, 0)
    df = Store(db).query(
        """SELECT s.dataset, s.prediction, s.extraction_status, m.value AS em
           FROM samples s JOIN sample_metrics m USING (run_id, dataset, sample_id)
           WHERE run_id = $r AND m.metric = 'em'""",
        {"r": run.run_id},
    )
    got = {r.dataset: (r.prediction, r.extraction_status, r.em) for r in df.itertuples()}
    assert got == {
        "popqa": ("farmer", "ok", 0.0),  # the first answer; the run test above scores "politician"
        "hotpotqa": ("yes", "ok", 1.0),  # the first answer; "no" (last) scores 0 there
        "2wikimultihopqa": ("I don't know.", "final_turn_fallback", 0.0),
        "musique": (" maybe sony", "final_turn_fallback", 0.0),
    }
    assert len(backend.calls) == 1  # every question ended in its first segment
