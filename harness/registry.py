"""A small typed registry (in the spirit of lm-eval's): register by decorator or lazily as
``"module:attr"``; unknown names fail loudly with the list of known ones.

A registry may be given a ``discover`` hook: it runs once, on the first lookup (``get``,
``names``, ``in``, iteration), and registers what plugins provide (``harness.plugins``: the
paper folders under ``methods/`` and the ``baselines`` package), so the engine names none of them.
"""

from __future__ import annotations

import importlib
from collections.abc import Callable, Iterator
from typing import Generic, TypeVar

from harness.errors import ConfigError

T = TypeVar("T")


class Registry(Generic[T]):
    def __init__(self, kind: str, discover: Callable[[Registry[T]], None] | None = None):
        self.kind = kind
        self._items: dict[str, T] = {}
        self._lazy: dict[str, str] = {}
        self._discover = discover

    def _discovered(self) -> None:
        """Run the discover hook once. It is cleared before it runs (a lookup made by the hook
        itself sees what is registered so far) and, if it fails, everything it registered is
        removed and the hook is put back, so the next lookup raises the same error again."""
        hook, self._discover = self._discover, None
        if hook is None:
            return
        items, lazy = dict(self._items), dict(self._lazy)
        try:
            hook(self)
        except BaseException:
            self._items, self._lazy, self._discover = items, lazy, hook
            raise

    def register(self, name: str, obj: T | None = None) -> Callable[[T], T] | T:
        """``reg.register("x", obj)`` or ``@reg.register("x")``."""

        def add(o: T) -> T:
            if name in self._items or name in self._lazy:
                raise ConfigError(f"{self.kind} {name!r} is registered twice")
            self._items[name] = o
            return o

        if obj is not None:
            return add(obj)
        return add

    def register_lazy(self, name: str, target: str) -> None:
        """Register ``"package.module:attr"``, imported on first use."""
        if name in self._items or name in self._lazy:
            raise ConfigError(f"{self.kind} {name!r} is registered twice")
        self._lazy[name] = target

    def get(self, name: str) -> T:
        self._discovered()
        if name in self._items:
            return self._items[name]
        if name in self._lazy:
            target = self._lazy[name]
            mod, _, attr = target.partition(":")
            module = importlib.import_module(mod)
            if not hasattr(module, attr):
                raise ConfigError(
                    f"{self.kind} {name!r} is registered as {target!r}, but {mod} has no {attr!r}"
                )
            obj = getattr(module, attr)
            del self._lazy[name]
            self._items[name] = obj
            return obj
        from harness.choices import unknown

        raise unknown(self.kind, name, self.names())

    def names(self) -> list[str]:
        self._discovered()
        return sorted({*self._items, *self._lazy})

    def __contains__(self, name: object) -> bool:
        self._discovered()
        return name in self._items or name in self._lazy

    def __iter__(self) -> Iterator[str]:
        return iter(self.names())
