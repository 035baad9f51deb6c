"""Every tensor the engine creates says where it lives: a static check over the packages whose
tensors meet a model (``harness/rl``, ``harness/llm``, ``harness/retrieval``).

CI has no GPU, so a factory call without ``device=`` (which silently makes a CPU tensor that then
meets a CUDA model) would pass every CPU test; this check fails on it instead. A call is fine when
it names ``device=``, or copies the device of a tensor (``*_like``, ``x.new_*``, which are not
``torch.<factory>`` calls), or carries a ``# cpu:`` comment on its line saying why it must be on
the CPU."""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
CHECKED = ("harness/rl", "harness/llm", "harness/retrieval")
FACTORIES = {
    "tensor",
    "as_tensor",
    "zeros",
    "ones",
    "full",
    "empty",
    "arange",
    "linspace",
    "eye",
    "rand",
    "randn",
    "randint",
    "randperm",
    "Generator",
}
CPU_MARK = "# cpu:"


def deviceless_calls(source: str, filename: str) -> list[str]:
    """``file:line: torch.<factory>(...)`` for each factory call naming no device and not marked."""
    tree = ast.parse(source, filename)
    lines = source.splitlines()
    found = []
    for node in ast.walk(tree):
        if not (isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute)):
            continue
        f = node.func
        if not (isinstance(f.value, ast.Name) and f.value.id == "torch" and f.attr in FACTORIES):
            continue
        if any(k.arg == "device" for k in node.keywords):
            continue
        span = lines[node.lineno - 1 : (node.end_lineno or node.lineno)]
        if any(CPU_MARK in line for line in span) or CPU_MARK in lines[node.lineno - 2]:
            continue
        found.append(f"{filename}:{node.lineno}: torch.{f.attr}(...) names no device")
    return found


def test_no_deviceless_tensor_factories_in_the_engine():
    found = []
    for pkg in CHECKED:
        for path in sorted((ROOT / pkg).rglob("*.py")):
            found += deviceless_calls(path.read_text(), str(path.relative_to(ROOT)))
    assert not found, (
        "tensors created without device= (add device=..., or a '# cpu: why' comment):\n" + "\n".join(found)
    )


@pytest.mark.parametrize(
    "code, bad",
    [
        ("import torch\nx = torch.zeros(3)\n", True),
        ("import torch\nx = torch.tensor(\n    [1, 2],\n    dtype=torch.long,\n)\n", True),
        ("import torch\ng = torch.Generator()\n", True),
        ("import torch\nx = torch.zeros(3, device=y.device)\n", False),
        ("import torch\nx = torch.zeros_like(y)\n", False),
        ("import torch\nx = y.new_zeros(3)\n", False),
        ("import torch\nx = torch.tensor([1])  # cpu: a lookup key compared on the host\n", False),
    ],
)
def test_the_guard_flags_a_planted_deviceless_call(code: str, bad: bool):
    assert bool(deviceless_calls(code, "planted.py")) is bad
