"""Masked reductions over (B, T) token tensors: the one implementation every RL function uses.

Masks are binary, of shape (B, T), as ``bool`` or any numeric dtype (non-zero = valid). Values at
masked-out positions never reach a result or a gradient: they are replaced by 0 with
``torch.where`` *before* any arithmetic, so a ``-inf`` or ``NaN`` sitting in a padded position
cannot poison a sum or its backward pass.

Empty masks: sums are 0, means are 0 (not NaN), variances are 0.
"""

from __future__ import annotations

import torch
from torch import Tensor


def as_bool(mask: Tensor) -> Tensor:
    """The mask as a bool tensor (non-zero = valid)."""
    return mask if mask.dtype == torch.bool else mask != 0


def masked_fill_zero(values: Tensor, mask: Tensor) -> Tensor:
    """``values`` where the mask is set, exactly 0 elsewhere (gradient 0 there too)."""
    return torch.where(as_bool(mask), values, torch.zeros((), dtype=values.dtype, device=values.device))


def masked_count(mask: Tensor, dim: int | None = None) -> Tensor:
    """Number of valid positions (over everything, or along ``dim``), as a float tensor."""
    m = as_bool(mask).to(torch.float32)
    return m.sum() if dim is None else m.sum(dim=dim)


def masked_sum(values: Tensor, mask: Tensor, dim: int | None = None) -> Tensor:
    """Sum of ``values`` over valid positions: ``sum(values[mask])`` (or along ``dim``)."""
    v = masked_fill_zero(values, mask)
    return v.sum() if dim is None else v.sum(dim=dim)


def masked_mean(values: Tensor, mask: Tensor, dim: int | None = None) -> Tensor:
    """Mean over valid positions: ``masked_sum / count``; 0 where the count is 0."""
    count = masked_count(mask, dim).to(values.dtype)
    return masked_sum(values, mask, dim) / count.clamp(min=1)


def masked_var(values: Tensor, mask: Tensor, *, unbiased: bool) -> Tensor:
    """Variance of the valid values, over the whole tensor (a scalar).

    ``unbiased=True`` divides by ``n - 1`` (Bessel, as ``torch.var`` and verl's ``masked_var``),
    ``False`` by ``n``. With fewer valid values than the divisor needs (n = 0, or n = 1 when
    unbiased) the variance is defined as 0.
    """
    n = masked_count(mask).to(values.dtype)
    mean = masked_sum(values, mask) / n.clamp(min=1)
    sq = masked_sum((values - mean) ** 2, mask)
    denom = n - 1 if unbiased else n
    return torch.where(denom > 0, sq / denom.clamp(min=1), torch.zeros_like(sq))


def masked_whiten(values: Tensor, mask: Tensor, *, unbiased: bool, eps: float) -> Tensor:
    """Whiten over all valid positions: ``(x - mean) / sqrt(var + eps)``; exactly 0 where masked.

    Mean and variance are taken over every valid element of the tensor (e.g. every response
    token of the batch), as verl's ``masked_whiten`` (which uses ``eps=1e-8``, ``unbiased=True``).
    A single valid element whitens to 0.
    """
    n = masked_count(mask).to(values.dtype)
    mean = masked_sum(values, mask) / n.clamp(min=1)
    var = masked_var(values, mask, unbiased=unbiased)
    return masked_fill_zero((values - mean) * torch.rsqrt(var + eps), mask)
