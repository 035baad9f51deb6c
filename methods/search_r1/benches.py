"""Search-R1's training bench (registered from ``methods/search_r1/__init__.py``)."""

from __future__ import annotations

from harness.api import Bench, train_entry

# Not packaged (only dev/test questions are): pass --data-dir with the train files.
TRAIN = Bench(
    name="searchr1-train",
    entries=(train_entry("nq"), train_entry("hotpotqa")),
    description="NQ + HotpotQA train, merged (Search-R1 §4; Eval-RAR trains on the same)",
)
