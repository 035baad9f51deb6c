"""Write ``results/regress/recorded.json``: the recorded model outputs the regression gate's
deterministic layers replay (``harness regress``, docs/regression-gate.md).

Taken from a committed showcase database: for the first ``--per-dataset`` questions of each
dataset (by position), every method's model outputs in turn order (``generate`` and ``llm_call``
turns); a sample of the search queries the models issued; and every stored (prediction, gold
answers) pair, for the metric check on fixed predictions. Run once; the file is committed.

    python scripts/regress_record_outputs.py --db results/showcase-2026-11-24.duckdb
"""

from __future__ import annotations

import argparse
import json
from pathlib import Path

import duckdb


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--db", type=Path, default=Path("results/showcase-2026-11-24.duckdb"))
    ap.add_argument("--out", type=Path, default=Path("results/regress/recorded.json"))
    ap.add_argument("--per-dataset", type=int, default=2)
    ap.add_argument("--queries", type=int, default=40)
    args = ap.parse_args()
    c = duckdb.connect(str(args.db), read_only=True)
    runs = dict(
        c.execute("select method, run_id from runs where status = 'complete' order by method").fetchall()
    )
    first = next(iter(runs.values()))
    slice_rows = c.execute(
        "select dataset, sample_id from (select dataset, sample_id, row_number() over "
        "(partition by dataset order by position) as r from samples where run_id = ?) "
        "where r <= ? order by dataset, r",
        [first, args.per_dataset],
    ).fetchall()
    outputs: dict[str, dict[str, list[str]]] = {}
    for method, run_id in runs.items():
        per: dict[str, list[str]] = {}
        for dataset, sample_id in slice_rows:
            texts = c.execute(
                "select text from turns where run_id = ? and dataset = ? and sample_id = ? "
                "and kind in ('generate', 'llm_call') order by turn_index",
                [run_id, dataset, sample_id],
            ).fetchall()
            per[f"{dataset}/{sample_id}"] = [t or "" for (t,) in texts]
        outputs[method] = per
    queries = [
        q
        for (q,) in c.execute(
            "select distinct t.query from turns t join samples s using (run_id, dataset, sample_id) "
            "where t.kind = 'retrieve' and t.query is not null and t.query <> s.question order by t.query"
        ).fetchall()
    ]
    step = max(1, len(queries) // args.queries)
    predictions = sorted(
        {(p or "", tuple(a)) for p, a in c.execute("select prediction, answers from samples").fetchall()}
    )
    doc = {
        "source": args.db.as_posix() if not args.db.is_absolute() else args.db.name,
        "note": "model outputs of qwen2.5-coder-1.5b-instruct (greedy) recorded by the showcase run; "
        "regenerate with scripts/regress_record_outputs.py",
        "slice": [f"{d}/{s}" for d, s in slice_rows],
        "outputs": outputs,
        "search_queries": queries[::step][: args.queries],
        "predictions": [{"prediction": p, "answers": list(a)} for p, a in predictions],
    }
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps(doc, indent=1, ensure_ascii=False) + "\n")
    print(
        f"wrote {args.out}: {len(slice_rows)} questions x {len(outputs)} methods, "
        f"{len(doc['search_queries'])} queries, {len(predictions)} predictions"
    )


if __name__ == "__main__":
    main()
