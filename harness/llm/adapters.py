"""Shipped trained policies: a method's GGUF LoRA adapter on a packaged base model, named as a model
preset ``<base alias>+<method>`` (``smollm2+search_r1``).

A paper folder ships its trained policy as two files under ``methods/<paper>/trained/``
(``scripts/ship_adapter.py export`` writes them from a training run's checkpoint):

* ``<stem>.gguf``: the llama.cpp LoRA adapter (the checkpoint's difference to the packaged base,
  :func:`harness.llm.gguf_lora.delta_lora_tensors`, at most 10 MB);
* ``<stem>.adapter.json``: its manifest, :class:`AdapterPreset`'s fields (name, base preset, sha256
  and size of the GGUF, rank, storage type, ``trained_by`` {method, recipe, algorithm}, the record
  under ``results/`` that holds its held-out evaluation).

The engine serves the base preset's GGUF with the adapter (llama.cpp's ``--lora``). A run with such a
model records ``adapter_sha256`` and ``trained_by`` among its stored versions and is labelled
``trained`` (:func:`adapter_runtime`); a run with the bare base preset stays ``untrained policy``.
Found through the plugin manifests (every folder under ``methods/``), so ``harness/`` names no paper.
"""

from __future__ import annotations

import functools
import json
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from harness.errors import ConfigError

SUFFIX = ".adapter.json"
MAX_BYTES = 10 * 1024 * 1024  # issue 57: a shipped adapter is at most 10 MB


@dataclass(frozen=True)
class AdapterPreset:
    """One shipped adapter (its ``.adapter.json``). ``gguf`` is absolute once loaded."""

    name: str  # "<base alias>+<method>"
    base: str  # the packaged base preset it applies to
    method: str  # the method whose policy it is (run it with --method <method>)
    gguf: Path
    sha256: str
    size: int
    rank: int
    storage: str  # the tensors' type in the GGUF: "f32", "f16"
    trained_by: dict[str, str]  # {"method", "recipe", "algorithm"}
    record: str  # the record under results/ with its held-out evaluation (repository-relative)

    def runtime(self) -> dict[str, Any]:
        """What a run with this model stores among its versions (``runs.versions_json``)."""
        return {"adapter": self.name, "adapter_sha256": self.sha256, "trained_by": dict(self.trained_by)}


def load_manifest(path: Path) -> AdapterPreset:
    """An ``.adapter.json`` manifest; the GGUF beside it must exist and be at most :data:`MAX_BYTES`."""
    try:
        d = json.loads(path.read_text())
        preset = AdapterPreset(
            name=str(d["name"]),
            base=str(d["base"]),
            method=str(d["method"]),
            gguf=(path.parent / str(d["gguf"])).resolve(),
            sha256=str(d["sha256"]),
            size=int(d["size"]),
            rank=int(d["rank"]),
            storage=str(d["storage"]),
            trained_by={k: str(v) for k, v in d["trained_by"].items()},
            record=str(d["record"]),
        )
    except (KeyError, TypeError, ValueError) as e:
        raise ConfigError(
            f"{path}: not an adapter manifest ({type(e).__name__}: {e}); see harness/llm/adapters.py"
        ) from None
    if set(preset.trained_by) != {"method", "recipe", "algorithm"}:
        raise ConfigError(f"{path}: trained_by must name exactly method, recipe and algorithm")
    if preset.size > MAX_BYTES:
        raise ConfigError(
            f"{path}: the adapter is {preset.size} bytes, over the {MAX_BYTES} a shipped adapter may be"
        )
    return preset


@functools.cache
def adapter_presets() -> dict[str, AdapterPreset]:
    """Every shipped adapter under the plugin folders (``<folder>/trained/*.adapter.json``), by name."""
    from harness.plugins import manifests

    out: dict[str, AdapterPreset] = {}
    for m in manifests():
        folder = Path(m.path).parent / "trained"
        for path in sorted(folder.glob(f"*{SUFFIX}")) if folder.is_dir() else []:
            p = load_manifest(path)
            if p.name in out:
                raise ConfigError(f"{path}: adapter preset {p.name!r} is shipped twice")
            out[p.name] = p
    return out


def get_adapter(name: str) -> AdapterPreset | None:
    """The shipped adapter preset ``name`` (None: not one)."""
    return adapter_presets().get(name) if "+" in name else None


def verified_gguf(preset: AdapterPreset) -> Path:
    """The preset's GGUF, checked against its manifest's size and sha256 (a changed file is refused)."""
    from harness.llm.model_files import sha256_file

    if not preset.gguf.is_file():
        raise ConfigError(f"adapter preset {preset.name!r}: {preset.gguf} is missing")
    size = preset.gguf.stat().st_size
    if size != preset.size or sha256_file(preset.gguf) != preset.sha256:
        raise ConfigError(
            f"adapter preset {preset.name!r}: {preset.gguf} does not match its manifest's size and sha256; "
            "re-export it with scripts/ship_adapter.py export"
        )
    return preset.gguf


def adapter_runtime(model: str) -> dict[str, Any]:
    """The versions a run of ``model`` stores for its adapter (empty for any other model)."""
    p = get_adapter(model)
    return p.runtime() if p is not None else {}


def auto_backend(model: str, *, served: bool = False) -> str:
    """:func:`harness.llm.model_files.auto_backend`, and ``llamacpp`` for a shipped adapter preset."""
    from harness.llm.model_files import auto_backend as base_auto

    return "llamacpp" if not served and get_adapter(model) is not None else base_auto(model, served=served)


def check_model(backend: str, model: str) -> None:
    """:func:`harness.llm.model_files.check_model`; a shipped adapter preset needs ``llamacpp`` and a
    GGUF that matches its manifest."""
    from harness.llm.model_files import check_model as base_check

    preset = get_adapter(model)
    if preset is None:
        return base_check(backend, model)
    if backend != "llamacpp":
        raise ConfigError(
            f"model {model!r} is a GGUF LoRA adapter preset: it runs on --backend llamacpp only"
        )
    verified_gguf(preset)


def describe_adapters() -> list[tuple[str, ...]]:
    """Rows for ``harness list models``, in its columns: one per shipped adapter preset."""
    return [
        (
            a.name,
            f"{a.base} + {a.trained_by['method']} adapter ({a.trained_by['algorithm']}, recipe "
            f"{a.trained_by['recipe']}; rank {a.rank}, {a.storage})",
            f"{a.size / 1e6:,.1f} MB",
            "llamacpp",
            "as its base",
            "in the repository",
            a.gguf.name,
            f"record {a.record}",
        )
        for a in adapter_presets().values()
    ]


def trained_preset_for(method: str, base: str) -> str | None:
    """The shipped adapter preset of ``method`` on packaged ``base`` (None: none shipped)."""
    from harness.llm.model_files import canonical_name

    for p in adapter_presets().values():
        if p.method == method and canonical_name(p.base) == canonical_name(base):
            return p.name
    return None
