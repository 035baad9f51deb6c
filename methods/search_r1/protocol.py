"""Search-R1's evaluation protocol, ``searchr1`` (registered from ``methods/search_r1/__init__.py``)."""

from __future__ import annotations

from harness.api import E5_BASE_V2, CorpusRef, DenseSpec, Protocol


def searchr1() -> Protocol:
    """Search-R1's evaluation (arXiv 2503.09516 v5 §4; PeterGriffinJin/Search-R1@a14dc3a
    scripts/nq_hotpotqa/evaluate.sh): wiki-18 with e5-base-v2 Flat, top-3, max 4 turns, greedy, full
    test-else-dev, EM primary. The corpus hash comes from the user's wiki-18 file at run time
    (``harness.eval.protocol.resolve_corpus``). Metrics: the standard set (``harness.protocol.STANDARD_METRICS``)."""
    return Protocol(
        name="searchr1",
        description="Search-R1 (Jin et al. 2025) eval: wiki-18, e5-base-v2 Flat, top-3, 4 turns, greedy, EM",
        corpus=CorpusRef(id="wiki18", n_passages=21_015_324),
        retriever=DenseSpec(encoder=E5_BASE_V2, index_type="Flat"),
    )
