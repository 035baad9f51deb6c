"""R-Search: prompts per phase, rollout control flow, and every branch of the reward
(paper §3.2.2, Eqs. 3-6) with a scripted reader model."""

from __future__ import annotations

import pytest

from harness.errors import ConfigError
from harness.method import RewardContext
from methods.r_search.method import (
    READER_PROMPT,
    SYSTEM_EVAL,
    SYSTEM_PAPER,
    SYSTEM_TRAIN,
    RSearch,
    eval_protocol,
    f1_reward,
)
from methods.search_r1.render import SEARCH_R1_INVALID_MESSAGE
from tests.methods.helpers import PROTO, ScriptedReader, context, example, trajectory

M = RSearch()
Q = "When was Countrywide bought by the company that bought FleetBoston Financial"
GOLD = ["July 1, 2008"]
OBS = '\n\n<observation>(Title: "Bank of America") In 2004, Bank of America ...</observation>\n\n'
SEARCH = "Step 1. <search> FleetBoston Financial was bought by whom? </search>"
EVID = "<original_evidence>- Bank of America bought Countrywide on July 1, 2008.</original_evidence>"
EVID2 = "<original_evidence>- FleetBoston was bought in 2004.</original_evidence>"
ANSWER = "<answer> 1 July </answer>"  # F1 vs "July 1, 2008": P 1, R 2/3 -> 0.8
READER_SAYS = {"Countrywide on July": ["2008"], "FleetBoston was bought": ["2008"]}  # reader F1 0.5


def rewards(parts_list, name="r_search", reader=None):
    reader = reader or ScriptedReader(READER_SAYS)
    ctx = RewardContext(models={"reader": reader})
    trajs = [trajectory(p, GOLD, Q) for p in parts_list]
    return M.rewards(trajs, name=name, ctx=ctx), reader


@pytest.mark.parametrize(
    "parts,r_format,r_answer,r_evidence,I",
    [
        # Eqs. 3-6 worked out per case, row by row (γ_e = γ_α = 0.2; answer F1 0.8; reader F1 0.5)
        ([(ANSWER, True)], 0.4, 0.8, 0.0, (0, 1, 1)),  # no search, no evidence
        (
            [(EVID + ANSWER, True)],
            0.2,
            0.8,
            0.0,
            (0, 1, 0),
        ),  # no search, evidence box: 0.2 as the code (Eq. 5: 0.4)
        ([(SEARCH, True), (OBS, False), (EVID + ANSWER, True)], 0.4, 0.8, 0.5, (1, 1, 1)),
        ([(SEARCH, True), (OBS, False), (ANSWER, True)], 0.2, 0.8, 0.0, (1, 1, 0)),  # search, no evidence
        (
            [(SEARCH, True), (OBS, False), (EVID + EVID2 + ANSWER, True)],
            0.2,
            0.8,
            0.5,
            (1, 1, 0),
        ),  # two boxes: last
        ([(SEARCH, True), (OBS, False), (EVID, True)], 0.2, 0.0, 0.5, (1, 0, 1)),  # no answer box
        (
            [(SEARCH, True), (OBS, False), (EVID + "<answer>wrong</answer>" + ANSWER, True)],
            0.2,
            0.8,
            0.5,
            (1, 0, 1),
        ),  # two answers: F1 of the last, no answer format reward
        # further branches (Eq. 5)
        (
            [(SEARCH, True), (OBS, False), ("<original_evidence> </original_evidence>" + ANSWER, True)],
            0.2,
            0.8,
            0.0,
            (1, 1, 0),
        ),
        ([(SEARCH, True), (OBS, False), (EVID + "<answer> and </answer>", True)], 0.2, 0.0, 0.5, (1, 0, 1)),
        ([(SEARCH, True), (OBS, False), (EVID + "<answer></answer>", True)], 0.2, 0.0, 0.5, (1, 0, 1)),
    ],
)
def test_reward_branches(parts, r_format, r_answer, r_evidence, I):  # noqa: E741
    (r,), _reader = rewards([parts])
    c = r.components
    assert (c["format"], c["answer"], c["evidence"]) == pytest.approx(
        (r_format, r_answer, r_evidence), abs=1e-12
    )
    assert (c["I_S"], c["I_A"], c["I_E"]) == I
    assert r.total == pytest.approx(r_format + r_answer + r_evidence, abs=1e-12)
    assert c["reader_error"] == 0.0


def test_full_marks_is_2_4():
    parts = [(SEARCH, True), (OBS, False), (EVID + "<answer>July 1, 2008</answer>", True)]
    (r,), _ = rewards([parts], reader=ScriptedReader({"Countrywide": ["July 1, 2008"]}))
    assert r.total == pytest.approx(2.4, abs=1e-12)


def test_reader_calls_are_batched_with_the_evidence_template():
    with_ev = [(SEARCH, True), (OBS, False), (EVID + ANSWER, True)]
    two_boxes = [(SEARCH, True), (OBS, False), (EVID + EVID2 + ANSWER, True)]
    no_search = [(EVID + ANSWER, True)]
    rs, reader = rewards([with_ev, no_search, two_boxes])
    assert len(reader.batches) == 1 and len(reader.batches[0]) == 2  # one call, evidence only where scored
    (msgs_1, msgs_2) = reader.batches[0]
    assert msgs_1 == [
        {
            "role": "user",
            "content": "Answer the question based on the given passages. Only give me the answer and do not output "
            "any other words.\n\nThe following are given passages:\n- Bank of America bought Countrywide on July 1, "
            f"2008.\n\nQuestion: {Q}\nAnswer:",
        }
    ]
    assert msgs_2[0]["content"].startswith(READER_PROMPT.split("{")[0])
    assert "- FleetBoston was bought in 2004." in msgs_2[0]["content"]  # the last box is the one sent
    max_tokens, sampling = reader.settings[0]
    assert (max_tokens, sampling.temperature, sampling.top_p) == (512, 0.1, 0.9)
    assert [r.total for r in rs] == pytest.approx([1.7, 1.0, 1.5], abs=1e-12)


def test_reader_failure_is_counted_and_scores_zero():
    parts = [(SEARCH, True), (OBS, False), (EVID + ANSWER, True)]
    (r,), _ = rewards([parts], reader=ScriptedReader(READER_SAYS, fail_on="Countrywide"))
    assert r.components["evidence"] == 0.0 and r.components["reader_error"] == 1.0
    assert r.total == pytest.approx(1.2, abs=1e-12)


def test_no_reader_configured_is_a_clear_error():
    parts = [(SEARCH, True), (OBS, False), (EVID + ANSWER, True)]
    with pytest.raises(ConfigError, match="'reader' model"):
        M.rewards([trajectory(parts, GOLD, Q)], name="r_search", ctx=RewardContext())
    # without evidence to score, no reader is needed
    assert M.rewards([trajectory([(ANSWER, True)], GOLD, Q)], name="r_search", ctx=RewardContext())[
        0
    ].total == pytest.approx(1.2)


def test_no_evidence_ablation_reward():
    parts = [(SEARCH, True), (OBS, False), (EVID + ANSWER, True)]
    (r,), reader = rewards([parts], name="no_evidence")
    assert reader.batches == []  # the reader is not called
    assert r.total == pytest.approx(0.8 + 0.2, abs=1e-12)
    assert (r.components["evidence"], r.components["format"]) == (0.0, 0.2)


def test_f1_reward_is_rounded_to_two_decimals_without_yes_no_rule():
    assert f1_reward("America bank holding", ["Bank of America"]) == 0.67  # 2/3
    assert f1_reward("no way", ["no"]) == 0.67  # SQuAD F1, no HotpotQA yes/no rule
    assert f1_reward("Paris", ["Rome", "paris"]) == 1.0
    assert f1_reward("", ["x"]) == 0.0


def test_templates():
    assert SYSTEM_TRAIN.replace("as needed.\nWhen", "as needed. When") == SYSTEM_PAPER
    assert SYSTEM_TRAIN.replace("omit the evidence section", "you can skip the summary step") == SYSTEM_EVAL
    assert SYSTEM_TRAIN.endswith("provide the final answer within <answer> and </answer> tags.")


def test_solve_training_vs_evaluation_prompts_and_observation():
    script = {"FleetBoston": [SEARCH, EVID + ANSWER]}
    ctx, be, ret = context(script, training=True)
    (t,) = M.solve([example(1, Q, *GOLD)], ctx)
    assert be.calls[0][0] == f"<system>{SYSTEM_TRAIN}</system><user>{Q}</user><assistant>"  # raw question
    assert ret.calls == [(["FleetBoston Financial was bought by whom?"], 3)]
    # "\n\n<observation>{stripped docs}</observation>\n\n" with "(Title: ...) text" documents
    assert '\n\n<observation>(Title: "Title 1") Text about' in t.response
    assert "number 3.</observation>\n\n" in t.response
    kept = "".join(chr(i) for i, m in zip(t.response_ids, t.loss_mask, strict=True) if m)
    assert kept == SEARCH + EVID + ANSWER  # the evidence is trained on, the observation is masked

    ctx, be, _ret = context({"FleetBoston": ["junk", "<answer>x</answer>"]})
    (t,) = M.solve([example(1, "  " + Q + " ", *GOLD)], ctx)
    assert be.calls[0][0] == f"<system>{SYSTEM_EVAL}</system><user>{Q}?</user><assistant>"
    assert SEARCH_R1_INVALID_MESSAGE in t.response


def test_training_turn_budget_four_searches_then_a_final_turn():
    ctx, be, ret = context({"FleetBoston": [SEARCH] * 6}, PROTO.with_(max_turns=4), training=True)
    (t,) = M.solve([example(1, Q, *GOLD)], ctx)
    assert ret.n_queries == 4 and len(be.calls) == 5  # the fifth search is not executed
    assert t.turns[-1].status == "search_after_budget"


def test_eval_protocol():
    p = eval_protocol()
    assert (p.name, p.top_k, p.max_turns, p.max_obs_tokens) == ("r_search-eval", 5, 10, 8192)
    d = p.decoding
    assert (d.temperature, d.top_p, d.max_new_tokens, d.seed) == (0.1, 0.9, 1024, 44)
    ctx, _be, ret = context({"FleetBoston": [SEARCH, "<answer>x</answer>"]}, p)
    M.solve([example(1, Q, *GOLD)], ctx)
    assert ret.calls[0][1] == 5


def test_authors_evaluation_under_own_protocol_only():
    script = {"FleetBoston": [SEARCH, "  It was Bank of America.  ", "<answer>x</answer>"]}
    # r_search-eval: a turn with neither a search nor an answer is final; its whole text is the answer
    ctx, be, ret = context(script, eval_protocol())
    (t,) = M.solve([example(1, Q, *GOLD)], ctx)
    assert len(be.calls) == 2 and ret.n_queries == 1 and SEARCH_R1_INVALID_MESSAGE not in t.response
    assert (t.prediction, t.extraction_status) == ("It was Bank of America.", "final_turn_fallback")
    # a complete <answer> is taken as usual
    ctx, _be, _ret = context({"FleetBoston": [SEARCH, EVID + ANSWER]}, eval_protocol())
    (t,) = M.solve([example(1, Q, *GOLD)], ctx)
    assert t.extraction_status == "ok"
    # shared protocols and training: correction message, strict extraction
    for proto, training in ((PROTO, False), (eval_protocol(), True)):
        ctx, be, _ret = context(script, proto, training=training)
        (t,) = M.solve([example(1, Q, *GOLD)], ctx)
        assert len(be.calls) == 3 and SEARCH_R1_INVALID_MESSAGE in t.response
        assert (t.prediction, t.extraction_status) == ("x", "ok")


def test_recipes():
    r = M.recipes()
    paper, smoke = r["paper"], r["cpu-smoke"]
    a = paper.algo
    assert (a.group_size, a.train_batch_size, a.lr, a.lr_warmup_ratio, a.kl_coef, a.top_p) == (
        5,
        256,
        1e-6,
        0.95,
        0.001,
        0.95,
    )
    assert (
        paper.steps,
        r["paper-7b"].steps,
        paper.max_new_tokens,
        paper.max_turns,
        paper.max_obs_tokens,
    ) == (195, 120, 500, 4, 1800)
    assert paper.aux_models["reader"].model == "meta-llama/Llama-3.2-3B-Instruct"
    assert smoke.aux_models["reader"].kind == "transformers" and smoke.aux_models["reader"].model == "default"


# -- the released evaluation: r_search-released ---------------------------------------------------------


def test_released_protocol_pins_the_released_setting():
    """QingFei1/R-Search@ecba08d ``src/eval/main.py``:

    - :15 ``--retrieve_top_k`` default 5; :19-21 ``--temperature 0.1``, ``--max_tokens 1024``,
      ``--top_p 0.9``; :120 ``SamplingParams(max_tokens=..., temperature=..., top_p=..., stop=...)``
    - :92 ``while True`` (the cap at :114 is commented out): no search cap (ours: a guard of 50)
    - :93 stops only at ``</search>`` variants; :95-102 the final turn's last ``<answer>``, else the
      whole turn, stripped (the answer taken)
    - :139 ``curr_search_template = '\\n\\n{output_text}<observation>{search_results}</observation>\\n\\n'``
    - :195 Acc (``utils.py:18-30``), F1 (``utils.py:62-78``, no yes/no rule), EM
    """
    from harness.eval.protocol import preset

    p = preset("r_search-released")
    d = p.decoding
    assert (p.top_k, p.max_turns, p.max_obs_tokens) == (5, 50, 8192)
    assert (d.temperature, d.top_p, d.max_new_tokens, d.seed, d.repetition_penalty) == (
        0.1,
        0.9,
        1024,
        44,
        1.0,
    )
    assert p.metrics["acc_substring_lower"] == "1" and {"em", "f1_squad"} <= set(p.metrics)
    assert "acc_substring_lower" not in preset("r_search-eval").metrics
    assert M.spec(p).dialect["obs_prefix"] == "<observation>"
    assert M.spec(eval_protocol()).dialect["obs_prefix"] == "\n\n<observation>"  # unchanged


def test_released_wrapper_puts_the_stripped_turn_after_a_blank_line():
    from harness.rollout.render import RENDERERS
    from methods.r_search.method import released_protocol
    from tests.support.scripted import RecordingRetriever

    turn = "  Step 1. <search> FleetBoston Financial was bought by whom? </search>"
    script = {"FleetBoston": [turn, "  It was Bank of America.  ", "<answer>x</answer>"]}
    ctx, be, ret = context(script, released_protocol())
    (t,) = M.solve([example(1, Q, *GOLD)], ctx)
    docs = RENDERERS.get("r_search")(
        RecordingRetriever().search(["FleetBoston Financial was bought by whom?"], 5)[0]
    )
    # prompt + "\n\n" + turn.strip() + "<observation>" + docs (not stripped) + "</observation>\n\n"
    assert (
        be.calls[1][0]
        == be.calls[0][0] + "\n\n" + turn.strip() + "<observation>" + docs + "</observation>\n\n"
    )
    assert ret.calls == [(["FleetBoston Financial was bought by whom?"], 5)]
    # the final turn (no search, no answer) is the prediction, as in r_search-eval
    assert (t.prediction, t.extraction_status, len(be.calls)) == (
        "It was Bank of America.",
        "final_turn_fallback",
        2,
    )
    assert t.turns[0].text == turn  # the recorded turn keeps the sampled text


def test_released_protocol_is_for_evaluation_only():
    from methods.r_search.method import released_protocol

    ctx, _be, _ret = context(
        {"FleetBoston": [SEARCH, "<answer>x</answer>"]}, released_protocol(), training=True
    )
    with pytest.raises(ConfigError, match="evaluation protocol"):
        M.solve([example(1, Q, *GOLD)], ctx)


def test_run_under_the_released_protocol_scores_acc(monkeypatch, tmp_path):
    """A real ``Runner`` run under ``r_search-released`` stores R-Search's "Acc"
    (``acc_substring_lower``, QingFei1/R-Search@ecba08d src/eval/utils.py:18-30) per sample beside
    em and f1_squad; ``r_search-eval`` does not score it."""
    from harness.data.benches import Selection
    from harness.eval.runner import RunConfig, Runner
    from harness.results.store import Store
    from methods.r_search.method import released_protocol
    from tests.support.scripted import RecordingRetriever, ScriptedBackend

    script = {"George Rankin's occupation": ["<answer>He was a Politician.</answer>"]}
    metrics = {}
    for proto in (released_protocol(), eval_protocol()):
        backend = ScriptedBackend(script, default="<answer>x</answer>")
        monkeypatch.setattr(Runner, "backend", lambda self, b=backend: b)
        monkeypatch.setattr(Runner, "retriever", lambda self, protocol=None: RecordingRetriever())
        db = tmp_path / f"{proto.name}.duckdb"
        cfg = RunConfig(
            methods=["r_search"],
            bench="mini",
            protocol=proto.with_(selection=Selection(mode="first", n=1)),
            db=db,
        )
        (run,) = Runner(cfg).run([M])
        df = Store(db).query(
            "SELECT m.metric, m.value FROM sample_metrics m JOIN samples s USING (run_id, dataset, sample_id) "
            "WHERE run_id = $r AND s.dataset = 'popqa'",
            {"r": run.run_id},
        )
        metrics[proto.name] = dict(zip(df["metric"], df["value"], strict=True))
    rel = metrics["r_search-released"]
    # gold "politician": a lower-cased substring (Acc 1), not an exact match; f1_squad P 1/3, R 1
    assert (rel["acc_substring_lower"], rel["em"]) == (1.0, 0.0)
    assert rel["f1_squad"] == pytest.approx(2 * (1 / 3) * 1 / (1 / 3 + 1))
    assert "acc_substring_lower" not in metrics["r_search-eval"]
