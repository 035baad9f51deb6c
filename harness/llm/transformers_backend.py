"""In-process generation with transformers + torch: the CPU default and the backend training uses.

Our own KV-cache decoding loop rather than ``model.generate``: prompts are left-padded into
micro-batches of ``max_batch_size`` (sorted by length to waste little padding); after every step
each row is checked for its stop strings, and finished rows are dropped from the batch and the
cache, so they cost nothing from then on. ``model.generate(stop_strings=...)`` keeps finished rows
in the batch and still needs the text cut afterwards; on SmolLM2-135M (fp32, one thread, 150-token
prompts, 128 new tokens, a busy machine) our loop ran at 18.3 / 51.4 tokens/s at batch 1 / 8 and
``generate`` at 17.3 / 49.8.

Sampling: ``temperature == 0`` is greedy (argmax); otherwise temperature, then top-k, then top-p,
then a draw from a per-prompt ``torch.Generator`` seeded with ``seed + index of the prompt in the
call``; so a seed reproduces a call exactly, whatever ``max_batch_size`` is, and identical prompts
in one call (a GRPO group) get different samples. ``seed=None`` draws fresh seeds.

Threads: ``torch.set_num_threads`` from the spec, else ``$OMP_NUM_THREADS``, else 1 (two torch
threads on a busy 2-core machine were 6-15x slower, feasibility-ml.md).
"""

from __future__ import annotations

import os
import random
import time
from collections.abc import Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

from harness.errors import ConfigError
from harness.llm.base import GREEDY, Backend, BackendSpec, hf_encode
from harness.llm.decoding import StopScanner
from harness.llm.model_files import canonical_name, model_revision, resolve_model
from harness.types import Completion, SamplingParams

if TYPE_CHECKING:
    import torch


def torch_threads(spec_threads: int | None) -> int:
    if spec_threads is not None:
        return spec_threads
    env = os.environ.get("OMP_NUM_THREADS", "").strip()
    if env.isdigit() and int(env) > 0:
        return int(env)
    return 1


class TransformersBackend(Backend):
    """``model`` / ``tokenizer`` are the loaded objects (the trainer updates ``model`` in place)."""

    name = "transformers"

    def __init__(self, spec: BackendSpec | None = None, *, model: Any = None, tokenizer: Any = None):
        import torch

        spec = spec or BackendSpec()
        if spec.kind != "transformers":
            raise ConfigError(f"TransformersBackend got a {spec.kind!r} spec")
        self.spec = spec
        torch.set_num_threads(torch_threads(spec.threads))
        if model is None:
            from transformers import AutoModelForCausalLM, AutoTokenizer

            os.environ.setdefault("HF_HUB_OFFLINE", "1")
            self.path: Path | None = resolve_model(spec.model)
            dtype = "auto" if spec.dtype == "auto" else getattr(torch, spec.dtype)
            tokenizer = AutoTokenizer.from_pretrained(str(self.path))
            model = AutoModelForCausalLM.from_pretrained(str(self.path), dtype=dtype)
            model.eval()
        else:
            if tokenizer is None:
                raise ConfigError("TransformersBackend(model=...) needs its tokenizer too")
            self.path = None
        self.model = model
        self.tokenizer = tokenizer
        self.pad_id = tokenizer.pad_token_id if tokenizer.pad_token_id is not None else tokenizer.eos_token_id
        if self.pad_id is None:
            raise ConfigError(f"{self.spec.model}: the tokenizer has neither a pad nor an eos token")
        self.eos_ids = _eos_ids(model, tokenizer)
        self.unaligned = 0  # completions whose token ids could not be made to match the text
        self._revision: str | None = None

    @classmethod
    def from_model(cls, model: Any, tokenizer: Any, spec: BackendSpec | None = None) -> TransformersBackend:
        """Wrap an already loaded model (the policy being trained)."""
        return cls(spec, model=model, tokenizer=tokenizer)

    # -- tokenizer -------------------------------------------------------------------------
    def tokenize(self, text: str) -> list[int]:
        return hf_encode(self.tokenizer, text)

    def detokenize(self, ids: Sequence[int]) -> str:
        return self.tokenizer.decode(list(ids), skip_special_tokens=False)

    def prompt_ids(self, text: str) -> list[int]:
        return hf_encode(self.tokenizer, text, prompt=True)

    def chat_prompt(self, messages: list[dict[str, str]], add_generation_prompt: bool = True) -> str:
        if not getattr(self.tokenizer, "chat_template", None):
            raise ConfigError(f"{self.path or self.spec.model}: the tokenizer has no chat template")
        return self.tokenizer.apply_chat_template(
            messages, tokenize=False, add_generation_prompt=add_generation_prompt
        )

    def describe(self) -> dict[str, Any]:
        import torch
        import transformers

        if self._revision is None:
            self._revision = model_revision(self.path) if self.path is not None else "in-memory"
        return {
            "backend": self.name,
            "model": canonical_name(self.spec.model) if self.path is not None else "in-memory",
            "path": str(self.path) if self.path is not None else None,
            "dtype": str(next(self.model.parameters()).dtype).removeprefix("torch."),
            "revision": self._revision,
            "threads": torch.get_num_threads(),
            "max_batch_size": self.spec.max_batch_size,
            "transformers": transformers.__version__,
            "torch": torch.__version__,
        }

    # -- generation ------------------------------------------------------------------------
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
        import torch

        if max_new_tokens < 1:
            raise ConfigError(f"max_new_tokens must be at least 1, got {max_new_tokens}")
        limit = getattr(self.model.config, "max_position_embeddings", None)
        for i, ids in enumerate(prompt_ids):
            if not ids:
                raise ConfigError(f"prompt {i} is empty")
            if limit is not None and len(ids) + max_new_tokens > limit:
                raise ConfigError(
                    f"prompt {i} has {len(ids)} tokens; with max_new_tokens={max_new_tokens} it exceeds "
                    f"the model's {limit} positions: shorten the prompt (e.g. max_obs_tokens)"
                )
        base_seed = sampling.seed if sampling.seed is not None else random.SystemRandom().randrange(2**62)
        order = sorted(range(len(prompt_ids)), key=lambda i: -len(prompt_ids[i]))
        out: list[Completion | None] = [None] * len(prompt_ids)
        was_training = self.model.training
        self.model.eval()
        try:
            with torch.inference_mode():
                bs = self.spec.max_batch_size
                for k in range(0, len(order), bs):
                    idx = order[k : k + bs]
                    done = self._generate_batch(
                        [list(prompt_ids[i]) for i in idx],
                        [base_seed + i for i in idx],
                        stop=list(stop),
                        max_new_tokens=max_new_tokens,
                        sampling=sampling,
                        include_stop=include_stop,
                    )
                    for i, c in zip(idx, done, strict=True):
                        out[i] = c
        finally:
            self.model.train(was_training)
        return [c for c in out if c is not None]

    def _generate_batch(
        self,
        prompts: list[list[int]],
        seeds: list[int],
        *,
        stop: list[str],
        max_new_tokens: int,
        sampling: SamplingParams,
        include_stop: bool,
    ) -> list[Completion]:
        import torch

        t0 = time.perf_counter()
        device = next(self.model.parameters()).device
        n = len(prompts)
        width = max(len(p) for p in prompts)
        input_ids = torch.full((n, width), self.pad_id, dtype=torch.long)
        attn = torch.zeros((n, width), dtype=torch.long)
        for r, p in enumerate(prompts):
            input_ids[r, width - len(p) :] = torch.tensor(p, dtype=torch.long)
            attn[r, width - len(p) :] = 1
        input_ids, attn = input_ids.to(device), attn.to(device)
        pos = (attn.cumsum(-1) - 1).clamp(min=0)

        gens = [torch.Generator(device="cpu").manual_seed(s) for s in seeds] if not sampling.greedy else []
        scanners = [StopScanner(stop, self.detokenize) for _ in range(n)]
        generated: list[list[int]] = [[] for _ in range(n)]
        eos_hit = [False] * n
        latency = [0.0] * n
        active = list(range(n))  # original row of each row still in the batch

        out = self.model(
            input_ids=input_ids, attention_mask=attn, position_ids=pos, use_cache=True, logits_to_keep=1
        )
        cache = out.past_key_values
        logits = out.logits[:, -1, :]
        last_pos = pos[:, -1]
        for step in range(max_new_tokens):
            next_ids = _pick(logits, sampling, [gens[r] for r in active] if gens else None)
            keep: list[int] = []
            for j, r in enumerate(active):
                tok = int(next_ids[j])
                generated[r].append(tok)
                if tok in self.eos_ids:
                    eos_hit[r] = True
                elif not scanners[r].update(generated[r]) and step + 1 < max_new_tokens:
                    keep.append(j)
                    continue
                latency[r] = time.perf_counter() - t0
            if not keep:
                break
            if len(keep) < len(active):
                sel = torch.tensor(keep, dtype=torch.long, device=device)
                _select_rows(cache, sel)
                attn, last_pos, next_ids = attn[sel], last_pos[sel], next_ids[sel]
                active = [active[j] for j in keep]
            attn = torch.cat([attn, attn.new_ones((len(active), 1))], dim=1)
            last_pos = last_pos + 1
            out = self.model(
                input_ids=next_ids.view(-1, 1).to(device),
                attention_mask=attn,
                position_ids=last_pos.view(-1, 1),
                past_key_values=cache,
                use_cache=True,
            )
            cache = out.past_key_values
            logits = out.logits[:, -1, :]

        results = []
        for r in range(n):
            results.append(
                self.completion_from_ids(
                    generated[r],
                    prompt_tokens=len(prompts[r]),
                    eos_hit=eos_hit[r],
                    stop=stop,
                    include_stop=include_stop,
                    latency_s=latency[r],
                )
            )
        return results


def _eos_ids(model: Any, tokenizer: Any) -> frozenset[int]:
    ids: set[int] = set()
    gc = getattr(model, "generation_config", None)
    cand = getattr(gc, "eos_token_id", None) if gc is not None else None
    if isinstance(cand, int):
        ids.add(cand)
    elif isinstance(cand, list | tuple):
        ids.update(int(x) for x in cand)
    if tokenizer.eos_token_id is not None:
        ids.add(int(tokenizer.eos_token_id))
    return frozenset(ids)


def _select_rows(cache: Any, sel: torch.Tensor) -> None:
    """Keep only rows ``sel`` of a KV cache (older transformers: on the cache, newer: per layer)."""
    if hasattr(cache, "batch_select_indices"):
        cache.batch_select_indices(sel)
        return
    for layer in cache.layers:
        layer.batch_select_indices(sel)


def _pick(logits: torch.Tensor, sampling: SamplingParams, gens: list[torch.Generator] | None) -> torch.Tensor:
    """Next token per row: argmax when greedy, else temperature / top-k / top-p sampling."""
    import torch

    if sampling.greedy or gens is None:
        return logits.argmax(dim=-1)
    scores = logits.float() / sampling.temperature
    if sampling.top_k and sampling.top_k > 0 and sampling.top_k < scores.shape[-1]:
        kth = torch.topk(scores, sampling.top_k, dim=-1).values[:, -1:]
        scores = scores.masked_fill(scores < kth, float("-inf"))
    if sampling.top_p < 1.0:
        sorted_scores, sorted_idx = torch.sort(scores, descending=True, dim=-1)
        cum = sorted_scores.softmax(dim=-1).cumsum(dim=-1)
        # drop a token when the tokens before it already reach top_p (the first is always kept)
        drop = (cum - sorted_scores.softmax(dim=-1)) >= sampling.top_p
        sorted_scores = sorted_scores.masked_fill(drop, float("-inf"))
        scores = torch.full_like(scores, float("-inf")).scatter(-1, sorted_idx, sorted_scores)
    probs = scores.softmax(dim=-1)
    picks = [torch.multinomial(probs[j], 1, generator=g) for j, g in enumerate(gens)]
    return torch.cat(picks).to(logits.device)
