"""Build the fixed train / held-out split of the learning run (deterministic).

    python scripts/build_learning_split.py            # writes harness/data/packaged/splits/learning.json
    python scripts/build_learning_split.py --check    # exit 1 if the stored file differs

The held-out part is ``Selection(mode="random", n=HELDOUT_N, seed=SEED)`` of each dataset of
``BENCH`` (ranked by sha256 of seed and id, so it depends on neither row order nor Python
version); the train part is every other question. ``harness run --bench mini-singlehop --sample
HELDOUT_N --seed SEED`` evaluates exactly the held-out part (harness/rl/split.py).
"""

from __future__ import annotations

import argparse
import sys

from harness.data.benches import Selection
from harness.rl.split import build_split, split_path

NAME = "learning"
BENCH = "mini-singlehop"  # PopQA questions whose gold paragraphs are in the closed corpus
HELDOUT_N = 100
SEED = 20


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--check", action="store_true", help="compare with the stored file instead of writing")
    args = ap.parse_args(argv)
    split = build_split(NAME, BENCH, Selection(mode="random", n=HELDOUT_N, seed=SEED))
    text = split.to_json()
    path = split_path(NAME)
    if args.check:
        same = path.exists() and path.read_text() == text
        print(f"{path}: {'up to date' if same else 'DIFFERS (rebuild)'}")
        return 0 if same else 1
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text)
    n_train = sum(map(len, split.train.values()))
    n_held = sum(map(len, split.heldout.values()))
    print(f"wrote {path}: {n_train} train, {n_held} held-out questions of {BENCH}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
