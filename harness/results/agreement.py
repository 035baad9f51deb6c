"""Does our number agree with a paper's? An equivalence test, not "the paper's number is inside
our interval".

At n = 10 a 95% interval spans some 50 points, so "inside our interval" holds for almost any
paper number (a copy of a paper's setting 20.6 points below it on the shared average read
"6 of 8 agree"). Agreement has to be shown, not failed to be refuted:

- **agrees**: our 95% interval lies inside ``[paper - MARGIN, paper + MARGIN]``. This is the two
  one-sided tests (TOST, Schuirmann 1987) of "ours is more than MARGIN above" and "more than
  MARGIN below" the paper's number, each at 0.025, with the interval the view shows (Wilson for
  0/1 metrics, the percentile bootstrap otherwise).
- **differs**: the paper's number lies outside our 95% interval (and "agrees" does not hold: an
  interval outside the paper's number but within the margin of it is a difference too small to
  matter, and reads "agrees").
- **inconclusive**: neither: the data cannot tell (the usual answer at n = 10, where the interval
  is wider than the margin and "agrees" is impossible).

``power``: the chance of reading "agrees" if our true value were the paper's, at this interval's
width: with half-width h (standard error ``h / 1.96``), ``2 Phi((MARGIN - h) / (h / 1.96)) - 1``,
0 when ``h >= MARGIN``. A power near 0 says the comparison cannot agree at this n, whatever the
numbers.

The margin applies to fractions (EM, F1, ...; in points: +-5). A count (retrievals per question)
has no margin: it can only differ or be inconclusive.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

from harness.metrics.bootstrap import Z95

MARGIN = 0.05
"""The equivalence margin for fraction metrics: +-5 percentage points (0.05 as a fraction)."""
AGREES, DIFFERS, INCONCLUSIVE = "agrees", "differs", "inconclusive"
VERDICTS = (AGREES, DIFFERS, INCONCLUSIVE)


@dataclass(frozen=True)
class Agreement:
    """The verdict on our number against a paper's and the power of the equivalence test."""

    verdict: str
    power: float


def _nan(x: float | None) -> bool:
    return x is None or (isinstance(x, float) and math.isnan(x))


def power(lo: float, hi: float, margin: float = MARGIN) -> float:
    """The chance of "agrees" when our true value equals the paper's (module docstring)."""
    half = (hi - lo) / 2
    if _nan(half) or half >= margin:
        return 0.0
    if half <= 0:
        return 1.0
    z = (margin - half) / (half / Z95)
    return float(2 * (0.5 * (1 + math.erf(z / math.sqrt(2)))) - 1)


def agreement(reported: float, lo: float, hi: float, *, fraction: bool = True) -> Agreement | None:
    """Our 95% interval ``[lo, hi]`` against the paper's number; None when either is missing.
    ``fraction``: the metric is a fraction (the margin applies); else a count."""
    if _nan(reported) or _nan(lo) or _nan(hi):
        return None
    if fraction and reported - MARGIN <= lo and hi <= reported + MARGIN:
        return Agreement(AGREES, power(lo, hi))
    pw = power(lo, hi) if fraction else math.nan
    if not lo <= reported <= hi:
        return Agreement(DIFFERS, pw)
    return Agreement(INCONCLUSIVE, pw)


__all__ = ["AGREES", "DIFFERS", "INCONCLUSIVE", "MARGIN", "VERDICTS", "Agreement", "agreement", "power"]
