"""Answer metrics: one implementation each, max over gold aliases (as RUC-NLPIR/FlashRAG@1ee5249
``flashrag/evaluator/metrics.py`` and PeterGriffinJin/Search-R1@a14dc3a ``verl/utils/reward_score/qa_em.py``).

Every function takes the prediction and the list of gold aliases and returns a float in [0, 1]:

- ``exact_match``: ``max_g 1[norm(pred) == norm(g)]`` (SQuAD normalisation).
- ``f1``: token F1 with the HotpotQA rule (``hotpot_evaluate_v1.py``, FlashRAG, ReSearch,
  R1-Searcher): if either normalised side is ``yes``, ``no`` or ``noanswer`` and the two differ, 0.
  Max over golds of the F1 itself (FlashRAG maxes P and R separately; we report only F1).
- ``f1_squad``: the same token F1 without that rule (SQuAD, BERGEN, Search-o1), for compatibility:
  prediction "no" against gold "no way" scores 0 under ``f1`` and 2/3 under ``f1_squad``.
- ``cover_em``: the normalised gold is a **character substring** of the normalised prediction
  (FlashRAG "acc", Search-R1 ``subem_check``, BERGEN "Match"). There is no word-boundary check, so
  gold "art" is covered by "party" (score 1). Search-o1's "acc" would give 0 there because it skips
  golds with no token overlap; we do not copy that gate.
- ``cover_em_tokens``: R1-Searcher's reported "Cover-EM" (``cover_exact_match_score_1``): every
  token of the gold (R1-Searcher normalisation) is among the prediction's tokens, any order.
- ``acc_substring_lower``: R-Search's reported "Acc" (QingFei1/R-Search@ecba08d
  ``src/eval/utils.py:18-30`` ``acc_score``): the gold, only lower-cased, is a substring of the
  prediction, only lower-cased; no punctuation, article or whitespace normalisation, so gold
  "U.S." is not covered by "us" (``cover_em`` covers it).

Edge cases, decided once here:

- An empty golds list raises ``ValueError`` (data loaders reject such rows earlier).
- A prediction that is empty or only whitespace scores 0 on every metric (the model gave no answer).
- A gold alias that normalises to the empty string (real HotpotQA answers: the bands "!!!" and
  "The The"): ``exact_match`` compares normally (a prediction that also normalises to "" scores 1);
  ``f1`` and ``f1_squad`` give 0, as in every upstream implementation (no common tokens);
  ``cover_em`` and ``cover_em_tokens`` count it as covered only when the prediction also
  normalises to "". Upstream ``"" in pred`` is always true, which would mark every prediction
  correct for such a question; R1-Searcher's ``split(" ")`` already behaves like our rule.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

from harness.metrics.normalize import (
    normalize_answer,
    normalize_answer_r1searcher,
    normalize_many,
    normalize_many_r1searcher,
)

SPECIAL_ANSWERS = frozenset({"yes", "no", "noanswer"})


_MEMO_LIMIT = 1 << 17  # distinct strings a GoldMemo keeps before it starts again (bounded memory)


class GoldMemo:
    """The normalisations of gold aliases, kept across rows: a scorer of many rows (``harness
    score``, a run) normalises each distinct gold string once. Bounded: past ``_MEMO_LIMIT``
    distinct strings a table starts empty again, so a file of millions of rows never holds them all."""

    __slots__ = ("r1", "squad")

    def __init__(self) -> None:
        self.squad: dict[str, str] = {}
        self.r1: dict[str, list[str]] = {}

    def squad_norm(self, gold: str) -> str:
        v = self.squad.get(gold)
        if v is None:
            if len(self.squad) >= _MEMO_LIMIT:
                self.squad.clear()
            v = self.squad[gold] = normalize_answer(gold)
        return v

    def fill(self, golds: list[str], *, squad: bool, r1: bool) -> None:
        """Normalise the golds not yet kept, all at once (:func:`normalize_many`)."""
        for table, many, wanted in (
            (self.squad, normalize_many, squad),
            (self.r1, normalize_many_r1searcher, r1),
        ):
            if not wanted:
                continue
            missing = list(dict.fromkeys(g for g in golds if g not in table))
            if not missing:
                continue
            if len(table) + len(missing) > _MEMO_LIMIT:
                table.clear()  # and every gold of this block is normalised again
                missing = list(dict.fromkeys(golds))
            values: list[Any] = many(missing)
            if table is self.r1:
                values = [v.split(" ") for v in values]
            table.update(zip(missing, values, strict=True))

    def r1_tokens(self, gold: str) -> list[str]:
        v = self.r1.get(gold)
        if v is None:
            if len(self.r1) >= _MEMO_LIMIT:
                self.r1.clear()
            v = self.r1[gold] = normalize_answer_r1searcher(gold).split(" ")
        return v


class AnswerPair:
    """A prediction and its gold aliases, with each normalisation computed once, on first use.

    Every answer metric is a function of an ``AnswerPair``; the public functions below build one,
    and ``score_answer`` builds one per sample and shares it across metrics. ``memo`` (a
    :class:`GoldMemo`) shares the golds' normalisations across pairs.

    The derived values (``pred_norm``, ``golds_norm``, ``token_f1s``, ``pred_tokens_r1``,
    ``golds_tokens_r1``) are slots filled on first read by ``__getattr__`` (called only while a slot
    is empty), so a later read is a plain slot read. Not ``functools.cached_property``: Python
    3.11's takes a lock on every first access, a fifth of ``harness score``'s time on 100k rows.
    """

    __slots__ = (
        "_memo",
        "empty",
        "golds",
        "golds_norm",
        "golds_tokens_r1",
        "pred_norm",
        "pred_tokens_r1",
        "prediction",
        "token_f1s",
    )

    pred_norm: str
    golds_norm: list[str]
    token_f1s: list[float]
    """Token F1 of the prediction against each gold (no yes/no rule), in gold order."""
    pred_tokens_r1: frozenset[str]
    golds_tokens_r1: list[list[str]]

    def __init__(self, prediction: str, golds: Sequence[str], memo: GoldMemo | None = None):
        if isinstance(golds, str):
            raise TypeError("golds must be a list of gold aliases, not a single string")
        if len(golds) == 0:
            raise ValueError("golds is empty: every question needs at least one gold answer")
        self.prediction = prediction
        self.golds = golds
        self.empty = not prediction.strip()
        self._memo = memo

    def __getattr__(self, name: str) -> Any:
        if name == "pred_norm":
            v: Any = normalize_answer(self.prediction)
        elif name == "golds_norm":
            memo = self._memo
            if memo is None:
                v = [normalize_answer(g) for g in self.golds]
            else:
                v = [memo.squad_norm(g) for g in self.golds]
        elif name == "token_f1s":
            v = _token_f1s(self.pred_norm, self.golds_norm)
        elif name == "pred_tokens_r1":
            v = frozenset(normalize_answer_r1searcher(self.prediction).split(" "))
        elif name == "golds_tokens_r1":
            memo = self._memo
            if memo is None:
                v = [normalize_answer_r1searcher(g).split(" ") for g in self.golds]
            else:
                v = [memo.r1_tokens(g) for g in self.golds]
        else:
            raise AttributeError(f"{type(self).__name__!r} object has no attribute {name!r}")
        setattr(self, name, v)
        return v


def _token_f1s(pred_norm: str, golds_norm: list[str]) -> list[float]:
    """Token F1 of a normalised prediction against each normalised gold, in gold order."""
    pred_counts: dict[str, int] = {}
    n_pred = 0
    for t in pred_norm.split():
        pred_counts[t] = pred_counts.get(t, 0) + 1
        n_pred += 1
    return [_token_f1(pred_counts, n_pred, g.split()) for g in golds_norm]


def _token_f1(pred_counts: dict[str, int], n_pred: int, gold_tokens: list[str]) -> float:
    """SQuAD token F1 given the prediction's token counts; the multiset overlap is counted directly
    (equal to ``sum((Counter(pred) & Counter(gold)).values())``, several times faster)."""
    if n_pred == 0 or not gold_tokens:
        return 0.0
    n_same = 0
    used: dict[str, int] = {}
    for t in gold_tokens:
        c = pred_counts.get(t, 0)
        if c:
            u = used.get(t, 0)
            if u < c:
                used[t] = u + 1
                n_same += 1
    if n_same == 0:
        return 0.0
    precision = n_same / n_pred
    recall = n_same / len(gold_tokens)
    return 2 * precision * recall / (precision + recall)


def em_pair(pair: AnswerPair) -> float:
    if pair.empty:
        return 0.0
    return 1.0 if pair.pred_norm in pair.golds_norm else 0.0


def f1_pair(pair: AnswerPair) -> float:
    if pair.empty:
        return 0.0
    p = pair.pred_norm
    p_special = p in SPECIAL_ANSWERS
    best = 0.0
    for g, score in zip(pair.golds_norm, pair.token_f1s, strict=True):
        if p != g and (p_special or g in SPECIAL_ANSWERS):
            continue  # HotpotQA rule: yes/no/noanswer must match exactly
        if score > best:
            best = score
    return best


def f1_squad_pair(pair: AnswerPair) -> float:
    if pair.empty:
        return 0.0
    return max(pair.token_f1s)


def cover_em_pair(pair: AnswerPair) -> float:
    if pair.empty:
        return 0.0
    p = pair.pred_norm
    for g in pair.golds_norm:
        if (g in p) if g else (p == ""):
            return 1.0
    return 0.0


def cover_em_tokens_pair(pair: AnswerPair) -> float:
    if pair.empty:
        return 0.0
    pred_tokens = pair.pred_tokens_r1
    for gold_tokens in pair.golds_tokens_r1:
        if pred_tokens.issuperset(gold_tokens):  # every gold token is a prediction token
            return 1.0
    return 0.0


def acc_substring_lower_pair(pair: AnswerPair) -> float:
    """Upstream ``any(ans.lower() in pred.lower() for ans in answer)``. An empty prediction scores
    0 (the rule above), so an empty or whitespace-only gold alias never counts (upstream ``"" in
    pred`` covers every prediction)."""
    if pair.empty:
        return 0.0
    p = pair.prediction.lower()
    return 1.0 if any(g.strip() and g.lower() in p for g in pair.golds) else 0.0


def exact_match(pred: str, golds: Sequence[str]) -> float:
    """1.0 if the SQuAD-normalised prediction equals a normalised gold alias, else 0.0."""
    return em_pair(AnswerPair(pred, golds))


def f1(pred: str, golds: Sequence[str]) -> float:
    """Token F1 with the HotpotQA yes/no/noanswer rule, max over gold aliases."""
    return f1_pair(AnswerPair(pred, golds))


def f1_squad(pred: str, golds: Sequence[str]) -> float:
    """Token F1 without the yes/no/noanswer rule (SQuAD, BERGEN, Search-o1), max over aliases."""
    return f1_squad_pair(AnswerPair(pred, golds))


def cover_em(pred: str, golds: Sequence[str]) -> float:
    """1.0 if a normalised gold is a character substring of the normalised prediction.

    Substring, not word match: ``cover_em("party", ["art"]) == 1.0``.
    """
    return cover_em_pair(AnswerPair(pred, golds))


def cover_em_tokens(pred: str, golds: Sequence[str]) -> float:
    """1.0 if every token of a gold (R1-Searcher normalisation) is among the prediction's tokens."""
    return cover_em_tokens_pair(AnswerPair(pred, golds))


def acc_substring_lower(pred: str, golds: Sequence[str]) -> float:
    """1.0 if a gold alias, lower-cased, is a substring of the lower-cased prediction (R-Search's
    "Acc"; no other normalisation): ``acc_substring_lower("The U.S. Army", ["u.s."]) == 1.0``."""
    return acc_substring_lower_pair(AnswerPair(pred, golds))


# The derived values of an AnswerPair each answer metric reads; :func:`score_many` fills them for a
# block of rows at once. A metric not listed here reads them lazily (``AnswerPair.__getattr__``).
_NEEDS: dict[Callable[[AnswerPair], float], tuple[str, ...]] = {
    em_pair: ("squad",),
    f1_pair: ("squad", "f1s"),
    f1_squad_pair: ("squad", "f1s"),
    cover_em_pair: ("squad",),
    cover_em_tokens_pair: ("r1",),
    acc_substring_lower_pair: (),
}


def score_many(
    preds: Sequence[str],
    golds: Sequence[Sequence[str]],
    fns: Sequence[Callable[[AnswerPair], float]],
    memo: GoldMemo | None = None,
) -> list[list[float]]:
    """``[[fn(AnswerPair(p, g)) for fn in fns] for p, g in zip(preds, golds)]``, faster: the
    predictions are normalised a block at a time (:func:`normalize_many`), each distinct gold once
    (``memo``, kept across calls), and each pair gets its values filled in plain code instead of
    on first read. The metrics themselves are the same functions."""
    if len(preds) != len(golds):
        raise ValueError(f"{len(preds)} predictions but {len(golds)} gold lists")
    memo = GoldMemo() if memo is None else memo
    needs = {k for fn in fns for k in _NEEDS.get(fn, ())}
    squad, f1s, r1 = "squad" in needs, "f1s" in needs, "r1" in needs
    if squad or r1:
        memo.fill([g for gs in golds for g in gs], squad=squad, r1=r1)
    pred_norms = normalize_many(list(preds)) if squad else None
    pred_r1 = normalize_many_r1searcher(list(preds)) if r1 else None
    sq, r1t = memo.squad, memo.r1
    new = AnswerPair.__new__
    out = []
    for i, pred in enumerate(preds):
        gs = golds[i]
        if isinstance(gs, str) or not gs:
            AnswerPair(pred, gs)  # the one-line TypeError / ValueError
        pair = new(AnswerPair)
        pair.prediction = pred
        pair.golds = gs
        pair.empty = not pred.strip()
        pair._memo = memo
        if pred_norms is not None:
            pn = pair.pred_norm = pred_norms[i]
            gn = pair.golds_norm = [sq[g] for g in gs]
            if f1s:
                pair.token_f1s = _token_f1s(pn, gn)
        if pred_r1 is not None:
            pair.pred_tokens_r1 = frozenset(pred_r1[i].split(" "))
            pair.golds_tokens_r1 = [r1t[g] for g in gs]
        out.append([fn(pair) for fn in fns])
    return out
