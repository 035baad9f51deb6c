"""Write a learning run's committed record (results/*.json) from its databases, or print its tables.

    python scripts/learning_record.py build --out results/learning-2026-11-26.json \\
        --method search_r1 --recipe cpu-sft-grpo --train-db runs/train.duckdb \\
        --eval "untrained=runs/eval-untrained.duckdb:learning untrained" \\
        --eval "SFT=runs/eval-sft.duckdb:learning sft" \\
        --eval "SFT+RL step 10@10=runs/eval-rl-step-10.duckdb:learning sft+rl step 10" \\
        --eval "SFT+RL@30=runs/eval-sft+rl.duckdb:learning sft+rl"
    python scripts/learning_record.py tables results/learning-2026-11-26.json   # the docs' markdown

``--eval LABEL[@RL_STEPS]=DB:RUN_LABEL`` names one held-out evaluation (``harness run ... --label
RUN_LABEL --db DB``); ``@RL_STEPS`` marks an RL checkpoint and the RL steps behind it. The
template-majority baseline is computed from the split's training part and added as a row. The SFT
and RL training runs are the newest runs of the training database labelled ``sft recipe <recipe>``
and ``recipe <recipe>``; their per-step curves go into the record. ``tables`` prints
``harness.rl.learning_record.learning_tables`` of a record: ``docs/training.md`` holds exactly
that text (``tests/rl/test_learning_record.py``).
"""

from __future__ import annotations

import argparse
import subprocess
import sys
from pathlib import Path


def _train_run(db: Path, label: str) -> str:
    from harness.errors import ConfigError
    from harness.results.store import Store

    ids = Store(db).query("SELECT run_id FROM runs WHERE label = $l ORDER BY started_at DESC", {"l": label})
    if not len(ids):
        raise ConfigError(f"{db}: no run labelled {label!r}")
    return str(ids["run_id"].iloc[0])


def build(args: argparse.Namespace) -> int:
    from harness.errors import ConfigError
    from harness.rl.heldout import template_majority_report
    from harness.rl.learning_record import (
        BASELINE,
        SCHEMA,
        check_record,
        checkpoint_entry,
        eval_entry,
        train_curve,
        write_record,
    )

    entries = []
    for spec in args.eval:
        head, sep, tail = spec.partition("=")
        db, sep2, run_label = tail.partition(":")
        if not (sep and sep2 and head and db and run_label):
            raise ConfigError(f"--eval {spec!r}: expected LABEL[@RL_STEPS]=DB:RUN_LABEL")
        label, _, steps = head.partition("@")
        entries.append(eval_entry(label, int(steps) if steps else None, Path(db), run_label))
        if label == "untrained":  # the baseline sits after the untrained model
            entries.append(checkpoint_entry(BASELINE, None, None, template_majority_report(args.split)))
    for e in entries:
        if e["label"] in args.partial:  # stopped before it had every held-out question
            e["partial"] = True
    if not any(e["label"] == BASELINE for e in entries):
        entries.insert(0, checkpoint_entry(BASELINE, None, None, template_majority_report(args.split)))
    db = Path(args.train_db)
    sft_run = _train_run(db, f"sft recipe {args.sft_recipe or args.recipe}")
    rl_run = _train_run(db, f"recipe {args.recipe}")
    commit = subprocess.run(["git", "rev-parse", "HEAD"], capture_output=True, text=True).stdout.strip()
    record = {
        "schema": SCHEMA,
        "about": args.about,
        "split": args.split,
        "method": args.method,
        "recipe": args.recipe,
        "sft_recipe": args.sft_recipe or args.recipe,
        "commit": commit,
        "checkpoints": entries,
        "curves": {"sft": train_curve(db, sft_run), "rl": train_curve(db, rl_run)},
    }
    check_record(record)
    write_record(Path(args.out), record)
    print(f"{args.out}: {len(entries)} checkpoints, RL run {rl_run}, SFT run {sft_run}")
    return 0


def tables(args: argparse.Namespace) -> int:
    from harness.rl.learning_record import learning_tables, load_record

    print(learning_tables(load_record(Path(args.record))))
    return 0


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    sub = ap.add_subparsers(dest="cmd", required=True)
    b = sub.add_parser("build", help="write the record from the run's databases")
    b.add_argument("--out", required=True, help="the JSON file to write (under results/)")
    b.add_argument("--method", required=True)
    b.add_argument(
        "--recipe", required=True, help="the RL recipe (its train run is labelled 'recipe <recipe>')"
    )
    b.add_argument("--sft-recipe", default=None, help="the SFT recipe when it differs from --recipe")
    b.add_argument("--split", default="learning")
    b.add_argument("--train-db", required=True, help="the database harness sft and harness train wrote")
    b.add_argument("--eval", action="append", required=True, metavar="LABEL[@RL_STEPS]=DB:RUN_LABEL")
    b.add_argument("--about", default="", help="one line on what was run")
    b.add_argument(
        "--partial",
        action="append",
        default=[],
        metavar="LABEL",
        help="an evaluation stopped before it had every held-out question (its rows are a subset; the "
        "paired comparisons with it use the questions both have)",
    )
    b.set_defaults(fn=build)
    t = sub.add_parser("tables", help="print the markdown tables of a record")
    t.add_argument("record")
    t.set_defaults(fn=tables)
    args = ap.parse_args(argv)
    return args.fn(args)


if __name__ == "__main__":
    sys.exit(main())
