"""The retrieval step the tag loop and the segment loop share, and the observation hook's extra
turns (recorded by the engine right after the retrieval, numbered in order)."""

from __future__ import annotations

from harness.protocol import CorpusRef, Protocol
from harness.rollout.base import RunContext
from harness.rollout.engine import TagRolloutConfig, run_tag_rollouts
from harness.rollout.extract import extract_tagged
from harness.rollout.render import RENDERERS
from harness.rollout.segments import SegmentLoopConfig, run_segment_rollouts
from harness.types import Completion, QAExample, Turn
from methods.search_r1.render import SEARCH_R1_DIALECT as D
from tests.support.scripted import RecordingRetriever, ScriptedBackend

PROTO = Protocol(name="t", corpus=CorpusRef(id="t", content_hash="0" * 64, n_passages=1))
EXAMPLE = QAExample(id="1", dataset="toy", split="test", question="qq", answers=("Paris",))
OUTS = ["<search>capital of France</search>", "<answer>Paris</answer>"]
RENDER = RENDERERS.get("search_r1")


def tag_config(**kw) -> TagRolloutConfig:
    base = dict(dialect=D, renderer=RENDER, top_k=2, max_turns=2, max_obs_tokens=30, max_new_tokens=200)
    return TagRolloutConfig(**(base | kw))


def query_of(c: Completion) -> str | None:
    action, content = D.parse_action(c.text)
    return content if action == "search" else None


SEGMENTS = SegmentLoopConfig(
    dialect=D,
    stops=tuple(D.stops),
    max_new_tokens=200,
    max_searches=2,
    top_k=2,
    max_obs_tokens=30,
    query_of=query_of,
    observe=RENDER,
    extractor=lambda text: extract_tagged(text, D.answer_open, D.answer_close),
)


def run(run_fn, cfg, training: bool = False):
    be, ret = ScriptedBackend({"qq": list(OUTS)}), RecordingRetriever()
    ctx = RunContext(backend=be, protocol=PROTO, retriever=ret, training=training)
    (t,) = run_fn(["Q: qq\n"], [EXAMPLE], ctx, cfg)
    return t, ret


def test_tag_and_segment_loops_record_the_same_retrieval():
    for training in (False, True):
        tag, tag_ret = run(run_tag_rollouts, tag_config(), training)
        seg, seg_ret = run(run_segment_rollouts, SEGMENTS, training)
        assert tag_ret.calls == seg_ret.calls == [(["capital of France"], 2)]
        (a,) = [x for x in tag.turns if x.kind == "retrieve"]
        (b,) = [x for x in seg.turns if x.kind == "retrieve"]
        body = RENDER(RecordingRetriever().search(["capital of France"], 2)[0])[:30]  # 1 char = 1 token
        assert (a.text, a.status, a.observation_tokens) == (
            body,
            "obs_truncated",
            len(D.obs_prefix + body + D.obs_suffix),
        )
        assert (a.index, a.query, a.text, a.doc_ids, a.doc_scores, a.observation_tokens, a.status) == (
            b.index, b.query, b.text, b.doc_ids, b.doc_scores, b.observation_tokens, b.status,
        )  # fmt: skip
        assert tag.response == seg.response == OUTS[0] + D.obs_prefix + body + D.obs_suffix + OUTS[1]
        assert tag.loss_mask == seg.loss_mask


def test_observation_turns_follow_their_retrieval_and_the_body_is_cut():
    seen: list[tuple[str, list[str]]] = []

    def observe(states, queries, hits, ctx):
        seen.extend((q, [h.doc_id for h in hs]) for q, hs in zip(queries, hits, strict=True))
        return [("R" * 50, (Turn(index=-1, kind="llm_call", text="read", status="ok"),)) for _ in hits]

    t, _ret = run(run_tag_rollouts, tag_config(observation_fn=observe))
    assert seen == [("capital of France", ["capital of France#1", "capital of France#2"])]
    assert [(x.index, x.kind, x.text) for x in t.turns] == [
        (0, "generate", OUTS[0]),
        (1, "retrieve", "R" * 30),  # the hook's body, cut to max_obs_tokens
        (2, "llm_call", "read"),
        (3, "generate", OUTS[1]),
    ]
    assert t.response == OUTS[0] + D.obs_prefix + "R" * 30 + D.obs_suffix + OUTS[1]
