"""Plugins: each paper folder under ``methods/`` and the ``baselines`` package declare what they
provide; the engine's registries are filled from those declarations, so ``harness/`` names none.

A plugin's ``__init__.py`` holds one manifest, ``PLUGIN = Plugin(...)``: registered names mapped to
``"module:attr"`` targets (a leading ``.`` means the plugin's own package, ``".method:SearchR1"``).
The ``__init__.py`` stays light (it imports this module and nothing else): discovery imports every
manifest and none of the modules they name; a target is imported when its name is first looked
up (:meth:`harness.registry.Registry.register_lazy`).

Discovery is per registry and runs once, on the registry's first lookup
(``Registry(kind, discover=register("methods"))``). Adding a paper is adding a folder
``methods/<paper>/`` with its manifest; ``tests/test_architecture.py`` checks that no module in
``harness/`` names it and that ``harness/`` imports neither ``methods`` nor ``baselines`` at
module level. The manifest's fields and where things live in a folder: ``docs/plugins.md``.
"""

from __future__ import annotations

import functools
import importlib
import pkgutil
import re
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from types import MappingProxyType
from typing import TYPE_CHECKING, Any, Literal

from harness.errors import ConfigError

if TYPE_CHECKING:
    from harness.registry import Registry

# The packages whose manifests are read: the package itself (``baselines``) and every package
# directly under it (``methods.search_r1``, ...).
PLUGIN_ROOTS: tuple[str, ...] = ("methods", "baselines")

Kind = Literal["methods", "protocols", "benches", "judge_prompts", "renderers"]
KINDS: tuple[Kind, ...] = ("methods", "protocols", "benches", "judge_prompts", "renderers")

_TARGET = re.compile(r"^\.?[A-Za-z_][\w.]*:[A-Za-z_]\w*$")


def _frozen(d: Mapping[str, str]) -> Mapping[str, str]:
    return MappingProxyType(dict(d))


@dataclass(frozen=True)
class Plugin:
    """What one plugin package provides, by registered name.

    ``methods``: method name -> its :class:`~harness.method.Method` class. ``variants``: a method
    name (also in ``methods``) -> the method it varies; a variant is listed and runnable by name
    but not part of ``--method all``. ``protocols``: protocol name -> a factory returning the
    :class:`~harness.protocol.Protocol` of that name. ``benches``: bench name -> a
    :class:`~harness.data.benches.Bench`. ``judge_prompts``: prompt id -> a
    :class:`~harness.judge.prompts.JudgePrompt`. ``renderers``: renderer name -> a document renderer.
    ``aliases``: the other spellings of the paper's name in code (``"searchr1"``, ``"TiresRAG"``),
    besides its folder name and method names; the architecture test keeps them out of ``harness/``.
    """

    methods: Mapping[str, str] = field(default_factory=dict)
    variants: Mapping[str, str] = field(default_factory=dict)
    protocols: Mapping[str, str] = field(default_factory=dict)
    benches: Mapping[str, str] = field(default_factory=dict)
    judge_prompts: Mapping[str, str] = field(default_factory=dict)
    renderers: Mapping[str, str] = field(default_factory=dict)
    aliases: tuple[str, ...] = ()

    def __post_init__(self) -> None:
        for kind in KINDS:
            targets = getattr(self, kind)
            for name, target in targets.items():
                if not isinstance(target, str) or not _TARGET.match(target):
                    raise ConfigError(
                        f"plugin {kind} {name!r}: target {target!r} is not 'module:attr' "
                        "(a leading '.' for the plugin's own package, e.g. '.method:MyMethod')"
                    )
            object.__setattr__(self, kind, _frozen(targets))
        for variant, base in self.variants.items():
            if variant not in self.methods:
                raise ConfigError(f"plugin variant {variant!r} (of {base!r}) is not among its methods")
        object.__setattr__(self, "variants", _frozen(self.variants))


@dataclass(frozen=True)
class Manifest:
    """A discovered plugin: its package (``methods.search_r1``), the manifest file and what it declares."""

    package: str
    path: str
    plugin: Plugin

    def targets(self, kind: Kind) -> dict[str, str]:
        """``getattr(plugin, kind)`` with every relative target made absolute."""
        return {
            name: (self.package + target if target.startswith(".") else target)
            for name, target in getattr(self.plugin, kind).items()
        }


def _manifest(module: Any, required: bool) -> Manifest | None:
    plugin = getattr(module, "PLUGIN", None)
    path = getattr(module, "__file__", None) or module.__name__
    if plugin is None and not required:
        return None
    if not isinstance(plugin, Plugin):
        raise ConfigError(
            f"{path}: a plugin package must define PLUGIN = harness.plugins.Plugin(...) "
            f"(found {type(plugin).__name__}); see docs/plugins.md"
        )
    return Manifest(module.__name__, path, plugin)


def discover(roots: tuple[str, ...] = PLUGIN_ROOTS) -> tuple[Manifest, ...]:
    """Every manifest under ``roots``, in package-name order: each root package's own (optional)
    and each direct subpackage's (required: a folder under ``methods/`` is a plugin)."""
    out: list[Manifest] = []
    for root in roots:
        pkg = importlib.import_module(root)
        own = _manifest(pkg, required=False)
        if own is not None:
            out.append(own)
        for info in sorted(pkgutil.iter_modules(pkg.__path__), key=lambda i: i.name):
            if info.ispkg:
                sub = _manifest(importlib.import_module(f"{root}.{info.name}"), required=True)
                assert sub is not None
                out.append(sub)
    _check_variants(out)
    return tuple(out)


def _check_variants(manifests: list[Manifest]) -> None:
    methods = {n for m in manifests for n in m.plugin.methods}
    for m in manifests:
        for variant, base in m.plugin.variants.items():
            if base not in methods:
                raise ConfigError(f"{m.path}: variant {variant!r} varies {base!r}, which no plugin registers")


@functools.cache
def manifests() -> tuple[Manifest, ...]:
    """The manifests under :data:`PLUGIN_ROOTS`, read once per process."""
    return discover()


def register(
    kind: Kind, source: Callable[[], tuple[Manifest, ...]] = manifests
) -> Callable[[Registry[Any]], None]:
    """A registry's discover hook: register every plugin's ``kind`` lazily (name -> target), from
    the manifests ``source()`` returns (default: those under :data:`PLUGIN_ROOTS`)."""
    if kind not in KINDS:
        raise ConfigError(f"unknown plugin kind {kind!r}; known: {', '.join(KINDS)}")

    def hook(registry: Registry[Any]) -> None:
        for m in source():
            for name, target in m.targets(kind).items():
                try:
                    registry.register_lazy(name, target)
                except ConfigError as e:  # a name taken twice: say which manifest took it second
                    raise ConfigError(f"{m.path}: {e}") from None

    return hook


def variants() -> dict[str, str]:
    """Variant method name -> the method it varies, over every plugin."""
    return {v: base for m in manifests() for v, base in m.plugin.variants.items()}
