"""Float comparisons whose tolerance is relative to the magnitude of the values compared.

An absolute tolerance (``atol=1e-5``) holds on one machine and fails on another: float32
reductions are summed in a different order on AVX2 and AVX-512 kernels (and on Intel and AMD), and
the rounding that order leaves scales with the values summed. Gradients near 11 differed by 4.4e-5
between two forwards on an AVX-512 AMD EPYC, where the same test passed on the AVX2 machine it was
written on. Elementwise ``rtol`` is not enough either: a small element of a large tensor inherits
the rounding of the large terms it was summed from. So the tolerance here is relative to the
tensor's largest magnitude.
"""

from __future__ import annotations

import torch

# float32 has a 2**-24 (6e-8) unit roundoff; a gradient is a sum over every position and layer,
# and two forwards of different shapes differed by up to 1.1e-5 of the largest magnitude here (AMD
# EPYC, AVX-512 and AVX2, 1 and 2 threads). 1e-4 leaves ~10x headroom; a wrong mask, position or
# scale moves values by O(1) of their magnitude.
F32_REL = 1e-4


def max_rel_diff(a: torch.Tensor, b: torch.Tensor) -> float:
    """max |a - b| divided by the largest magnitude in either (0 when both are all zero)."""
    a, b = a.detach().double(), b.detach().double()
    scale = max(float(a.abs().max()), float(b.abs().max())) if a.numel() else 0.0
    return float((a - b).abs().max()) / scale if scale > 0 else 0.0


def assert_close_rel(a: torch.Tensor, b: torch.Tensor, rel: float = F32_REL, what: str = "") -> None:
    """Same shape, and every element within ``rel`` x the largest magnitude of either tensor."""
    assert a.shape == b.shape, f"{what}: shapes {tuple(a.shape)} != {tuple(b.shape)}"
    d = max_rel_diff(a, b)
    assert d <= rel, f"{what}: max |a - b| is {d:.3g} of the largest magnitude (allowed {rel:g})"
