"""Answer normalisation, exactly as the field does it (RUC-NLPIR/FlashRAG@1ee5249
``flashrag/evaluator/utils.py`` ``normalize_answer``).

``normalize_answer`` is the SQuAD v1.1 function that FlashRAG, Search-R1, BERGEN, Search-o1,
ReSearch and ZeroSearch all use, applied left to right:

1. lower-case;
2. **delete** every character of ASCII ``string.punctuation`` (curly quotes, en dashes and other
   non-ASCII punctuation survive);
3. replace the whole words ``a``, ``an``, ``the`` (``re`` ``\\b(a|an|the)\\b``) by a space;
4. collapse whitespace (``" ".join(s.split())``).

``normalize_answer_r1searcher`` is R1-Searcher's variant (``evaluation/metric_calc_rule.py`` in
SsmallSong/R1-Searcher), used only by ``cover_em_tokens``:

0. ``bool_mapping``: the whole string ``"True"`` becomes ``"yes"`` and ``"False"`` becomes ``"no"``
   (exact, case-sensitive comparison, before anything else);
1. ``_`` becomes a space; lower-case;
2. every character of ``string.punctuation`` plus ‘ ’ ´ ` is **replaced by a space** (not deleted);
3. articles and whitespace as above.

So ``"U.S."`` is ``"us"`` under SQuAD but ``"u s"`` under R1-Searcher. Some later copies of
R1-Searcher's file also strip commas inside numbers ("1,000" -> "1000"); the released evaluation
script does not, and neither do we.
"""

from __future__ import annotations

import re
import string
from typing import Any

_ARTICLES = re.compile(r"\b(a|an|the)\b")
_DELETE_PUNCT = str.maketrans("", "", string.punctuation)
# R1-Searcher adds the left/right single quotation marks, the acute accent and the backtick
# (the backtick is already ASCII punctuation).
R1SEARCHER_EXTRA_PUNCT = "\u2018\u2019\u00b4`"
_SPACE_PUNCT = str.maketrans({ch: " " for ch in string.punctuation + R1SEARCHER_EXTRA_PUNCT})


def normalize_answer(s: str) -> str:
    """SQuAD v1.1 normalisation: lower, delete ASCII punctuation, drop articles, fix whitespace."""
    return " ".join(_ARTICLES.sub(" ", s.lower().translate(_DELETE_PUNCT)).split())


def r1searcher_bool_mapping(s: str) -> str:
    """R1-Searcher's ``bool_mapping``: exactly ``"True"`` -> ``"yes"``, ``"False"`` -> ``"no"``."""
    if s == "True":
        return "yes"
    if s == "False":
        return "no"
    return s


def normalize_answer_r1searcher(s: str) -> str:
    """R1-Searcher normalisation: True/False -> yes/no, punctuation (with ‘ ’ ´ `) and ``_`` -> space."""
    s = r1searcher_bool_mapping(s)
    return " ".join(_ARTICLES.sub(" ", s.lower().translate(_SPACE_PUNCT)).split())


_SEP = "\x00"  # joins a block of strings: not cased, not case-ignorable, not a word character, not whitespace


def _many(strings: list[str], table: dict[int, Any]) -> list[str]:
    """``" ".join(articles(s.lower().translate(table)).split())`` for each string, computed on the
    strings joined by ``_SEP`` so that lower-casing, translation and the article regex run once per
    block instead of once per string (the result is the same: ``_SEP`` behaves at every join as a
    string's start and end do, final-sigma lower-casing and ``\\b`` included). A block where a
    string itself contains ``_SEP`` is done one string at a time."""
    out: list[str] = []
    for i in range(0, len(strings), 4096):
        block = strings[i : i + 4096]
        joined = _SEP.join(block)
        if joined.count(_SEP) != len(block) - 1:
            out.extend(" ".join(_ARTICLES.sub(" ", s.lower().translate(table)).split()) for s in block)
            continue
        parts = _ARTICLES.sub(" ", joined.lower().translate(table)).split(_SEP)
        out.extend([" ".join(p.split()) for p in parts])
    return out


def normalize_many(strings: list[str]) -> list[str]:
    """``[normalize_answer(s) for s in strings]``, faster on many strings."""
    return _many(strings, _DELETE_PUNCT)


def normalize_many_r1searcher(strings: list[str]) -> list[str]:
    """``[normalize_answer_r1searcher(s) for s in strings]``, faster on many strings."""
    return _many([r1searcher_bool_mapping(s) for s in strings], _SPACE_PUNCT)
