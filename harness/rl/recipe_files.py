"""Recipes as data files: ``methods/<paper>/recipes.yaml`` -> validated :class:`Recipe` objects.

A recipes file maps recipe names to entries. Every value sits beside its source::

    paper:
      steps: {value: 500, source: "paper App. B.2: 500 steps"}
      algo:
        group_size: {value: 5, source: "paper App. B.2 / code: train_grpo.sh rollout.n_agent=5"}
      ...
    paper-7b:
      extends: paper
      steps: {value: 120, source: "code: total_training_steps=120 for 7B"}
    cpu-smoke:
      extends: [paper, "overlay:cpu-smoke"]
      max_turns: {value: 2, source: "ours: 2 searches (CPU budget)"}

Keys of an entry: ``extends`` (one name or a list, merged left to right, then the entry's own
fields on top: another recipe of the same file, or ``overlay:<name>``, a partial recipe kept once
in ``harness/rl/<name>.overlay.yaml``), ``about`` (free text for the reader), ``algo`` (the
:class:`AlgoConfig` fields) and the other :class:`Recipe` fields. A field is
``{value: V, source: S}``; ``{source: S}`` alone re-cites an inherited value. A value always comes
with a source, so ``Recipe.sources`` names the provenance of every field. ``name`` is the entry's
key and ``method`` the method loading the file. Errors are one :class:`ConfigError` line naming
the file, the recipe and the key (unknown key, cycle in ``extends``, a value without a source,
wrong type).

Written here rather than with a config library (Hydra / OmegaConf): their merges know nothing of
the source beside each value, and the result must be the frozen pydantic types anyway.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from functools import cache
from pathlib import Path
from typing import Any

import yaml
from pydantic import ValidationError

from harness.errors import ConfigError
from harness.rl.config import AlgoConfig
from harness.rl.recipe import Recipe

OVERLAY_DIR = Path(__file__).parent
_OVERLAY = "overlay:"
# Recipe fields a file sets (``name``, ``method`` and ``sources`` come from the loader; ``algo``
# is a section of its own).
_RECIPE_KEYS = tuple(k for k in Recipe.model_fields if k not in ("name", "method", "sources", "algo"))
_ALGO_KEYS = tuple(AlgoConfig.model_fields)
_ENTRY_KEYS = ("extends", "about")
_MISSING: Any = object()


@dataclass(frozen=True)
class _Field:
    value: Any = _MISSING
    source: str | None = None


Fields = dict[str, _Field]  # "steps", "algo.lr", ... -> value and source


def load_recipes(path: Path, method: str) -> dict[str, Recipe]:
    """Every recipe of the file at ``path``, in file order, for ``method``."""
    raw = _read(path)
    return {name: _build(path, name, _resolve(path, raw, name, ()), method) for name in raw}


def _read(path: Path) -> dict[str, Any]:
    path = Path(path).resolve()
    if not path.is_file():
        raise ConfigError(f"{path}: no such recipes file")
    stat = path.stat()
    return dict(_read_cached(path, stat.st_mtime_ns, stat.st_size))


@cache
def _read_cached(path: Path, mtime_ns: int, size: int) -> Mapping[str, Any]:
    """The parsed file, cached while it is unchanged (``mtime_ns``, ``size``)."""
    try:
        data = yaml.safe_load(path.read_text(encoding="utf-8"))
    except yaml.YAMLError as e:
        raise ConfigError(f"{path}: not valid YAML: {' '.join(str(e).split())}") from e
    except UnicodeDecodeError as e:
        raise ConfigError(f"{path}: not UTF-8 text (byte {e.start}: {e.reason}); save it as UTF-8") from None
    except RecursionError:
        raise ConfigError(f"{path}: nested too deeply to read (beyond Python's recursion limit)") from None
    if not isinstance(data, dict) or not data:
        raise ConfigError(f"{path}: expected a mapping of recipe names to recipes")
    for name, body in data.items():
        if not isinstance(name, str) or not isinstance(body, dict):
            raise ConfigError(f"{path}: recipe {name!r} must be a name mapped to its fields")
    return data


def _resolve(path: Path, raw: dict[str, Any], name: str, chain: tuple[str, ...]) -> Fields:
    """The fields of recipe ``name``: its bases merged in order, then its own fields."""
    if name in chain:
        raise ConfigError(f"{path}: recipe {name!r}: cycle in extends: {' -> '.join((*chain, name))}")
    body = raw[name]
    where = f"{path}: recipe {name!r}"
    bases = body.get("extends", [])
    if isinstance(bases, str):
        bases = [bases]
    if not isinstance(bases, list) or not all(isinstance(b, str) for b in bases):
        raise ConfigError(f"{where}: extends must be a recipe name or a list of names")
    merged: Fields = {}
    for base in bases:
        if base.startswith(_OVERLAY):
            part = overlay_fields(base[len(_OVERLAY) :], where=f"{where}: extends {base!r}: ")
        elif base in raw:
            part = _resolve(path, raw, base, (*chain, name))
        else:
            raise ConfigError(
                f"{where}: extends {base!r}, which is neither a recipe of this file "
                f"({', '.join(raw)}) nor '{_OVERLAY}<name>'"
            )
        merged = merge(merged, part)
    return merge(merged, parse_fields(body, where))


def overlay_fields(name: str, where: str = "") -> Fields:
    """The fields of the overlay ``name`` (``harness/rl/<name>.overlay.yaml``): a partial recipe,
    with no ``extends``."""
    path = OVERLAY_DIR / f"{name}.overlay.yaml"
    if not path.is_file():
        known = sorted(p.name.removesuffix(".overlay.yaml") for p in OVERLAY_DIR.glob("*.overlay.yaml"))
        raise ConfigError(f"{where}no overlay {name!r} ({path} does not exist); known: {', '.join(known)}")
    data = _read(path)
    if set(data) != {name}:
        raise ConfigError(f"{path}: an overlay file holds exactly one entry, named {name!r}")
    if "extends" in data[name]:
        raise ConfigError(f"{path}: an overlay extends nothing")
    return parse_fields(data[name], f"{path}: overlay {name!r}")


def parse_fields(body: Mapping[str, Any], where: str) -> Fields:
    """An entry's own fields, checked: known keys, each ``{value, source}``."""
    out: Fields = {}
    for key, spec in body.items():
        if key in _ENTRY_KEYS:
            continue
        if key == "algo":
            if not isinstance(spec, dict):
                raise ConfigError(f"{where}: algo must be a mapping of algorithm fields")
            for sub, sub_spec in spec.items():
                if sub not in _ALGO_KEYS:
                    raise ConfigError(f"{where}: unknown key algo.{sub} (known: {', '.join(_ALGO_KEYS)})")
                out[f"algo.{sub}"] = _field(sub_spec, f"{where}: algo.{sub}")
        elif key in _RECIPE_KEYS:
            out[key] = _field(spec, f"{where}: {key}")
        else:
            known = ", ".join((*_ENTRY_KEYS, "algo", *_RECIPE_KEYS))
            raise ConfigError(f"{where}: unknown key {key!r} (known: {known})")
    return out


def _field(spec: Any, where: str) -> _Field:
    if not isinstance(spec, dict) or not spec or set(spec) - {"value", "source"}:
        raise ConfigError(
            f"{where}: write {{value: ..., source: ...}} (or {{source: ...}} alone), got {spec!r}"
        )
    source = spec.get("source")
    if "source" in spec and (not isinstance(source, str) or not source.strip()):
        raise ConfigError(f"{where}: source must be a non-empty string, got {source!r}")
    if "value" in spec and source is None:
        raise ConfigError(f"{where}: a value needs a source beside it")
    return _Field(spec.get("value", _MISSING), source)


def merge(base: Fields, top: Fields) -> Fields:
    """``top`` over ``base``: a field of ``top`` replaces the value and/or source it gives."""
    out = dict(base)
    for key, f in top.items():
        old = out.get(key, _Field())
        out[key] = _Field(
            f.value if f.value is not _MISSING else old.value,
            f.source if f.source is not None else old.source,
        )
    return out


def _build(path: Path | str, name: str, fields: Fields, method: str) -> Recipe:
    where = f"{path}: recipe {name!r}"
    data: dict[str, Any] = {"name": name, "method": method, "algo": {}, "sources": {}}
    for key, f in fields.items():
        if f.value is _MISSING:
            raise ConfigError(f"{where}: {key} has a source but no value (here or in what it extends)")
        if key.startswith("algo."):
            data["algo"][key.removeprefix("algo.")] = f.value
        else:
            data[key] = f.value
        if f.source is not None:
            data["sources"][key] = f.source
    try:
        return Recipe.model_validate(data)
    except ValidationError as e:
        problems = "; ".join(
            f"{'.'.join(map(str, err['loc'])) or 'recipe'}: {err['msg']}" for err in e.errors()
        )
        raise ConfigError(f"{where}: {problems}") from e
    except RecursionError:
        raise ConfigError(f"{where}: nested too deeply to read") from None


RECIPES_FILE = "recipes.yaml"


def recipes_path(method: Any) -> Path:
    """The recipes file of ``method``: ``recipes.yaml`` in the folder of the nearest class of its
    MRO that has one (a subclass defined elsewhere, as a variant or in a test, inherits it)."""
    import inspect

    for cls in type(method).__mro__:
        if cls.__module__ in ("harness.method", "harness.api"):  # the contract's own classes hold none
            break
        path = Path(inspect.getfile(cls)).parent / RECIPES_FILE
        if path.is_file():
            return path
    raise ConfigError(
        f"method {method.name!r} has no {RECIPES_FILE} beside {inspect.getfile(type(method))}; "
        "write one (format: harness/rl/recipe_files.py) or override recipes()"
    )


def method_recipes(method: Any) -> dict[str, Recipe]:
    """The recipes of ``method`` (a ``TrainableMethod``) from its recipes file, each reward stage
    checked against the rewards the method defines."""
    path = recipes_path(method)
    recipes = load_recipes(path, method.name)
    known = ("default", *method.reward_names())
    for name, recipe in recipes.items():
        for stage in recipe.reward_stages:
            if stage.reward not in known:
                raise ConfigError(
                    f"{path}: recipe {name!r}: reward_stages names reward {stage.reward!r}, which "
                    f"method {method.name!r} does not define (known: {', '.join(known)})"
                )
    return recipes
