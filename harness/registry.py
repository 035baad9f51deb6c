"""A small typed registry (in the spirit of lm-eval's): register by decorator or lazily as
``"module:attr"``; unknown names fail loudly with the list of known ones.

A registry may be given a ``discover`` hook: it runs once, on the first lookup (``get``,
``names``, ``in``, iteration), and registers what plugins provide (``harness.plugins``: the
paper folders under ``methods/`` and the ``baselines`` package), so the engine names none of them.

Lookups are thread-safe (verl calls rewards and agent loops from many threads of one process):
discovery runs under the registry's lock, and a lookup from another thread waits until it has
finished, so no lookup returns before every plugin is registered; a lazy target is imported
outside the lock and published under it.
"""

from __future__ import annotations

import importlib
import threading
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
        self._done = discover is None  # discovery has finished (or there is none)
        self._running = False  # the hook is running, in the thread that holds the lock
        self._lock = threading.RLock()

    def _discovered(self) -> None:
        """Run the discover hook once, under the lock: another thread's lookup waits until it has
        finished; a lookup made by the hook itself (same thread) sees what is registered so far.
        If the hook fails, everything it registered is removed and the next lookup runs it again
        (and raises the same error)."""
        if self._done:
            return
        with self._lock:
            if self._done or self._running:
                return
            assert self._discover is not None
            items, lazy = dict(self._items), dict(self._lazy)
            self._running = True
            try:
                self._discover(self)
            except BaseException:
                self._items, self._lazy = items, lazy
                raise
            finally:
                self._running = False
            self._done = True

    def register(self, name: str, obj: T | None = None) -> Callable[[T], T] | T:
        """``reg.register("x", obj)`` or ``@reg.register("x")``."""

        def add(o: T) -> T:
            with self._lock:
                if name in self._items or name in self._lazy:
                    raise ConfigError(f"{self.kind} {name!r} is registered twice")
                self._items[name] = o
            return o

        if obj is not None:
            return add(obj)
        return add

    def register_lazy(self, name: str, target: str) -> None:
        """Register ``"package.module:attr"``, imported on first use."""
        with self._lock:
            if name in self._items or name in self._lazy:
                raise ConfigError(f"{self.kind} {name!r} is registered twice")
            self._lazy[name] = target

    def get(self, name: str) -> T:
        self._discovered()
        if name in self._items:
            return self._items[name]
        target = self._lazy.get(name)
        if target is not None:
            # imported outside the lock (a module's import may look up this registry from another
            # thread); the first thread to finish publishes it, the others return the same object
            mod, _, attr = target.partition(":")
            module = importlib.import_module(mod)
            if not hasattr(module, attr):
                raise ConfigError(
                    f"{self.kind} {name!r} is registered as {target!r}, but {mod} has no {attr!r}"
                )
            with self._lock:
                if name in self._lazy:
                    del self._lazy[name]
                    self._items[name] = getattr(module, attr)
                return self._items[name]
        if name in self._items:  # resolved by another thread since the first check
            return self._items[name]
        from harness.choices import unknown

        raise unknown(self.kind, name, self.names())

    def names(self) -> list[str]:
        self._discovered()
        with self._lock:
            return sorted({*self._items, *self._lazy})

    def __contains__(self, name: object) -> bool:
        self._discovered()
        with self._lock:
            return name in self._items or name in self._lazy

    def __iter__(self) -> Iterator[str]:
        return iter(self.names())
