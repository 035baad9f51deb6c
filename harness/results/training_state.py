"""A run's training state: one definition, read from the run's record, never from a label.

The record is four keys of the run's ``runs.versions_json`` (written when the run is created,
:func:`harness.results.lifecycle.create_run`'s ``runtime``), filled by ``harness run`` from the
model it evaluates (:func:`record_for_model`):

- ``adapter_sha256``: sha256 of the LoRA adapter file the run's model served (a preset that
  carries an adapter);
- ``checkpoint_sha256``: sha256 of a trained checkpoint's weights (``harness run --model DIR`` of
  a Hugging Face directory ``harness train`` / ``harness sft`` wrote: the sha256 over its
  ``*.safetensors`` files in name order);
- ``trained_by``: the algorithm that trained those weights, lower case: ``ppo`` (the ``gae``
  estimator), ``grpo``, ``reinforce_pp``, ..., or ``sft``; a shipped adapter records
  ``{method, recipe, algorithm}`` (:mod:`harness.llm.adapters`) and its ``algorithm`` is read;
- ``trained_variant``: the recipe variant as a paper names it (``w/o retrieved-token masking``);
  absent or empty: the paper's main recipe.

A model preset that serves an adapter declares it with attributes ``adapter_sha256`` and
``trained_by`` (and optionally ``trained_variant``) on its :class:`harness.llm.model_files.
ModelPreset`; :func:`record_for_model` copies them into the record.

The state (:func:`training_of`): ``none`` for a method that is not trained (a prompt baseline),
``untrained`` for a trained method's run with neither hash (its base model), else ``trained
(<algorithm>)`` or ``trained (<algorithm>; <variant>)``; ``trained (algorithm not recorded)``
when a hash has no ``trained_by``. A paper row's state is written the same way from its
``reported.yaml`` setting (``training``, ``algorithm``, ``variant``): a trained run compares only
with rows of the same algorithm and variant (:mod:`harness.results.comparable`).
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Mapping
from pathlib import Path

ADAPTER_SHA256 = "adapter_sha256"
CHECKPOINT_SHA256 = "checkpoint_sha256"
TRAINED_BY = "trained_by"
TRAINED_VARIANT = "trained_variant"
RECORD_KEYS = (ADAPTER_SHA256, CHECKPOINT_SHA256, TRAINED_BY, TRAINED_VARIANT)

NONE, UNTRAINED, TRAINED = "none", "untrained", "trained"
ESTIMATOR_ALGORITHM = {"gae": "ppo"}
"""An advantage estimator's algorithm name where they differ (GAE with a critic is PPO)."""

TYPE_OF_STATE = {NONE: "prompt baseline", UNTRAINED: "untrained policy", TRAINED: "trained"}
"""The leaderboard's method type of a state (``trained (...)`` is ``trained``)."""


def training_text(state: str | None, algorithm: str | None = None, variant: str | None = None) -> str | None:
    """The state as compared: ``none``, ``untrained``, ``trained (grpo)``, ``trained (ppo; w/o
    retrieved-token masking)``, ``trained (algorithm not recorded)``; None when unknown."""
    if state != TRAINED:
        return state
    algo = (algorithm or "").strip().lower() or "algorithm not recorded"
    return f"{TRAINED} ({algo}; {variant.strip()})" if variant and variant.strip() else f"{TRAINED} ({algo})"


def training_of(method: str, versions: Mapping[str, object] | None) -> str | None:
    """The training state of a run of ``method`` from its record (``runs.versions_json`` as a
    dict); None for a method not registered here."""
    from harness.methods_registry import METHODS, get_method

    if method not in METHODS.names():
        return None
    if not get_method(method).trained:
        return NONE
    rec = versions or {}
    if not (rec.get(ADAPTER_SHA256) or rec.get(CHECKPOINT_SHA256)):
        return UNTRAINED
    by = rec.get(TRAINED_BY)
    if isinstance(by, Mapping):  # a shipped adapter's {method, recipe, algorithm} (harness.llm.adapters)
        by = by.get("algorithm")
    return training_text(TRAINED, str(by or ""), str(rec.get(TRAINED_VARIANT) or ""))


def type_of(state: str | None) -> str:
    """The leaderboard's method type of a state (``?`` when unknown)."""
    if state is None:
        return "?"
    return TYPE_OF_STATE.get(state.split(" ", 1)[0], "?")


def _sha256_files(paths: list[Path]) -> str:
    h = hashlib.sha256()
    for p in paths:
        with p.open("rb") as f:
            for chunk in iter(lambda: f.read(1 << 20), b""):
                h.update(chunk)
    return h.hexdigest()


def checkpoint_record(folder: Path) -> dict[str, str]:
    """The record of a Hugging Face checkpoint directory written by ``harness train`` / ``harness
    sft`` (its ``harness_train.json`` says so); empty for any other directory (a base model)."""
    meta = folder / "harness_train.json"
    weights = sorted(folder.glob("*.safetensors"))
    if not meta.is_file() or not weights:
        return {}
    info = json.loads(meta.read_text())
    algo = "sft" if info.get("stage") == "sft" else ""
    recipe = folder / "recipe.json"
    if not algo and recipe.is_file():
        est = str((json.loads(recipe.read_text()).get("algo") or {}).get("adv_estimator", ""))
        algo = ESTIMATOR_ALGORITHM.get(est, est)
    return {CHECKPOINT_SHA256: _sha256_files(weights), TRAINED_BY: algo}


def record_for_model(model: str) -> dict[str, str]:
    """What ``harness run`` records about the training of ``model`` (module docstring): a preset's
    adapter, a trained checkpoint directory's weights, else nothing (a base model)."""
    from harness.llm.model_files import get_preset, is_preset

    if is_preset(model):
        preset = get_preset(model)
        sha = getattr(preset, ADAPTER_SHA256, None)
        if not sha:
            return {}
        out = {ADAPTER_SHA256: str(sha), TRAINED_BY: str(getattr(preset, TRAINED_BY, "") or "")}
        variant = getattr(preset, TRAINED_VARIANT, None)
        return {**out, TRAINED_VARIANT: str(variant)} if variant else out
    path = Path(model)
    return checkpoint_record(path) if path.is_dir() else {}


__all__ = [
    "ADAPTER_SHA256",
    "CHECKPOINT_SHA256",
    "NONE",
    "RECORD_KEYS",
    "TRAINED",
    "TRAINED_BY",
    "TRAINED_VARIANT",
    "UNTRAINED",
    "checkpoint_record",
    "record_for_model",
    "training_of",
    "training_text",
    "type_of",
]
