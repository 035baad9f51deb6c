"""One way to refuse a name that is not among the known ones: one line, the near misses first.

``harness export --view cost --dataset hotpot`` used to print an empty table; every filter value
(dataset, method, metric, view, paper, bench, protocol) is now checked against what exists with
:func:`check_choice`, which names the close matches (:func:`difflib.get_close_matches`) and then
every known value."""

from __future__ import annotations

import difflib
from collections.abc import Iterable

from harness.errors import ConfigError


def _key(name: str) -> str:
    return name.strip().lower().replace("-", "_")


def did_you_mean(value: str, known: Iterable[str]) -> str:
    """`` (did you mean a or b?)`` for the values of ``known`` close to ``value`` (case and ``-`` /
    ``_`` ignored), else the empty string."""
    by_key = {_key(k): k for k in known}
    close = difflib.get_close_matches(_key(value), list(by_key), n=2, cutoff=0.6)
    if not close:  # a prefix is a near miss too (hotpot -> hotpotqa)
        close = [k for k in by_key if k.startswith(_key(value))][:2] if value.strip() else []
    return f" (did you mean {' or '.join(by_key[c] for c in close)}?)" if close else ""


def unknown(what: str, value: str, known: Iterable[str]) -> ConfigError:
    """The one-line error for ``value`` not being a known ``what``."""
    names = sorted(set(known))
    return ConfigError(
        f"unknown {what} {value!r}{did_you_mean(value, names)}; known: {', '.join(names) or '(none)'}"
    )


def check_choice(what: str, value: str, known: Iterable[str]) -> str:
    """``value`` when it is one of ``known``; else :func:`unknown`'s error."""
    names = list(known)
    if value in names:
        return value
    raise unknown(what, value, names)
