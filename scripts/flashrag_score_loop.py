"""The alternative ``harness score`` is measured against: a FlashRAG-style scoring loop.

Written after RUC-NLPIR/FlashRAG@1ee5249 ``flashrag/evaluator/metrics.py`` (``ExactMatch``,
``Sub_ExactMatch``, ``F1_Score``) and ``flashrag/evaluator/utils.py`` (``normalize_answer``): each
metric walks every row and normalises the prediction and each gold alias itself, F1 counts tokens
with ``collections.Counter``. Reads JSON Lines with ``json.loads`` (``prediction``/``pred`` and
``golden_answers``), prints one JSON object with the means and, with ``--per-sample OUT``, writes
one line per row (``{"em": .., "f1": .., "cover_em": ..}``) so the values can be compared with
``harness score --per-sample``. No intervals: FlashRAG reports none.

    python scripts/flashrag_score_loop.py predictions.jsonl
    python scripts/flashrag_score_loop.py predictions.jsonl --per-sample loop.jsonl

Used by tests/bench/test_bench_score.py (the side-by-side ratio) and docs/performance.md.
"""

from __future__ import annotations

import argparse
import json
import re
import string
import sys
from collections import Counter


def normalize_answer(s: str) -> str:
    def remove_articles(text):
        return re.sub(r"\b(a|an|the)\b", " ", text)

    def white_space_fix(text):
        return " ".join(text.split())

    def remove_punc(text):
        exclude = set(string.punctuation)
        return "".join(ch for ch in text if ch not in exclude)

    def lower(text):
        return text.lower()

    return white_space_fix(remove_articles(remove_punc(lower(s))))


def exact_match(prediction: str, golden_answers: list[str]) -> float:
    normalized_prediction = normalize_answer(prediction)
    for golden_answer in golden_answers:
        if normalize_answer(golden_answer) == normalized_prediction:
            return 1.0
    return 0.0


def sub_exact_match(prediction: str, golden_answers: list[str]) -> float:
    normalized_prediction = normalize_answer(prediction)
    for golden_answer in golden_answers:
        g = normalize_answer(golden_answer)
        # the harness' cover_em edge rule (an alias that normalises to "" covers only "")
        if (g in normalized_prediction) if g else (normalized_prediction == ""):
            return 1.0
    return 0.0


def f1_score(prediction: str, golden_answers: list[str]) -> float:
    best = 0.0
    for ground_truth in golden_answers:
        normalized_prediction = normalize_answer(prediction)
        normalized_ground_truth = normalize_answer(ground_truth)
        special = ["yes", "no", "noanswer"]
        if normalized_prediction in special and normalized_prediction != normalized_ground_truth:
            continue
        if normalized_ground_truth in special and normalized_prediction != normalized_ground_truth:
            continue
        prediction_tokens = normalized_prediction.split()
        ground_truth_tokens = normalized_ground_truth.split()
        common = Counter(prediction_tokens) & Counter(ground_truth_tokens)
        num_same = sum(common.values())
        if num_same == 0:
            continue
        precision = num_same / len(prediction_tokens)
        recall = num_same / len(ground_truth_tokens)
        best = max(best, (2 * precision * recall) / (precision + recall))
    return best


METRICS = {"em": exact_match, "f1": f1_score, "cover_em": sub_exact_match}


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("file")
    ap.add_argument("--per-sample", default=None)
    args = ap.parse_args(argv)
    preds, golds = [], []
    with open(args.file, encoding="utf-8") as f:
        for line in f:
            if line.strip():
                row = json.loads(line)
                preds.append(row.get("prediction", row.get("pred")))
                golds.append(row.get("golden_answers", row.get("answers")))
    scores = {}
    for name, fn in METRICS.items():  # FlashRAG: one pass over the data per metric
        # an empty prediction scores 0 on every metric (the harness' rule)
        scores[name] = [fn(p, g) if p.strip() else 0.0 for p, g in zip(preds, golds, strict=True)]
    n = len(preds)
    print(json.dumps({"n": n, "metrics": {k: sum(v) / n for k, v in scores.items()}}))
    if args.per_sample:
        with open(args.per_sample, "w", encoding="utf-8") as out:
            for i in range(n):
                out.write(json.dumps({k: v[i] for k, v in scores.items()}) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
