"""The trainer's rollout engine choice and the engine/learner mismatch it logs
(harness/rl/rollout_engine.py, harness.rl.trainer.engine_mismatch)."""

from __future__ import annotations

import json
import math

import pytest
import torch

from harness.errors import ConfigError
from harness.rl.rollout_engine import (
    CPU_LORA_DEFAULT,
    default_rollout_backend,
    default_rollout_engines,
    engine_base,
    llamacpp_applies,
)
from harness.rl.trainer import engine_logprobs, engine_mismatch
from harness.types import Trajectory


def _recipe(name: str):
    from methods.search_r1.method import SearchR1

    return SearchR1().recipes()[name]


def test_llamacpp_applies_to_a_lora_recipe_over_a_packaged_model_on_the_cpu(tmp_path):
    lora, full = _recipe("cpu-sft-grpo"), _recipe("cpu-smoke")
    cpu, gpu = torch.device("cpu"), torch.device("cuda")
    assert llamacpp_applies(lora, "default", cpu)
    assert not llamacpp_applies(lora, "default", gpu)
    assert not llamacpp_applies(full, "default", cpu)  # no adapter to sync
    ckpt = tmp_path / "sft"
    ckpt.mkdir()
    (ckpt / "harness_train.json").write_text(json.dumps({"base_model": "default", "stage": "sft"}))
    assert engine_base(str(ckpt)) == ("default", ckpt)
    assert llamacpp_applies(lora, str(ckpt), cpu)
    assert not llamacpp_applies(lora, str(tmp_path), cpu)  # no GGUF base known
    # auto: llama.cpp, measured faster side by side (results/rl-step-bench-2026-11-27b.json)
    assert CPU_LORA_DEFAULT == "llamacpp"
    assert default_rollout_backend(lora, "default", cpu) == CPU_LORA_DEFAULT
    assert default_rollout_backend(lora, "default", gpu) == "transformers"
    with pytest.raises(ConfigError, match="use --rollout-backend transformers"):
        engine_base(str(tmp_path))


def test_an_unknown_rollout_backend_is_refused_before_any_work(tmp_path):
    from harness.rl.trainer import Trainer
    from tests.rl.test_trainer import PROTO, FavouriteWords, toy_recipe

    with pytest.raises(ConfigError, match="not one of transformers, llamacpp, vllm"):
        Trainer(
            FavouriteWords(),
            toy_recipe(1),
            model="x",
            out_dir=tmp_path,
            protocol=PROTO,
            retriever=None,
            rollout_backend="sglang",
        )


def test_engine_mismatch_is_the_mean_absolute_difference_and_the_ratio_spread_on_model_tokens():
    def traj(ids, lps):
        return Trajectory(
            example_id="1",
            dataset="t",
            question="q",
            answers=["a"],
            response_ids=ids,
            loss_mask=[1] * len(ids),
            engine_logprobs=lps,
        )

    trajs = [traj([5, 6, 7], [-1.0, math.nan, -2.0]), traj([8], [-0.5])]
    eng = engine_logprobs(trajs, device="cpu")
    assert eng.shape == (2, 3) and math.isnan(eng[0, 1]) and math.isnan(eng[1, 2])
    learner = torch.tensor([[-1.5, -9.0, -1.0], [-0.5, 0.0, 0.0]])
    mask = torch.tensor([[1.0, 1.0, 1.0], [1.0, 0.0, 0.0]])
    m = engine_mismatch(learner, eng, mask)
    d = torch.tensor([-0.5, 1.0, 0.0], dtype=torch.float64)  # learner - engine where both are known
    assert m["engine/tokens"] == 3.0
    assert m["engine/logp_abs_diff"] == pytest.approx(float(d.abs().mean()), rel=1e-6)
    r = d.exp()
    assert m["engine/ratio_std"] == pytest.approx(float(r.std(unbiased=False)), rel=1e-6)
    assert m["engine/ratio_min"] == pytest.approx(math.exp(-0.5), rel=1e-6)
    assert m["engine/ratio_max"] == pytest.approx(math.e, rel=1e-6)
    assert engine_logprobs([traj([1], None)], device="cpu") is None


@pytest.mark.slow
@pytest.mark.integration
@pytest.mark.llamacpp
def test_a_training_step_on_llamacpp_rollouts_logs_a_small_engine_learner_mismatch(tmp_path):
    """harness train with --rollout-backend llamacpp from the packaged model: the step's rollouts
    come from llama.cpp with the learner's adapter, the learner recomputes the log-probs, and the
    logged mismatch is of the size of the engines' own numerics (about 0.04-0.07 nats; measured
    0.057-0.065 on the shared 2 cores)."""
    import os
    import subprocess
    import sys

    import duckdb

    db = tmp_path / "t.duckdb"
    cmd = [sys.executable, "-m", "harness", "train", "--method", "search_r1", "--recipe", "cpu-sft-grpo",
           "--model", "default", "--out", str(tmp_path / "out"), "--db", str(db), "--rollout-backend", "llamacpp",
           "--recipe-override", "steps=1", "algo.group_size=4", "algo.train_batch_size=1", "algo.mini_batch_size=1",
           'algo.dynamic_sampling={"enabled": false, "max_rounds": null, "filters": []}',
           "algo.kl_placement=none", "algo.kl_coef=0"]  # fmt: skip
    subprocess.run(cmd, check=True, env=dict(os.environ, OMP_NUM_THREADS="1"), timeout=900)
    with duckdb.connect(str(db), read_only=True) as c:
        m = dict(c.execute("select metric, value from train_steps where step = 0").fetchall())
    assert m["engine/tokens"] > 0 and 0 < m["engine/logp_abs_diff"] < 0.15, m
    assert m["ratio_min"] == m["ratio_max"] == 1.0  # trained on the learner's own log-probs
    assert m["seconds_sync"] > 0
    assert (tmp_path / "out" / "rollout-adapters" / "current.gguf").exists()


@pytest.mark.parametrize(
    ("flag", "said"),
    [
        (["--rollout-weights", "q8_0"], "--rollout-weights q8_0: only llama.cpp rollouts serve"),
        (["--rollout-engines", "2"], "--rollout-engines 2: only llama.cpp rollouts run on several engines"),
    ],
)
def test_llamacpp_options_without_llamacpp_rollouts_are_refused_before_any_row(tmp_path, capsys, flag, said):
    from harness.cli import main

    db = tmp_path / "r.duckdb"
    argv = ["train", "--method", "search_r1", "--recipe", "cpu-sft-grpo", "--out", str(tmp_path / "o")]
    argv += ["--db", str(db), "--rollout-backend", "transformers", *flag]
    assert main(argv) == 2
    err = capsys.readouterr().err
    assert said in err and "rolls out on transformers" in err
    assert not db.exists() and not (tmp_path / "o").exists()


def test_llamacpp_rollouts_of_a_recipe_without_lora_are_refused_before_any_model_is_loaded(
    tmp_path, capsys, monkeypatch
):
    from harness.cli import main
    from harness.rl import trainer

    def no_loading(*a, **kw):
        raise AssertionError("the model was loaded before the refusal")

    monkeypatch.setattr(trainer, "load_policy", no_loading)
    db = tmp_path / "r.duckdb"
    argv = ["train", "--method", "search_r1", "--recipe", "cpu-smoke", "--out", str(tmp_path / "o")]
    assert main([*argv, "--db", str(db), "--rollout-backend", "llamacpp"]) == 2
    assert "recipe 'cpu-smoke': --rollout-backend llamacpp needs a LoRA recipe" in capsys.readouterr().err
    assert not db.exists() and not (tmp_path / "o").exists()
    # and through the API: Trainer itself refuses before train() loads anything
    from tests.rl.test_trainer import PROTO, FavouriteWords, toy_recipe

    with pytest.raises(ConfigError, match="needs a LoRA recipe"):
        trainer.Trainer(
            FavouriteWords(),
            toy_recipe(1),
            model="default",
            out_dir=tmp_path,
            protocol=PROTO,
            retriever=None,
            rollout_backend="llamacpp",
        )


def test_engines_default_to_one_per_thread_and_at_most_one_per_group():
    # (threads, groups of a round) -> engines: the largest count <= both that divides the threads
    cases = {(2, 4): 2, (1, 4): 1, (4, 4): 4, (4, 3): 2, (6, 4): 3, (2, 1): 1, (3, 2): 1}
    assert {k: default_rollout_engines(*k) for k in cases} == cases


@pytest.mark.llamacpp
@pytest.mark.integration
def test_two_engines_split_the_rollout_threads(tmp_path):
    from harness.llm.llamacpp_engines import LlamaCppEngines
    from harness.rl.rollout_engine import LlamaCppRollout

    engine = LlamaCppRollout("default", _recipe("cpu-sft-grpo"), tmp_path, threads=2, parallel=1, engines=2)
    try:
        assert isinstance(engine.backend, LlamaCppEngines)
        assert [e.threads for e in engine.backend.engines] == [1, 1]
        assert all(e.child and e.spin for e in engine.backend.engines)
        engine.suspend()  # the learner's turn: both stopped
        assert all(e._proc is None for e in engine.backend.engines)
    finally:
        engine.close()


def test_engine_logprobs_of_a_turn_that_ends_on_a_stop_string_keep_every_token_before_it():
    """llama.cpp drops the probabilities of the stop string's tokens (stop_type "word"): the
    tokens before it keep theirs, the stop string's get NaN (no engine value), never the whole
    turn None; any other length mismatch, or kept ids that are not the generated prefix, is None."""
    from harness.llm.llamacpp_backend import LlamaCppBackend
    from harness.types import Completion

    b = object.__new__(LlamaCppBackend)  # only _kept_logprobs' own state
    b.logprobs_unaligned = 0
    gen = [5, 6, 7, 8, 9]
    probs = [{"logprob": -0.5}, {"logprob": -1.0}, {"logprob": -2.0}]

    def c(ids):
        return Completion(
            text="", prompt_tokens=1, completion_tokens=len(ids), finish_reason="stop", token_ids=ids
        )

    got = b._kept_logprobs({"tokens": gen, "completion_probabilities": probs, "stop_type": "word"}, c(gen))
    assert got[:3] == [-0.5, -1.0, -2.0] and all(math.isnan(x) for x in got[3:]) and len(got) == 5
    assert b._kept_logprobs(
        {"tokens": gen, "completion_probabilities": probs, "stop_type": "word"}, c(gen[:2])
    ) == [
        -0.5,
        -1.0,
    ]
    assert b.logprobs_unaligned == 0
    assert (
        b._kept_logprobs({"tokens": gen, "completion_probabilities": probs, "stop_type": "eos"}, c(gen))
        is None
    )
    assert (
        b._kept_logprobs({"tokens": gen, "completion_probabilities": probs, "stop_type": "word"}, c([5, 7]))
        is None
    )
    assert b.logprobs_unaligned == 2


@pytest.mark.llamacpp
@pytest.mark.integration
def test_q8_rollout_weights_are_written_once_per_run_and_served(tmp_path):
    """--rollout-weights q8_0: the engine serves <out>/rollout-adapters/base-q8_0.gguf, written by
    the first engine of the run and reused by the next (a resumed run), not rewritten."""
    from harness.rl.rollout_engine import LlamaCppRollout

    recipe = _recipe("cpu-sft-grpo")
    first = LlamaCppRollout("default", recipe, tmp_path, threads=1, parallel=1, weights="q8_0")
    target = tmp_path / "rollout-adapters" / "base-q8_0.gguf"
    try:
        assert first.backend.gguf == target and target.is_file()
        assert first.backend.describe()["model"] != "smollm2-135m-instruct"
    finally:
        first.close()
    stamp = target.stat().st_mtime_ns
    again = LlamaCppRollout("default", recipe, tmp_path, threads=1, parallel=1, weights="q8_0")
    again.close()
    assert target.stat().st_mtime_ns == stamp
    with pytest.raises(ConfigError, match="--rollout-weights 'q4_k': not one of packaged, q8_0"):
        LlamaCppRollout("default", recipe, tmp_path, threads=1, parallel=1, weights="q4_k")


@pytest.mark.llamacpp
@pytest.mark.integration
def test_q8_rollout_weights_of_a_merged_checkpoint_are_the_checkpoint_itself(tmp_path, monkeypatch):
    """From a merged checkpoint (``harness sft``'s final), --rollout-weights q8_0 serves
    start-q8_0.gguf, the base with the checkpoint's difference added before quantising
    (harness.llm.gguf_lora.checkpoint_delta), and no start adapter: only the policy's adapter is
    applied per token. The packaged weights keep the difference as an adapter."""
    import gguf
    import numpy as np

    import harness.llm.gguf_lora as gl
    from harness.llm.model_files import resolve_gguf
    from harness.rl.rollout_engine import LlamaCppRollout

    ckpt = tmp_path / "sft"
    ckpt.mkdir()
    (ckpt / "harness_train.json").write_text(json.dumps({"base_model": "default", "stage": "sft"}))
    name = "blk.2.ffn_up.weight"
    shape = next(
        tuple(int(x) for x in reversed(t.shape.tolist()))
        for t in gguf.GGUFReader(str(resolve_gguf("default"))).tensors
        if t.name == name
    )
    asked = []

    def delta(base, checkpoint):  # a stand-in difference: loading a real checkpoint is the slow part
        asked.append((base, checkpoint))
        return {name: np.full(shape, 0.5, dtype=np.float32)}

    monkeypatch.setattr(gl, "checkpoint_delta", delta)
    engine = LlamaCppRollout(
        str(ckpt), _recipe("cpu-sft-grpo"), tmp_path / "run", threads=1, parallel=1, weights="q8_0"
    )
    target = tmp_path / "run" / "rollout-adapters" / "start-q8_0.gguf"
    try:
        assert asked == [("default", ckpt)]
        assert engine.backend.gguf == target and engine.start == () and engine.backend.lora == ()
    finally:
        engine.close()
    got = next(t for t in gguf.GGUFReader(str(target)).tensors if t.name == name)
    from gguf.quants import dequantize

    assert float(np.mean(dequantize(got.data, got.tensor_type))) > 0.4  # the difference is in the weights
    assert not (tmp_path / "run" / "rollout-adapters" / "base-q8_0.gguf").exists()


def test_merged_weights_are_the_merged_policys_and_leave_the_policy_as_it_was(tiny_dir):
    """What the vLLM rollout engine loads each step: every weight of the model under its Hugging
    Face name, the adapted linears' ``W + scale * B @ A`` exactly PEFT's own merge, the rest the
    base weights; and the policy keeps its adapters."""
    import copy

    from harness.methods_registry import get_method
    from harness.rl.rollout_engine import merged_weights
    from harness.rl.trainer import load_policy

    r = get_method("search_r1").recipes()["cpu-grpo-long"].with_overrides(["lora.layers=[1]"])
    policy, _, _ = load_policy(str(tiny_dir), r, with_reference=False)
    torch.manual_seed(0)
    with torch.no_grad():
        for name, p in policy.named_parameters():
            if "lora_B" in name:
                p.normal_(0, 0.05)
    before = {n: p.clone() for n, p in policy.named_parameters()}
    got = dict(merged_weights(policy))
    merged = dict(copy.deepcopy(policy).merge_and_unload().named_parameters())
    assert set(got) == set(merged)  # Hugging Face names, every parameter, no adapter tensors
    for name, w in got.items():
        assert torch.equal(w, merged[name]), name
    base = {n.replace(".base_layer.", ".").removeprefix("base_model.model."): p for n, p in before.items()}
    changed = sorted(n for n in got if not torch.equal(got[n], base[n]))
    # exactly the adapted linears of layer 1 differ from the base, each by its adapter
    assert sorted(n.split(".")[-2] for n in changed) == sorted(r.lora.target_modules)
    assert all(n.startswith("model.layers.1.") for n in changed)
    assert all(torch.equal(p, before[n]) for n, p in policy.named_parameters())  # still unmerged


def test_vllm_rollouts_are_refused_in_one_line_where_vllm_is_not_installed():
    import argparse
    import importlib.util

    from harness.cli.cmd_train import check_rollout_backend, rollout_backend_of

    if importlib.util.find_spec("vllm") is not None:
        pytest.skip("vLLM is installed here (tests/vllm covers the vllm rollout engine)")
    args = argparse.Namespace(rollout_backend="vllm", model="default")
    with pytest.raises(ConfigError, match="vLLM is not installed"):
        check_rollout_backend(args, None, "vllm")  # asked for by name: checked before torch is imported
    assert rollout_backend_of(args, None, torch.device("cpu")) == "vllm"  # and not asked again


def test_the_rollout_engines_slots_hold_every_arena_training_prompt_and_its_completion():
    """ARENA's cpu-learn-grpo RL failed at its first rollout on 2026-11-30 (a MuSiQue prompt of 2,966
    tokens against 2,048 a slot). Every RL question's prompt, in the packaged tokenizer, plus the
    recipe's new tokens must fit a slot."""
    from transformers import AutoTokenizer

    from harness.llm.model_files import resolve_model
    from harness.methods_registry import get_method
    from harness.rl.rollout_engine import ROLLOUT_N_CTX
    from harness.rl.trainer import training_examples

    arena = get_method("arena")
    recipe = arena.recipes()["cpu-learn-grpo"]
    tok = AutoTokenizer.from_pretrained(str(resolve_model("default")))
    musique = [e for e in training_examples(recipe) if e.dataset == "musique"]  # the 20-paragraph ones
    texts = [
        tok.apply_chat_template(
            arena.prompt_messages(e, training=True), add_generation_prompt=True, tokenize=False
        )
        for e in musique
    ]
    longest = max(len(ids) for ids in tok(texts)["input_ids"])
    assert longest > 2048  # what the engine had
    assert longest + recipe.max_new_tokens <= ROLLOUT_N_CTX


def test_the_vllm_rollout_engine_holds_as_many_tokens_as_a_llamacpp_slot(monkeypatch):
    """vLLM's rollout engine had ``max_model_len=2048``, which would refuse ARENA's training prompts
    as the llama.cpp slots did; it now takes :data:`ROLLOUT_N_CTX` (what the engine is asked for;
    tests/vllm runs the engine itself)."""
    import harness.llm.vllm_backend as vllm_backend
    from harness.rl.rollout_engine import ROLLOUT_N_CTX, VLLMRollout

    specs = []

    class Recorder:
        def __init__(self, spec, **kw):
            specs.append((spec, kw))

    monkeypatch.setattr(vllm_backend, "VLLMBackend", Recorder)
    VLLMRollout("default", _recipe("cpu-grpo-long"), parallel=4)
    ((spec, kw),) = specs
    assert (spec.kind, spec.max_model_len, spec.max_batch_size) == ("vllm", ROLLOUT_N_CTX, 4)
    assert kw == {"logprobs": True}
