"""llama-cpp-python in-process over a GGUF (the ``llamacpp`` extra): fast per request on a CPU.

One model context, so prompts run one after another (llama.cpp reuses the KV cache of the longest
common prefix with the previous prompt, which multi-turn rollouts benefit from). The token loop is
ours, over ``Llama.generate``: stop strings, token ids and the end-of-sequence token are handled by
:mod:`harness.llm.decoding` exactly as in the transformers backend. Sampling uses llama.cpp's
samplers with neutral settings (no repeat penalty, no min-p); ``temperature == 0`` is greedy.

``model``: ``default`` (the packaged SmolLM2 GGUF) or a path to a ``.gguf`` file.
"""

from __future__ import annotations

import random
import time
from collections.abc import Sequence
from typing import Any

from harness.errors import ConfigError, HarnessError
from harness.llm.base import GREEDY, Backend, BackendSpec
from harness.llm.decoding import StopScanner
from harness.llm.model_files import sha256_file
from harness.llm.server import INSTALL_HINT, resolve_gguf
from harness.llm.transformers_backend import torch_threads
from harness.types import Completion, SamplingParams


class LlamaCppBackend(Backend):
    name = "llamacpp"

    def __init__(self, spec: BackendSpec):
        if spec.kind != "llamacpp":
            raise ConfigError(f"LlamaCppBackend got a {spec.kind!r} spec")
        try:
            import llama_cpp
        except ImportError as e:
            raise HarnessError(f"the llamacpp backend needs llama-cpp-python: run `{INSTALL_HINT}`") from e
        self.spec = spec
        self.gguf = resolve_gguf(spec.model)
        self._llama_cpp = llama_cpp
        self.llm = llama_cpp.Llama(
            model_path=str(self.gguf),
            n_ctx=spec.n_ctx,
            n_threads=torch_threads(spec.threads),
            logits_all=False,
            verbose=False,
        )
        self.unaligned = 0
        self._revision: str | None = None
        meta = self.llm.metadata
        self._template = meta.get("tokenizer.chat_template")
        self._bos = self.detokenize([self.llm.token_bos()]) if self.llm.token_bos() >= 0 else ""
        self._eos = self.detokenize([self.llm.token_eos()]) if self.llm.token_eos() >= 0 else ""

    def tokenize(self, text: str) -> list[int]:
        return list(self.llm.tokenize(text.encode("utf-8"), add_bos=False, special=True))

    def prompt_ids(self, text: str) -> list[int]:
        """With the BOS token when the model wants one (GGUF metadata) and ``text`` lacks it."""
        add = not (self._bos and text.startswith(self._bos))
        return list(self.llm.tokenize(text.encode("utf-8"), add_bos=add, special=True))

    def detokenize(self, ids: Sequence[int]) -> str:
        return self.llm.detokenize(list(ids), special=True).decode("utf-8", errors="replace")

    def chat_prompt(self, messages: list[dict[str, str]], add_generation_prompt: bool = True) -> str:
        if not self._template:
            raise ConfigError(f"{self.gguf}: the GGUF has no chat template (tokenizer.chat_template)")
        from llama_cpp.llama_chat_format import Jinja2ChatFormatter

        fmt = Jinja2ChatFormatter(
            self._template, self._eos, self._bos, add_generation_prompt=add_generation_prompt
        )
        return fmt(messages=messages).prompt  # type: ignore[arg-type]

    def describe(self) -> dict[str, Any]:
        if self._revision is None:
            self._revision = f"gguf-sha256:{sha256_file(self.gguf)}"
        return {
            "backend": self.name,
            "model": self.spec.model,
            "path": str(self.gguf),
            "dtype": "gguf",
            "revision": self._revision,
            "threads": torch_threads(self.spec.threads),
            "n_ctx": self.spec.n_ctx,
            "llama_cpp": self._llama_cpp.__version__,
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
        base_seed = sampling.seed if sampling.seed is not None else random.SystemRandom().randrange(2**31)
        return [
            self._one(list(ids), base_seed + i, list(stop), max_new_tokens, sampling, include_stop)
            for i, ids in enumerate(prompt_ids)
        ]

    def _one(
        self,
        ids: list[int],
        seed: int,
        stop: list[str],
        max_new_tokens: int,
        sampling: SamplingParams,
        include_stop: bool,
    ) -> Completion:
        if not ids:
            raise ConfigError("empty prompt")
        if len(ids) + max_new_tokens > self.spec.n_ctx:
            raise ConfigError(
                f"prompt of {len(ids)} tokens + {max_new_tokens} new tokens exceeds n_ctx={self.spec.n_ctx}"
            )
        t0 = time.perf_counter()
        self.llm.set_seed(seed & 0xFFFFFFFF)
        vocab = self.llm._model.vocab
        scanner = StopScanner(stop, self.detokenize)
        gen: list[int] = []
        eos_hit = False
        for tok in self.llm.generate(
            ids,
            top_k=sampling.top_k,
            top_p=sampling.top_p,
            min_p=0.0,
            temp=sampling.temperature,
            repeat_penalty=1.0,
            reset=True,
        ):
            gen.append(int(tok))
            if self._llama_cpp.llama_vocab_is_eog(vocab, tok):
                eos_hit = True
                break
            if scanner.update(gen) or len(gen) >= max_new_tokens:
                break
        return self.completion_from_ids(
            gen,
            prompt_tokens=len(ids),
            eos_hit=eos_hit,
            stop=stop,
            include_stop=include_stop,
            latency_s=time.perf_counter() - t0,
        )

    def close(self) -> None:
        self.llm.close()
