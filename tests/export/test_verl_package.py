"""``harness.verl``: each module imports on its own in a fresh interpreter, in every order, without
verl; the imports between its modules go one way; the package itself imports none of them."""

from __future__ import annotations

import ast
import itertools
import subprocess
import sys
from pathlib import Path

import pytest

import harness.verl

MODULES = ["contract", "rows", "reward", "job", "agent_loop"]
PACKAGE = Path(harness.verl.__file__).parent


def internal_imports(module: str) -> set[str]:
    """The ``harness.verl`` modules ``module`` imports anywhere (module level or in a function)."""
    tree = ast.parse((PACKAGE / f"{module}.py").read_text())
    out: set[str] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.ImportFrom) and node.module:
            if node.module.startswith("harness.verl."):
                out.add(node.module.removeprefix("harness.verl."))
            elif node.module == "harness.verl":
                out.update(a.name for a in node.names)
        elif isinstance(node, ast.Import):
            out.update(
                a.name.removeprefix("harness.verl.") for a in node.names if a.name.startswith("harness.verl.")
            )
    return out


def test_the_package_lists_its_modules():
    assert sorted(p.stem for p in PACKAGE.glob("*.py") if p.stem != "__init__") == sorted(MODULES)


def test_imports_between_modules_go_one_way():
    graph = {m: internal_imports(m) for m in MODULES}
    assert graph == {
        "contract": set(),
        "rows": {"contract"},
        "reward": {"contract", "rows"},
        "job": {"contract", "rows"},
        "agent_loop": {"contract", "rows"},
    }
    assert internal_imports("__init__") == set()


@pytest.mark.integration
def test_each_module_imports_alone_and_in_reverse_order_without_verl():
    # one fresh interpreter; harness.verl is unloaded before each order, so each order's first module
    # is imported first: a cycle shows as an ImportError on a partly initialised module
    orders = [[m] for m in MODULES] + [list(reversed(MODULES))]
    orders += [list(p) for p in itertools.permutations(["reward", "job", "agent_loop"])]
    script = (
        "import importlib, sys\n"
        f"for order in {orders!r}:\n"
        "    for m in [k for k in sys.modules if k.startswith('harness.verl')]:\n"
        "        del sys.modules[m]\n"
        "    for m in order:\n"
        "        importlib.import_module('harness.verl.' + m)\n"
        "print(sorted(k for k in sys.modules if k == 'verl' or k.startswith('verl.')))\n"
    )
    run = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, timeout=120)
    assert run.returncode == 0, run.stderr
    assert run.stdout.strip() == "[]"  # verl is imported only by agent_loop_class()
