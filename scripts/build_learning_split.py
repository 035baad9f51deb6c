"""Build the fixed train / held-out split of the learning run (deterministic).

    python scripts/build_learning_split.py            # writes harness/data/packaged/splits/learning.json
    python scripts/build_learning_split.py --check    # exit 1 if a stored file differs
    python scripts/build_learning_split.py --only learning-400
    python scripts/build_learning_split.py --only learning-multihop

Three splits. ``learning-multihop`` (issue 57): 134 held out of each dataset of ``mini-multihop``
(402), the five seed papers' learning recipes train on the rest. ``learning``: the recorded run's (100 held out). ``learning-400`` (issue 43, fixed
before any run of it): 400 held out per ``extend_heldout``: ``learning``'s 100 plus the next 300
train questions of the same ranking, skipping the 160 the recorded warm-up trained on
(``cpu-sft-rl``'s ``sft.n_questions`` of its seed-0 shuffle of ``learning``'s train part, which also
holds every question the recorded RL steps drew), so nothing any recorded run trained on is held
out; its train part is the remaining 600.

The held-out part is ``Selection(mode="random", n=HELDOUT_N, seed=SEED)`` of each dataset of
``BENCH`` (ranked by sha256 of seed and id, so it depends on neither row order nor Python
version); the train part is every other question. ``harness run --bench mini-singlehop --sample
HELDOUT_N --seed SEED`` evaluates exactly the held-out part (harness/rl/split.py).
"""

from __future__ import annotations

import argparse
import random
import sys

from harness.data.benches import Selection
from harness.rl.split import Split, build_split, extend_heldout, split_examples, split_path

NAME = "learning"
BENCH = "mini-singlehop"  # PopQA questions whose gold paragraphs are in the closed corpus
HELDOUT_N = 100
SEED = 20
EXTENDED = "learning-400"
EXTENDED_N = 400
RECORDED_SFT_N, RECORDED_SFT_SEED = 160, 0
# issue 57: the multi-hop split the five seed papers' learning recipes train and are held out on
# (fixed before any run of it): 134 held out of each mini-multihop dataset (402 in all: HotpotQA,
# 2WikiMultiHopQA, MuSiQue, each question's gold paragraphs in the closed corpus), the rest train.
MULTIHOP = "learning-multihop"
MULTIHOP_BENCH = "mini-multihop"
MULTIHOP_N = 134  # methods/search_r1/recipes.yaml cpu-sft-rl: sft.n_questions, seed


def recorded_sft_questions() -> dict[str, set[str]]:
    """The questions the recorded warm-up (results/learning-2026-11-26.json's SFT run) was built
    from: the first 160 of ``random.Random(0).shuffle`` of ``learning``'s train part, as
    ``harness sft`` drew them before issue 43."""
    order = split_examples(NAME, "train")
    random.Random(RECORDED_SFT_SEED).shuffle(order)
    out: dict[str, set[str]] = {}
    for e in order[:RECORDED_SFT_N]:
        out.setdefault(e.dataset, set()).add(e.id)
    return out


def build_all() -> list[Split]:
    base = build_split(NAME, BENCH, Selection(mode="random", n=HELDOUT_N, seed=SEED))
    return [
        base,
        extend_heldout(base, EXTENDED, EXTENDED_N, recorded_sft_questions()),
        build_split(MULTIHOP, MULTIHOP_BENCH, Selection(mode="random", n=MULTIHOP_N, seed=SEED)),
    ]


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--check", action="store_true", help="compare with the stored files instead of writing")
    ap.add_argument("--only", choices=[NAME, EXTENDED, MULTIHOP], default=None, help="one split only")
    args = ap.parse_args(argv)
    bad = 0
    for split in build_all():
        if args.only is not None and split.name != args.only:
            continue
        text = split.to_json()
        path = split_path(split.name)
        if args.check:
            same = path.exists() and path.read_text() == text
            print(f"{path}: {'up to date' if same else 'DIFFERS (rebuild)'}")
            bad += not same
            continue
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text)
        n_train = sum(map(len, split.train.values()))
        n_held = sum(map(len, split.heldout.values()))
        print(f"wrote {path}: {n_train} train, {n_held} held-out questions of {split.bench}")
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())
