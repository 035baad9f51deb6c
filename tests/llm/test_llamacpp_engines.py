"""Several one-thread llama.cpp engines behind one backend (harness/llm/llamacpp_engines.py): the
routing rule, and that the split changes nothing a rollout sees: the same completions, seed for
seed, as one engine of one thread, and each group's next turn served from its engine's cache."""

from __future__ import annotations

import pytest

from harness.errors import ConfigError
from harness.llm.base import BackendSpec
from harness.llm.llamacpp_engines import LlamaCppEngines, route
from harness.types import SamplingParams


def test_a_group_stays_together_and_new_groups_go_to_the_least_loaded_engine():
    hist: list[list[tuple[int, ...]]] = [[], []]
    a, b, c = [1, 2, 3], [1, 2, 4, 5], [1, 9]
    # a's group on engine 0, b's (more tokens) on 1, c to the engine with fewer tokens: 0 (3×2 < 4×2)
    assert route([a, a, b, b, c, c], hist, 2) == [0, 0, 1, 1, 0, 0]
    assert hist == [[(1, 2, 3)] * 2 + [(1, 9)] * 2, [(1, 2, 4, 5)] * 2]
    # the next turn: each extends its own earlier prompt, whatever the loads of this call
    assert route([b + [7, 8, 9, 10], a + [6], c + [5], b + [1]], hist, 2) == [1, 0, 0, 1]


def test_the_longest_served_prefix_decides():
    hist: list[list[tuple[int, ...]]] = [[(1, 2)], [(1, 2, 3, 4)]]
    assert route([[1, 2, 3, 4, 5]], hist, 2) == [1]  # (1, 2) is a prefix too, but shorter
    assert route([[1, 2, 3]], hist, 2) == [0]
    assert route([[2, 1]], hist, 2) == [0]  # extends nothing; loads of this call 3 and 5 -> 0


def test_a_history_of_the_wrong_size_is_refused():
    with pytest.raises(ValueError, match="history for 1 engines, not 2"):
        route([[1]], [[]], 2)


def test_engines_must_divide_the_threads_and_have_one_slot_each():
    with pytest.raises(ConfigError, match="--rollout-engines 2: must divide the 3 rollout threads"):
        LlamaCppEngines(BackendSpec(kind="llamacpp", model="default", threads=3), 2)
    with pytest.raises(ConfigError, match="max_batch_size 4; each engine has one slot"):
        LlamaCppEngines(BackendSpec(kind="llamacpp", model="default", threads=2, max_batch_size=4), 2)


@pytest.mark.llamacpp
@pytest.mark.integration
def test_two_engines_sample_what_one_one_thread_engine_samples_and_reuse_their_caches():
    from harness.llm.llamacpp_backend import LlamaCppBackend

    spec = BackendSpec(kind="llamacpp", model="default", threads=2, max_batch_size=1, n_ctx=1024)
    sampling = SamplingParams(temperature=1.0, top_p=1.0, seed=11)
    engines = LlamaCppEngines(spec, 2, logprobs=True)
    one = LlamaCppBackend(spec.model_copy(update={"threads": 1}), logprobs=True, child=True)
    try:
        qa = engines.prompt_ids(engines.chat_prompt([{"role": "user", "content": "Who wrote Hamlet?"}]))
        qb = engines.prompt_ids(engines.chat_prompt([{"role": "user", "content": "Where is Lyon?"}]))
        prompts = [qa] * 3 + [qb] * 3
        got = engines.generate_ids(prompts, max_new_tokens=12, sampling=sampling)
        want = one.generate_ids(prompts, max_new_tokens=12, sampling=sampling)
        assert engines.served == [3, 3]
        # seed for seed and token for token: prompt i keeps seed + i on whichever engine serves it
        assert [c.token_ids for c in got] == [c.token_ids for c in want]
        assert [c.logprobs for c in got] == [c.logprobs for c in want]
        assert len({tuple(c.token_ids or ()) for c in got[:3]}) > 1  # sampled, not one greedy answer
        # the next turn of one rollout of each group: only the appended tokens are prefilled
        obs = engines.tokenize(" Observation: none.")
        nxt = [qa + list(got[2].token_ids or []) + obs, qb + list(got[5].token_ids or []) + obs]
        turn = engines.generate_ids(nxt, max_new_tokens=4, sampling=sampling)
        assert engines.served == [4, 4]
        assert [c.prefill_tokens for c in turn] == [len(obs) + 1, len(obs) + 1]  # + the last prompt token
        # a restart (a new adapter each step) empties the caches and forgets the routing
        engines.set_adapters([])
        assert engines._history == [[], []]
        assert engines.describe()["engines"] == 2 and engines.describe()["threads"] == 2
    finally:
        engines.close()
        one.close()


@pytest.mark.llamacpp
@pytest.mark.integration
def test_close_aborts_both_engines_generations_in_flight():
    """An interrupted training run closes its rollout engine mid-rollout: both engines' requests are
    aborted (each engine's own close), not decoded to the token limit, and the call in flight ends
    with that one-line error."""
    import threading
    import time

    from harness.errors import HarnessError

    engines = LlamaCppEngines(BackendSpec(kind="llamacpp", model="default", threads=2, n_ctx=1024), 2)
    # two prompts neither of which extends the other: one to each engine
    prompts = [engines.prompt_ids(", ".join(str(i) for i in range(a, a + 29))) for a in (1, 100)]
    outcome: list[object] = []

    def generate() -> None:
        try:
            outcome.append(engines.generate_ids(prompts, max_new_tokens=900))
        except HarnessError as e:
            outcome.append(e)

    t = threading.Thread(target=generate)
    t.start()
    time.sleep(2)  # 2 x 900 tokens take tens of seconds: both engines are decoding
    assert t.is_alive() and engines.served == [1, 1]
    engines.close()
    t.join(timeout=60)
    assert not t.is_alive()
    (e,) = outcome
    assert isinstance(e, HarnessError) and "aborted by close()" in str(e), e
