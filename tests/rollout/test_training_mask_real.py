"""Loss masks on a real rollout: the tiny model with the real SmolLM2 tokenizer in token space.
Every observation and correction token is 0, every generated token 1, and the token ids decode
to exactly the text the engine recorded."""

from __future__ import annotations

from harness.llm import BackendSpec, make_backend
from harness.protocol import CorpusRef, Protocol
from harness.rollout.base import RunContext
from harness.rollout.engine import TagRolloutConfig, run_tag_rollouts
from harness.rollout.render import RENDERERS
from harness.types import Completion, QAExample, SamplingParams
from methods.search_r1.render import SEARCH_R1_DIALECT
from tests.support.scripted import RecordingRetriever

PROTO = Protocol(name="t", corpus=CorpusRef(id="t", content_hash="0" * 64, n_passages=1))


class FirstTurnSearches:
    """The real tiny backend, except that each sequence's first turn is a search (real token ids)."""

    def __init__(self, inner):
        self.inner = inner
        self.calls = 0

    def __getattr__(self, name):
        return getattr(self.inner, name)

    def generate_ids(self, prompt_ids, **kw):
        self.calls += 1
        if self.calls == 1:
            text = "<think>hm</think><search>capital of France</search>"
            ids = self.inner.tokenize(text)
            return [
                Completion(
                    text=text,
                    prompt_tokens=len(p),
                    completion_tokens=len(ids),
                    finish_reason="stop",
                    stop="</search>",
                    token_ids=ids,
                )
                for p in prompt_ids
            ]
        return self.inner.generate_ids(prompt_ids, **kw)


def test_mask_token_by_token_on_real_tokenizer(tiny_dir):
    backend = FirstTurnSearches(make_backend(BackendSpec(model=str(tiny_dir), max_batch_size=4)))
    ctx = RunContext(
        backend=backend,
        protocol=PROTO,
        retriever=RecordingRetriever(),
        training=True,
        sampling=SamplingParams(temperature=1.0, seed=3),
    )
    cfg = TagRolloutConfig(
        dialect=SEARCH_R1_DIALECT,
        renderer=RENDERERS.get("search_r1"),
        top_k=2,
        max_turns=2,
        max_obs_tokens=40,
        max_new_tokens=12,
    )
    examples = [
        QAExample(id=str(i), dataset="t", split="t", question=f"q{i}", answers=("Paris",)) for i in range(2)
    ]
    prompts = [backend.chat_prompt([{"role": "user", "content": f"Question {i}?"}]) for i in range(2)]
    trajs = run_tag_rollouts(prompts, examples, ctx, cfg)
    tok = backend.inner.tokenizer
    corrections = 0
    for t in trajs:
        assert len(t.response_ids) == len(t.loss_mask)
        # walk the response part by part: generated parts carry mask 1, environment parts mask 0
        pos = 0
        env_texts = []
        for k, turn in enumerate(t.turns):
            if turn.kind == "generate":
                n = turn.completion_tokens
                assert t.loss_mask[pos : pos + n] == [1] * n
                assert tok.decode(t.response_ids[pos : pos + n]) == turn.text
                pos += n
                last = k == len(t.turns) - 1
                if turn.status in ("invalid_action", "truncated", "empty_query") and not last:
                    # the correction message follows as its own turn, with its token count
                    nxt = t.turns[k + 1]
                    assert (nxt.kind, nxt.status) == ("message", "correction")
                    assert nxt.text == SEARCH_R1_DIALECT.invalid_message
                    assert nxt.observation_tokens == len(backend.tokenize(SEARCH_R1_DIALECT.invalid_message))
            elif turn.kind == "message":
                m = turn.observation_tokens
                assert t.loss_mask[pos : pos + m] == [0] * m
                env_texts.append(tok.decode(t.response_ids[pos : pos + m]))
                pos += m
            else:
                n = turn.observation_tokens
                assert t.loss_mask[pos : pos + n] == [0] * n
                obs = tok.decode(t.response_ids[pos : pos + n])
                assert obs.startswith("\n\n<information>") and obs.endswith("</information>\n\n")
                assert turn.text in obs
                pos += n
        assert pos == len(t.response_ids)
        assert t.n_retrievals == 1
        assert all(e == SEARCH_R1_DIALECT.invalid_message for e in env_texts)
        corrections += len(env_texts)
        assert tok.decode(t.prompt_ids + t.response_ids).startswith(t.meta["prompt"])
    assert corrections > 0  # the correction-message path was exercised too
