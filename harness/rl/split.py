"""Fixed train / held-out splits of packaged questions, stored as data.

A split file ``harness/data/packaged/splits/<name>.json`` (built by
``scripts/build_learning_split.py``, deterministic) names a bench and, per dataset, the ids of its
``train`` and ``heldout`` questions. Training commands (``harness sft``, ``harness train`` with a
recipe whose ``split`` is set) read the ``train`` part only and refuse a held-out id; evaluation
reads the ``heldout`` part.

The held-out part is exactly the questions ``Selection(mode="random", n, seed)`` picks from each
dataset of the bench (``heldout_selection`` in the file), so ``harness run --bench B --sample n
--seed s`` evaluates precisely the held-out questions with no new option; ``check_split`` verifies
that equality against the packaged data (a test runs it).
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from functools import cache
from importlib import resources
from pathlib import Path
from typing import Literal

from harness.data.benches import Selection, get_bench, load_bench
from harness.errors import ConfigError
from harness.types import QAExample

SPLITS_PACKAGE = "harness.data.packaged"
Part = Literal["train", "heldout"]


@dataclass(frozen=True)
class Split:
    """A named split: the bench it partitions, the selection that yields its held-out part, and
    per dataset the sorted-by-dataset-order ids of each part."""

    name: str
    bench: str
    heldout_selection: Selection
    train: dict[str, tuple[str, ...]]
    heldout: dict[str, tuple[str, ...]]
    # an extended split (extend_heldout): the split it grows, the held-out size per dataset, and the
    # train questions a recorded run trained on, which stay train whatever the ranking says
    extends: str | None = None
    heldout_n: int | None = None
    kept_train: dict[str, tuple[str, ...]] | None = None

    def ids(self, part: Part) -> dict[str, tuple[str, ...]]:
        return self.train if part == "train" else self.heldout

    def eval_args(self) -> list[str]:
        """The ``harness run`` arguments that evaluate exactly the held-out part (a plain split
        only: an extended one is evaluated by ids, :func:`harness.rl.heldout` over
        ``split_examples(name, 'heldout')``)."""
        if self.extends is not None:
            raise ConfigError(
                f"split {self.name!r} extends {self.extends!r}: its held-out part is no --sample draw; "
                "evaluate split_examples(name, 'heldout') (harness.rl.heldout)"
            )
        s = self.heldout_selection
        return ["--bench", self.bench, "--sample", str(s.n), "--seed", str(s.seed)]

    def to_json(self) -> str:
        data = {
            "name": self.name,
            "bench": self.bench,
            "heldout_selection": self.heldout_selection.model_dump(),
            "built_by": "scripts/build_learning_split.py",
            **(
                {
                    "extends": self.extends,
                    "heldout_n": self.heldout_n,
                    "kept_train": {d: list(v) for d, v in (self.kept_train or {}).items()},
                }
                if self.extends is not None
                else {}
            ),
            "heldout": {d: list(v) for d, v in self.heldout.items()},
            "train": {d: list(v) for d, v in self.train.items()},
        }
        return json.dumps(data, indent=1) + "\n"


def split_path(name: str) -> Path:
    return Path(str(resources.files(SPLITS_PACKAGE).joinpath("splits", f"{name}.json")))


@cache
def load_split(name: str) -> Split:
    """The packaged split ``name`` (``harness/data/packaged/splits/<name>.json``)."""
    path = split_path(name)
    if not path.exists():
        known = sorted(p.stem for p in path.parent.glob("*.json")) if path.parent.exists() else []
        raise ConfigError(
            f"no split {name!r} at {path} (known: {', '.join(known) or 'none'}); "
            "build it with `python scripts/build_learning_split.py`"
        )
    d = json.loads(path.read_text())
    split = Split(
        name=d["name"],
        bench=d["bench"],
        heldout_selection=Selection(**d["heldout_selection"]),
        train={k: tuple(v) for k, v in d["train"].items()},
        heldout={k: tuple(v) for k, v in d["heldout"].items()},
        extends=d.get("extends"),
        heldout_n=d.get("heldout_n"),
        kept_train={k: tuple(v) for k, v in d["kept_train"].items()} if "kept_train" in d else None,
    )
    for ds, ids in split.train.items():
        overlap = set(ids) & set(split.heldout.get(ds, ()))
        if overlap:
            raise ConfigError(f"{path}: {len(overlap)} {ds} ids are in both train and heldout")
    return split


def build_split(name: str, bench: str, heldout: Selection) -> Split:
    """Held-out = ``heldout`` applied to each dataset of ``bench``; train = the rest, in dataset order."""
    if heldout.mode != "random":
        raise ConfigError("a held-out selection must be mode 'random' (what `harness run --sample` draws)")
    train: dict[str, tuple[str, ...]] = {}
    held: dict[str, tuple[str, ...]] = {}
    for entry, exs in load_bench(get_bench(bench)):
        picked = {e.id for e in heldout.apply(exs)}
        held[entry.dataset] = tuple(e.id for e in exs if e.id in picked)
        train[entry.dataset] = tuple(e.id for e in exs if e.id not in picked)
    return Split(name=name, bench=bench, heldout_selection=heldout, train=train, heldout=held)


def extend_heldout(base: Split, name: str, n: int, kept_train: dict[str, set[str]]) -> Split:
    """A larger held-out set that leaves alone what was trained on: per dataset, ``base``'s held-out
    questions plus the next of its train questions in the base selection's ranking
    (``sha256(f"{seed}:{id}")``, so the base's held-out part is the head of the same ranking),
    skipping ``kept_train`` (questions a recorded run trained on, which stay train), until ``n``
    are held out. Train = the rest of the base's train part, in dataset order."""
    from harness.data.benches import _rank

    seed = base.heldout_selection.seed
    train: dict[str, tuple[str, ...]] = {}
    held: dict[str, tuple[str, ...]] = {}
    for entry, exs in load_bench(get_bench(base.bench)):
        ds = entry.dataset
        old_held = set(base.heldout.get(ds, ()))
        keep = kept_train.get(ds, set())
        ranked = sorted(
            (e for e in exs if e.id not in old_held and e.id not in keep), key=lambda e: _rank(seed, e.id)
        )
        need = n - len(old_held)
        if need < 0 or need > len(ranked):
            raise ConfigError(f"split {name!r}: cannot hold out {n} {ds} questions from {base.name!r}")
        picked = old_held | {e.id for e in ranked[:need]}
        held[ds] = tuple(e.id for e in exs if e.id in picked)
        train[ds] = tuple(e.id for e in exs if e.id not in picked)
    return Split(
        name=name,
        bench=base.bench,
        heldout_selection=base.heldout_selection,
        train=train,
        heldout=held,
        extends=base.name,
        heldout_n=n,
        kept_train={d: tuple(sorted(v)) for d, v in kept_train.items()},
    )


def check_split(split: Split) -> None:
    """The stored ids are what ``build_split`` (or ``extend_heldout``) makes from the packaged data today."""
    if split.extends is not None:
        assert split.heldout_n is not None and split.kept_train is not None
        kept = {d: set(v) for d, v in split.kept_train.items()}
        fresh = extend_heldout(load_split(split.extends), split.name, split.heldout_n, kept)
    else:
        fresh = build_split(split.name, split.bench, split.heldout_selection)
    if fresh.train != split.train or fresh.heldout != split.heldout:
        raise ConfigError(
            f"split {split.name!r} no longer matches the packaged {split.bench} questions; "
            "rebuild it with `python scripts/build_learning_split.py`"
        )


def split_examples(name: str, part: Part, data_dir: Path | None = None) -> list[QAExample]:
    """The examples of one part of split ``name``, in dataset order."""
    split = load_split(name)
    out: list[QAExample] = []
    for entry, exs in load_bench(get_bench(split.bench), data_dir=data_dir):
        wanted = set(split.ids(part).get(entry.dataset, ()))
        got = [e for e in exs if e.id in wanted]
        if len(got) != len(wanted):
            raise ConfigError(
                f"split {name!r}: {len(wanted) - len(got)} {part} ids of {entry.dataset} are not in the data"
            )
        out.extend(got)
    return out


def refuse_heldout(name: str, examples: list[QAExample]) -> None:
    """Raise if any of ``examples`` is a held-out question of split ``name`` (training guard)."""
    held = load_split(name).heldout
    bad = [e.id for e in examples if e.id in set(held.get(e.dataset, ()))]
    if bad:
        raise ConfigError(
            f"{len(bad)} training questions are held out by split {name!r} (e.g. {bad[0]}); "
            "train on split_examples(name, 'train') only"
        )


@dataclass(frozen=True)
class StageQuestions:
    """Which training questions each stage of a warm-started run uses: ``sft`` the supervised
    warm-up's, ``rl`` the RL stage's; disjoint by construction."""

    sft: tuple[QAExample, ...]
    rl: tuple[QAExample, ...]


def stage_questions(examples: list[QAExample], *, seed: int, sft_n: int | None) -> StageQuestions:
    """Shuffle the training questions once with ``seed`` (``random.Random(seed).shuffle``); the
    supervised warm-up takes the first ``sft_n`` (all of them when None), RL the rest, in the
    shuffled order. Before issue 43 both stages shuffled with the same seed and RL drew from the
    front again, so its first steps re-used the warm-up's questions."""
    import random

    order = list(examples)
    random.Random(seed).shuffle(order)
    n = len(order) if sft_n is None else min(sft_n, len(order))
    return StageQuestions(sft=tuple(order[:n]), rl=tuple(order[n:]))
