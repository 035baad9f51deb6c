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

MODULES = ["versions", "contract", "rows", "reward", "job", "agent_loop", "dry_run"]
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
        "versions": set(),
        "contract": set(),
        "rows": {"contract"},
        "reward": {"contract", "rows"},
        "job": {"contract", "rows", "versions"},
        "agent_loop": {"contract", "rows", "versions"},
        "dry_run": {"versions"},
    }
    assert internal_imports("__init__") == set()


@pytest.mark.integration
def test_each_module_imports_alone_and_in_reverse_order_without_verl():
    # one fresh interpreter; harness.verl is unloaded before each order, so each order's first module
    # is imported first: a cycle shows as an ImportError on a partly initialised module
    orders = [[m] for m in MODULES] + [list(reversed(MODULES))]
    orders += [list(p) for p in itertools.permutations(["reward", "job", "agent_loop", "dry_run"])]
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
    assert run.stdout.strip() == "[]"  # verl is imported only by agent_loop_class() and the dry run


# -- the version policy (harness.verl.versions) ----------------------------------------------------
def test_an_unsupported_verl_is_one_line_naming_the_supported_versions(monkeypatch):
    import pytest

    from harness.errors import ConfigError
    from harness.verl import versions

    with pytest.raises(ConfigError) as e:
        versions.check_version("0.7.1", "the exported reward.py")
    assert str(e.value) == (
        "the exported reward.py: verl 0.7.1 is installed, but the harness supports verl 0.9.1 only: "
        "pip install 'rar-harness[verl]' (in a checkout: pip install -e '.[verl]')"
    )
    monkeypatch.setattr(versions, "installed_verl", lambda: None)
    with pytest.raises(
        ConfigError, match=r"^run.sh --dry-run needs verl \(verl 0.9.1\), which is not installed"
    ):
        versions.require_verl("run.sh --dry-run")
    monkeypatch.setattr(versions, "installed_verl", lambda: "0.9.1")
    assert versions.require_verl("x") == "0.9.1"


def test_the_export_refuses_an_unsupported_installed_verl_before_writing(tmp_path, monkeypatch):
    import pytest

    from harness.errors import ConfigError
    from harness.methods_registry import get_method
    from harness.verl import job
    from tests.verl.test_export_verl import examples

    monkeypatch.setattr(job, "installed_verl", lambda: "0.8.0")
    method = get_method("search_r1")
    with pytest.raises(
        ConfigError, match="harness export-verl: verl 0.8.0 is installed, but the harness supports"
    ):
        job.write_verl_job(
            method,
            method.recipes()["cpu-smoke"],
            tmp_path / "J",
            examples(),
            examples(),
            retriever_url="http://x/retrieve",
            n_gpus=4,
            model_path="m",
        )
    assert not (tmp_path / "J").exists()


def test_the_exported_reward_checks_the_verl_that_loads_it(tmp_path, monkeypatch):
    import importlib.util
    import sys
    import types

    import pytest

    from harness.errors import ConfigError
    from harness.verl import versions
    from harness.verl.job import REWARD_PY

    path = tmp_path / "reward.py"
    path.write_text(REWARD_PY.format(method="search_r1", reward="em", total_steps=3))

    def load():
        spec = importlib.util.spec_from_file_location("exported_reward_version_check", path)
        spec.loader.exec_module(importlib.util.module_from_spec(spec))

    monkeypatch.setitem(sys.modules, "verl", types.ModuleType("verl"))  # verl is the one loading it
    monkeypatch.setattr(versions, "installed_verl", lambda: "0.8.0")
    with pytest.raises(ConfigError, match="the exported reward.py: verl 0.8.0 is installed"):
        load()
    monkeypatch.setattr(versions, "installed_verl", lambda: versions.SUPPORTED[-1])
    load()


# verl hidden from one interpreter: its import and its package metadata both fail, as where it is not installed
NO_VERL = """
import importlib.abc, importlib.metadata as m, sys
class _NoVerl(importlib.abc.MetaPathFinder):
    def find_spec(self, name, path=None, target=None):
        if name == "verl" or name.startswith("verl."):
            raise ModuleNotFoundError(f"No module named {name!r}")
sys.meta_path.insert(0, _NoVerl())
_version = m.version
def version(name):
    if name == "verl":
        raise m.PackageNotFoundError(name)
    return _version(name)
m.version = version
"""


@pytest.mark.integration
def test_run_sh_dry_run_without_verl_is_one_line_naming_the_extra(tmp_path):
    import os

    from harness.methods_registry import get_method
    from harness.verl.job import write_verl_job
    from tests.verl.test_export_verl import examples

    method = get_method("search_r1")
    out = tmp_path / "J"
    write_verl_job(
        *(method, method.recipes()["cpu-smoke"], out, examples(), examples()),
        retriever_url="http://x/retrieve",
        n_gpus=1,
        model_path="m",
    )
    (tmp_path / "site").mkdir()
    (tmp_path / "site" / "sitecustomize.py").write_text(NO_VERL)
    root = Path(__file__).resolve().parents[2]
    env = {
        **os.environ,
        "PATH": f"{Path(sys.executable).parent}{os.pathsep}{os.environ.get('PATH', '')}",
        "PYTHONPATH": os.pathsep.join([str(tmp_path / "site"), str(root)]),
    }
    run = subprocess.run(
        ["bash", str(out / "run.sh"), "--dry-run"], capture_output=True, text=True, timeout=120, env=env
    )
    assert run.returncode == 2
    assert run.stdout == ""
    assert run.stderr == (
        "run.sh --dry-run needs verl (verl 0.9.1), which is not installed: "
        "pip install 'rar-harness[verl]' (in a checkout: pip install -e '.[verl]')\n"
    )
