"""Search-o1 control flow with a scripted backend: search tags, one Reason-in-Documents call per
executed search (batched), the search cap (searches, not turns), the over-limit and repeated-query
messages, the generation-round cap, \\boxed{} extraction."""

from __future__ import annotations

import json
import re

import pytest

from baselines.search_o1 import (
    DIALECT,
    MAX_TURN,
    MULTIHOP_DATASETS,
    MULTIQA_INSTRUCTION,
    NO_INFORMATION,
    OVER_LIMIT_MESSAGE,
    REPEATED_QUERY_MESSAGE,
    SINGLEQA_INSTRUCTION,
    TASK_INSTRUCTION,
    SearchO1,
    SearchO1Released,
    extract_information,
    format_documents,
    previous_steps,
    released_rid_sampling,
)
from harness.errors import ConfigError
from harness.rollout.base import RunContext
from harness.rollout.extract import extract_boxed
from tests.baselines.helpers import context, example, protocol
from tests.support.scripted import RecordingRetriever, ScriptedBackend

Q1 = "Which company developed the game voiced by Alice David?"
Q2 = "Who got the first Nobel Prize in Physics, in one word?"
RID = "**Task Instruction:**"  # every Reason-in-Documents prompt starts with it; no main prompt has it


def search(q: str) -> str:
    return f"<|begin_search_query|>{q}<|end_search_query|>"


def test_search_reason_in_documents_and_boxed_answer():
    be = ScriptedBackend(
        {
            Q1: [
                f"I need the game. {search('Alice David voice')} ignored",
                "So it is \\boxed{Crystal Dynamics}.",
            ],
            Q2: ["Known: \\boxed{\\text{Röntgen}}"],
            RID: ["Reading...\n**Final Information**\n\nAlice David voices Lara\nCroft."],
        }
    )
    ctx, ret = context(be)
    t1, t2 = SearchO1().solve([example(1, Q1, dataset="hotpotqa"), example(2, Q2, dataset="nq")], ctx)
    # main turn (both) -> one Reason-in-Documents call -> main turn (Q1 only)
    assert [len(c) for c in be.calls] == [2, 1, 1]
    assert ret.calls == [(["Alice David voice"], 3)]
    # prompts: multi-hop instruction for HotpotQA, single-hop otherwise; the cap is the protocol's turns
    assert be.calls[0][0] == (
        "<user>" + MULTIQA_INSTRUCTION.format(max_search_limit=4) + TASK_INSTRUCTION.format(question=Q1)
        + "</user><assistant>"
    )  # fmt: skip
    assert be.calls[0][1].startswith("<user>" + SINGLEQA_INSTRUCTION.format(max_search_limit=4))
    # the Reason-in-Documents prompt: previous steps, the query, the passages as web pages
    rid_prompt = be.calls[1][0]
    assert (
        f"**Previous Reasoning Steps:**  \nStep 1: I need the game. {search('Alice David voice')}\n"
        in rid_prompt
    )
    assert "**Current Search Query:**  \nAlice David voice\n" in rid_prompt
    assert format_documents(RecordingRetriever().search(["Alice David voice"], 3)[0]) in rid_prompt
    # its result (newlines removed) goes back inside the result tags; the search was cut at its close tag
    assert t1.response == (
        f"I need the game. {search('Alice David voice')}"
        "\n\n<|begin_search_result|>Alice David voices LaraCroft.<|end_search_result|>\n\n"
        "So it is \\boxed{Crystal Dynamics}."
    )
    assert [t.kind for t in t1.turns] == ["generate", "retrieve", "llm_call", "generate"]
    assert [t.index for t in t1.turns] == [0, 1, 2, 3]
    assert t1.prediction == "Crystal Dynamics" and t1.extraction_status == "ok"
    assert (t1.n_retrievals, t1.n_llm_calls) == (1, 3)
    assert t1.meta["reason_in_documents_calls"] == 1 and t1.meta["backoff"] is False
    # every call's tokens are counted, the Reason-in-Documents call included
    assert t1.prompt_tokens == len(be.calls[0][0]) + len(rid_prompt) + len(be.calls[2][0])
    assert t2.prediction == "Röntgen" and (t2.n_retrievals, t2.n_llm_calls) == (0, 1)


def test_search_cap_counts_searches_and_over_limit_search_gets_search_o1_message():
    be = ScriptedBackend(
        {
            Q1: [search("first query"), search("second query"), search("third query"), "\\boxed{z}"],
            RID: ["**Final Information**\nA.", "**Final Information**\nB."],
        }
    )
    ctx, ret = context(be, protocol(max_turns=2))
    (t,) = SearchO1().solve([example(1, Q1)], ctx)
    assert ret.n_queries == 2  # the third search is over the cap: not executed, not read
    assert sum(1 for c in be.calls for p in c if RID in p) == 2
    assert [(x.kind, x.status) for x in t.turns] == [
        ("generate", "ok"), ("retrieve", "ok"), ("llm_call", "ok"),
        ("generate", "ok"), ("retrieve", "ok"), ("llm_call", "ok"),
        ("generate", "search_after_budget"), ("message", "over_budget"),
        ("generate", "ok"),
    ]  # fmt: skip
    assert OVER_LIMIT_MESSAGE == (
        "\n<|begin_search_result|>\nThe maximum search limit is exceeded. You are not allowed to search.\n"
        "<|end_search_result|>\n"
    )
    # the model continued after Search-o1's message and answered
    assert t.response.endswith(search("third query") + OVER_LIMIT_MESSAGE + "\\boxed{z}")
    assert t.turns[7].query == "third query" and t.turns[7].text == OVER_LIMIT_MESSAGE
    assert t.turns[7].observation_tokens == len(OVER_LIMIT_MESSAGE)
    assert t.prediction == "z" and t.extraction_status == "ok"
    assert (t.n_retrievals, t.meta["over_limit_searches"], t.meta["repeated_queries"]) == (2, 1, 0)
    assert "limited to 2." in be.calls[0][0]
    assert SearchO1().spec(protocol()).params["max_generations"] == MAX_TURN == 15


def test_generation_rounds_are_capped_and_the_last_round_search_is_read():
    queries = [f"query {i}" for i in range(MAX_TURN + 1)]
    be = ScriptedBackend({Q1: [search(q) for q in queries], RID: ["**Final Information**\nA."] * MAX_TURN})
    ctx, ret = context(be, protocol(max_turns=20))
    (t,) = SearchO1().solve([example(1, Q1)], ctx)
    main_calls = [c for c in be.calls if RID not in c[0]]
    assert len(main_calls) == MAX_TURN  # 15 generation rounds, then stop (no 16th)
    assert ret.n_queries == MAX_TURN and t.meta["reason_in_documents_calls"] == MAX_TURN
    assert [x.kind for x in t.turns[-3:]] == ["generate", "retrieve", "llm_call"]
    assert t.extraction_status == "max_turns" and t.prediction == ""


def test_over_limit_rounds_keep_going_until_the_round_cap():
    be = ScriptedBackend({Q1: [search(f"q{i}") for i in range(MAX_TURN)], RID: ["**Final Information**\nA."]})
    ctx, ret = context(be, protocol(max_turns=1))
    (t,) = SearchO1().solve([example(1, Q1)], ctx)
    assert ret.n_queries == 1 and len(be.calls) == 1 + 1 + (MAX_TURN - 1)
    assert t.meta["over_limit_searches"] == MAX_TURN - 1 and t.n_retrievals == 1
    assert t.response.count(OVER_LIMIT_MESSAGE) == MAX_TURN - 1


def test_repeated_query_gets_search_o1_message_without_retrieval_or_reading():
    be = ScriptedBackend(
        {
            Q1: [search("same"), search("same"), search("other"), "\\boxed{x}"],
            RID: ["**Final Information**\nfound it", "**Final Information**\nmore"],
        }
    )
    ctx, ret = context(be, protocol(max_turns=2))
    (t,) = SearchO1().solve([example(1, Q1)], ctx)
    # the repeat is neither retrieved nor read nor counted: "other" is still within the cap of 2
    assert [q for qs, _ in ret.calls for q in qs] == ["same", "other"]
    assert t.meta == {
        **t.meta,
        "reason_in_documents_calls": 2,
        "repeated_queries": 1,
        "over_limit_searches": 0,
    }
    assert [(x.kind, x.status) for x in t.turns][3:5] == [
        ("generate", "repeat_query"),
        ("message", "repeat_query"),
    ]
    assert REPEATED_QUERY_MESSAGE == (
        "\n<|begin_search_result|>\nYou have searched this query. Please refer to previous results.\n"
        "<|end_search_result|>\n"
    )
    assert search("same") + REPEATED_QUERY_MESSAGE + search("other") in t.response
    assert t.n_retrievals == 2 and t.prediction == "x"


def test_over_limit_wins_over_repeat():
    be = ScriptedBackend(
        {Q1: [search("same"), search("same"), "\\boxed{x}"], RID: ["**Final Information**\nA"]}
    )
    ctx, _ret = context(be, protocol(max_turns=1))
    (t,) = SearchO1().solve([example(1, Q1)], ctx)
    assert [x.status for x in t.turns if x.kind == "message"] == ["over_budget"]
    assert OVER_LIMIT_MESSAGE in t.response and REPEATED_QUERY_MESSAGE not in t.response


def test_unreadable_reading_becomes_no_helpful_information_and_is_counted():
    be = ScriptedBackend({Q1: [search("q"), "\\boxed{y}"], RID: ["I could not read it"]})
    ctx, _ = context(be)
    (t,) = SearchO1().solve([example(1, Q1)], ctx)
    assert f"<|begin_search_result|>{NO_INFORMATION}<|end_search_result|>" in t.response
    assert [x.status for x in t.turns if x.kind == "llm_call"] == ["no_final_information"]


@pytest.mark.parametrize(
    "segment,action",
    [
        (f"think {search(' q ')}", ("search", "q")),
        (f"{search('a')} then {search('b')}", ("search", "b")),  # the last query (extract_between)
        (search("  "), ("answer", "")),  # an empty query finishes, as in Search-o1
        ("no search, \\boxed{z}", ("answer", "")),
        ("<|begin_search_query|>unclosed", ("answer", "")),
    ],
)
def test_dialect_search_or_finish(segment, action):
    assert DIALECT.parse_action(segment) == action
    assert DIALECT.stops == ["<|end_search_query|>"]


def test_extract_information_rules():
    assert extract_information("x\n**Final Information**\n\nA\nB.\n```") == ("AB.", True)
    assert extract_information("**Final Information** C") == ("C", True)  # at the very start too
    assert extract_information("x\n**Modified Reasoning Steps**\nStep 1: a\n") == ("Step 1: a", True)
    assert extract_information("nothing") == (NO_INFORMATION, False)


def test_previous_steps_elides_long_histories():
    short = "a\n\nb\nc"
    assert previous_steps(short) == "Step 1: a\n\nStep 2: b\n\nStep 3: c"
    long = "\n".join(["s1", "s2", search("q"), "s4", "s5", "s6", "s7", "s8", "s9"])
    # the first step, every search step and the last four parts (the empty part after the last
    # "\n\n" is one of them, as in run_search_o1.py, so three steps show)
    assert previous_steps(long) == (
        f"Step 1: s1\n\n...\n\nStep 3: {search('q')}\n\n...\n\nStep 7: s7\n\nStep 8: s8\n\nStep 9: s9"
    )


def test_documents_are_shown_as_web_pages():
    (hits,) = RecordingRetriever().search(["q"], 1)
    assert (
        format_documents(hits)
        == "**Web Page 1:**\n"
        + json.dumps({"id": 1, "title": "Title 1", "context": "Text about q number 1."}, indent=2)
        + "\n"
    )


def _upstream_extract_answer_qa(output: str) -> str:
    """sunnynexus/Search-o1@6ced48f scripts/evaluate.py:32-42 (``extract_answer``, mode ``qa``),
    verbatim in effect: a greedy one-line regex, the last match, the last greedy ``\\text{}``."""
    matches = re.findall(r"\\boxed\{(.*)\}", output)
    if not matches:
        return ""
    text = matches[-1]
    inner = re.findall(r"\\text\{(.*)\}", text)
    return (inner[-1] if inner else text).strip("()")


@pytest.mark.parametrize(
    ("output", "ours", "upstream"),
    [
        ("so \\boxed{Paris}.", "Paris", "Paris"),  # the common case: the same
        ("\\boxed{\\text{(Paris)}}", "Paris", "Paris"),
        # where the rules differ (docs/baselines.md, Search-o1, "Differences that remain"):
        ("\\boxed{A} or \\boxed{B}", "B", "A} or \\boxed{B"),  # two boxes on one line: greedy .*
        ("\\boxed{x} (see {y})", "x", "x} (see {y"),  # a later brace on the line
        ("\\boxed{New\nYork}", "New\nYork", ""),  # a box across lines: no match upstream
        ("\\boxed{\\text{Paris} city}", "\\text{Paris} city", "Paris"),  # \\text{} not the whole box
        ("\\boxed{ Paris }", "Paris", " Paris "),  # whitespace (normalised away by every metric)
    ],
)
def test_boxed_answer_rule_against_the_release(output, ours, upstream):
    """Our ``extract_boxed`` (balanced braces, the last box) is not the release's regex; the cases
    where they differ are pinned here and listed in docs/baselines.md."""
    assert extract_boxed(output).prediction == ours
    assert _upstream_extract_answer_qa(output) == upstream


# -- the released evaluation: protocols search_o1-released-{singlehop,multihop}, variant search_o1_released

# sunnynexus/Search-o1@6ced48f scripts/run_search_o1.py, verbatim: lines 199-205 (the QA sets'
# budgets), 210-212 (the reasoning's repetition penalty), 304-312 (Reason-in-Documents' own
# sampling), 388-394 (max_tokens); the argparse defaults of lines 125-143 are --temperature 0.7,
# --top_p 0.8, --top_k_sampling 20.
RUN_SEARCH_O1 = """\
    if dataset_name in ['nq', 'triviaqa', 'hotpotqa', 'musique', 'bamboogle', '2wiki', 'medmcqa', 'pubhealth']:
        MAX_SEARCH_LIMIT = 5
        if dataset_name in ['hotpotqa', 'musique', 'bamboogle', '2wiki']:
            MAX_SEARCH_LIMIT = 10
            MAX_TURN = 15
        top_k = 10
        max_doc_len = 3000
    if repetition_penalty is None:
        repetition_penalty = 1.05 if 'qwq' in model_path.lower() else 1.0
        output = llm.generate(
            prompts,
            sampling_params=SamplingParams(
                max_tokens=max_tokens,
                temperature=0.7,
                top_p=0.8,
                top_k=20,
                repetition_penalty=1.05,
            )
        )
    if 'qwq' in model_path.lower():
        if dataset_name in ['aime', 'amc', 'livecode']:
            max_tokens = 32768
        else:
            max_tokens = 20480
    else:
        max_tokens = 8192
"""
ARGPARSE_DEFAULTS = {"temperature": 0.7, "top_p": 0.8, "top_k_sampling": 20}


def upstream(pattern: str) -> list[str]:
    return re.findall(pattern, RUN_SEARCH_O1)


def test_released_protocols_pin_run_search_o1():
    from harness.eval.protocol import preset

    single, multi = preset("search_o1-released-singlehop"), preset("search_o1-released-multihop")
    assert [single.max_turns, multi.max_turns] == [int(x) for x in upstream(r"MAX_SEARCH_LIMIT = (\d+)")]
    assert single.top_k == multi.top_k == int(upstream(r"top_k = (\d+)")[0]) == 10
    assert int(upstream(r"MAX_TURN = (\d+)")[0]) == MAX_TURN
    for p in (single, multi):
        d = p.decoding  # the reasoning's decoding: the argparse defaults, a non-QwQ model
        assert (d.temperature, d.top_p, d.top_k) == tuple(ARGPARSE_DEFAULTS.values())
        assert d.repetition_penalty == float(upstream(r"else (\d\.\d+)\n")[0]) == 1.0
        assert d.max_new_tokens == int(upstream(r"max_tokens = (\d+)\n$")[0]) == 8192
        assert p.with_(max_turns=5).protocol_id == single.protocol_id  # they differ in the cap only
    assert "hotpotqa" in MULTIHOP_DATASETS and "nq" not in MULTIHOP_DATASETS


def test_released_reason_in_documents_sampling_pins_run_search_o1():
    rid = released_rid_sampling(7)
    block = RUN_SEARCH_O1.split("SamplingParams(")[1]
    assert rid.temperature == float(re.search(r"temperature=([\d.]+)", block).group(1)) == 0.7
    assert rid.top_p == float(re.search(r"top_p=([\d.]+)", block).group(1)) == 0.8
    assert rid.top_k == int(re.search(r"top_k=(\d+)", block).group(1)) == 20
    assert rid.repetition_penalty == float(re.search(r"repetition_penalty=([\d.]+)", block).group(1)) == 1.05
    assert rid.seed == 7


class SamplingRecorder(ScriptedBackend):
    """Records the sampling parameters and token budget of every generate call."""

    def __init__(self, script):
        super().__init__(script)
        self.settings = []

    def generate(self, prompts, *, stop, max_new_tokens, sampling, include_stop=False):
        self.settings.append((max_new_tokens, sampling))
        return super().generate(
            prompts, stop=stop, max_new_tokens=max_new_tokens, sampling=sampling, include_stop=include_stop
        )


def _run(method, proto):
    be = SamplingRecorder(
        {
            Q1: [f"{search('Alice David voice')}", "So \\boxed{Crystal Dynamics}."],
            RID: ["**Final Information**\n\nAlice David voices Lara Croft."],
        }
    )
    sampling = proto.decoding.sampling()
    ctx = RunContext(backend=be, protocol=proto, retriever=RecordingRetriever(), sampling=sampling)
    (t,) = method.solve([example(1, Q1, dataset="hotpotqa")], ctx)
    return be, t, sampling


def test_variant_decodes_reason_in_documents_as_released_and_the_reasoning_as_the_protocol():
    from harness.eval.protocol import preset

    proto = preset("search_o1-released-multihop")
    be, t, sampling = _run(SearchO1Released(), proto)
    assert t.prediction == "Crystal Dynamics"
    main1, rid, main2 = be.settings
    assert main1 == main2 == (8192, sampling) and sampling.repetition_penalty == 1.0
    assert rid == (8192, released_rid_sampling(proto.decoding.seed))
    # the default search_o1 decodes both calls the same way
    be, _, sampling = _run(SearchO1(), proto)
    assert [s for _, s in be.settings] == [sampling] * 3
    # the prompt states the protocol's cap, as Search-o1 states MAX_SEARCH_LIMIT
    assert "limited to 10." in be.calls[0][0]


def test_variant_is_scored_only_under_the_released_protocols():
    from harness.eval.protocol import preset
    from harness.eval.runner import check_protocol
    from harness.methods_registry import get_method

    for name in ("search_o1-released-singlehop", "search_o1-released-multihop"):
        check_protocol(get_method("search_o1_released"), preset(name))
        with pytest.raises(ConfigError, match="own setting of method"):
            check_protocol(get_method("search_o1"), preset(name))
    with pytest.raises(ConfigError, match="scored only under its own protocol"):
        check_protocol(get_method("search_o1_released"), preset("mini"))
    spec = SearchO1Released().spec(preset("search_o1-released-multihop"))
    assert spec.params["reason_in_documents_sampling"]["repetition_penalty"] == 1.05
    assert spec.params["max_searches"] == 10 and spec.params["top_k"] == 10
