"""vLLM in-process (the ``gpu`` extra): continuous batching on GPUs.

Written against vLLM's offline API: ``vllm.LLM(...)`` and ``LLM.generate(prompts, SamplingParams)``
with ``TokensPrompt`` inputs. vLLM stops at the stop strings itself; the returned token ids (which
include the stop string's tokens) then go through :mod:`harness.llm.decoding`, so text, token ids,
``stop`` and ``finish_reason`` mean exactly what they mean for the other in-process backends.
Seeds are per request (``seed + index of the prompt in the call``), as in the transformers backend.

For evaluation on GPUs the ``openai`` backend against ``vllm serve`` is usually simpler (vLLM's
exact torch/transformers pins then stay out of the harness's environment); this backend is for
training loops that want generation in the same process.
"""

from __future__ import annotations

import json
import random
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from harness.errors import ConfigError, HarnessError
from harness.llm.base import GREEDY, Backend, BackendSpec, hf_encode
from harness.llm.model_files import canonical_name, model_revision, resolve_model
from harness.types import Completion, SamplingParams

INSTALL_HINT = "pip install 'rar-harness[gpu]' (a CUDA machine; vLLM has no official CPU wheel)"


def engine_kwargs(spec: BackendSpec, model_path: str) -> dict[str, Any]:
    """Arguments of ``vllm.LLM`` for ``spec``."""
    kw: dict[str, Any] = {
        "model": model_path,
        "tokenizer": model_path,
        "dtype": spec.dtype,
        "tensor_parallel_size": spec.tensor_parallel_size,
        "gpu_memory_utilization": spec.gpu_memory_utilization,
        "max_num_seqs": spec.max_batch_size,
        "enable_prefix_caching": True,
        "trust_remote_code": False,
    }
    if spec.max_model_len is not None:
        kw["max_model_len"] = spec.max_model_len
    return kw


def sampling_kwargs(
    sampling: SamplingParams, *, stop: Sequence[str], max_new_tokens: int, seed: int
) -> dict[str, Any]:
    """Arguments of ``vllm.SamplingParams`` for one request."""
    return {
        "n": 1,
        "temperature": sampling.temperature,
        "top_p": sampling.top_p,
        "top_k": sampling.top_k if sampling.top_k > 0 else -1,
        "seed": seed,
        "max_tokens": max_new_tokens,
        "stop": [s for s in stop if s] or None,
        "include_stop_str_in_output": True,  # the text is re-derived from the token ids anyway
        "skip_special_tokens": False,
        "detokenize": True,
    }


def eos_ids(model_dir: Path, tokenizer_eos: int | None) -> set[int]:
    """The tokenizer's EOS id plus the ``eos_token_id`` of ``generation_config.json`` (int or list)."""
    ids = {int(tokenizer_eos)} if tokenizer_eos is not None else set()
    gc = model_dir / "generation_config.json"
    if gc.is_file():
        val = json.loads(gc.read_text()).get("eos_token_id")
        if isinstance(val, int):
            ids.add(val)
        elif isinstance(val, list):
            ids.update(int(x) for x in val)
    return ids


class VLLMBackend(Backend):
    name = "vllm"

    def __init__(self, spec: BackendSpec):
        if spec.kind != "vllm":
            raise ConfigError(f"VLLMBackend got a {spec.kind!r} spec")
        try:
            import vllm
        except ImportError as e:
            raise HarnessError(f"the vllm backend needs vLLM: {INSTALL_HINT}") from e
        self.spec = spec
        self._vllm = vllm
        self.path = resolve_model(spec.model)
        self.llm = vllm.LLM(**engine_kwargs(spec, str(self.path)))
        self.tokenizer = self.llm.get_tokenizer()
        self.eos_ids = eos_ids(self.path, self.tokenizer.eos_token_id)
        self.unaligned = 0
        self._revision: str | None = None

    def tokenize(self, text: str) -> list[int]:
        return hf_encode(self.tokenizer, text)

    def detokenize(self, ids: Sequence[int]) -> str:
        return self.tokenizer.decode(list(ids), skip_special_tokens=False)

    def prompt_ids(self, text: str) -> list[int]:
        return hf_encode(self.tokenizer, text, prompt=True)

    def chat_prompt(self, messages: list[dict[str, str]], add_generation_prompt: bool = True) -> str:
        return self.tokenizer.apply_chat_template(
            messages, tokenize=False, add_generation_prompt=add_generation_prompt
        )

    def describe(self) -> dict[str, Any]:
        if self._revision is None:
            self._revision = model_revision(self.path)
        return {
            "backend": self.name,
            "model": canonical_name(self.spec.model),
            "path": str(self.path),
            "dtype": self.spec.dtype,
            "revision": self._revision,
            "tensor_parallel_size": self.spec.tensor_parallel_size,
            "vllm": self._vllm.__version__,
        }

    def generate(
        self,
        prompts: Sequence[str],
        *,
        stop: Sequence[str] = (),
        max_new_tokens: int,
        sampling: SamplingParams = GREEDY,
        include_stop: bool = False,
    ) -> list[Completion]:
        return self.generate_ids(
            [self.prompt_ids(p) for p in prompts],
            stop=stop,
            max_new_tokens=max_new_tokens,
            sampling=sampling,
            include_stop=include_stop,
        )

    def generate_ids(
        self,
        prompt_ids: Sequence[Sequence[int]],
        *,
        stop: Sequence[str] = (),
        max_new_tokens: int,
        sampling: SamplingParams = GREEDY,
        include_stop: bool = False,
    ) -> list[Completion]:
        from vllm import SamplingParams as VSamplingParams
        from vllm.inputs import TokensPrompt

        base_seed = sampling.seed if sampling.seed is not None else random.SystemRandom().randrange(2**31)
        params = [
            VSamplingParams(
                **sampling_kwargs(sampling, stop=stop, max_new_tokens=max_new_tokens, seed=base_seed + i)
            )
            for i in range(len(prompt_ids))
        ]
        t0 = time.perf_counter()
        outs = self.llm.generate(
            [TokensPrompt(prompt_token_ids=list(ids)) for ids in prompt_ids], params, use_tqdm=False
        )
        latency = time.perf_counter() - t0
        results = []
        for ids, o in zip(prompt_ids, outs, strict=True):
            gen = list(o.outputs[0].token_ids)
            results.append(
                self.completion_from_ids(
                    gen,
                    prompt_tokens=len(ids),
                    eos_hit=bool(gen) and gen[-1] in self.eos_ids,
                    stop=stop,
                    include_stop=include_stop,
                    latency_s=latency,
                )
            )
        return results

    def close(self) -> None:
        del self.llm
