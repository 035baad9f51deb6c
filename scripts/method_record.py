"""The committed record of one method's learning run (issue 57): its held-out evaluations, the
question ids of every training stage, the stages' curves and commands, in one JSON under
``results/``; the tables ``docs/training.md`` prints from it, and the checks a test runs on it.

    # after the held-out evaluations (scripts/eval_heldout.py run ... --record runs/records/X.json)
    python scripts/method_record.py build --method r_search --recipe cpu-learn-grpo \\
        --out-dir runs/r_search --db runs/r_search/runs.duckdb \\
        --evals runs/records/r_search-sft.json runs/records/r_search-rl.json runs/records/naive_rag.json \\
        --pair "SFT (warm start),SFT+RL step 20" --pair "naive_rag,SFT+RL step 20" \\
        --command "scripts/learning_run.sh r_search cpu-learn-grpo runs/r_search" \\
        --about "..." --record results/learning-r_search.json
    python scripts/method_record.py tables results/learning-r_search.json   # what the page prints
    python scripts/method_record.py check results/learning-r_search.json    # what the test checks
    python scripts/method_record.py summary results/learning-r_search.json results/learning-eval_rar.json

A run resumed with ``--resume`` logs under a new run id: give the earlier ones with
``--resumed-from RUN_ID`` (oldest first); the RL curve is stitched from them
(:func:`harness.rl.learning_record.stitched_curve`) and ``stages.rl.segments`` says which run
logged which steps, at which commit.

``build`` takes the evaluations (by label; one label once) from the ``eval_heldout.py`` records
given, the warm start's question ids from ``<out-dir>/sft/final/harness_train.json`` (trained on
and its early-stopping dev slice), the RL stage's from ``<out-dir>/rl/rl_questions.jsonl`` (every
rollout round's questions, in order, up to the last step logged), each stage's run id, commit,
command line and per-step curve from ``--db`` (``train_steps``), and refuses a record whose stage
ids meet the split's held-out ids. Paths in the record are relative; nothing machine-specific.

``tables`` prints the evaluations, the paired comparisons (``--pair`` B - A: greedy EM by exact
McNemar, F1 and the method's own reward by paired bootstrap), a line per stage and the RL curve.
``summary`` prints one row per record: the shipped policy (the evaluation of the adapter preset
whose manifest names the record) against the warm start and the baseline its pairs name.
``check`` re-reads the split: every evaluation covers its held-out ids exactly, and no stage id is
held out (one line and exit 1 otherwise).
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

SCHEMA = 1
ROOT = Path(__file__).resolve().parents[1]
WARM_START = "SFT (warm start)"  # the warm start's evaluation label in every method record


def _rl_draws(out_dir: Path, steps: int) -> list[dict]:
    """The RL stage's rollout rounds (``rl_questions.jsonl``) up to step ``steps`` (1-based): a run
    stopped after a step may have drawn the next step's questions before it stopped."""
    rows = [
        json.loads(line) for line in (out_dir / "rl" / "rl_questions.jsonl").read_text().splitlines() if line
    ]
    return [r for r in rows if int(r["step"]) < steps]


def _run_row(db: Path, run_id: str) -> dict:
    from harness.results.store import Store

    df = Store(db, create=False).query(
        "SELECT run_id, kind, method, label, git_commit, command, status, started_at, ended_at FROM runs "
        "WHERE run_id = $r",
        {"r": run_id},
    )
    if len(df) != 1:
        from harness.errors import ConfigError

        raise ConfigError(f"{db}: no run {run_id!r}")
    row = df.iloc[0].to_dict()
    return {k: (str(v) if v is not None else None) for k, v in row.items()}


def _portable_command(cmd: str | None, roots: list[tuple[str, str]]) -> str | None:
    """A command line with the machine's folders (``roots``) replaced by ``$RUNS`` / ``.``, and the
    checkout its program ran from (``<checkout>/harness/__main__.py``, what ``python -m harness``
    logs) by ``.``: a stage may have run from another exported copy than the one building the record."""
    if cmd is None:
        return None
    program, main = cmd.split(" ", 1)[0], "/harness/__main__.py"
    if program.startswith("/") and program.endswith(main):
        roots = [*roots, (program.removesuffix(main), ".")]
    for root, name in roots:
        cmd = cmd.replace(root, name)
    return cmd


def build(args: argparse.Namespace) -> int:
    from harness.errors import ConfigError
    from harness.results.lifecycle import code_commit
    from harness.rl.heldout_eval import load_record, put_eval, record_tables
    from harness.rl.learning_record import stitched_curve, train_curve

    record: dict = {
        "schema": SCHEMA,
        "method": args.method,
        "recipe": args.recipe,
        "about": args.about,
        "commands": args.command,
        "commit": code_commit(),
        "split": args.split,
        "evaluations": [],
    }
    seen: dict[str, Path] = {}
    for f in args.evals:
        source = load_record(f)
        for ev in source["evaluations"]:
            if ev["label"] in seen:
                raise ConfigError(f"{f}: evaluation {ev['label']!r} is also in {seen[ev['label']]}")
            seen[ev["label"]] = f
            # the code that evaluated it (its record's commit), kept with the evaluation
            ev = {**ev, "meta": {"commit": source.get("commit"), **ev.get("meta", {})}}
            record = put_eval(record, _from_dict(ev))
    sft_info = json.loads((args.out_dir / "sft" / "final" / "harness_train.json").read_text())
    sft_run = _sft_run(args.db, args.method)
    rl_run = json.loads((args.out_dir / "rl" / "train-run.json").read_text())["run_id"]
    # a --resume continues a run under a new run id, from its last checkpoint: one curve, oldest first
    rl_runs = [*args.resumed_from, rl_run]
    curve, segments = stitched_curve([train_curve(args.db, r) for r in rl_runs])
    if curve["step"][0] != 1:
        raise ConfigError(
            f"{args.db}: RL run {rl_runs[0]} starts at step {curve['step'][0]}: it resumed an earlier run; "
            "give that run's id with --resumed-from (oldest first)"
        )
    steps = len(curve["step"])
    draws = _rl_draws(args.out_dir, steps)
    roots = [(str(args.out_dir.resolve().parent), "$RUNS"), (str(Path.cwd().resolve()), ".")]
    given = dict(c.split("=", 1) for c in args.stage_commit)
    stages = {}
    for name, run_id, questions in (
        ("sft", sft_run, list(sft_info["questions"])),
        ("rl", rl_run, list(dict.fromkeys(i for d in draws for i in d["ids"]))),
    ):
        row = _run_row(args.db, run_id)
        stages[name] = {
            "run_id": run_id,
            "commit": row["git_commit"] or given.get(name) or None,
            "command": _portable_command(row["command"], roots),
            "questions": questions,
        }
    stages["rl"]["steps_done"] = steps
    if args.resumed_from:  # which run logged which steps, each with its commit and command
        stages["rl"]["segments"] = []
        for run_id, seg in zip(rl_runs, segments, strict=True):
            row = _run_row(args.db, run_id)
            stages["rl"]["segments"].append(
                {
                    "run_id": run_id,
                    "steps": seg,
                    "commit": row["git_commit"] or None,
                    "command": _portable_command(row["command"], roots),
                }
            )
    stages["rl"]["draws"] = draws
    record["stages"] = stages
    record["curves"] = {"sft": train_curve(args.db, sft_run), "rl": curve}
    record["pairs"] = [p.split(",", 1) for p in args.pair]
    check(record)
    record_tables(record)  # every pair names an evaluation
    text = json.dumps(record, indent=1, ensure_ascii=False) + "\n"
    for root, _name in roots:
        if root in text:
            raise ConfigError(
                f"{args.record}: the record would keep the machine path {root}; give relative paths"
            )
    args.record.parent.mkdir(parents=True, exist_ok=True)
    args.record.write_text(text)
    print(
        f"{args.record}: {len(record['evaluations'])} evaluations, stages sft ({len(stages['sft']['questions'])} "
        f"questions) and rl ({len(stages['rl']['questions'])} questions, {steps} steps)"
    )
    return 0


def _from_dict(d: dict):
    from harness.rl.heldout_eval import HeldoutEval

    return HeldoutEval.from_dict(d)


def _sft_run(db: Path, method: str) -> str:
    """The warm start's run: the one complete ``harness sft`` run of ``method`` in ``db``."""
    from harness.errors import ConfigError
    from harness.results.store import Store

    df = Store(db, create=False).query(
        "SELECT run_id FROM runs WHERE run_id LIKE 'sft-%' AND method = $m AND status = 'complete'",
        {"m": method},
    )
    if len(df) != 1:
        raise ConfigError(f"{db}: {len(df)} complete sft runs of {method} (need exactly one)")
    return str(df["run_id"].iloc[0])


def check(record: dict) -> None:
    """Every evaluation covers the split's held-out ids (``heldout_eval.check_record``), and no
    training stage drew a held-out question."""
    from harness.errors import ConfigError
    from harness.rl.heldout_eval import check_record, heldout_questions

    check_record(record)
    held = {e.id for e in heldout_questions(record["split"])}
    for name, stage in record["stages"].items():
        leak = sorted(held & set(stage["questions"]))
        if leak:
            raise ConfigError(
                f"record of {record['method']}: stage {name} trained on {len(leak)} held-out question(s), "
                f"first {leak[0]}"
            )


def tables(record: dict, every: int = 5) -> str:
    from harness.rl.heldout_eval import by_dataset_table, record_evals, record_tables
    from harness.rl.learning_record import rl_curve_table
    from harness.rl.split import load_split

    st = record["stages"]
    groups = load_split(record["split"]).heldout
    lines = [
        record_tables(record),
        *([by_dataset_table(record_evals(record), groups)] if len(groups) > 1 else []),
        f"Stages: warm start `{st['sft']['run_id']}` on {len(st['sft']['questions'])} questions (commit "
        f"{(st['sft']['commit'] or '?')[:7]}); RL `{st['rl']['run_id']}`, {st['rl']['steps_done']} steps on "
        f"{len(st['rl']['questions'])} questions (commit {(st['rl']['commit'] or '?')[:7]}); none of them held out.",
    ]
    curve = record["curves"]["rl"]
    n = len(curve["step"])
    keep = [i for i in range(n) if (i + 1) % every == 0 or i in (0, n - 1)]
    lines.append(rl_curve_table({k: [v[i] for i in keep] for k, v in curve.items()}))
    return "\n\n".join(lines)


def shipped_pairs(record: dict, path: str) -> tuple:
    """(the warm start's evaluation, the shipped policy's, the baseline's) in ``record`` (at the
    repository-relative ``path``): the policy is the evaluation of the adapter preset whose manifest
    names this record; the warm start and the baseline are the ``a`` of the record's pairs with that
    policy as ``b`` (the warm start labelled :data:`WARM_START`, the baseline of another method)."""
    from harness.errors import ConfigError
    from harness.llm.adapters import adapter_presets
    from harness.rl.heldout_eval import record_evals

    method = record["method"]
    names = {p.name for p in adapter_presets().values() if p.method == method and p.record == path}
    evs = {e.label: e for e in record_evals(record)}
    policy = [e for e in evs.values() if e.model in names]
    if len(policy) != 1:
        raise ConfigError(
            f"{path}: {len(policy)} evaluations of a shipped {method} adapter whose manifest names this record "
            f"(presets {sorted(names) or 'none'}); the summary needs exactly one"
        )
    pol = policy[0]
    firsts = [evs[a] for a, b in record.get("pairs") or [] if b == pol.label]
    warm = [e for e in firsts if e.label == WARM_START]
    base = [e for e in firsts if e.method != method]
    if len(warm) != 1 or len(base) != 1:
        raise ConfigError(
            f"{path}: the pairs with {pol.label!r} second name {len(warm)} {WARM_START!r} and {len(base)} "
            f"evaluation(s) of another method; the summary needs one warm start and one baseline"
        )
    return warm[0], pol, base[0]


def summary(paths: list[str]) -> str:
    """One row per method record: its shipped policy against its warm start (greedy EM by exact
    McNemar, F1 and the method's own reward by paired bootstrap) and against its baseline (EM)."""
    from harness.rl.heldout_eval import compare

    def cell(t) -> str:
        d = t.diff
        return f"{d.mean:+.3f} [{d.lo:+.3f}, {d.hi:+.3f}], p = {t.p:.2g}"

    lines = [
        "| method | recipe, RL steps | held-out questions | greedy EM: warm start → shipped policy | EM, policy - warm start [95%], exact McNemar | gained / lost | F1, policy - warm start | own reward, policy - warm start | EM, policy - baseline | shipped preset |",
        "|---|---|---|---|---|---|---|---|---|---|",
    ]
    for path in paths:
        record = json.loads((ROOT / path).read_text())
        warm, pol, base = shipped_pairs(record, path)
        w, b = compare(warm, pol).tests, compare(base, pol).tests
        reward = cell(w["greedy_reward"]) if "greedy_reward" in w else "-"
        lines.append(
            f"| `{record['method']}` | `{record['recipe']}`, {record['stages']['rl']['steps_done']} | "
            f"{pol.n} (`{record['split']}`) | {sum(warm.greedy_em) / warm.n:.3f} → {sum(pol.greedy_em) / pol.n:.3f} | "
            f"{cell(w['greedy_em'])} | {w['greedy_em'].b_better} / {w['greedy_em'].a_better} | "
            f"{cell(w['greedy_f1'])} | {reward} | {cell(b['greedy_em'])} (`{base.label}`) | `{pol.model}` |"
        )
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    sub = ap.add_subparsers(dest="cmd", required=True)
    b = sub.add_parser("build", help="write the record from a run's folder, database and evaluations")
    b.add_argument("--method", required=True)
    b.add_argument("--recipe", required=True)
    b.add_argument("--out-dir", type=Path, required=True, help="the run's folder (sft/, rl/)")
    b.add_argument("--db", type=Path, required=True, help="the run's results database")
    b.add_argument("--evals", type=Path, nargs="+", required=True, help="eval_heldout.py records")
    b.add_argument("--pair", action="append", default=[], metavar="A,B", help="a paired comparison B - A")
    b.add_argument("--split", default="learning-multihop")
    b.add_argument("--command", action="append", default=[], help="a command that made it (repeatable)")
    b.add_argument(
        "--stage-commit",
        action="append",
        default=[],
        metavar="STAGE=SHA",
        help="a stage's commit when it ran from an exported copy (git archive: the database has none; "
        "scripts/learning_run.sh logs HARNESS_COMMIT), e.g. sft=66c209d...",
    )
    b.add_argument(
        "--resumed-from",
        action="append",
        default=[],
        metavar="RUN_ID",
        help="an earlier RL run whose checkpoint the one in rl/train-run.json resumed (repeat, oldest first)",
    )
    b.add_argument("--about", default="", help="one paragraph: what was run and what stopped it")
    b.add_argument("--record", type=Path, required=True, help="the record to write (results/...)")
    t = sub.add_parser("tables", help="print the record's markdown tables")
    t.add_argument("record", type=Path)
    t.add_argument("--every", type=int, default=5, help="curve rows: every N steps, the first and the last")
    m = sub.add_parser(
        "summary", help="one row per method: its shipped policy against its warm start and baseline"
    )
    m.add_argument(
        "records", nargs="+", help="method records, repository-relative (results/learning-<method>.json)"
    )
    c = sub.add_parser("check", help="the record against the split: coverage and no held-out id trained on")
    c.add_argument("record", type=Path)
    args = ap.parse_args(argv)
    if args.cmd == "build":
        return build(args)
    if args.cmd == "summary":
        print(summary(args.records))
        return 0
    rec = json.loads(args.record.read_text())
    if args.cmd == "tables":
        print(tables(rec, args.every))
        return 0
    check(rec)
    print(f"{args.record}: every evaluation covers the held-out ids; no stage question is held out")
    return 0


if __name__ == "__main__":
    from harness.errors import script_exit

    sys.exit(script_exit(main))
