"""ARENA's training bench (registered from ``methods/arena/__init__.py``)."""

from __future__ import annotations

from harness.api import Bench, train_entry

# Not packaged (only dev/test questions are): pass --data-dir with the train files.
TRAIN = Bench(
    name="arena-train",
    entries=(train_entry("hotpotqa"), train_entry("2wikimultihopqa"), train_entry("musique")),
    description="HotpotQA + 2Wiki + MuSiQue train with their own paragraphs (ARENA: 10k + 10k + 5k sampled)",
)
