"""Shipped trained policies as model presets (harness.llm.adapters): a paper folder's
``trained/*.adapter.json`` is found through the plugin manifests, resolves to the packaged base plus
its GGUF adapter, is refused when the file no longer matches its manifest, and a run with it stores
the adapter's hash and training under clear keys and is labelled trained; ``harness run --method all``
picks each RL method's shipped adapter, a method named alone keeps its untrained policy."""

from __future__ import annotations

import hashlib
import json
from pathlib import Path

import pandas as pd
import pytest

from harness.errors import ConfigError
from harness.llm import adapters
from harness.plugins import Manifest, Plugin


def _ship(
    folder: Path, *, name: str = "smollm2+fake_rl", method: str = "fake_rl", data: bytes = b"GGUF-adapter"
) -> Path:
    trained = folder / "trained"
    trained.mkdir(parents=True)
    (trained / "smollm2.gguf").write_bytes(data)
    manifest = {
        "name": name,
        "base": "smollm2-135m-instruct",
        "method": method,
        "gguf": "smollm2.gguf",
        "sha256": hashlib.sha256(data).hexdigest(),
        "size": len(data),
        "rank": 32,
        "storage": "f16",
        "trained_by": {"method": method, "recipe": "cpu-learn-grpo", "algorithm": "GRPO (clip 0.2/0.2)"},
        "record": "results/learning-fake.json",
    }
    path = trained / "smollm2.adapter.json"
    path.write_text(json.dumps(manifest))
    return path


@pytest.fixture
def shipped(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    path = _ship(tmp_path / "fake_paper")
    fake = Manifest("methods.fake_paper", str(tmp_path / "fake_paper" / "__init__.py"), Plugin())
    monkeypatch.setattr("harness.plugins.manifests", lambda: (fake,))
    adapters.adapter_presets.cache_clear()
    yield path
    adapters.adapter_presets.cache_clear()


def test_a_shipped_adapter_is_a_model_preset_on_its_base(shipped: Path):
    from harness.llm.model_files import is_preset

    p = adapters.get_adapter("smollm2+fake_rl")
    assert p is not None and p.gguf == (shipped.parent / "smollm2.gguf").resolve()
    assert adapters.verified_gguf(p) == p.gguf
    assert adapters.auto_backend("smollm2+fake_rl") == "llamacpp"
    assert (
        adapters.auto_backend("smollm2") == "llamacpp" and adapters.auto_backend("x", served=True) == "openai"
    )
    adapters.check_model("llamacpp", "smollm2+fake_rl")
    with pytest.raises(ConfigError, match="llamacpp only"):
        adapters.check_model("transformers", "smollm2+fake_rl")
    assert not is_preset("smollm2+fake_rl")  # not a bare base: a run with it is no untrained policy
    assert adapters.trained_preset_for("fake_rl", "default") == "smollm2+fake_rl"
    assert adapters.trained_preset_for("other", "default") is None
    assert [r[0] for r in adapters.describe_adapters()] == ["smollm2+fake_rl"]


def test_a_run_with_it_stores_the_adapter_hash_and_its_training(shipped: Path):
    rt = adapters.adapter_runtime("smollm2+fake_rl")
    assert rt == {
        "adapter": "smollm2+fake_rl",
        "adapter_sha256": hashlib.sha256(b"GGUF-adapter").hexdigest(),
        "trained_by": {"method": "fake_rl", "recipe": "cpu-learn-grpo", "algorithm": "GRPO (clip 0.2/0.2)"},
    }
    assert adapters.adapter_runtime("smollm2-135m-instruct") == {}


def test_a_changed_adapter_file_is_refused(shipped: Path):
    (shipped.parent / "smollm2.gguf").write_bytes(b"GGUF-adapteR")
    p = adapters.get_adapter("smollm2+fake_rl")
    assert p is not None
    with pytest.raises(ConfigError, match="does not match its manifest"):
        adapters.verified_gguf(p)


def test_manifests_over_10_mb_or_without_the_training_keys_are_refused(tmp_path: Path):
    path = _ship(tmp_path / "a")
    d = json.loads(path.read_text())
    path.write_text(json.dumps({**d, "size": adapters.MAX_BYTES + 1}))
    with pytest.raises(ConfigError, match="over the"):
        adapters.load_manifest(path)
    path.write_text(json.dumps({**d, "trained_by": {"method": "fake_rl", "recipe": "r"}}))
    with pytest.raises(ConfigError, match="trained_by"):
        adapters.load_manifest(path)


def test_method_all_runs_each_rl_method_with_its_shipped_adapter(shipped: Path):
    from harness.cli.cmd_run import trained_models
    from harness.eval.protocol import mini
    from harness.eval.runner import RunConfig

    got = trained_models(["fake_rl", "naive_rag"], "smollm2-135m-instruct", "llamacpp")
    assert got == {"fake_rl": "smollm2+fake_rl"}
    assert trained_models(["fake_rl"], "smollm2-135m-instruct", "transformers") == {}
    assert trained_models(["fake_rl"], "some/checkpoint", "llamacpp") == {}
    cfg = RunConfig(methods=["fake_rl", "naive_rag"], bench="mini", protocol=mini(), method_models=got)
    assert cfg.model_for("fake_rl") == "smollm2+fake_rl"
    assert cfg.model_for("naive_rag") == "smollm2-135m-instruct"


def test_the_line_under_the_table_says_whether_a_method_separates():
    from harness.cli.cmd_run import what_the_numbers_are

    rows = [
        {"method": "a", "dataset": "popqa", "n": 20, "primary": 0.30, "primary_lo": 0.14, "primary_hi": 0.52},
        {"method": "b", "dataset": "popqa", "n": 20, "primary": 0.10, "primary_lo": 0.03, "primary_hi": 0.30},
    ]
    line = what_the_numbers_are(pd.DataFrame(rows), "smollm2-135m-instruct", {"a": "smollm2+a"}, "em")
    assert "smollm2-135m-instruct; up to 20 questions" in line and "here: a (smollm2+a)" in line
    assert "No method separates" in line
    rows[1].update(primary=0.0, primary_lo=0.0, primary_hi=0.12)
    line = what_the_numbers_are(pd.DataFrame(rows), "m", {}, "em")
    assert "a separates from the others" in line and "here: none" in line
