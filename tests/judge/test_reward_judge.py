"""The judge a reward asks (harness/judge/reward.py): one chat_batch with only the asked items,
the paper's parse per reply, and a status per item (ok / unparsable / error / skipped)."""

from __future__ import annotations

import pytest

from harness.errors import ConfigError
from harness.judge.prompts import get_prompt
from harness.judge.reward import JudgedReply, RewardJudge
from harness.method import RewardContext
from harness.types import Completion, SamplingParams, Trajectory

SAMPLING = SamplingParams(temperature=0.0)


class ChatJudge:
    """Replies with the scripted text per call; the text "FAIL" is a failed request."""

    def __init__(self, replies: list[str]):
        self.replies = list(replies)
        self.calls: list[tuple[list[list[dict[str, str]]], int, SamplingParams]] = []

    def chat_batch(self, conversations, *, max_new_tokens, sampling, stop=()):
        self.calls.append((list(conversations), max_new_tokens, sampling))
        out = []
        for _ in conversations:
            text = self.replies.pop(0)
            failed = text == "FAIL"
            out.append(
                Completion(
                    text="" if failed else text,
                    prompt_tokens=0,
                    completion_tokens=0,
                    finish_reason="error" if failed else "stop",
                )
            )
        return out


def traj(q: str) -> Trajectory:
    return Trajectory(example_id=q, dataset="t", question=q, answers=[f"gold {q}"], response=f"resp {q}")


def yes_no(reply: str) -> bool | None:
    return {"yes": True, "no": False}.get(reply.strip().lower())


JUDGE = RewardJudge(get_prompt("default"), yes_no, 16, SAMPLING)


def test_one_batch_of_the_asked_items_and_a_status_each():
    judge = ChatJudge(["yes", "maybe", "FAIL", "no"])
    ts = [traj(q) for q in ("q1", "q2", "q3", "q4", "q5")]
    replies = JUDGE.ask(RewardContext(models={"judge": judge}), "m", ts, ["p1", None, "p3", "p4", "p5"])
    assert replies == [
        JudgedReply("ok", True),
        JudgedReply("skipped"),
        JudgedReply("unparsable"),
        JudgedReply("error"),
        JudgedReply("ok", False),
    ]
    ((convs, max_new_tokens, sampling),) = judge.calls  # one call, four conversations
    assert (max_new_tokens, sampling) == (16, SAMPLING)
    prompt = get_prompt("default")
    assert convs == [prompt.messages(f"q{i}", [f"gold q{i}"], f"p{i}") for i in (1, 3, 4, 5)]


def test_nothing_asked_needs_no_judge_model():
    assert JUDGE.ask(RewardContext(), "m", [traj("q1")], [None]) == [JudgedReply("skipped")]


def test_a_missing_judge_model_names_the_method():
    with pytest.raises(ConfigError, match="method 'm' needs a 'judge' model"):
        JUDGE.ask(RewardContext(), "m", [traj("q1")], ["p1"])
