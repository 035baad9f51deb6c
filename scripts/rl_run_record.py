"""The committed record of a long RL run (issue 43): every step's logged metrics and every held-out
evaluation the trainer made during the run, in one JSON file under ``results/``, and the tables
``docs/training.md`` prints from it (a test regenerates them).

    python scripts/rl_run_record.py build --out-dir runs/long --db runs/long.duckdb \\
        --record results/long-run-2026-11-28.json --about "..." --command "harness train ..." \\
        --resumed-from train-search_r1-20261128-014358-fac586
    python scripts/rl_run_record.py tables results/long-run-2026-11-28.json --every 5

``build`` reads the run named by ``<out-dir>/train-run.json`` from ``--db`` (its ``train_steps``,
held-out metrics left out: :func:`harness.rl.learning_record.train_curve`), after the runs it
resumed (``--resumed-from``, oldest first: each one's steps up to where the next resumed;
``segments`` in the record says which run logged which steps) and the held-out
evaluations the trainer wrote (``<out-dir>/heldout/step-<N>.json``:
:func:`harness.rl.heldout_eval.heldout_at_step`), labelled ``step N``; each later one is paired
with step 0. The record has the held-out record's shape (``split``, ``evaluations``, ``pairs``:
:func:`harness.rl.heldout_eval.record_tables`) plus ``curves.rl``. Paths in it are relative.

``tables`` prints the held-out tables, then the per-step curve (every ``--every`` steps and the
last; ``harness.rl.learning_record.rl_curve_table``).
"""

from __future__ import annotations

import argparse
import json
import re
import sys
from pathlib import Path


def build(args: argparse.Namespace) -> int:
    from harness.results.lifecycle import git_commit
    from harness.rl.learning_record import stitched_curve, train_curve

    run_id = json.loads((args.out_dir / "train-run.json").read_text())["run_id"]
    run_ids = [*args.resumed_from, run_id]
    curve, segments = stitched_curve([train_curve(args.db, r) for r in run_ids])
    evaluations = []
    # whole evaluations only: step-N.qLO-HI.json are parts, in step-N.json once they cover the set
    whole = [f for f in (args.out_dir / "heldout").glob("step-*.json") if re.fullmatch(r"step-\d+", f.stem)]
    for f in sorted(whole, key=lambda p: int(p.stem.removeprefix("step-"))):
        evaluations.append(json.loads(f.read_text()))
    labels = [e["label"] for e in evaluations]
    record = {
        "schema": 1,
        "about": args.about,
        "commands": args.command,
        "commit": git_commit(),  # the code this process loaded, +dirty when it differed from HEAD
        "run_id": run_id,
        # which run logged which steps: a --resume continues a run under a new row (the row of the
        # one that died is marked interrupted), from its last checkpoint
        "segments": [{"run_id": r, "steps": seg} for r, seg in zip(run_ids, segments, strict=True)],
        "split": args.split,
        "evaluations": evaluations,
        "pairs": [[labels[0], b] for b in labels[1:]],
        "curves": {"rl": curve},
    }
    text = json.dumps(record, indent=1, ensure_ascii=False) + "\n"
    if "/tmp/" in text or str(Path.cwd()) in text:
        raise SystemExit(
            f"{args.record}: the record would hold an absolute path; run from the repository root"
        )
    args.record.write_text(text)
    print(
        f"{args.record}: {len(curve['step'])} steps, {len(evaluations)} held-out evaluations", file=sys.stderr
    )
    return 0


def tables_of(record: dict, every: int) -> str:
    """The markdown docs print from a long-run record: its held-out tables, then its curve at
    every ``every``-th step and the last."""
    from harness.rl.heldout_eval import record_tables
    from harness.rl.learning_record import rl_curve_table

    curve = record["curves"]["rl"]
    n = len(curve["step"])
    keep = [i for i, s in enumerate(curve["step"]) if s == 1 or s % every == 0 or i == n - 1]
    thin = {k: [v[i] for i in keep] for k, v in curve.items()}
    parts = [record_tables(record)] if record["evaluations"] else []
    return "\n\n".join([*parts, rl_curve_table(thin)])


def tables(args: argparse.Namespace) -> int:
    print(tables_of(json.loads(args.record.read_text()), args.every))
    return 0


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    sub = ap.add_subparsers(dest="cmd", required=True)
    b = sub.add_parser("build", help="write the record from the run's folder and database")
    b.add_argument("--out-dir", type=Path, required=True, help="the run's --out (train-run.json, heldout/)")
    b.add_argument("--db", type=Path, required=True, help="the run's --db")
    b.add_argument("--record", type=Path, required=True, help="the JSON file to write (under results/)")
    b.add_argument("--split", default="learning-400", help="the recipe's split (default learning-400)")
    b.add_argument("--about", required=True, help="one paragraph on what was run")
    b.add_argument("--command", action="append", default=[], help="a command that made the run (repeat)")
    b.add_argument(
        "--resumed-from",
        action="append",
        default=[],
        metavar="RUN_ID",
        help="an earlier run whose checkpoint this one resumed (repeat, oldest first)",
    )
    b.set_defaults(func=build)
    t = sub.add_parser("tables", help="print the markdown tables of a record")
    t.add_argument("record", type=Path)
    t.add_argument("--every", type=int, default=5, help="the curve's rows: every N steps and the last")
    t.set_defaults(func=tables)
    args = ap.parse_args(argv)
    return int(args.func(args))


if __name__ == "__main__":
    sys.exit(main())
