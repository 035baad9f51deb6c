"""The packaged SmolLM2 re-quantised to Q8_0 (harness.llm.gguf_requant), which the trainer's llama.cpp
rollouts can serve (``--rollout-weights q8_0``), is the same model: every metadata key and tensor
kept, each re-quantised weight within Q8_0's rounding of the Q4_1 weight it came from, and llama.cpp
serving it is as close to the learner (transformers over the same dequantised weights) as the
packaged Q4_1 is. Also the rollout engine's lifecycle: its child spins (OMP_WAIT_POLICY=ACTIVE),
``suspend`` stops it so a request fails in one line, and ``set_adapters`` brings it back with the
same greedy tokens.

Tolerance of the engine gap: llama.cpp quantises activations to 8 bits for both weight types, so
the gap to transformers is mostly that (measured on these prompts: Q4_1 0.031, Q8_0 0.034 nats per
greedy token); the Q8_0 file must stay within 1.5x the packaged file's gap."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from harness.errors import ConfigError, HarnessError
from harness.llm.base import BackendSpec
from harness.llm.gguf_requant import requantize_gguf
from harness.llm.model_files import resolve_gguf
from harness.types import SamplingParams
from tests.llm.test_gguf_lora import engine_gap

pytestmark = [pytest.mark.llamacpp, pytest.mark.integration]

QUESTIONS = [
    "Who wrote the novel Moby-Dick?",
    "What is the capital of Australia?",
    "Explain photosynthesis in one paragraph.",
]


@pytest.fixture(scope="module")
def q8(tmp_path_factory) -> Path:
    return requantize_gguf(resolve_gguf("default"), tmp_path_factory.mktemp("rq") / "q8.gguf", "q8_0")


def test_every_key_and_tensor_is_kept_and_each_weight_within_q8_rounding(q8: Path):
    import gguf
    from gguf import GGMLQuantizationType as Q
    from gguf.quants import dequantize

    src, dst = gguf.GGUFReader(str(resolve_gguf("default"))), gguf.GGUFReader(str(q8))
    keys = {k for k in src.fields if not k.startswith("GGUF.")}
    assert keys == {k for k in dst.fields if not k.startswith("GGUF.")}
    for k in keys:
        a, b = src.fields[k], dst.fields[k]
        assert [bytes(a.parts[i]) for i in a.data] == [bytes(b.parts[i]) for i in b.data], k
    by_name = {t.name: t for t in dst.tensors}
    assert set(by_name) == {t.name for t in src.tensors}
    changed = 0
    for t in src.tensors:
        u = by_name[t.name]
        assert list(u.shape) == list(t.shape), t.name
        if t.tensor_type in (Q.F32, Q.Q8_0):
            assert u.tensor_type == t.tensor_type and np.array_equal(u.data, t.data), t.name
            continue
        assert u.tensor_type == Q.Q8_0, t.name
        x = dequantize(t.data, t.tensor_type).reshape(-1, 32)  # Q8_0 blocks of 32 along a row
        y = dequantize(u.data, u.tensor_type).reshape(-1, 32)
        step = np.abs(x).max(axis=1, keepdims=True) / 127  # Q8_0's grid step in each block
        # half a step, plus the float16 scale's relative rounding (2^-11) of the block's largest value
        assert (np.abs(y - x) <= step * (0.5 + 127 * 2.0**-10) + 1e-12).all(), t.name
        assert not np.array_equal(x, y)  # it did re-quantise
        changed += 1
    assert changed == 210  # SmolLM2-135M Q4_1: every linear of the 30 layers


def test_a_difference_is_added_before_quantising(q8: Path, tmp_path: Path):
    """``add``: the named weights are quantised from dequantised + difference (exactly what
    quantising that sum gives), every other tensor as without it; a name or shape that does not
    fit is refused in one line."""
    import gguf
    from gguf import GGMLQuantizationType as Q
    from gguf.quants import dequantize, quantize

    src = {t.name: t for t in gguf.GGUFReader(str(resolve_gguf("default"))).tensors}
    name = "blk.3.attn_k.weight"
    shape = tuple(int(x) for x in reversed(src[name].shape.tolist()))
    d = np.random.default_rng(0).normal(0, 0.01, shape).astype(np.float32)
    out = requantize_gguf(resolve_gguf("default"), tmp_path / "add.gguf", "q8_0", add={name: d})
    got = {t.name: t for t in gguf.GGUFReader(str(out)).tensors}
    plain = {t.name: t for t in gguf.GGUFReader(str(q8)).tensors}
    want = quantize(dequantize(src[name].data, src[name].tensor_type).reshape(shape) + d, Q.Q8_0)
    assert got[name].tensor_type == Q.Q8_0 and np.array_equal(np.asarray(got[name].data), want)
    assert not np.array_equal(np.asarray(got[name].data), np.asarray(plain[name].data))
    assert all(np.array_equal(got[n].data, plain[n].data) for n in plain if n != name)
    with pytest.raises(ConfigError, match="no tensor 'blk.99.attn_k.weight' to add a difference to"):
        requantize_gguf(resolve_gguf("default"), tmp_path / "x.gguf", "q8_0", add={"blk.99.attn_k.weight": d})
    with pytest.raises(ConfigError, match="the difference to add is \\(3, 3\\)"):
        requantize_gguf(resolve_gguf("default"), tmp_path / "x.gguf", "q8_0", add={name: np.zeros((3, 3))})


def test_an_unknown_target_is_refused(tmp_path: Path):
    with pytest.raises(ConfigError, match="q4_k.*not one of q8_0, f16"):
        requantize_gguf(resolve_gguf("default"), tmp_path / "x.gguf", "q4_k")


def test_llamacpp_serving_q8_is_as_close_to_the_learner_as_the_packaged_q4(q8: Path):
    import torch
    from transformers import AutoModelForCausalLM, AutoTokenizer

    from harness.llm.llamacpp_backend import LlamaCppBackend
    from harness.llm.model_files import resolve_model

    learner = AutoModelForCausalLM.from_pretrained(str(resolve_model("default")), dtype=torch.float32)
    tok = AutoTokenizer.from_pretrained(str(resolve_model("default")))
    gaps = {}
    for name, path in (("q4_1", "default"), ("q8_0", str(q8))):
        e = LlamaCppBackend(
            BackendSpec(kind="llamacpp", model=path, threads=1, n_ctx=512), logprobs=True, child=True
        )
        try:
            gaps[name] = engine_gap(e, learner, tok, QUESTIONS, max_new_tokens=32)
        finally:
            e.close()
    assert 0 < gaps["q4_1"] < 0.1, gaps
    assert gaps["q8_0"] <= 1.5 * gaps["q4_1"], gaps


def test_a_spinning_child_engine_suspends_and_comes_back_with_the_same_tokens():
    from harness.llm.llamacpp_backend import LlamaCppBackend

    e = LlamaCppBackend(
        BackendSpec(kind="llamacpp", model="default", threads=1, n_ctx=512),
        logprobs=True,
        child=True,
        spin=True,
    )
    try:
        assert e._proc is not None
        environ = Path(f"/proc/{e._proc.pid}/environ").read_bytes().split(b"\0")
        assert b"OMP_WAIT_POLICY=ACTIVE" in environ
        ids = [e.prompt_ids(e.chat_prompt([{"role": "user", "content": QUESTIONS[0]}]))]
        kw = {"stop": [], "max_new_tokens": 12, "sampling": SamplingParams(), "include_stop": True}
        before = e.generate_ids(ids, **kw)[0].token_ids
        pid = e._proc.pid
        e.suspend()
        assert e._proc is None and not Path(f"/proc/{pid}").exists()  # stopped and reaped
        with pytest.raises(HarnessError, match="suspended; set_adapters starts it again"):
            e.generate_ids(ids, **kw)
        e.set_adapters([])
        assert e.generate_ids(ids, **kw)[0].token_ids == before
    finally:
        e.close()
    with pytest.raises(ConfigError, match="spin=True\\) needs child=True"):
        LlamaCppBackend(BackendSpec(kind="llamacpp", model="default", threads=1, n_ctx=512), spin=True)


def test_a_generation_cut_by_a_stop_string_keeps_the_engine_logprobs_before_it():
    """llama.cpp reports no probabilities for the stop string's tokens; the backend keeps every
    earlier token's, equal to those of the same greedy generation without the stop string."""
    import math

    from harness.llm.llamacpp_backend import LlamaCppBackend

    e = LlamaCppBackend(
        BackendSpec(kind="llamacpp", model="default", threads=1, n_ctx=512), logprobs=True, child=True
    )
    try:
        ids = [e.prompt_ids(e.chat_prompt([{"role": "user", "content": QUESTIONS[0]}]))]
        kw = {"max_new_tokens": 24, "sampling": SamplingParams(), "include_stop": True}
        free = e.generate_ids(ids, stop=[], **kw)[0]
        words = free.text.split()
        stop = " " + words[len(words) // 2]  # a word from the middle of the greedy reply
        cut = e.generate_ids(ids, stop=[stop], **kw)[0]
        assert cut.stop == stop and cut.logprobs is not None and e.logprobs_unaligned == 0
        known = [x for x in cut.logprobs if not math.isnan(x)]
        assert 0 < len(known) < len(cut.logprobs)  # the stop string's tokens have none
        assert known == free.logprobs[: len(known)]
    finally:
        e.close()
