"""Benches: named lists of (dataset, split, subset), and the selection applied to each dataset.

``singlehop``, ``multihop`` and ``all`` are the field's seven sets; the ``mini`` variants keep
the questions whose gold passages are in the packaged closed corpus, so retrieval is
meaningful on a laptop; ``r1searcher`` is R1-Searcher's evaluation set; every dataset is
also a bench of its own name.
"""

from __future__ import annotations

import hashlib
from pathlib import Path
from typing import Literal

from pydantic import BaseModel, ConfigDict, model_validator

from harness import plugins
from harness.data import packaged
from harness.data.datasets import DATASETS, get_dataset_info, load_dataset
from harness.errors import ConfigError
from harness.registry import Registry
from harness.types import QAExample

SubsetName = Literal["all", "closed", "r1searcher500", "longtail"]


class _Frozen(BaseModel):
    model_config = ConfigDict(frozen=True, extra="forbid")


class Selection(_Frozen):
    """Which questions of each dataset to run.

    ``full``: all of them; ``first``: the first ``n`` in dataset order; ``random``: ``n`` drawn
    with ``seed`` and returned in dataset order. The random draw ranks questions by
    ``sha256(f"{seed}:{id}")``, so it does not depend on the Python version or on row order,
    and a smaller sample is contained in a larger one with the same seed.
    """

    mode: Literal["full", "first", "random"] = "full"
    n: int | None = None
    seed: int = 0

    @model_validator(mode="after")
    def _check(self) -> Selection:
        if self.mode == "full" and self.n is not None:
            raise ValueError("selection 'full' takes no n (use mode 'first' or 'random')")
        if self.mode != "full" and (self.n is None or self.n < 1):
            raise ValueError(f"selection {self.mode!r} needs n >= 1")
        return self

    def apply(self, examples: list[QAExample]) -> list[QAExample]:
        if self.mode == "full":
            return list(examples)
        assert self.n is not None
        if self.mode == "first":
            return list(examples[: self.n])
        ranked = sorted(range(len(examples)), key=lambda i: _rank(self.seed, examples[i].id))
        keep = sorted(ranked[: self.n])
        return [examples[i] for i in keep]

    def describe(self) -> str:
        """A stable short name: ``full``, ``first-100``, ``random-100-seed0``."""
        if self.mode == "full":
            return "full"
        if self.mode == "first":
            return f"first-{self.n}"
        return f"random-{self.n}-seed{self.seed}"


def _rank(seed: int, qid: str) -> bytes:
    return hashlib.sha256(f"{seed}:{qid}".encode()).digest()


class BenchEntry(_Frozen):
    """One dataset of a bench: its split and which packaged subset of it."""

    dataset: str
    split: str
    subset: SubsetName = "all"

    def describe(self) -> str:
        tail = "" if self.subset == "all" else f"[{self.subset}]"
        return f"{self.dataset}/{self.split}{tail}"


class Bench(_Frozen):
    name: str
    entries: tuple[BenchEntry, ...]
    description: str

    @property
    def datasets(self) -> list[str]:
        return [e.dataset for e in self.entries]


BENCHES: Registry[Bench] = Registry("bench", discover=plugins.register("benches"))

SINGLEHOP = ("nq", "triviaqa", "popqa")
MULTIHOP = ("hotpotqa", "2wikimultihopqa", "musique", "bamboogle")


def _entry(dataset: str, subset: SubsetName = "all") -> BenchEntry:
    return BenchEntry(dataset=dataset, split=get_dataset_info(dataset).split, subset=subset)


def _register(name: str, entries: list[BenchEntry], description: str) -> None:
    BENCHES.register(name, Bench(name=name, entries=tuple(entries), description=description))


_register("singlehop", [_entry(d) for d in SINGLEHOP], "NQ, TriviaQA, PopQA (Search-R1's general QA sets)")
_register("multihop", [_entry(d) for d in MULTIHOP], "HotpotQA, 2Wiki, MuSiQue, Bamboogle (multi-hop QA)")
_register("all", [_entry(d) for d in (*SINGLEHOP, *MULTIHOP)], "the seven QA sets of Search-R1 and FlashRAG")
_register(
    "mini-singlehop",
    [_entry("popqa", "closed")],
    "PopQA questions whose gold paragraphs are in the closed corpus",
)
_register(
    "mini-multihop",
    [_entry(d, "closed") for d in ("hotpotqa", "2wikimultihopqa", "musique")],
    "multi-hop questions whose gold paragraphs are all in the closed corpus",
)
_register(
    "mini",
    [_entry("popqa", "closed"), *(_entry(d, "closed") for d in ("hotpotqa", "2wikimultihopqa", "musique"))],
    "mini-singlehop + mini-multihop: retrieval over the closed corpus is meaningful",
)
_register(
    "r1searcher",
    [*(_entry(d, "r1searcher500") for d in ("hotpotqa", "2wikimultihopqa", "musique")), _entry("bamboogle")],
    "R1-Searcher's evaluation sets: 500 each of HotpotQA, 2Wiki, MuSiQue, and Bamboogle",
)


# Training benches: the train splits methods train on. They are not packaged (only dev/test
# questions are): pass --data-dir with the files (FlashRAG layout {data_dir}/{dataset}/train.jsonl,
# or the original formats), or a clear error names what is missing. A paper's own training mix is
# registered from its folder (``PLUGIN = Plugin(benches={...})`` in ``methods/<paper>/__init__.py``).
def train_entry(dataset: str) -> BenchEntry:
    """The train split of ``dataset`` (not packaged: read from ``--data-dir``)."""
    return BenchEntry(dataset=dataset, split="train")


_register(
    "2wikimultihopqa-train",
    [train_entry("2wikimultihopqa")],
    "2WikiMultiHopQA train (R-Search, When-to-Search)",
)

for _d in (*SINGLEHOP, *MULTIHOP):
    _info = get_dataset_info(_d)
    _register(_d, [_entry(_d)], f"{_info.title}, {_info.split} split")


def get_bench(name: str) -> Bench:
    """A registered bench by name (a dataset alias such as ``2wiki`` names its dataset's bench)."""
    for d in DATASETS:
        if name in d.aliases:
            name = d.name
    bench = BENCHES.get(name)
    if bench.name != name:
        raise ConfigError(f"bench {name!r} is registered as an object named {bench.name!r}; make them equal")
    return bench


def list_benches() -> list[Bench]:
    """Every bench: the groups first, then one per dataset."""
    order = {
        n: i
        for i, n in enumerate(
            ("singlehop", "multihop", "all", "mini-singlehop", "mini-multihop", "mini", "r1searcher")
        )
    }
    return sorted((get_bench(n) for n in BENCHES.names()), key=lambda b: (order.get(b.name, 99), b.name))


def entry_examples(entry: BenchEntry, data_dir: Path | None = None) -> list[QAExample]:
    """The examples of one entry: its dataset (packaged or from ``data_dir``) restricted to its subset.

    Subsets are id lists of the packaged rows; with ``data_dir`` every listed id must occur in
    the user's data (``closed`` and ``longtail`` use the sources' own ids), else ConfigError.
    """
    examples = load_dataset(entry.dataset, data_dir, entry.split)
    if entry.subset == "all":
        return examples
    sub = packaged.get_subset(get_dataset_info(entry.dataset).name, entry.subset)
    wanted = set(sub.ids)
    out = [ex for ex in examples if ex.id in wanted]
    if len(out) != len(wanted):
        missing = len(wanted) - len(out)
        raise ConfigError(
            f"{entry.describe()}: {missing} of the subset's {len(wanted)} ids are not in the loaded data"
            f"{f' from {data_dir}' if data_dir else ''}; subsets are defined on the packaged ids"
        )
    return out


def load_bench(
    bench: Bench | str, selection: Selection | None = None, data_dir: Path | None = None
) -> list[tuple[BenchEntry, list[QAExample]]]:
    """Each entry of the bench with its selected examples (selection applied per dataset)."""
    b = get_bench(bench) if isinstance(bench, str) else bench
    sel = selection or Selection()
    return [(e, sel.apply(entry_examples(e, data_dir))) for e in b.entries]
