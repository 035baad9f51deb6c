"""Each plugin folder's own data for the shared tests, found through the plugin manifests.

A plugin (``methods/<paper>/``, the ``baselines`` package) keeps a ``conformance.json`` beside its
``__init__.py`` manifest, so adding a paper touches only its folder; the shared tests read every
plugin's file and say which one lacks what. Its sections, each optional:

- ``spec_hashes``: method -> protocol -> pinned ``MethodSpec`` hash (``tests/test_conformance.py``).
  A (method, protocol) pair is pinned in the file of the plugin registering the method or of the
  one registering the protocol, once; ``UPDATE_SPEC_HASHES=1`` re-pins a changed hash where it is and
  a new pair in the plugin of the two that pins nothing yet, else the method's.
- ``judge_prompt_hashes``: judge prompt id -> pinned prompt hash, for the prompts the plugin
  registers (``tests/judge/test_prompts.py``; the engine's own prompts are pinned there).
- ``reported_tables``: ``{"why": ..., "rows": {table: rows}}``, the rows the paper's
  ``reported.yaml`` gives per table (``tests/methods/test_reported.py``).
- ``verl_cases``: method -> a scripted run for the verl export parity test
  (``tests/verl/test_export_verl.py``): ``script`` (question -> model outputs), ``reward``,
  ``models`` (``judge`` / ``reader``: prompt key -> the reply every call gets; ``embedder``: text ->
  vector) and ``protocol`` (a registered protocol name; default the tests' own).
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from functools import cache
from pathlib import Path
from typing import Any

from harness.plugins import Manifest, manifests

FILE = "conformance.json"
SECTIONS = ("spec_hashes", "judge_prompt_hashes", "reported_tables", "verl_cases")
ROOT = Path(__file__).resolve().parents[2]


@dataclass(frozen=True)
class PluginData:
    """One plugin's ``conformance.json`` (empty when the folder has none)."""

    manifest: Manifest
    path: Path
    data: dict[str, Any]

    @property
    def where(self) -> str:
        """The file, relative to the checkout when it is inside it."""
        try:
            return str(self.path.relative_to(ROOT))
        except ValueError:
            return str(self.path)

    @property
    def methods(self) -> frozenset[str]:
        return frozenset(self.manifest.plugin.methods)

    @property
    def protocols(self) -> frozenset[str]:
        return frozenset(self.manifest.plugin.protocols)

    def section(self, key: str) -> dict[str, Any]:
        return self.data.get(key, {})

    def write_section(self, key: str, value: dict[str, Any]) -> None:
        """Rewrite the file with ``key`` replaced (dropped when empty), the other sections kept."""
        data = {k: v for k, v in self.data.items() if k != key}
        if value:
            data[key] = value
        data = {k: data[k] for k in SECTIONS if k in data}
        self.path.write_text(json.dumps(data, indent=1, ensure_ascii=False) + "\n", encoding="utf-8")


def _load(m: Manifest) -> PluginData:
    path = Path(m.path).parent / FILE
    data = json.loads(path.read_text(encoding="utf-8")) if path.is_file() else {}
    pd = PluginData(m, path, data)
    unknown = sorted(set(data) - set(SECTIONS))
    if unknown:
        raise ValueError(f"{pd.where}: unknown section(s) {unknown}; known: {', '.join(SECTIONS)}")
    return pd


@cache
def plugin_data() -> tuple[PluginData, ...]:
    """Every plugin's data, in manifest order (read once per process)."""
    return tuple(_load(m) for m in manifests())


def reload() -> tuple[PluginData, ...]:
    """Read the files again (after a rewrite)."""
    plugin_data.cache_clear()
    return plugin_data()


def of_method(name: str) -> PluginData:
    """The plugin that registers method ``name``."""
    return next(pd for pd in plugin_data() if name in pd.methods)


def of_protocol(name: str) -> PluginData | None:
    """The plugin that registers protocol ``name``; None for the engine's own (``mini``)."""
    return next((pd for pd in plugin_data() if name in pd.protocols), None)


def expected_file(key: str, names: list[str]) -> str:
    """'methods/x/conformance.json (section key: a, b)' for each plugin that should hold ``names``."""
    by: dict[str, list[str]] = {}
    for n in names:
        by.setdefault(of_method(n).where, []).append(n)
    return "; ".join(f"{w} (section {key!r}: {', '.join(ns)})" for w, ns in sorted(by.items()))
