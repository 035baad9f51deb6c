"""TIRESRAG-R1's training bench, R1-Searcher's training questions (registered from
``methods/tiresrag_r1/__init__.py``)."""

from __future__ import annotations

from harness.api import Bench, train_entry

# Not packaged (only dev/test questions are): pass --data-dir with the train files.
TRAIN = Bench(
    name="r1searcher-train",
    entries=(train_entry("hotpotqa"), train_entry("2wikimultihopqa")),
    description="R1-Searcher's training questions: HotpotQA + 2Wiki train (TIRESRAG-R1 §5: 4,561 + 3,587)",
)
