"""In-process generation with transformers + torch: the CPU default and the backend training uses.

Our own KV-cache decoding loop rather than ``model.generate``: prompts are left-padded into
micro-batches of ``max_batch_size`` (sorted by length to waste little padding); after every step
each row is checked for its stop strings, and finished rows are dropped from the batch and the
cache, so they cost nothing from then on. ``model.generate(stop_strings=...)`` keeps finished rows
in the batch and still needs the text cut afterwards; on SmolLM2-135M (fp32, one thread, 150-token
prompts, 128 new tokens, a busy machine) our loop ran at 18.3 / 51.4 tokens/s at batch 1 / 8 and
``generate`` at 17.3 / 49.8.

Decode modes (``BackendSpec.decode``). ``dynamic`` (the default off a GPU) grows a
``DynamicCache`` and drops finished rows. ``static`` preallocates the batch's KV
(:class:`_StaticKV`, ``rows x (width + max_new_tokens)`` rounded up to :data:`DECODE_BUCKET`
columns) and keeps every row in the batch to the end, so each decode step has one shape and one
set of addresses; ``graph`` (the default on a CUDA device) is ``static`` with that step captured
once as a CUDA graph and replayed: one launch per token instead of the forward's hundreds. On a GPU
both our loop and ``model.generate`` were bound by the host launching kernels (about 127k launches
per GRPO step at the 0.4B shape); with graphs a 0.4B float32 rollout of 32 x 128 tokens went from
2.7 s to 0.73 s on an H200 (docs/gpu.md). The prefill is the same in every mode (the dynamic
cache, prefix reuse included) and is copied into the static KV; a finished row's KV for the prefix
cache is cut at the column it ended on. Tokens equal the dynamic loop's up to rounding
(tests/llm/test_static_decode.py checks greedy, seeded sampling, stops, the repetition penalty,
multi-turn prefix reuse and decoder reuse token by token on the CPU, and that the step traces as
one graph under ``torch.compile(fullgraph=True)``, which fails on any host read). Decoders are kept
per shape across calls (:data:`MAX_DECODERS`) and dropped when the parameters move to new tensors;
in-place optimizer steps keep the addresses, so a trainer's graphs stay valid across steps.

Sampling: ``repetition_penalty`` first (transformers' own processor, over the prompt and the
generated ids, as ``generate`` applies it); then ``temperature == 0`` is greedy (argmax); otherwise
temperature, then top-k, then top-p, then a draw from a per-prompt ``torch.Generator`` on the
model's device seeded with ``seed + index of the prompt in the call``; so a seed reproduces a call
exactly on one device, whatever ``max_batch_size`` is, and identical prompts in one call (a GRPO
group) get different samples. ``seed=None`` draws fresh seeds.

Device (``BackendSpec.device``, :mod:`harness.device`): a model the backend loads goes there; a
model handed in (the trainer's policy) stays where it is. Every tensor of the decoding loop is
created on the model's device, and a step reads the picked tokens back to the host once (one
``tolist`` for the batch, not one read per row), since the stop scan is host code.

Threads: ``torch.set_num_threads`` from the spec, else ``$OMP_NUM_THREADS``, else 1 (two torch
threads on a busy 2-core machine were 6-15x slower than one, measured on SmolLM2 decoding).

Prefix reuse across calls (:class:`PrefixCache`). A multi-turn rollout calls the backend once per
turn with the whole context so far (prompt, earlier generations, observations); without reuse
every turn prefills the whole context again. After a call the backend keeps each sequence's KV
(the prompt and the generated ids whose KV was computed, i.e. all but the last) keyed by its token
ids; the next call looks up, for every prompt, the kept sequence with the longest common *token*
prefix and prefills only the rest. Token ids, not text, are the key: the engine's eval mode
re-tokenizes the context text, and a BPE merge across the boundary of a generation or a
non-canonical tokenization the model produced changes ids; only the ids that really match are
reused, so the result never depends on how the text was assembled. The last prompt token is
always recomputed (its logits start the generation). A micro-batch is laid out as without reuse,
every row left-padded to one width: the first ``R`` columns come from the kept KV, the last ``S``
(the longest new suffix of the batch) are computed; a row whose new suffix is shorter than ``S``
recomputes a little more of its prefix instead of leaving a hole, which costs nothing since the
batch computes ``S`` columns for every row anyway. Greedy output is the same with and without
reuse up to floating-point rounding, as it is across batch sizes (tests check it token by token).
Memory is bounded by ``BackendSpec.prefix_cache_tokens`` (least recently used sequences go
first); a kept sequence that a longer sequence of the same trajectory fully extends is dropped at
once, so a trajectory in flight holds one entry. Any change of the model's weights (a trainer's
optimizer step bumps the parameters' version counters) empties the cache, so training rollouts
never reuse KV of an older policy. ``Completion.prefill_tokens`` counts the prompt tokens a row
actually computed. Models whose cache is not a plain per-layer KV (sliding-window or linear
attention layers) are refused with ``prefix_cache_tokens > 0``.
"""

from __future__ import annotations

import os
import time
from collections import OrderedDict
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from harness.errors import ConfigError
from harness.llm.base import (
    BackendSpec,
    GenerateArgs,
    HFTokenizerMixin,
    TokenBackend,
    base_seed,
    eos_ids,
    pad_token_id,
)
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


def cache_kwarg(model: Any) -> str:
    """The name of the KV cache in the model's ``forward`` and in its output: ``cache`` where
    transformers has renamed it (5.24 has; ``past_key_values`` is then a deprecated alias, removed
    in 5.40), ``past_key_values`` in earlier versions (``pyproject.toml`` allows 4.56 and later)."""
    import inspect

    return "cache" if "cache" in inspect.signature(model.forward).parameters else "past_key_values"


class TransformersBackend(HFTokenizerMixin, TokenBackend):
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
            from harness.device import resolve_device, resolve_dtype

            device = resolve_device(spec.device)
            dtype = resolve_dtype(spec.dtype, device)
            tokenizer = AutoTokenizer.from_pretrained(str(self.path))
            model = AutoModelForCausalLM.from_pretrained(str(self.path), dtype=dtype).to(device)
            model.eval()
        else:
            if tokenizer is None:
                raise ConfigError("TransformersBackend(model=...) needs its tokenizer too")
            self.path = None
        self.model = model
        self.cache_kw = cache_kwarg(model)
        self.tokenizer = tokenizer
        self.pad_id = pad_token_id(tokenizer, self.spec.model)
        self.eos_ids = eos_ids(tokenizer, getattr(model, "generation_config", None))
        self.unaligned = 0  # completions whose token ids could not be made to match the text
        self._revision: str | None = None
        # which token ids can end a stop string, per set of last characters (StopScanner.memo)
        self._stop_memo: dict[str, dict[int, bool]] = {}
        self.prefix_cache: PrefixCache | None = None
        if spec.prefix_cache_tokens > 0:
            _check_plain_kv(model, spec)
            self.prefix_cache = PrefixCache(spec.prefix_cache_tokens)
        self.decode_mode = _decode_mode(model, spec)
        # static / graph decoding: one decoder per (rows, bucketed length), least recently used first
        self._decoders: OrderedDict[tuple[int, int], _StaticDecoder] = OrderedDict()
        self._decoders_weights: tuple[int, int] | None = None

    @classmethod
    def from_model(cls, model: Any, tokenizer: Any, spec: BackendSpec | None = None) -> TransformersBackend:
        """Wrap an already loaded model (the policy being trained)."""
        return cls(spec, model=model, tokenizer=tokenizer)

    def drop_prefix_cache(self) -> None:
        if self.prefix_cache is not None:
            self.prefix_cache.clear()

    def _decoder(self, cache: Any, attn: torch.Tensor, last_pos: torch.Tensor, length: int) -> _StaticDecoder:
        """The static decoder for this batch's shape, loaded with the prefill's KV. Decoders are
        kept across calls (a CUDA graph is captured once per shape) and dropped when the model's
        parameters are new tensors (a captured graph reads the old addresses); in-place updates
        (optimizer steps) keep the addresses, so the graphs stay valid across training steps."""
        weights = _weights_address(self.model)
        if weights != self._decoders_weights:
            self._decoders.clear()
            self._decoders_weights = weights
        key = (int(attn.shape[0]), -(-length // DECODE_BUCKET) * DECODE_BUCKET)
        dec = self._decoders.pop(key, None)
        if dec is None:
            dec = _StaticDecoder(
                self.model, self.cache_kw, cache, key[0], key[1], self.decode_mode == "graph"
            )
        self._decoders[key] = dec
        while len(self._decoders) > MAX_DECODERS:
            self._decoders.popitem(last=False)
        dec.load(cache, attn, last_pos)
        return dec

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
            "device": str(next(self.model.parameters()).device),
            "revision": self._revision,
            "threads": torch.get_num_threads(),
            "max_batch_size": self.spec.batch_limit,
            "prefix_cache_tokens": self.spec.prefix_cache_tokens,
            "decode": self.decode_mode,
            "transformers": transformers.__version__,
            "torch": torch.__version__,
        }

    # -- generation ------------------------------------------------------------------------
    def _complete_ids(self, prompt_ids: Sequence[Sequence[int]], args: GenerateArgs) -> list[Completion]:
        import torch

        limit = getattr(self.model.config, "max_position_embeddings", None)
        args.check_prompt_ids(prompt_ids, limit=limit, room=f"the model's {limit} positions")
        sampling = args.sampling
        first_seed = base_seed(sampling, 2**62)
        prompts = [list(p) for p in prompt_ids]
        pc = self.prefix_cache
        if pc is not None:
            pc.check_weights(self.model)
            bases = [pc.match(p) for p in prompts]
        else:
            bases = [(None, 0)] * len(prompts)
        # longest new suffix first: rows needing similar prefill share a micro-batch
        order = sorted(range(len(prompts)), key=lambda i: -(len(prompts[i]) - bases[i][1]))
        out: list[Completion | None] = [None] * len(prompts)
        kept: list[_Entry] = []
        was_training = self.model.training
        self.model.eval()
        try:
            with torch.inference_mode():
                bs = self.spec.batch_limit
                for k in range(0, len(order), bs):
                    idx = order[k : k + bs]
                    done, entries = self._generate_batch(
                        [prompts[i] for i in idx],
                        [first_seed + i for i in idx],
                        [bases[i] for i in idx],
                        args,
                    )
                    kept += entries
                    for i, c in zip(idx, done, strict=True):
                        out[i] = c
        finally:
            self.model.train(was_training)
        if pc is not None:
            # an entry a row reused whole is a prefix of that row's new entry: superseded
            pc.drop([e for e, r in bases if e is not None and r == e.length])
            pc.add(kept)
        return [c for c in out if c is not None]

    # long: one decode loop; its per-step state (KV cache, attention, positions, the rows still
    # active, the repetition penalty's ids, the per-row noise) is narrowed together when a row stops,
    # so pieces of it split out would each take and return all of that state
    def _generate_batch(
        self,
        prompts: list[list[int]],
        seeds: list[int],
        bases: list[tuple[_Entry | None, int]],
        args: GenerateArgs,
    ) -> tuple[list[Completion], list[_Entry]]:
        """One micro-batch. ``bases[r]`` is row r's cached entry and how many of its leading
        tokens match the prompt (at most ``len(prompt) - 1``). Returns the completions and, when
        the prefix cache is on, each row's KV to keep."""
        import torch

        stop, max_new_tokens, sampling = list(args.stop), args.max_new_tokens, args.sampling
        t0 = time.perf_counter()
        device = next(self.model.parameters()).device
        n = len(prompts)
        # S new columns for every row; a row reuses what precedes its last S tokens (see module doc)
        suffix = max(len(p) - r for p, (_, r) in zip(prompts, bases, strict=True))
        reuse = [max(0, len(p) - suffix) for p in prompts]
        past = max(reuse)
        width = past + suffix
        rows_ids, rows_attn = [], []
        for r, p in enumerate(prompts):
            new = p[reuse[r] :]
            rows_ids.append([self.pad_id] * (suffix - len(new)) + new)
            rows_attn.append([0] * (width - len(p)) + [1] * len(p))
        input_ids = torch.tensor(rows_ids, dtype=torch.long, device=device)
        attn = torch.tensor(rows_attn, dtype=torch.long, device=device)
        pos = (attn.cumsum(-1) - 1).clamp(min=0)
        cache = None
        if past:
            cache = _batch_cache([b[0] for b in bases], reuse, past, device)

        gens = [torch.Generator(device=device).manual_seed(s) for s in seeds] if not sampling.greedy else []
        scanners = [StopScanner(stop, self.detokenize) for _ in range(n)]
        if scanners[0].last_chars is not None:
            memo = self._stop_memo.setdefault(scanners[0].last_chars, {})
            for sc in scanners:
                sc.memo = memo
        noise = _RowNoise(gens, max_new_tokens) if gens else None
        generated: list[list[int]] = [[] for _ in range(n)]
        eos_hit = [False] * n
        latency = [0.0] * n
        active = list(range(n))  # original row of each row still in the batch

        out = self.model(
            input_ids=input_ids,
            attention_mask=attn,
            position_ids=pos[:, past:],
            use_cache=True,
            logits_to_keep=1,
            **{self.cache_kw: cache},
        )
        cache = out[self.cache_kw]
        logits = out.logits[:, -1, :]
        last_pos = pos[:, -1]
        penalty, seen = None, input_ids
        if sampling.repetition_penalty != 1.0:
            from transformers import RepetitionPenaltyLogitsProcessor

            # transformers' own processor, the one generate(repetition_penalty=) applies, over each
            # row's prompt and generated ids (`seen`, grown by a column per step). Rows are padded
            # with the id vocab_size, which the processor maps past the vocabulary and drops.
            penalty = RepetitionPenaltyLogitsProcessor(float(sampling.repetition_penalty))
            vocab = logits.shape[-1]
            width_seen = max(len(p) for p in prompts)
            seen = torch.tensor(
                [p + [vocab] * (width_seen - len(p)) for p in prompts], dtype=torch.long, device=device
            )
        # static / graph modes: the batch keeps its rows (a finished row's later tokens are
        # computed and ignored), so every step has one shape; dynamic: finished rows are dropped
        dec = None
        if self.decode_mode != "dynamic" and max_new_tokens > 1:
            dec = self._decoder(cache, attn, last_pos, width + max_new_tokens)
            cache = dec.cache
        entries: list[_Entry] = []
        for step in range(max_new_tokens):
            if penalty is not None:
                logits = penalty(seen, logits.float())  # float32, as generate() has its logits
            next_ids = _pick(logits, sampling, noise.next(logits) if noise is not None else None)
            picked = next_ids.tolist()  # the step's one device -> host read
            keep: list[int] = []
            for j, r in enumerate(active):
                b = j if dec is None else r  # the row's place in the batch
                tok = picked[b]
                generated[r].append(tok)
                if tok in self.eos_ids:
                    eos_hit[r] = True
                elif not scanners[r].update(generated[r]) and step + 1 < max_new_tokens:
                    keep.append(j)
                    continue
                latency[r] = time.perf_counter() - t0
                if self.prefix_cache is not None:
                    # the KV holds the prompt and every generated id but the one just picked; in a
                    # static cache they end at column width + step
                    ids = prompts[r] + generated[r][:-1]
                    entries.append(_Entry.of_row(cache, b, ids, end=None if dec is None else width + step))
            if not keep:
                break
            if dec is not None:
                active = [active[j] for j in keep]
                if penalty is not None:
                    seen = torch.cat([seen, next_ids.view(-1, 1).to(seen.device)], dim=1)
                logits = dec.step(next_ids)
                continue
            if len(keep) < len(active):
                sel = torch.tensor(keep, dtype=torch.long, device=device)
                _select_rows(cache, sel)
                attn, last_pos, next_ids = attn[sel], last_pos[sel], next_ids[sel]
                seen = seen[sel] if penalty is not None else seen
                if noise is not None:
                    noise.keep(keep)
                active = [active[j] for j in keep]
            if penalty is not None:
                seen = torch.cat([seen, next_ids.view(-1, 1).to(seen.device)], dim=1)
            attn = torch.cat([attn, attn.new_ones((len(active), 1))], dim=1)
            last_pos = last_pos + 1
            out = self.model(
                input_ids=next_ids.view(-1, 1).to(device),
                attention_mask=attn,
                position_ids=last_pos.view(-1, 1),
                use_cache=True,
                **{self.cache_kw: cache},
            )
            cache = out[self.cache_kw]
            logits = out.logits[:, -1, :]

        results = []
        for r in range(n):
            c = self.completion_from_ids(
                generated[r],
                prompt_tokens=len(prompts[r]),
                eos_hit=eos_hit[r],
                stop=stop,
                include_stop=args.include_stop,
                latency_s=latency[r],
            )
            c.prefill_tokens = len(prompts[r]) - reuse[r]
            results.append(c)
        return results, entries


@dataclass(eq=False)
class _Entry:
    """One kept sequence: its token ids and, per layer, its keys and values ``(heads, len, dim)``."""

    ids: torch.Tensor  # 1-D long
    kv: list[tuple[torch.Tensor, torch.Tensor]]

    @property
    def length(self) -> int:
        return int(self.ids.shape[0])

    @classmethod
    def of_row(cls, cache: Any, row: int, ids: list[int], end: int | None = None) -> _Entry:
        """Row ``row`` of a left-padded batch cache whose last ``len(ids)`` columns (before column
        ``end``, where given: a static cache holds more columns than are filled) are ``ids``."""
        import torch

        n = len(ids)
        cols = slice(-n, None) if end is None else slice(end - n, end)
        kv = [(la.keys[row, :, cols, :].clone(), la.values[row, :, cols, :].clone()) for la in cache.layers]
        # cpu: the ids are a lookup key compared on the host (PrefixCache.match); the KV stays on
        # the model's device
        return cls(torch.tensor(ids, dtype=torch.long, device="cpu"), kv)


class PrefixCache:
    """A bounded LRU of kept sequences (see the module docstring); bounded in tokens, not entries,
    since memory grows with tokens. Not thread-safe: one backend generates one call at a time."""

    def __init__(self, max_tokens: int):
        self.max_tokens = max_tokens
        self.entries: OrderedDict[int, _Entry] = OrderedDict()  # id(entry) -> entry, oldest first
        self.tokens = 0
        self._weights: tuple[int, int, int] | None = None

    def check_weights(self, model: Any) -> None:
        """Empty the cache when the weights changed since the last call: an in-place update of a
        parameter (an optimizer step, ``load_state_dict``) bumps its version counter, new tensors
        (``model.to``) have new storage. Writes that bump neither (``param.data.copy_``, a
        ``fused=True`` optimizer) must be followed by ``prefix_cache.clear()``."""
        params = list(model.parameters())
        key = (id(model), sum(p._version for p in params), hash(tuple(p.data_ptr() for p in params)))
        if key != self._weights:
            self.clear()
            self._weights = key

    def clear(self) -> None:
        self.entries.clear()
        self.tokens = 0

    def match(self, ids: list[int]) -> tuple[_Entry | None, int]:
        """The entry sharing the longest token prefix with ``ids`` and how many tokens can be
        reused (the last prompt token is always recomputed); (None, 0) when none shares any."""
        import torch

        if not self.entries or len(ids) < 2:
            return None, 0
        q = torch.tensor(ids, dtype=torch.long, device="cpu")  # cpu: compared with the CPU keys
        best, best_n = None, 0
        for e in self.entries.values():
            m = min(e.length, len(ids) - 1)
            if m <= best_n or int(e.ids[0]) != ids[0]:
                continue
            diff = (e.ids[:m] != q[:m]).nonzero()
            n = int(diff[0, 0]) if len(diff) else m
            if n > best_n:
                best, best_n = e, n
        if best is not None:
            self.entries.move_to_end(id(best))
        return best, best_n

    def drop(self, entries: Sequence[_Entry]) -> None:
        for e in entries:
            if self.entries.pop(id(e), None) is not None:
                self.tokens -= e.length

    def add(self, entries: Sequence[_Entry]) -> None:
        """Keep ``entries`` (newest last), then evict the least recently used beyond the bound."""
        for e in entries:
            if e.length > self.max_tokens:
                continue
            self.entries[id(e)] = e
            self.tokens += e.length
        while self.tokens > self.max_tokens:
            _, old = self.entries.popitem(last=False)
            self.tokens -= old.length


def _batch_cache(entries: list[_Entry | None], reuse: list[int], past: int, device: Any) -> Any:
    """A DynamicCache of ``past`` columns: row r holds the first ``reuse[r]`` positions of
    ``entries[r]``, right-aligned (left padding, masked out by the attention mask)."""
    from transformers import DynamicCache

    first = next(e for e in entries if e is not None)
    layers = []
    for li, (k0, v0) in enumerate(first.kv):
        k = k0.new_zeros((len(entries), k0.shape[0], past, k0.shape[2]), device=device)
        v = v0.new_zeros((len(entries), v0.shape[0], past, v0.shape[2]), device=device)
        for r, (e, n) in enumerate(zip(entries, reuse, strict=True)):
            if n and e is not None:  # reuse > 0 only where an entry matched
                k[r, :, past - n :, :] = e.kv[li][0][:, :n, :]
                v[r, :, past - n :, :] = e.kv[li][1][:, :n, :]
        layers.append((k, v))
    return DynamicCache(layers)


# static decoding: cache lengths are rounded up to this many columns, so that a multi-turn rollout's
# calls of slightly different widths share one decoder (and one captured graph)
DECODE_BUCKET = 64
# decoders (each with its static KV and, on CUDA, its captured graph) kept across calls
MAX_DECODERS = 2


def _decode_mode(model: Any, spec: BackendSpec) -> str:
    """``spec.decode`` resolved for ``model``: ``auto`` is ``graph`` on a CUDA device when the
    model's KV is plain per-layer attention (static decoding needs that) and ``dynamic`` otherwise;
    an explicit mode the device or the model cannot run is refused in one line."""
    device = next(model.parameters()).device
    if spec.decode == "auto":
        if device.type != "cuda":
            return "dynamic"
        try:
            _check_plain_kv(model, spec)
        except ConfigError:
            return "dynamic"  # documented rule: sliding-window / linear-attention models decode dynamically
        return "graph"
    if spec.decode == "graph" and device.type != "cuda":
        raise ConfigError(
            f"{spec.model}: decode='graph' replays CUDA graphs and needs a CUDA device, not {device}; "
            "use decode='static' or 'dynamic'"
        )
    if spec.decode in ("static", "graph"):
        _check_plain_kv(model, spec)
    return spec.decode


def _weights_address(model: Any) -> tuple[int, int]:
    """Where the parameters live (a captured graph reads these addresses)."""
    return id(model), hash(tuple(p.data_ptr() for p in model.parameters()))


@dataclass(eq=False)
class _KV:
    keys: torch.Tensor
    values: torch.Tensor


class _StaticKV:
    """Preallocated keys and values per layer, ``(rows, kv_heads, length, dim)``, written at the
    column held in the one-element device tensor ``col``: a decode step allocates nothing and reads
    nothing back to the host, so it can be replayed as a CUDA graph.

    Written by hand rather than transformers' ``StaticCache``: that cache's write position has moved
    between releases (``cache_position`` in the call, then a counter inside each layer that every
    call advances, so a graph's warm-up runs would move it); here the position is ours. It offers the
    one method the attention layers call on a cache, ``update``; the model is always given
    ``position_ids`` and a 4-D mask, so it asks the cache for nothing else."""

    def __init__(self, layers: list[_KV], col: torch.Tensor):
        self.layers = layers
        self.col = col

    def update(
        self, key_states: torch.Tensor, value_states: torch.Tensor, layer_idx: int, *args: Any, **kwargs: Any
    ):
        la = self.layers[layer_idx]
        la.keys.index_copy_(2, self.col, key_states)
        la.values.index_copy_(2, self.col, value_states)
        return la.keys, la.values


class _StaticDecoder:
    """The decode state of one batch shape: a :class:`_StaticKV`, and the step's inputs as buffers
    updated in place (the fed ids, the positions, a boolean ``(rows, 1, 1, length)`` attention mask).
    A step marks the written column in the mask, runs the model on one token per row and returns the
    last logits. With ``graph`` the step is captured once as a CUDA graph (after two warm-up runs on a
    side stream, as ``torch.cuda.graph`` asks) and replayed: one launch per token instead of the
    forward's hundreds, which bound both our loop and ``model.generate`` on a GPU. The warm-ups and
    the replay write the same column with the same inputs, so they do not change the result; the
    position and the column advance outside the graph."""

    def __init__(self, model: Any, cache_kw: str, prefill: Any, rows: int, length: int, graph: bool):
        import torch

        self.model, self.cache_kw, self.use_graph = model, cache_kw, graph
        first = prefill.layers[0].keys
        layers = [
            _KV(
                la.keys.new_zeros((rows, la.keys.shape[1], length, la.keys.shape[3])),
                la.values.new_zeros((rows, la.values.shape[1], length, la.values.shape[3])),
            )
            for la in prefill.layers
        ]
        self.cache = _StaticKV(layers, torch.zeros(1, dtype=torch.long, device=first.device))
        self.ids = torch.zeros((rows, 1), dtype=torch.long, device=first.device)
        self.pos = torch.zeros((rows, 1), dtype=torch.long, device=first.device)
        self.mask = torch.zeros((rows, 1, 1, length), dtype=torch.bool, device=first.device)
        self.graph: Any = None
        self.out: torch.Tensor | None = None

    def load(self, prefill: Any, attn: torch.Tensor, last_pos: torch.Tensor) -> None:
        """The prefill's KV into columns ``[0, width)``; the next step writes column ``width``.
        Columns past it keep an earlier call's values, which the mask hides."""
        width = int(attn.shape[1])
        for la, src in zip(self.cache.layers, prefill.layers, strict=True):
            la.keys[:, :, :width].copy_(src.keys)
            la.values[:, :, :width].copy_(src.values)
        self.mask.zero_()
        self.mask[:, 0, 0, :width] = attn.bool()
        self.pos.copy_(last_pos.view(-1, 1))
        self.cache.col.fill_(width)

    def _forward(self) -> torch.Tensor:
        self.mask.index_fill_(3, self.cache.col, True)
        out = self.model(
            input_ids=self.ids,
            attention_mask=self.mask,
            position_ids=self.pos,
            use_cache=True,
            **{self.cache_kw: self.cache},
        )
        return out.logits[:, -1, :]

    def step(self, next_ids: torch.Tensor) -> torch.Tensor:
        """Feed ``next_ids`` (one per row) and return the next logits ``(rows, V)``; with a graph
        the returned tensor is overwritten by the next step."""
        self.ids.copy_(next_ids.view(-1, 1))
        self.pos.add_(1)
        if not self.use_graph:
            logits = self._forward()
        else:
            if self.graph is None:
                self._capture()
            self.graph.replay()
            logits = self.out
        self.cache.col.add_(1)
        return logits

    def _capture(self) -> None:
        import torch

        side = torch.cuda.Stream(device=self.ids.device)
        side.wait_stream(torch.cuda.current_stream(self.ids.device))
        with torch.cuda.stream(side):
            for _ in range(2):
                self._forward()
        torch.cuda.current_stream(self.ids.device).wait_stream(side)
        graph = torch.cuda.CUDAGraph()
        with torch.cuda.graph(graph):
            self.out = self._forward()
        self.graph = graph


def _check_plain_kv(model: Any, spec: BackendSpec) -> None:
    """The prefix cache slices and re-assembles per-layer KV tensors, which is only right for
    full-attention layers (``DynamicLayer``); refuse anything else."""
    from transformers import DynamicCache
    from transformers.cache_utils import DynamicLayer

    kinds = {type(la).__name__ for la in DynamicCache(config=model.config).layers}
    if kinds != {DynamicLayer.__name__}:
        raise ConfigError(
            f"{spec.model}: the model's KV cache has {sorted(kinds)} layers; the prefix cache handles "
            "only full-attention layers: set BackendSpec.prefix_cache_tokens=0"
        )


def _select_rows(cache: Any, sel: torch.Tensor) -> None:
    """Keep only rows ``sel`` of a KV cache (older transformers: on the cache, newer: per layer)."""
    if hasattr(cache, "batch_select_indices"):
        cache.batch_select_indices(sel)
        return
    for layer in cache.layers:
        layer.batch_select_indices(sel)


class _RowNoise:
    """The sampler's uniform noise, one ``torch.Generator`` per row, drawn ``block`` decoding steps
    at a time.

    Each row needs a (V,) draw from its own generator every step, one kernel launch per row; on a
    GPU a 32-row batch spent 32 launches a token on it, while the whole step is launch-bound. On a
    GPU a row's next ``block`` steps are drawn in one launch, up to :data:`NOISE_ELEMENTS` floats
    for the batch (256 MB). On the CPU ``block`` is 1: there the draw costs per element, and a row
    that stops early would waste what was drawn ahead. The CPU generator fills a (k, V) tensor with
    the same stream as k (V,) draws, so CPU tokens do not depend on ``block``; CUDA's Philox
    generator assigns its offsets per launch, so GPU tokens do (a seed still repeats exactly)."""

    def __init__(self, gens: list[torch.Generator], max_steps: int, block: int | None = None):
        self.gens = gens
        self.block = block  # None: 1 on the CPU, as many as NOISE_ELEMENTS allows on a GPU
        self.left = max_steps
        self.buf: torch.Tensor | None = None
        self.k = 0

    def next(self, like: torch.Tensor) -> torch.Tensor:
        """(rows, V) uniforms in [0, 1) for this step, on ``like``'s device."""
        import torch

        if self.buf is None or self.k == self.buf.shape[1]:
            rows, vocab = like.shape
            block = self.block or 1
            if self.block is None and like.device.type != "cpu":
                block = max(1, min(16, self.left, NOISE_ELEMENTS // max(rows * vocab, 1)))
            self.buf = torch.empty((rows, block, vocab), dtype=torch.float32, device=like.device)
            for j, g in enumerate(self.gens):
                self.buf[j].uniform_(generator=g)
            self.k = 0
        u = self.buf[:, self.k]
        self.k += 1
        self.left -= 1
        return u

    def keep(self, rows: list[int]) -> None:
        """Only ``rows`` (indices into the current batch) go on decoding."""
        self.gens = [self.gens[j] for j in rows]
        if self.buf is not None:
            self.buf = self.buf[rows]


# floats of sampler noise held at once on a GPU (_RowNoise): 2**26 = 256 MB
NOISE_ELEMENTS = 1 << 26


def _pick(logits: torch.Tensor, sampling: SamplingParams, u: torch.Tensor | None) -> torch.Tensor:
    """Next token per row: argmax when greedy, else temperature / top-k / top-p sampling with the
    rows' uniform noise ``u`` (rows, V) from :class:`_RowNoise`."""
    import torch

    if sampling.greedy or u is None:
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
    # the exponential race: argmax(p / E) with E ~ Exp(1) i.i.d. draws token i with probability
    # p_i (vLLM's sampler does the same). One row's noise comes from that row's generator, drawn
    # as uniforms U in [0, 1) and turned into E = -log(U) for the whole batch at once: over
    # SmolLM2's 49,152 tokens on one CPU thread a row cost 0.8 ms so, 3.6 ms with exponential_ and
    # 5.9 ms as a softmax + torch.multinomial call (U = 0, probability 2**-24 per token, only
    # makes that token lose)
    return (probs / -torch.log(u)).argmax(dim=-1)
