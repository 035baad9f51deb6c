"""``harness regress``: the regression gate, exact layers first (:mod:`harness.gate`), then the
model's scores against a committed baseline (:mod:`harness.results.regress`)."""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from harness.cli import add_command
from harness.cli.options import add_db_arg, add_protocol_arg

EXAMPLES = """\
  harness regress --layers exact                      # specs, retrieval, prompts, extraction: seconds, no model
  harness run --method direct,cot,naive_rag --bench mini --limit 5 --model qwen2.5-coder-1.5b-instruct \\
      --batch-size 1 --db /tmp/ci.duckdb --no-progress
  harness regress --db /tmp/ci.duckdb                  # every layer, the model scores last; exit 1 on a move
  harness regress --layers exact --update --reason "naive_rag: renderer keeps titles with brackets"
  harness regress --layers scores --db /tmp/ci.duckdb --update --reason "reader slice: llama.cpp one slot"
  harness regress --against old.json --db results/harness.duckdb --layers scores --tolerance 0.02
"""

DESCRIPTION = """\
The regression gate. It checks, in this order, each layer against its committed baseline and
names the first layer and item that moved (docs/regression-gate.md):

  specs       every registered protocol id and method spec hash
  retrieval   top-k passage ids and scores of each packaged-corpus retriever on a fixed query set
  prompts     every method's fully rendered prompt of each turn, replaying recorded model outputs
              (hashes; the first difference is shown as text)
  extraction  extracted answers, statuses and every metric on the replayed and recorded outputs
  scores      the model's scores on the reader slice (--db): paired bootstrap, below

The first four (`--layers exact`) run no model and take seconds; they compare exactly against
--exact-against (results/regress/exact.json: the engine's and the baselines' items) and each
plugin folder's regress-exact.json (methods/<paper>/: the items of its own methods and
protocols). A change that is meant is recorded with --update and a one-line --reason, in the same
commit as the change; --update writes each item to its own file, a new paper's into its folder.

Scores: the latest scores of every (method, model, protocol, dataset, metric) in the database are
compared with --against. With per-question values in the baseline (what --update writes), the
current run is paired with the baseline on the same questions: a score fails when the
paired-bootstrap 95% interval of (current - baseline) lies below zero and the drop exceeds the
tolerance. Entries without per-question values fail when the mean drops by more than the
tolerance. A baseline entry with no counterpart in the database (method, dataset or metric
missing, or questions missing) fails. Keys in the database that the baseline lacks are listed as
`new` and do not fail. Only runs that ended `complete` are compared (and written by --update): a
killed, failed or incomplete run (failed samples) is left out, and a baseline entry found only in
such a run fails with a detail naming it. --include-partial compares them too (their missing
questions fail)."""

SCORES = "scores"


def add_parser(sub: argparse._SubParsersAction) -> None:
    p = add_command(
        sub,
        "regress",
        help="the regression gate: exact layers (specs, retrieval, prompts, extraction), then model scores",
        description=DESCRIPTION,
        examples=EXAMPLES,
        handler=handle,
    )
    p.add_argument(
        "--layers",
        default="all",
        help="all (default), exact (every layer but scores), or a comma list of "
        "specs,retrieval,prompts,extraction,scores",
    )
    p.add_argument(
        "--against", type=Path, default=Path("results/baseline.json"), help="score baseline JSON file"
    )
    p.add_argument(
        "--exact-against",
        type=Path,
        default=Path("results/regress/exact.json"),
        help="the central exact-layer baseline (the prompt texts beside it: <name>.prompts.json.gz); "
        "the plugin folders' regress-exact.json are read with it",
    )
    add_db_arg(p, default=None, help="results database of the reader slice (scores layer)")
    p.add_argument("--update", action="store_true", help="rewrite the baselines of the chosen layers")
    p.add_argument("--reason", default=None, help="with --update: one line saying why (kept in the baseline)")
    p.add_argument(
        "--tolerance",
        type=float,
        default=None,
        help="largest drop of a mean that never fails (default: the baseline's own, written by --update; 0)",
    )
    add_protocol_arg(p, default=None, help="scores with --update: only this protocol id")
    p.add_argument(
        "--output", type=Path, default=None, help="also write the report (text, then the score table) here"
    )
    p.add_argument(
        "--include-partial",
        action="store_true",
        help="also use runs that did not end complete (killed, failed, with failed samples)",
    )


def parse_layers(value: str) -> list[str]:
    """``all`` | ``exact`` | a comma list -> layer names in gate order."""
    from harness.errors import ConfigError
    from harness.gate.layers import LAYERS

    order = [*LAYERS, SCORES]
    v = value.strip()
    if v == "all":
        return order
    if v == "exact":
        return list(LAYERS)
    names = [x.strip() for x in v.split(",") if x.strip()]
    bad = [x for x in names if x not in order]
    if bad or not names:
        raise ConfigError(
            f"--layers {value!r}: unknown layer {bad[0] if bad else ''!r}; use all, exact or {','.join(order)}"
        )
    return [x for x in order if x in names]


def handle(args: argparse.Namespace) -> int:
    from harness.errors import ConfigError

    layers = parse_layers(args.layers)
    if args.update and not (args.reason or "").strip():
        raise ConfigError("--update needs --reason '...': one line saying why the baseline changes")
    if SCORES in layers and args.db is None:
        raise ConfigError(
            "the scores layer needs --db (the reader slice's results database, see `harness regress --help`); "
            "for the model-free layers alone pass --layers exact"
        )
    exact = [x for x in layers if x != SCORES]
    texts: list[str] = []
    store = None
    if SCORES in layers:  # a missing or damaged database is refused before any work
        from harness.results.queries import open_results

        store = open_results(args.db)
    rc = 0
    if exact:
        rc = max(rc, handle_exact(args, exact, texts))
    if store is not None:
        rc = max(rc, handle_scores(args, store, texts))
    if args.output is not None:
        args.output.write_text("\n\n".join(texts) + "\n")
    return rc


def handle_exact(args: argparse.Namespace, layers: list[str], texts: list[str]) -> int:
    from harness import gate
    from harness.gate.layers import compute
    from harness.gate.pins import PIN_FILE, load_pins, write_pins

    # the pin files are read first: a damaged one is one line before any replay
    pins = load_pins(args.exact_against, required=not args.update)
    current = compute(layers)
    if args.update:
        written = write_pins(current, args.exact_against, args.reason)
        n = sum(len(v) for v in current.items.values())
        cwd = Path.cwd()
        shown = [str(p.relative_to(cwd)) if p.is_relative_to(cwd) else str(p) for p in written]
        where = ", ".join(shown) or "nothing (every pin already equal)"
        print(f"wrote {where}: {', '.join(current.items)} ({n} items)", file=sys.stderr)
        return 0
    verdicts = gate.compare(pins.merged, current, baseline_texts=pins.merged_texts)
    text = gate.report(verdicts)
    print(text)
    texts.append(text)
    first = gate.first_moved(verdicts)
    if first is not None:
        layer, item = first
        print(
            f"regress: FAILED at layer {layer}"
            + (f", item {item.key}" if item else "")
            + f" against {args.exact_against} and the plugin folders' {PIN_FILE}"
            " (intended? --update --reason '...')",
            file=sys.stderr,
        )
        return 1
    print(
        f"regress: exact layers passed ({', '.join(layers)}) against {args.exact_against} and the "
        f"plugin folders' {PIN_FILE}",
        file=sys.stderr,
    )
    return 0


def handle_scores(args: argparse.Namespace, store, texts: list[str]) -> int:
    from harness.errors import ConfigError
    from harness.results.queries import latest_runs, latest_values
    from harness.results.regress import Baseline, baseline_from_values, compare, markdown

    complete_only = not args.include_partial
    values = latest_values(store, args.protocol, complete_only=complete_only)
    partial = latest_values(store, args.protocol, complete_only=False) if complete_only else values
    left_out = sorted(set(partial["run_id"]) - set(values["run_id"]))
    if left_out:
        print(
            f"regress: left out {len(left_out)} run(s) that did not end complete: {', '.join(left_out)} "
            "(finish them with `harness run ... --resume`, or pass --include-partial)",
            file=sys.stderr,
        )
    if args.update:
        if values.empty:
            raise ConfigError(f"{args.db}: no complete evaluation runs to take a baseline from")
        runs = latest_runs(store, args.protocol, complete_only=complete_only)
        provenance = {str(r.run_id): str(r.command or "") for r in runs.itertuples()}
        old = Baseline.load(args.against).reasons if args.against.is_file() else []
        baseline = baseline_from_values(
            values, tolerance=args.tolerance or 0.0, runs=provenance, reasons=[*old, args.reason.strip()]
        )
        baseline.save(args.against)
        keys = {(e.method, e.model, e.protocol_id) for e in baseline.entries}
        print(
            f"wrote {args.against}: {len(baseline.entries)} entries ({len(keys)} method/model/protocol, "
            f"{sum(e.n for e in baseline.entries)} values)",
            file=sys.stderr,
        )
        return 0
    baseline = Baseline.load(args.against)
    comparisons = compare(baseline, values, tolerance=args.tolerance, partial=partial)
    text = markdown(comparisons)
    print(text)
    texts.append(text)
    failed = [c for c in comparisons if c.failed]
    counts = {v: sum(c.verdict == v for c in comparisons) for v in ("ok", "improved", "new", "FAIL")}
    summary = ", ".join(f"{n} {v}" for v, n in counts.items() if n)
    if failed:
        print(f"regress: FAILED ({summary}) against {args.against}", file=sys.stderr)
        for c in failed:
            print(
                f"  {c.method} / {c.model} / {c.protocol_id} / {c.dataset} / {c.metric}: {c.detail}",
                file=sys.stderr,
            )
        return 1
    print(f"regress: passed ({summary}) against {args.against}", file=sys.stderr)
    return 0
