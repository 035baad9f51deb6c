"""Every registered method, imported lazily by name (``harness run --method NAME``)."""

from __future__ import annotations

from harness.errors import ConfigError
from harness.method import Method
from harness.registry import Registry

METHODS: Registry[type[Method]] = Registry("method")

# prompt baselines
METHODS.register_lazy("direct", "baselines.direct:Direct")
METHODS.register_lazy("naive_rag", "baselines.naive_rag:NaiveRAG")
METHODS.register_lazy("cot", "baselines.cot:CoT")
METHODS.register_lazy("ircot", "baselines.ircot:IRCoT")
METHODS.register_lazy("search_o1", "baselines.search_o1:SearchO1")
METHODS.register_lazy("sure", "baselines.sure:SuRe")
# paper methods
METHODS.register_lazy("search_r1", "methods.search_r1.method:SearchR1")
METHODS.register_lazy("eval_rar", "methods.eval_rar.method:EvalRAR")
METHODS.register_lazy("r_search", "methods.r_search.method:RSearch")
METHODS.register_lazy("arena", "methods.arena.method:Arena")
METHODS.register_lazy("tiresrag_r1", "methods.tiresrag_r1.method:TiresRAG")
METHODS.register_lazy("when_to_search", "methods.when_to_search.method:WhenToSearch")
# variants: registered and runnable by name, listed, but not part of `--method all` (one row per
# paper method in the main comparison); name -> the method it varies
METHODS.register_lazy("eval_rar_b", "methods.eval_rar.method:EvalRARModeB")
VARIANTS: dict[str, str] = {"eval_rar_b": "eval_rar"}


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
        if n not in METHODS:
            raise ConfigError(f"unknown method {n!r}; known: {', '.join(METHODS.names())}")
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
