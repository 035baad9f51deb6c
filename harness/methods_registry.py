"""Every registered method, imported lazily by name (``harness run --method NAME``)."""

from __future__ import annotations

from collections.abc import Iterator, Mapping

from harness import plugins
from harness.choices import check_choice
from harness.errors import ConfigError
from harness.method import Method
from harness.registry import Registry

# Filled from the plugins' manifests on first use: the baselines (``baselines/__init__.py``) and
# one folder per paper (``methods/<paper>/__init__.py``).
METHODS: Registry[type[Method]] = Registry("method", discover=plugins.register("methods"))


class _Variants(Mapping[str, str]):
    """Variant name -> the method it varies, from the manifests. A variant is registered and
    runnable by name, listed, but not part of ``--method all`` (one row per paper method in the
    main comparison)."""

    def __getitem__(self, name: str) -> str:
        return plugins.variants()[name]

    def __iter__(self) -> Iterator[str]:
        return iter(plugins.variants())

    def __len__(self) -> int:
        return len(plugins.variants())


VARIANTS: Mapping[str, str] = _Variants()


def get_method(name: str) -> Method:
    return METHODS.get(name)()


def resolve_methods(spec: str) -> list[str]:
    """``"all"``, one name, or a comma list -> names (validated, order kept, no duplicates)."""
    if spec.strip() == "all":
        return [n for n in METHODS.names() if n not in VARIANTS]
    names = [n.strip() for n in spec.split(",") if n.strip()]
    if not names:
        raise ConfigError("--method is empty; give a name, a comma list or 'all'")
    for n in names:
        check_choice("method", n, METHODS.names())
    return list(dict.fromkeys(names))


def describe_methods() -> list[tuple[str, ...]]:
    """Rows for ``harness list methods``: name, kind, description, source."""
    rows = []
    for name in METHODS.names():
        cls = METHODS.get(name)
        kind = "RL (trained policy)" if cls.trained else "prompt baseline"
        if name in VARIANTS:
            kind += f", variant of {VARIANTS[name]} (not in --method all)"
        rows.append((name, kind, cls.description, cls.source))
    return rows


def get_trainable(name: str, recipe: str, overrides: list[str] | None = None):
    """A trainable method and its recipe ``recipe`` with ``key=value`` overrides applied."""
    from harness.method import TrainableMethod

    method = get_method(name)
    if not isinstance(method, TrainableMethod):
        raise ConfigError(f"method {name!r} is a prompt baseline; it has no training recipe")
    recipes = method.recipes()
    if recipe not in recipes:
        raise ConfigError(f"method {name!r} has no recipe {recipe!r}; known: {', '.join(recipes)}")
    r = recipes[recipe]
    return method, (r.with_overrides(overrides) if overrides else r)
