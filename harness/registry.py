"""A small typed registry (in the spirit of lm-eval's): register by decorator or lazily as
``"module:attr"``; unknown names fail loudly with the list of known ones."""

from __future__ import annotations

import importlib
from collections.abc import Callable, Iterator
from typing import Generic, TypeVar

from harness.errors import ConfigError

T = TypeVar("T")


class Registry(Generic[T]):
    def __init__(self, kind: str):
        self.kind = kind
        self._items: dict[str, T] = {}
        self._lazy: dict[str, str] = {}

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
        if name in self._items:
            return self._items[name]
        if name in self._lazy:
            mod, _, attr = self._lazy.pop(name).partition(":")
            obj = getattr(importlib.import_module(mod), attr)
            self._items[name] = obj
            return obj
        known = ", ".join(sorted(self.names())) or "(none)"
        raise ConfigError(f"unknown {self.kind} {name!r}; known: {known}")

    def names(self) -> list[str]:
        return sorted({*self._items, *self._lazy})

    def __contains__(self, name: object) -> bool:
        return name in self._items or name in self._lazy

    def __iter__(self) -> Iterator[str]:
        return iter(self.names())
