"""Sequence layout and per-token log-probs for the trainer, SFT and PPO's critic.

A batch of (prompt, response) pairs is laid out for one forward (:func:`pack_sequences`): prompts
left-padded to one width, responses right-padded, on the model's device. :func:`sequence_logprobs`
runs the model's backbone once and projects only the response positions it is asked for through
the LM head, in chunks of tokens, each chunk under activation checkpointing: the (B, T, V) logits
are never materialised, and the backward pass keeps only the hidden states (it recomputes each
chunk's logits). On SmolLM2's 49,152-token vocabulary a (32, 128, V) float32 logits tensor is
805 MB, and the log-softmax, entropy and temperature copies of it that autograd kept were most of
a GRPO step's peak memory. TRL's ``add_fused_lm_head`` (trl/trainer/utils.py, TRL 1.16) does the
same with a hand-written autograd function; this module uses torch's own checkpointing, so the
gradient is autograd's, not ours.

The frozen trunk (:func:`frozen_depth`, :class:`TrunkCache`): with LoRA on the top layers only (the
CPU learning recipes adapt layers 20-29 of SmolLM2's 30), the embeddings and the layers below the
first adapted one hold no trainable parameter, so their output is the same for the policy being
updated, for the rollout policy of the step (old log-probs) and for the LoRA reference (the
adapter-free base). A step's update computes it once per micro-batch, without gradients, and
every pass (old, reference, the loss) runs only the layers above it: the same numbers as the
full forward (in the model's dtype; tests/rl/test_trunk.py), for about a third of the compute of
each pass. In bfloat16 (``Recipe.trunk_dtype``, CPU autocast) the trunk is a
rounding of the base model's frozen layers that every pass of the step shares, so the ratio of the
policy's log-probs to the old ones is still exactly 1 before the first update; the master LoRA
weights, the layers above the trunk, the LM head and the optimizer stay float32.

The shared-prefix forward (:func:`pack_shared`, ``share_prompts``): a group's rollouts share their
prompt and, in a search rollout, often the query and the documents it retrieved too; that common
start is computed once per micro-batch and each response's own rest after its keys and values.
On the captured cpu-sft-grpo update of SmolLM2 (32 rollouts, 15,391 response tokens, 4,464 once
the common starts are shared) the update took 27.4 s against 65.4 s with only the prompt shared
(float32 trunk; loss, KL and gradient norm equal to 5-6 digits; docs/training.md).
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

import torch
from torch.nn import functional as F  # noqa: N812
from torch.utils.checkpoint import checkpoint

from harness.errors import ConfigError

# float32 logits held at once per chunk (elements): 2**24 = 64 MB; a chunk is this many logits'
# worth of tokens (341 tokens at SmolLM2's vocabulary, 110 at Qwen2.5's 151,936). With 2**26 a
# chunk's logits, softmax and their gradients in the backward pass were over 1 GB of transients.
CHUNK_LOGITS = 1 << 24


@dataclass(frozen=True)
class Packed:
    """A batch of (prompt, response) pairs laid out for one forward: prompts left-padded to
    ``prompt_len``, responses right-padded to ``response_len``; ``labels`` are the response ids."""

    input_ids: torch.Tensor
    attention: torch.Tensor
    position_ids: torch.Tensor
    labels: torch.Tensor
    prompt_len: int
    response_len: int
    shared: SharedPrompts | None = None


@dataclass(frozen=True)
class SharedPrompts:
    """The layout of one shared-prefix forward (:func:`pack_shared`): each distinct prompt once
    with the start its rows' responses have in common (its "prefix"), left-padded (U, P), and the
    rest of each response right-padded (B, S) after its prefix's KV cache."""

    prompt_ids: torch.Tensor  # (U, P): the prefixes
    prompt_attention: torch.Tensor  # (U, P)
    prompt_positions: torch.Tensor  # (U, P)
    index: torch.Tensor  # (B,) the row's prefix among the U
    suffix_ids: torch.Tensor  # (B, S): the row's response after its prefix, right-padded
    attention: torch.Tensor  # (B, P + S): its prefix's mask, then the suffix's
    positions: torch.Tensor  # (B, S): the suffix's positions after its prefix
    # (B, T) over the original responses: where the hidden state that predicts response token j of
    # row i is, as a row of cat(prefix hidden (U * P), suffix hidden (B * S))
    source: torch.Tensor


def _common_start(rows: list[list[int]]) -> int:
    """How many leading tokens all of ``rows`` share, at most ``min(len) - 1``: every row keeps
    a token after the shared part, so that its own forward has something to run."""
    n = min(len(r) for r in rows) - 1
    first = rows[0]
    for r in rows[1:]:
        k = 0
        while k < n and r[k] == first[k]:
            k += 1
        n = k
    return max(n, 0)


def pack_shared(model: Any, prompts: list[list[int]], responses: list[list[int]], *, pad_id: int) -> Packed:
    """:func:`pack_sequences`'s batch with the shared-prefix layout beside it, on ``model``'s
    device: the responses of a group share their prompt and, in a search rollout, often far more:
    the same query, hence the same retrieved documents, then answers that differ in a few tokens
    (on SmolLM2's cpu-grpo-long step, 3 of 4 groups of 8 shared 450-555 of their 455-561 response
    tokens). Each distinct prompt with its rows' common response start is computed once, and the
    rest of each response runs after its keys and values (repeated by index, so the gradient
    reaches the shared part once per row). The shared forward of a group's prefix is Prefix
    Grouper's (Liu et al., arXiv 2506.05433, §3: the shared prefix attended once per group, exact
    in forward and backward), taken here past the prompt to the whole common start."""
    pk = pack_sequences(model, prompts, responses, pad_id=pad_id)
    distinct: dict[tuple[int, ...], int] = {}
    index = [distinct.setdefault(tuple(p), len(distinct)) for p in prompts]
    rows_of: list[list[int]] = [[] for _ in distinct]
    for i, u in enumerate(index):
        rows_of[u].append(i)
    common = [_common_start([responses[i] for i in rows]) for rows in rows_of]  # each has a row
    prefixes = [list(p) + responses[rows_of[u][0]][: common[u]] for u, p in enumerate(distinct)]
    p_len = max(len(p) for p in prefixes)
    shared = [common[u] for u in index]
    suffixes = [r[n:] for r, n in zip(responses, shared, strict=True)]
    s_len = max(max(len(x) for x in suffixes), 1)
    device = pk.input_ids.device
    ids = torch.tensor([[pad_id] * (p_len - len(p)) + p for p in prefixes], device=device)
    attn = torch.tensor([[0] * (p_len - len(p)) + [1] * len(p) for p in prefixes], device=device)
    suffix_ids = torch.tensor([x + [pad_id] * (s_len - len(x)) for x in suffixes], device=device)
    s_attn = torch.tensor([[1] * len(x) + [0] * (s_len - len(x)) for x in suffixes], device=device)
    idx = torch.tensor(index, dtype=torch.long, device=device)
    lengths = attn.sum(-1)[idx]
    # token j of row i (prefix u, L shared tokens) is predicted at prefix position P - L - 1 + j for
    # j <= L (the prefix's last position for j = L), else at suffix position j - L - 1; a padding
    # position points at the row's last suffix state (its log-prob is never used)
    j = torch.arange(pk.response_len, device=device)[None, :]
    n_sh = torch.tensor(shared, dtype=torch.long, device=device)[:, None]
    in_prefix = idx[:, None] * p_len + (p_len - n_sh - 1 + j)
    rows = torch.arange(len(responses), device=device)[:, None]
    in_suffix = len(prefixes) * p_len + rows * s_len + (j - n_sh - 1).clamp(0, s_len - 1)
    sp = SharedPrompts(
        prompt_ids=ids,
        prompt_attention=attn,
        prompt_positions=(attn.cumsum(-1) - 1).clamp(min=0),
        index=idx,
        suffix_ids=suffix_ids,
        attention=torch.cat([attn[idx], s_attn], dim=1),
        positions=lengths[:, None] + torch.arange(s_len, device=device)[None, :],
        source=torch.where(j <= n_sh, in_prefix, in_suffix),
    )
    return Packed(**{**pk.__dict__, "shared": sp})


def _run(backbone: Any, inputs: torch.Tensor, **kw: Any) -> Any:
    """``backbone`` over token ids (integer ``inputs``) or hidden states (floating ``inputs``)."""
    key = "inputs_embeds" if inputs.is_floating_point() else "input_ids"
    return backbone(**{key: inputs}, **kw)


def _padded_hidden(backbone: Any, pk: Packed, inputs: torch.Tensor) -> torch.Tensor:
    """``backbone``'s last hidden states (B, L, H) over the padded batch ``pk`` from ``inputs``
    (its token ids, or the hidden states entering the running layers)."""
    return _run(
        backbone, inputs, attention_mask=pk.attention, position_ids=pk.position_ids, use_cache=False
    ).last_hidden_state


def _response_hidden(
    backbone: Any, pk: Packed, prompt_in: torch.Tensor | None, resp_in: torch.Tensor
) -> tuple[torch.Tensor, torch.Tensor]:
    """The shared-prompt forward of ``backbone``'s current layers: (hidden (U, P, H) of the
    distinct prompts, hidden (B, T, H) of the responses). ``prompt_in``/``resp_in``: token ids or
    the hidden states entering the layers (a trunk's)."""
    from transformers import DynamicCache

    sh = pk.shared
    assert sh is not None
    cache = DynamicCache()
    hp = _run(
        backbone,
        sh.prompt_ids if prompt_in is None else prompt_in,
        attention_mask=sh.prompt_attention,
        position_ids=sh.prompt_positions,
        cache=cache,
        use_cache=True,
    ).last_hidden_state
    if cache.get_seq_length() != sh.prompt_ids.shape[1]:  # e.g. gradient checkpointing drops the cache
        raise ConfigError(
            f"{type(backbone).__name__}: the shared-prompt forward got no KV cache from the prompt pass "
            "(gradient checkpointing turns the cache off); run it without share_prompts"
        )
    cache.batch_select_indices(sh.index)
    hr = _run(
        backbone, resp_in, attention_mask=sh.attention, position_ids=sh.positions, cache=cache, use_cache=True
    ).last_hidden_state
    return hp, hr


def pack_sequences(
    model: Any, prompts: list[list[int]], responses: list[list[int]], *, pad_id: int
) -> Packed:
    """The layout the policy (:func:`sequence_logprobs`) and the critic
    (:func:`harness.rl.ppo.sequence_values`) share, on ``model``'s device."""
    p_len = max(len(p) for p in prompts)
    t_len = max(max(len(r) for r in responses), 1)
    ids, attn, labels = [], [], []
    for p, r in zip(prompts, responses, strict=True):
        pad_l, pad_r = p_len - len(p), t_len - len(r)
        ids.append([pad_id] * pad_l + p + r + [pad_id] * pad_r)
        attn.append([0] * pad_l + [1] * (len(p) + len(r)) + [0] * pad_r)
        labels.append(r + [pad_id] * pad_r)
    device = next(model.parameters()).device
    attention = torch.tensor(attn, device=device)
    return Packed(
        input_ids=torch.tensor(ids, device=device),
        attention=attention,
        position_ids=(attention.cumsum(-1) - 1).clamp(min=0),
        labels=torch.tensor(labels, device=device),
        prompt_len=p_len,
        response_len=t_len,
    )


# Decoder stacks whose forward runs ``self.layers`` in order over ``inputs_embeds`` as given (no
# embedding scale) with one attention kind, so that a slice of the layers is a valid forward
# (:func:`_only_layers`); another architecture runs the full forward (frozen depth 0).
TRUNK_MODEL_TYPES = frozenset({"llama", "mistral", "qwen2", "qwen3"})


@dataclass(frozen=True)
class Trunk:
    """The hidden states (B, L) entering decoder layer ``depth`` of a packed batch."""

    depth: int
    hidden: torch.Tensor  # shared-prompt layout: the responses' (B, T)
    prompt_hidden: torch.Tensor | None = None  # shared-prompt layout: the distinct prompts' (U, P)


def frozen_depth(model: Any) -> int:
    """How many leading decoder layers of ``model`` (its embeddings frozen too) hold no trainable
    parameter and no adapter module, for an architecture in :data:`TRUNK_MODEL_TYPES`; else 0."""
    core = model.get_base_model() if hasattr(model, "get_base_model") else model
    cfg = core.config.get_text_config() if hasattr(core.config, "get_text_config") else core.config
    if getattr(cfg, "model_type", None) not in TRUNK_MODEL_TYPES:
        return 0
    if len(set(getattr(cfg, "layer_types", None) or ["one"])) != 1:
        return 0  # sliding and full attention layers: the forward indexes them by position
    backbone = causal_lm_parts(model)[0]
    layers = getattr(backbone, "layers", None)
    embed = getattr(backbone, "embed_tokens", None)
    if layers is None or embed is None or any(p.requires_grad for p in embed.parameters()):
        return 0
    depth = 0
    for layer in layers:
        adapted = any("lora_" in name for name, _ in layer.named_modules())
        if adapted or any(p.requires_grad for p in layer.parameters()):
            break
        depth += 1
    return depth


@contextlib.contextmanager
def _only_layers(backbone: Any, layers: slice, *, norm: bool) -> Iterator[None]:
    """``backbone``'s forward over ``layers`` only (and without its final norm unless ``norm``);
    restored on exit."""
    full, final = backbone.layers, backbone.norm
    kept = list(full)[layers]
    attns = [getattr(layer, "self_attn", None) for layer in kept]
    numbers = [getattr(a, "layer_idx", None) for a in attns]
    backbone.layers = torch.nn.ModuleList(kept)
    for i, a in enumerate(attns):  # a KV cache is indexed by the position in the running stack
        if a is not None and numbers[i] is not None:
            a.layer_idx = i
    if not norm:
        backbone.norm = torch.nn.Identity()
    try:
        yield
    finally:
        backbone.layers, backbone.norm = full, final
        for a, n in zip(attns, numbers, strict=True):
            if a is not None and n is not None:
                a.layer_idx = n


def frozen_trunk(model: Any, pk: Packed, depth: int, *, dtype: torch.dtype | None = None) -> Trunk:
    """The hidden states entering layer ``depth`` for the packed batch ``pk``, without gradients;
    ``dtype`` bfloat16: computed under autocast (the trunk's matrix products in bfloat16), returned
    in the model's dtype."""
    backbone = causal_lm_parts(model)[0]
    param = next(model.parameters())
    cast = (
        torch.autocast(device_type=param.device.type, dtype=dtype)
        if dtype is not None and dtype != param.dtype
        else contextlib.nullcontext()
    )
    with torch.no_grad(), _only_layers(backbone, slice(0, depth), norm=False), cast:
        if pk.shared is not None:
            hp, hr = _response_hidden(backbone, pk, None, pk.shared.suffix_ids)
            return Trunk(depth, hr.to(param.dtype), hp.to(param.dtype))
        hidden = _padded_hidden(backbone, pk, pk.input_ids)
    return Trunk(depth, hidden.to(param.dtype))


class TrunkCache:
    """The frozen trunk of an update's micro-batches, computed on first use per set of rows of
    ``prompts``/``responses`` (the same rows pack the same way), then shared by every pass over
    them (old log-probs, reference, loss). ``depth`` 0: no trunk (the full forward)."""

    def __init__(
        self,
        model: Any,
        prompts: list[list[int]],
        responses: list[list[int]],
        *,
        pad_id: int,
        depth: int,
        dtype: torch.dtype | None = None,
        share_prompts: bool = False,
    ):
        self.model, self.prompts, self.responses = model, prompts, responses
        self.pad_id, self.depth, self.dtype = pad_id, depth, dtype
        self.share_prompts = share_prompts
        self._cache: dict[tuple[int, ...], Trunk] = {}

    def __call__(self, rows: list[int]) -> Trunk | None:
        if self.depth == 0:
            return None
        key = tuple(rows)
        if key not in self._cache:
            pack = pack_shared if self.share_prompts else pack_sequences
            pk = pack(
                self.model,
                [self.prompts[i] for i in rows],
                [self.responses[i] for i in rows],
                pad_id=self.pad_id,
            )
            self._cache[key] = frozen_trunk(self.model, pk, self.depth, dtype=self.dtype)
        return self._cache[key]


def causal_lm_parts(model: Any) -> tuple[Any, Any, float, float | None]:
    """(backbone, LM head, logit scale, final logit soft-cap) of a transformers causal LM, or of
    the model a peft wrapper holds (its layers carry the adapters)."""
    core = model.get_base_model() if hasattr(model, "get_base_model") else model
    backbone = getattr(core, getattr(core, "base_model_prefix", "model"), None)
    head = core.get_output_embeddings() if hasattr(core, "get_output_embeddings") else None
    if backbone is None or head is None or not isinstance(head, torch.nn.Linear):
        raise ConfigError(
            f"{type(core).__name__}: no backbone and linear LM head found; the trainer needs a "
            "transformers causal LM (AutoModelForCausalLM)"
        )
    cfg = core.config.get_text_config() if hasattr(core.config, "get_text_config") else core.config
    scale = getattr(cfg, "logit_scale", None)
    return (
        backbone,
        head,
        1.0 if scale is None else float(scale),
        getattr(cfg, "final_logit_softcapping", None),
    )


def _head_chunk(
    hidden: torch.Tensor,
    weight: torch.Tensor,
    bias: torch.Tensor | None,
    labels: torch.Tensor,
    scale: float,
    softcap: float | None,
    want_entropy: bool,
) -> tuple[torch.Tensor, torch.Tensor]:
    """Log-prob of ``labels`` and entropy (zeros unless ``want_entropy``) for ``n`` hidden states;
    the logits are float32 whatever the model's dtype (as verl and TRL compute them)."""
    z = F.linear(hidden, weight, bias).float()
    if softcap is not None:
        z = torch.tanh(z / softcap) * softcap
    z = z * scale
    lse = torch.logsumexp(z, dim=-1)
    logp = z.gather(-1, labels.unsqueeze(-1)).squeeze(-1) - lse
    if not want_entropy:
        return logp, torch.zeros_like(logp)
    ent = lse - (torch.softmax(z, dim=-1) * z).sum(dim=-1)
    return logp, ent


def token_logprobs(
    hidden: torch.Tensor,
    head: torch.nn.Linear,
    labels: torch.Tensor,
    *,
    scale: float = 1.0,
    softcap: float | None = None,
    with_entropy: bool = False,
    entropy_grad: bool = True,
    chunk_tokens: int | None = None,
) -> tuple[torch.Tensor, torch.Tensor | None]:
    """Per-token log-probs (and entropies) of ``labels`` (N,) from ``hidden`` (N, H) through
    ``head``, ``chunk_tokens`` tokens at a time (default: :data:`CHUNK_LOGITS` logits' worth).
    With gradients on, each chunk runs under non-reentrant checkpointing, so its logits are
    recomputed in the backward pass instead of being kept. ``scale`` multiplies the logits
    (1 / temperature, times any logit scale of the model)."""
    n = hidden.shape[0]
    step = chunk_tokens or max(1, CHUNK_LOGITS // head.weight.shape[0])
    grad = torch.is_grad_enabled()
    logps, ents = [], []
    for s in range(0, n, step):
        args = (
            hidden[s : s + step],
            head.weight,
            head.bias,
            labels[s : s + step],
            scale,
            softcap,
            with_entropy,
        )
        if grad:
            lp, en = checkpoint(_head_chunk, *args, use_reentrant=False)
        else:
            lp, en = _head_chunk(*args)
        logps.append(lp)
        ents.append(en if entropy_grad else en.detach())
    if not logps:  # nothing selected: an empty result still connected to the graph, so a
        # micro-batch whose loss mask is all 0 contributes a differentiable 0
        empty = hidden.sum(-1).float()
        return empty, (empty if with_entropy else None)
    logp = torch.cat(logps)
    return logp, (torch.cat(ents) if with_entropy else None)


# long: one forward in three exact variants that must stay equal (padded, shared prompt KV, frozen
# trunk), pinned by tests/rl/test_trunk.py; a split would pass the same padded tensors around
def sequence_logprobs(
    model: Any,
    prompts: list[list[int]],
    responses: list[list[int]],
    *,
    pad_id: int,
    temperature: float,
    with_entropy: bool,
    mask: torch.Tensor | None = None,
    entropy_grad: bool = True,
    keep: torch.Tensor | None = None,
    trunk: Trunk | None = None,
    share_prompts: bool = False,
) -> tuple[torch.Tensor, torch.Tensor | None]:
    """Log-probs (B, T) of each response token under ``model`` given its prompt and the response
    so far, at the sampling temperature; prompts are left-padded, responses right-padded.

    ``keep`` (B, T'), T' <= T: only the positions where ``keep`` is non-zero go through the LM
    head; every other position's log-prob is returned as 0. A search trajectory is mostly
    observation tokens (loss mask 0), and the vocabulary projection over them was a large share
    of a step with 500-token observations. ``keep=None``: every response position.

    ``with_entropy`` and a ``mask``: the per-token entropy (B, T) at the same temperature, 0 where
    ``mask`` is 0; it is part of the autograd graph only with ``entropy_grad`` (as a logged metric
    it costs no graph memory).

    ``trunk``: the frozen trunk of this batch (:func:`frozen_trunk` of the same pairs): only the
    layers above it run (computed with the same ``share_prompts``).

    ``share_prompts``: one forward per distinct prompt (a GRPO group's G responses share theirs)
    together with the start its responses have in common: its keys and values are computed once
    and the rest of every response runs after them (:func:`pack_shared`); a shared token's
    log-prob goes through the LM head once. The same log-probs and gradients as the padded batch,
    up to float rounding (tests/rl/test_trunk.py)."""
    pack = pack_shared if share_prompts else pack_sequences
    pk = pack(model, prompts, responses, pad_id=pad_id)
    b, t_len = pk.labels.shape
    backbone, head, scale, softcap = causal_lm_parts(model)
    sel = torch.ones_like(pk.labels, dtype=torch.bool)
    if keep is not None:
        k = keep.to(device=sel.device).bool()[:, :t_len]
        sel = F.pad(k, (0, t_len - k.shape[1]))
    if trunk is not None and (trunk.prompt_hidden is not None) != share_prompts:
        raise ValueError(
            "sequence_logprobs: the trunk was packed with another share_prompts; compute it alike"
        )
    want_ent = with_entropy and mask is not None
    lp_kw: dict[str, Any] = dict(
        scale=scale / temperature, softcap=softcap, with_entropy=want_ent, entropy_grad=entropy_grad
    )
    if share_prompts:
        sh = pk.shared
        assert sh is not None
        with contextlib.ExitStack() as stack:
            prompt_in, resp_in = None, sh.suffix_ids
            if trunk is not None:
                if trunk.hidden.shape[:2] != resp_in.shape:
                    raise ValueError(
                        f"sequence_logprobs: trunk of shape {tuple(trunk.hidden.shape[:2])} for responses "
                        f"packed as {tuple(resp_in.shape)}; compute the trunk from the same pairs"
                    )
                stack.enter_context(_only_layers(backbone, slice(trunk.depth, None), norm=True))
                prompt_in, resp_in = trunk.prompt_hidden, trunk.hidden
            hp, hr = _response_hidden(backbone, pk, prompt_in, resp_in)
        states = torch.cat([hp.flatten(0, 1), hr.flatten(0, 1)])
        # a shared prefix's token has one hidden state and one label for all its rows: through the
        # head once (the first token after it has one state but each row's own label)
        vocab = head.weight.shape[0]
        key = sh.source[sel] * vocab + pk.labels[sel]
        uniq, inverse = torch.unique(key, return_inverse=True)
        lp, en = token_logprobs(states[uniq // vocab], head, uniq % vocab, **lp_kw)
        lp = lp[inverse]
        en = None if en is None else en[inverse]
    else:
        if trunk is None:
            hidden = _padded_hidden(backbone, pk, pk.input_ids)
        else:
            if trunk.hidden.shape[:2] != pk.input_ids.shape:
                raise ValueError(
                    f"sequence_logprobs: trunk of shape {tuple(trunk.hidden.shape[:2])} for a batch packed "
                    f"as {tuple(pk.input_ids.shape)}; compute the trunk from the same pairs"
                )
            with _only_layers(backbone, slice(trunk.depth, None), norm=True):
                hidden = _padded_hidden(backbone, pk, trunk.hidden)
        # position p - 1 + j holds the distribution of response token j
        resp = hidden[:, pk.prompt_len - 1 : pk.prompt_len - 1 + t_len]
        lp, en = token_logprobs(resp[sel], head, pk.labels[sel], **lp_kw)
    logp = torch.zeros(b, t_len, dtype=lp.dtype, device=lp.device).masked_scatter(sel, lp)
    if not want_ent:
        return logp, None
    assert mask is not None and en is not None
    m = mask.to(device=sel.device).bool()[:, :t_len]
    m = F.pad(m, (0, t_len - m.shape[1]))
    ent = torch.zeros(b, t_len, dtype=en.dtype, device=en.device).masked_scatter(sel, en)
    return logp, ent * m


class _LowPrecisionProduct:
    """The forward of a frozen ``torch.nn.Linear`` computed in ``dtype``: input, weight and bias
    rounded to it, the product returned in the input's dtype. The rounded weight is kept beside
    the module (not a parameter: checkpoints keep the module's own weight)."""

    def __init__(self, linear: torch.nn.Linear, dtype: torch.dtype):
        self.dtype = dtype
        self.weight = linear.weight.detach().to(dtype)
        self.bias = None if linear.bias is None else linear.bias.detach().to(dtype)

    def __call__(self, x: torch.Tensor) -> torch.Tensor:
        return F.linear(x.to(self.dtype), self.weight, self.bias).to(x.dtype)


def low_precision_bases(policy: Any, dtype: torch.dtype) -> int:
    """Compute the frozen base product of every LoRA-adapted linear of PEFT ``policy`` in ``dtype``
    (bfloat16), the adapter's product staying in the model's dtype and added after it, as PEFT's
    ``lora.Linear`` does. Returns how many linears changed (0 where the model is already in
    ``dtype``).

    Why not autocast: under CPU autocast PEFT's adapter product is itself computed in bfloat16 and
    rounded into the base's output, and a small update of the adapter is largely lost: on a tiny
    Llama, B moved by 1% of itself moved the log-probs 61% off the float32 move
    (tests/rl/test_adapted_dtype.py), and on SmolLM2 a step's second update saw a ratio of exactly
    1 (docs/training.md). Here the adapter's product stays float32 and every pass of a step rounds
    the frozen bases alike, so the ratio follows the float32 one up to the rounding of the inputs of
    the bfloat16 products after the update (2.6% in that test), while the base products (most of
    the upper layers' work) run at bfloat16's speed.
    The weights must stay frozen afterwards: the rounded copy is taken once."""
    from peft.tuners.lora import LoraLayer

    n = 0
    for module in policy.modules():
        if not isinstance(module, LoraLayer):
            continue
        base = module.get_base_layer()
        if not isinstance(base, torch.nn.Linear):
            raise ConfigError(
                f"adapted_dtype: a LoRA-adapted {type(base).__name__} is not a linear layer; leave it 'model'"
            )
        if base.weight.requires_grad:
            raise ConfigError(
                "adapted_dtype: the adapted linear's base weight is trainable; leave it 'model'"
            )
        if base.weight.dtype == dtype:
            continue
        base.forward = _LowPrecisionProduct(base, dtype)
        n += 1
    return n


def full_precision_bases(policy: Any) -> int:
    """Undo :func:`low_precision_bases` (before merging the adapters into the base weights, whose
    rounded copies would then be stale); returns how many linears changed back."""
    n = 0
    for module in policy.modules():
        if isinstance(module.__dict__.get("forward"), _LowPrecisionProduct):
            del module.forward
            n += 1
    return n
