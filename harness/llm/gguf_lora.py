"""A PEFT LoRA adapter of a Llama-family policy written as a llama.cpp GGUF LoRA adapter, so the
llama.cpp engine (:class:`~harness.llm.llamacpp_backend.LlamaCppBackend` with ``lora=``) rolls out
the learner's current policy without merging or re-quantising the base model.

The format is what llama.cpp's ``convert_lora_to_gguf.py`` writes and ``llama-adapter.cpp``
reads (ggml-org/llama.cpp, both at the revision the ``xllamacpp`` wheel builds):

* metadata ``general.architecture`` (the base model's, ``llama``), ``general.type = adapter``,
  ``adapter.type = lora`` and ``adapter.lora.alpha``; llama.cpp scales each product by
  ``alpha / rank`` (rank read off ``lora_b``), which is PEFT's ``lora_alpha / r``;
* per adapted matrix two tensors named after the base tensor, ``blk.{i}.attn_q.weight.lora_a``
  (PEFT ``lora_A.weight``, numpy shape ``(r, in)``) and ``...lora_b`` (``lora_B.weight``,
  ``(out, r)``), float32;
* q and k: llama.cpp stores the base model's ``attn_q`` / ``attn_k`` with the rows of each head
  permuted (``convert_hf_to_gguf.py`` ``LlamaModel.permute``: its RoPE pairs adjacent dimensions,
  Hugging Face's pairs the two halves), so the adapter's output side, ``lora_b``, gets the same
  permutation (``n_head`` heads for q, ``n_kv_head`` for k). Without it the adapter adds its
  update to the wrong rows; ``tests/llm/test_gguf_lora.py`` checks that the engine's log-probs
  then move away from the learner's.

Only plain LoRA (no DoRA, no rsLoRA scaling, no bias) on the linear layers below is written; any
other trainable tensor is refused with a message.
"""

from __future__ import annotations

import re
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from harness.errors import ConfigError

# Hugging Face module name (Llama family) -> llama.cpp tensor name (gguf.TENSOR_NAMES)
HF_TO_GGUF = {
    "self_attn.q_proj": "attn_q",
    "self_attn.k_proj": "attn_k",
    "self_attn.v_proj": "attn_v",
    "self_attn.o_proj": "attn_output",
    "mlp.gate_proj": "ffn_gate",
    "mlp.up_proj": "ffn_up",
    "mlp.down_proj": "ffn_down",
}
_NAME = re.compile(
    r"(?:^|\.)layers\.(\d+)\.(self_attn\.[qkvo]_proj|mlp\.(?:gate|up|down)_proj)\.lora_([AB])\."
)


def permute_rows(w: Any, n_head: int) -> Any:
    """llama.cpp's q/k row order of ``w`` (out, ...) with ``n_head`` heads: within each head the
    two halves of the head dimension are interleaved (``convert_hf_to_gguf.py``
    ``LlamaModel.permute``)."""
    out = w.shape[0]
    if out % (2 * n_head):
        raise ConfigError(f"cannot permute {tuple(w.shape)} rows into {n_head} heads of even size")
    return w.reshape(n_head, 2, out // n_head // 2, *w.shape[1:]).swapaxes(1, 2).reshape(w.shape)


def lora_tensors(policy: Any, *, permute: bool = True) -> tuple[dict[str, Any], float, int]:
    """The adapter of a PEFT ``policy`` as llama.cpp tensors: ({gguf name: float32 numpy array},
    alpha, rank). ``permute=False`` skips the q/k permutation (only to show it matters)."""
    import torch

    peft_cfg = getattr(policy, "peft_config", {}).get("default")
    if peft_cfg is None:
        raise ConfigError("the policy has no LoRA adapter (peft_config['default']) to write as GGUF")
    if getattr(peft_cfg, "use_dora", False) or getattr(peft_cfg, "use_rslora", False):
        raise ConfigError(
            "only plain LoRA can be written for llama.cpp (the recipe's lora uses DoRA / rsLoRA)"
        )
    cfg = policy.get_base_model().config
    out: dict[str, Any] = {}
    for name, p in policy.named_parameters():
        if not p.requires_grad:
            continue
        m = _NAME.search(name)
        if m is None:
            raise ConfigError(
                f"trainable tensor {name!r} has no llama.cpp LoRA counterpart (Llama-family linears only)"
            )
        layer, module, ab = int(m.group(1)), m.group(2), m.group(3)
        w = p.detach().to(device="cpu", dtype=torch.float32)
        if ab == "B" and permute:
            w = _llamacpp_rows(w, module, cfg)
        out[f"blk.{layer}.{HF_TO_GGUF[module]}.weight.lora_{ab.lower()}"] = w.contiguous().numpy()
    if not out:
        raise ConfigError("the policy has no trainable LoRA tensor to write")
    return out, float(peft_cfg.lora_alpha), int(peft_cfg.r)


def write_lora_gguf(policy: Any, path: Path, *, arch: str = "llama", permute: bool = True) -> Path:
    """Write ``policy``'s LoRA adapter to ``path`` as a llama.cpp GGUF adapter; returns ``path``."""
    tensors, alpha, _rank = lora_tensors(policy, permute=permute)
    return write_tensors_gguf(tensors, alpha, path, arch=arch)


def _changed_linears(base: Any, merged: Any) -> Iterator[tuple[int, str, Any]]:
    """(layer, module, ``merged - base`` in float64) of every linear where two Llama-family
    Hugging Face models differ; a difference anywhere else is refused with a message."""
    b_sd, m_sd = base.state_dict(), merged.state_dict()
    if set(b_sd) != set(m_sd):
        raise ConfigError(
            "the checkpoint and its base model do not have the same tensors; not one architecture"
        )
    pat = re.compile(r"(?:^|\.)layers\.(\d+)\.(self_attn\.[qkvo]_proj|mlp\.(?:gate|up|down)_proj)\.weight$")
    for name, w in m_sd.items():
        d = w.detach().double() - b_sd[name].detach().double()
        if not bool(d.abs().max() > 0):
            continue
        m = pat.search(name)
        if m is None:
            raise ConfigError(f"tensor {name!r} differs from the base model and is not a LoRA-adapted linear")
        yield int(m.group(1)), m.group(2), d


def _llamacpp_rows(w: Any, module: str, cfg: Any) -> Any:
    """``w`` (out, ...) of HF ``module`` with its rows in llama.cpp's order: q and k permuted head
    by head (:func:`permute_rows` over the config's query / key-value heads), the rest as they are."""
    if module == "self_attn.q_proj":
        return permute_rows(w, cfg.num_attention_heads)
    if module == "self_attn.k_proj":
        return permute_rows(w, getattr(cfg, "num_key_value_heads", None) or cfg.num_attention_heads)
    return w


def delta_lora_tensors(
    base: Any, merged: Any, *, permute: bool = True, rel_tol: float = 1e-3, max_rank: int | None = None
) -> tuple[dict[str, Any], int]:
    """The difference ``merged - base`` of two Llama-family Hugging Face models, as one llama.cpp
    LoRA adapter at scale 1: ({gguf name: float32 array}, rank). A checkpoint whose LoRA was merged
    (``harness sft`` writes one) differs from its base by a low-rank update on the adapted linears
    only; each difference is factored exactly by its SVD (singular values below 1e-5 of the largest
    are float rounding) and every factor is zero-padded to the largest rank, so ``alpha = rank``
    gives scale 1. Refused with a message: a difference outside those linears, or one that the
    factors do not reproduce to ``rel_tol`` (Frobenius). ``max_rank``: keep at most that many
    singular directions of each difference (the best approximation of that rank; ``rel_tol`` is
    then not checked: a shipped adapter is checked by its greedy answers instead)."""
    import torch

    factors: dict[tuple[int, str], tuple[Any, Any]] = {}
    for layer, module, d in _changed_linears(base, merged):
        u, s, vh = torch.linalg.svd(d, full_matrices=False)
        r = int((s > s[0] * 1e-5).sum())
        if max_rank is not None:
            r = min(r, max_rank)
        b_f, a_f = u[:, :r] * s[:r], vh[:r]
        err = float((b_f @ a_f - d).norm() / d.norm())
        if err > rel_tol and max_rank is None:
            name = f"layers.{layer}.{module}.weight"
            raise ConfigError(f"tensor {name!r}: the difference is not low-rank (rank {r} leaves {err:.2g})")
        factors[(layer, module)] = (a_f, b_f)
    if not factors:
        raise ConfigError("the checkpoint equals its base model: no adapter to write")
    rank = max(a.shape[0] for a, _ in factors.values())
    out: dict[str, Any] = {}
    for (layer, module), (a_f, b_f) in factors.items():
        pad = rank - a_f.shape[0]
        a_f = torch.nn.functional.pad(a_f, (0, 0, 0, pad))
        b_f = torch.nn.functional.pad(b_f, (0, pad))
        if permute:
            b_f = _llamacpp_rows(b_f, module, base.config)
        stem = f"blk.{layer}.{HF_TO_GGUF[module]}.weight"
        out[f"{stem}.lora_a"] = a_f.float().contiguous().numpy()
        out[f"{stem}.lora_b"] = b_f.float().contiguous().numpy()
    return out, rank


def delta_weights(base: Any, merged: Any) -> dict[str, Any]:
    """The difference ``merged - base`` of two Llama-family Hugging Face models on the linears where
    they differ, as dense float32 arrays (out, in) under llama.cpp's tensor names, q/k rows in
    llama.cpp's order: what :func:`harness.llm.gguf_requant.requantize_gguf` adds to the base GGUF's
    dequantised weights to serve the merged model itself, with no adapter."""
    out: dict[str, Any] = {}
    for layer, module, d in _changed_linears(base, merged):
        d = _llamacpp_rows(d, module, base.config)
        out[f"blk.{layer}.{HF_TO_GGUF[module]}.weight"] = d.float().contiguous().numpy()
    if not out:
        raise ConfigError("the checkpoint equals its base model: no difference to add")
    return out


def write_tensors_gguf(tensors: dict[str, Any], alpha: float, path: Path, *, arch: str = "llama") -> Path:
    """Write llama.cpp LoRA ``tensors`` with ``alpha`` to ``path`` (written beside and renamed, so a
    reader never sees half a file); returns ``path``."""
    import gguf

    path = Path(path)
    tmp = path.with_name(path.name + ".tmp")
    w = gguf.GGUFWriter(str(tmp), arch=arch)
    w.add_type(gguf.GGUFType.ADAPTER)
    w.add_string(gguf.Keys.Adapter.TYPE, "lora")
    w.add_float32(gguf.Keys.Adapter.LORA_ALPHA, float(alpha))
    for name in sorted(tensors):
        w.add_tensor(name, tensors[name])
    w.write_header_to_file()
    w.write_kv_data_to_file()
    w.write_tensors_to_file()
    w.close()
    tmp.replace(path)
    return path


def _float32_pair(base: str, checkpoint: Path) -> tuple[Any, Any]:
    """The packaged ``base`` model and merged ``checkpoint``, both loaded in float32 (the learner's
    dequantised base and its merged checkpoint)."""
    import torch
    from transformers import AutoModelForCausalLM

    from harness.llm.model_files import resolve_model

    kw = {"dtype": torch.float32}
    return (
        AutoModelForCausalLM.from_pretrained(str(resolve_model(base)), **kw),
        AutoModelForCausalLM.from_pretrained(str(checkpoint), **kw),
    )


def checkpoint_adapter(
    base: str, checkpoint: Path, path: Path, *, max_rank: int | None = None, storage: str = "f32"
) -> Path:
    """Write merged ``checkpoint``'s exact difference to the packaged ``base`` model as one
    llama.cpp GGUF LoRA adapter at ``path`` (:func:`delta_lora_tensors`, in float32). ``max_rank``:
    its best approximation of at most that rank; ``storage`` ``"f16"``: the factors stored as
    float16 (half the bytes; llama.cpp applies F16 adapters as they are)."""
    import numpy as np

    if storage not in ("f32", "f16"):
        raise ConfigError(f"adapter storage {storage!r}: use f32 or f16")
    tensors, rank = delta_lora_tensors(*_float32_pair(base, checkpoint), max_rank=max_rank)
    if storage == "f16":
        tensors = {k: v.astype(np.float16) for k, v in tensors.items()}
    return write_tensors_gguf(tensors, float(rank), path)


def checkpoint_delta(base: str, checkpoint: Path) -> dict[str, Any]:
    """:func:`delta_weights` of merged ``checkpoint`` against the packaged ``base`` model, both loaded
    in float32 (:func:`_float32_pair`)."""
    return delta_weights(*_float32_pair(base, checkpoint))
