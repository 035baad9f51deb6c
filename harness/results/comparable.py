"""When two numbers may be compared: the one definition every view, export and command uses.

Two of our scores compare only under the same protocol id (which pins corpus, retriever, top-k,
prompt, decoding, sample and metric versions) and the same metric. Anything else gets no
difference, only both numbers and the reasons.
"""

from __future__ import annotations


def ours_differs(protocol_a: str, protocol_b: str, metric_a: str = "", metric_b: str = "") -> list[str]:
    """Why two of our scores do not compare (empty: they do): ``protocol X vs Y``, ``metric X vs Y``."""
    out = []
    if protocol_a != protocol_b:
        out.append(f"protocol {protocol_a} vs {protocol_b}")
    if metric_a != metric_b:
        out.append(f"metric {metric_a} vs {metric_b}")
    return out


__all__ = ["ours_differs"]
