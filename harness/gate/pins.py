"""Where the exact layers' pins live: the engine's in one file, each plugin folder's in the folder.

The baseline of :mod:`harness.gate` is split by owner, so adding a paper folder adds its pins
inside that folder and touches no shared file (the same rule as its spec hashes and reported
numbers):

- an item whose :data:`~harness.gate.layers.Scope` names a method or protocol that a plugin
  *folder* registers (``methods/<paper>/``: a package directly under a plugin root) is pinned in
  that folder's ``regress-exact.json`` (its prompt texts in ``regress-exact.prompts.json.gz``);
- everything else (the engine's and the root package's, e.g. ``baselines``, protocols and
  methods, the retrievers shared with them, the metric values on recorded predictions) is pinned
  in the central file, ``results/regress/exact.json`` by default.

An item that belongs to two folders (a method of one folder under another's protocol) is pinned
once: where it already is; a new one in the folder that has no pin file yet (the folder being
added), else the method's. Comparing reads every file as one baseline; ``--update`` writes each
item back to its file and touches only the files whose items changed.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any

from harness.errors import ConfigError
from harness.gate import ExactBaseline, library_versions, load_texts
from harness.gate.layers import LAYERS, Current, Scope

PIN_FILE = "regress-exact.json"


@dataclass(frozen=True)
class Owners:
    """Which plugin folder registers each method and protocol (names the engine or a root
    package registers are absent), and each folder's pin file."""

    methods: dict[str, str]
    protocols: dict[str, str]
    files: dict[str, Path]  # folder package -> its pin file

    @classmethod
    def discover(cls) -> Owners:
        from harness.plugins import manifests

        methods: dict[str, str] = {}
        protocols: dict[str, str] = {}
        files: dict[str, Path] = {}
        for m in manifests():
            if "." not in m.package:  # a root package's own manifest (baselines): the central file
                continue
            files[m.package] = Path(m.path).with_name(PIN_FILE)
            methods.update(dict.fromkeys(m.plugin.methods, m.package))
            protocols.update(dict.fromkeys(m.plugin.protocols, m.package))
        return cls(methods, protocols, files)

    def candidates(self, scope: Scope) -> list[str]:
        """The folders an item of ``scope`` may be pinned in, the method's first; none: central.
        An item shared by protocols (a retriever) is central when any of them is not a folder's."""
        methods, protocols = scope
        if not methods and any(p not in self.protocols for p in protocols):
            return []
        found = [self.methods.get(n) for n in methods] + [self.protocols.get(p) for p in protocols]
        return list(dict.fromkeys(f for f in found if f is not None))


@dataclass
class Pins:
    """The central file and every folder pin file that exists, read as one baseline."""

    central: Path
    files: dict[Path, ExactBaseline]  # existing files only, the central one first
    texts: dict[Path, dict[str, str]]
    where: dict[tuple[str, str], Path]  # (layer, key) -> the file pinning it

    @property
    def merged(self) -> ExactBaseline:
        """One baseline over every file (the central file's reasons and library versions)."""
        layers: dict[str, dict[str, Any]] = {}
        for b in self.files.values():
            for layer, items in b.layers.items():
                layers.setdefault(layer, {}).update(items)
        central = self.files.get(self.central)
        return ExactBaseline(
            reasons=central.reasons if central else [],
            versions=central.versions if central else {},
            layers={x: layers[x] for x in LAYERS if x in layers},
        )

    @property
    def merged_texts(self) -> dict[str, str]:
        return {k: v for texts in self.texts.values() for k, v in texts.items()}


def load_pins(central: Path, owners: Owners | None = None, *, required: bool = True) -> Pins:
    """The central baseline and every plugin folder's pin file. ``required``: a missing central
    file is an error (comparing), else an empty start (``--update``). A key pinned in two files is
    an error naming both."""
    owners = owners or Owners.discover()
    files: dict[Path, ExactBaseline] = {}
    if central.is_file() or required:
        files[central] = ExactBaseline.load(central)
    for path in sorted(owners.files.values()):
        if path.is_file():
            files[path] = ExactBaseline.load(path)
    where: dict[tuple[str, str], Path] = {}
    for path, b in files.items():
        for layer, items in b.layers.items():
            for k in items:
                if (layer, k) in where:
                    raise ConfigError(
                        f"{path}: {layer} item {k!r} is also pinned in {where[layer, k]}; keep it in one"
                    )
                where[layer, k] = path
    return Pins(central, files, {p: load_texts(p) for p in files}, where)


def assign(
    current: Current, pins: Pins, owners: Owners, *, keep_locations: bool = True
) -> dict[tuple[str, str], Path]:
    """(layer, key) -> the file each computed item is written to: where it is pinned now (with
    ``keep_locations``), else its folder (:meth:`Owners.candidates`; of two, the one without a pin
    file yet, else the method's), else the central file."""
    where = pins.where if keep_locations else {}
    out: dict[tuple[str, str], Path] = {}
    for layer, items in current.items.items():
        scopes = current.scopes.get(layer, {})
        for k in items:
            if (layer, k) in where:
                out[layer, k] = where[layer, k]
                continue
            folders = owners.candidates(scopes.get(k, ((), ())))
            fresh = [f for f in folders if owners.files[f] not in pins.files]
            pick = (fresh or folders or [None])[0]
            out[layer, k] = owners.files[pick] if pick is not None else pins.central
    return out


def write_pins(
    current: Current, central: Path, reason: str, *, owners: Owners | None = None, keep_locations: bool = True
) -> list[Path]:
    """Rewrite the computed layers of every pin file from ``current`` (the other layers of a file
    stay as they are), appending ``reason`` to each file whose items change; returns the files
    written. With ``keep_locations`` False every item goes where :func:`assign` puts a new one
    (regrouping a baseline by owner)."""
    from datetime import UTC, datetime

    reason = reason.strip()
    if not reason or "\n" in reason:
        raise ConfigError("--update needs --reason: one line saying why the baseline changes")
    owners = owners or Owners.discover()
    pins = load_pins(central, owners, required=False)
    target = assign(current, pins, owners, keep_locations=keep_locations)
    mine: dict[Path, dict[str, dict[str, Any]]] = {path: {} for path in pins.files}  # file -> layer -> items
    for (layer, k), path in target.items():
        mine.setdefault(path, {}).setdefault(layer, {})[k] = current.items[layer][k]
    stamp = datetime.now(UTC).strftime("%Y-%m-%d")
    written = []
    for path, computed in mine.items():
        old = pins.files.get(path)
        # the layers not computed now stay as they are; the computed ones are this file's items only
        merged = {
            **{x: v for x, v in (old.layers.items() if old else []) if x not in current.items},
            **computed,
        }
        layers = {x: merged[x] for x in LAYERS if x in merged}
        old_texts = pins.texts.get(path, {})
        texts = (
            {k: current.prompt_texts[k] for k in computed.get("prompts", {})}
            if "prompts" in current.items
            else old_texts
        )
        if old is not None and layers == old.layers and texts == old_texts:
            continue
        if old is None and not layers:
            continue
        has_retrieval = "retrieval" in current.items and bool(layers.get("retrieval"))
        new = ExactBaseline(
            reasons=[*(old.reasons if old else []), f"{stamp}: {reason}"],
            versions=library_versions() if has_retrieval else (old.versions if old else {}),
            layers=layers,
        )
        new.save(path, texts)
        written.append(path)
    return written
