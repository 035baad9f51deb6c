"""``pip install -e '.[verl]'`` on a clean venv (``tox -e verl-install``): the extra resolves the
supported verl with what the export, the reward and the agent loop import, and every trainable
method's export passes ``run.sh --dry-run`` there, under the versions it resolved to (transformers
5.10.4 when written: verl 0.9.1 requires < 5.11)."""

from __future__ import annotations

from importlib import metadata
from pathlib import Path

import pytest

from tests.support.verl import import_verl_or_skip

import_verl_or_skip()

pytestmark = [pytest.mark.verl_install, pytest.mark.integration]


def test_the_extra_brings_the_supported_verl_and_what_the_export_imports():
    import cachetools  # noqa: F401  (verl's agent loop)
    import gguf  # noqa: F401  (export-verl writes a model preset as a HF folder)

    from harness.verl.versions import SUPPORTED

    assert metadata.version("verl") in SUPPORTED
    requires = metadata.requires("rar-harness") or []
    extra = [r for r in requires if 'extra == "verl"' in r]
    assert any(r.startswith("verl[verl-core]==") for r in extra), extra
    print(f"resolved: verl {metadata.version('verl')}, transformers {metadata.version('transformers')}")


def trainable() -> list[str]:
    from harness.methods_registry import METHODS

    return sorted(n for n in METHODS.names() if METHODS.get(n).trained)


@pytest.mark.parametrize("name", trainable())
def test_every_methods_export_passes_its_dry_run(name, tmp_path: Path):
    from harness.cli import main
    from tests.verl.test_real_verl import run_dry

    out = tmp_path / "J"
    args = ["export-verl", "--method", name, "--recipe", "cpu-smoke", "--model", "smollm2-135m-instruct"]
    assert main([*args, "--n-gpus", "1", "--out", str(out)]) == 0
    run = run_dry(out)
    assert run.returncode == 0, run.stdout[-2000:] + run.stderr[-2000:]
    assert "dry run: verl 0.9.1 composed the config and validate_config passed" in run.stdout
