"""The cached judge on scripted replies: every status branch, caching, de-duplication, re-asking
failed requests, and the in-process backend path."""

from __future__ import annotations

import pytest

from harness.errors import ConfigError
from harness.judge.core import Judge, JudgeItem, judgement_key
from harness.judge.prompts import get_prompt
from harness.judge.transport import BackendTransport, JudgeReply
from harness.llm.base import Backend
from tests.judge.helpers import ScriptedTransport, new_store
from tests.support.scripted import ScriptedBackend

OK = JudgeReply('{"rationale": "same", "judgement": "correct"}', "ok", 50, 12, 0.1)
NO = JudgeReply('{"rationale": "differs", "judgement": "incorrect"}', "ok", 50, 12, 0.1)
PLAIN = JudgeReply("No.", "ok", 50, 2, 0.1)
GARBLE = JudgeReply("I think maybe", "ok", 50, 3, 0.1)
EMPTY = JudgeReply("", "ok", 50, 0, 0.1)
CUT = JudgeReply('{"rationale": "very long', "length", 50, 256, 0.1)
TIMEOUT = JudgeReply("", "timeout", latency_s=60.0, error="http://x/v1: APITimeoutError: Request timed out.")
FAILED = JudgeReply("", "error", latency_s=0.2, error="http://x/v1: InternalServerError: 500")

SCRIPT = {
    "pred-ok": OK,
    "pred-no": NO,
    "pred-plain": PLAIN,
    "pred-garble": GARBLE,
    "pred-empty": EMPTY,
    "pred-cut": CUT,
    "pred-timeout": TIMEOUT,
    "pred-failed": FAILED,
}


def _items(*preds: str) -> list[JudgeItem]:
    return [JudgeItem(f"question about {p}?", ("gold", "alias"), p) for p in preds]


def test_every_status_is_stored_counted_and_only_scored_ones_have_a_score(tmp_path):
    store = new_store(tmp_path)
    t = ScriptedTransport(dict(SCRIPT))
    judge = Judge(t, get_prompt("default"), store)
    preds = [*SCRIPT, ""]
    out = judge.judge(_items(*preds))
    got = {j.prediction: (j.status, j.verdict, j.score) for j in out.judgements}
    assert got == {
        "pred-ok": ("ok", "correct", 1.0),
        "pred-no": ("ok", "incorrect", 0.0),
        "pred-plain": ("fallback_parse", "incorrect", 0.0),
        "pred-garble": ("unparseable", None, None),
        "pred-empty": ("empty", None, None),
        "pred-cut": ("truncated", None, None),
        "pred-timeout": ("timeout", None, None),
        "pred-failed": ("error", None, None),
        "": ("no_prediction", "incorrect", 0.0),  # not asked: scored 0 like EM
    }
    assert (out.asked, out.cached, out.duplicates, out.n_scored) == (8, 0, 0, 4)
    assert out.status_counts == {
        "ok": 2, "fallback_parse": 1, "unparseable": 1, "empty": 1, "truncated": 1,
        "timeout": 1, "error": 1, "no_prediction": 1,
    }  # fmt: skip
    assert (out.prompt_tokens, out.completion_tokens) == (8 * 50 - 100, 12 + 12 + 2 + 3 + 0 + 256)
    stored = store.query("SELECT prediction, status, score, raw FROM judgements ORDER BY prediction")
    assert list(stored["prediction"]) == sorted(SCRIPT)  # the empty prediction is not stored
    row = stored.set_index("prediction").loc["pred-timeout"]
    assert row["status"] == "timeout" and row["raw"].endswith("Request timed out.")
    assert stored.set_index("prediction")["score"].isna().sum() == 5
    assert judge.metric_name == "judge@scripted-judge:b5fb6b85"


def test_a_second_pass_asks_only_the_failed_requests(tmp_path):
    store = new_store(tmp_path)
    first = ScriptedTransport(dict(SCRIPT))
    Judge(first, get_prompt("default"), store).judge(_items(*SCRIPT))
    again = ScriptedTransport({"pred-timeout": OK, "pred-failed": NO})
    out = Judge(again, get_prompt("default"), store).judge(_items(*SCRIPT))
    assert [a.split("Predicted answer: ")[1].split("\n")[0] for a in again.asked] == [
        "pred-timeout",
        "pred-failed",
    ]
    assert (out.asked, out.cached) == (2, 6)
    assert {j.prediction: j.status for j in out.judgements}["pred-timeout"] == "ok"
    # a third pass asks nothing at all
    third = ScriptedTransport({})
    out = Judge(third, get_prompt("default"), store).judge(_items(*SCRIPT))
    assert (third.asked, out.asked, out.cached) == ([], 0, 8)
    assert store.query("SELECT count(*) AS n FROM judgements")["n"][0] == 8


def test_duplicates_in_a_batch_are_asked_once_and_golds_order_does_not_matter(tmp_path):
    t = ScriptedTransport({"pred-ok": OK})
    items = [
        JudgeItem("q?", ("a", "b"), "pred-ok"),
        JudgeItem("q?", ("b", "a"), "pred-ok"),
        JudgeItem("q?", ("a", "b"), "pred-ok"),
    ]
    out = Judge(t, get_prompt("default"), new_store(tmp_path)).judge(items)
    assert (len(t.asked), out.asked, out.duplicates, [j.score for j in out.judgements]) == (
        1,
        1,
        2,
        [1.0] * 3,
    )


def test_the_key_names_model_prompt_question_golds_and_text():
    k = judgement_key("m", "h", "q", ["b", "a"], "p")
    assert k == judgement_key("m", "h", "q", ["a", "b"], "p")
    assert len({k, *(judgement_key(*v) for v in [
        ("m2", "h", "q", ["a", "b"], "p"), ("m", "h2", "q", ["a", "b"], "p"),
        ("m", "h", "q2", ["a", "b"], "p"), ("m", "h", "q", ["a"], "p"), ("m", "h", "q", ["a", "b"], "p2"),
    ])}) == 6  # fmt: skip


def test_another_prompt_or_model_is_asked_anew(tmp_path):
    store = new_store(tmp_path)
    Judge(ScriptedTransport({"pred-ok": OK}), get_prompt("default"), store).judge(_items("pred-ok"))
    t = ScriptedTransport({}, default=JudgeReply("YES", "ok", 40, 1))
    out = Judge(t, get_prompt("when_to_search"), store).judge(_items("pred-ok"))
    assert (len(t.asked), out.judgements[0].status) == (1, "ok")
    t2 = ScriptedTransport({"pred-ok": OK}, model="other-judge")
    assert Judge(t2, get_prompt("default"), store).judge(_items("pred-ok")).asked == 1


def test_logit_scoring_without_label_probabilities_is_counted_not_scored(tmp_path):
    t = ScriptedTransport({}, default=JudgeReply("YES", "ok", 40, 1, logprobs=None))
    out = Judge(t, get_prompt("when_to_search+logit"), new_store(tmp_path)).judge(_items("p"))
    j = out.judgements[0]
    assert (j.status, j.verdict, j.score, j.prompt_id) == (
        "no_logprobs",
        "correct",
        None,
        "when_to_search+logit",
    )


def test_without_a_store_nothing_is_cached(tmp_path):
    t = ScriptedTransport({"pred-ok": OK})
    judge = Judge(t, get_prompt("default"), None)
    judge.judge(_items("pred-ok"))
    judge.judge(_items("pred-ok"))
    assert len(t.asked) == 2


class ChatScripted(ScriptedBackend):
    chat_batch = Backend.chat_batch  # the in-process path: chat template, then generate
    _chat = Backend._chat

    def describe(self):
        return {"backend": "scripted", "model": "scripted-model"}


def test_any_backend_can_judge_in_process(tmp_path):
    b = ChatScripted({"pred-ok": ['{"rationale": "r", "judgement": "correct"}'], "pred-no": ["NO"]})
    transport = BackendTransport(b)
    out = Judge(transport, get_prompt("default"), new_store(tmp_path)).judge(_items("pred-ok", "pred-no"))
    assert [(j.status, j.score) for j in out.judgements] == [("ok", 1.0), ("fallback_parse", 0.0)]
    assert out.judgements[0].judge_model == "scripted-model"
    assert out.judgements[0].prompt_tokens == len(b.calls[0][0])  # characters are tokens here
    with pytest.raises(ConfigError, match="logit scoring needs log-probabilities"):
        transport.ask([[{"role": "user", "content": "x"}]], max_tokens=4, logprobs=True)
