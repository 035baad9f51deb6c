"""Where torch work runs: one rule for every command (``--device``) and every recipe dtype.

``--device`` takes ``auto``, ``cpu``, ``cuda`` or ``cuda:N``. ``auto`` is the first GPU when torch
sees one, else the CPU. The trainer, SFT, PPO's critic, the transformers backend and the dense
encoder put their models on the resolved device and create every tensor they make there (a CPU
tensor is deliberate and says so; ``tests/test_device_guard.py`` enforces it).

``dtype: auto`` (recipes, :class:`harness.llm.base.BackendSpec`) is bfloat16 on a GPU that supports
it and float32 elsewhere; an explicit dtype always wins.
"""

from __future__ import annotations

import re
from typing import TYPE_CHECKING, Any

from harness.errors import ConfigError

if TYPE_CHECKING:
    import torch

DEVICE_CHOICES = "auto, cpu, cuda or cuda:N"
_PATTERN = re.compile(r"^(auto|cpu|cuda(:\d+)?)$")


def check_device_spec(spec: str) -> str:
    """``spec`` unchanged when it is a valid ``--device`` value; else a one-line ConfigError."""
    if not _PATTERN.match(spec):
        raise ConfigError(f"--device {spec!r}: expected {DEVICE_CHOICES}")
    return spec


def resolve_device(spec: str = "auto") -> torch.device:
    """The torch device for ``spec``; a GPU asked for but absent is a one-line ConfigError."""
    import torch

    check_device_spec(spec)
    if spec == "auto":
        return torch.device("cuda:0" if torch.cuda.is_available() else "cpu")
    if spec == "cpu":
        return torch.device("cpu")
    if not torch.cuda.is_available():
        raise ConfigError(
            f"--device {spec}: torch sees no CUDA GPU here (torch {torch.__version__}); use --device cpu"
        )
    dev = torch.device(spec if ":" in spec else "cuda:0")
    if dev.index is not None and dev.index >= torch.cuda.device_count():
        raise ConfigError(
            f"--device {spec}: torch sees {torch.cuda.device_count()} GPU(s) (cuda:0..); pick one of them"
        )
    return dev


def resolve_dtype(name: str, device: torch.device) -> torch.dtype:
    """``auto``: bfloat16 on a GPU that supports it, float32 elsewhere; else the named dtype."""
    import torch

    if name == "auto":
        if device.type == "cuda" and torch.cuda.is_bf16_supported():
            return torch.bfloat16
        return torch.float32
    dt = getattr(torch, name, None)
    if not isinstance(dt, torch.dtype):
        raise ConfigError(f"dtype {name!r}: expected auto, float32, bfloat16 or float16")
    return dt


def describe_device(device: torch.device) -> dict[str, Any]:
    """What a run record says about where it ran: the device and, for a GPU, its name."""
    import torch

    out: dict[str, Any] = {"device": str(device)}
    if device.type == "cuda":
        out["device_name"] = torch.cuda.get_device_name(device)
        out["cuda"] = torch.version.cuda
    return out


def model_device(model: Any) -> torch.device:
    """The device of ``model``'s first parameter (the one every tensor it meets is created on)."""
    return next(model.parameters()).device
