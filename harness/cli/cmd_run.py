"""``harness run``: score methods on a bench under a protocol; results land in DuckDB."""

from __future__ import annotations

import argparse
import sys
from collections.abc import Sequence
from pathlib import Path
from typing import TYPE_CHECKING

from harness.cli import add_command, non_negative_int, positive_float, positive_int
from harness.cli.judge_options import add_judge_args
from harness.cli.options import (
    add_corpus_arg,
    add_data_dir_arg,
    add_db_arg,
    add_device_arg,
    add_model_arg,
    add_protocol_arg,
    run_choices,
)
from harness.cli.retrieval_options import add_remote_args
from harness.eval.plan import CONFIRM_ABOVE

if TYPE_CHECKING:
    from harness.eval.runner import MethodRun, RunConfig
    from harness.protocol import Protocol
    from harness.results.store import Store

EXAMPLES = """\
  harness run --method direct,naive_rag,search_r1 --bench mini-multihop --limit 5
  harness run --method all --bench multihop --limit 20            # every registered method
  harness run --yes                      # every method on every question of the bench (days on a CPU)
  harness run --method arena --protocol arena-gold-context --bench mini-multihop --limit 20
  harness run --method search_r1 --bench mini --limit 50 --resume  # continue an interrupted run
  harness run --method all --bench multihop --limit 1 --draft ngram   # llama.cpp speculative decoding
  harness run --method all --bench multihop --limit 20 --slots 8     # llama.cpp: 8 sequences per decode call
  harness run --method naive_rag --bench hotpotqa --sample 200 --seed 1
  harness run --method search_r1 --model ./checkpoints/step-100 --bench mini-multihop
  harness run --method search_r1 --backend openai --model smollm2 --base-url http://127.0.0.1:8765/v1 \\
      --tokenizer smollm2-135m-instruct --bench mini-multihop --limit 10
  harness run --protocol searchr1 --corpus wiki-18.jsonl --method search_r1 --bench all   # at scale
  harness run --method search_r1 --bench mini-multihop --retriever-url http://127.0.0.1:8000/retrieve
  harness run --method direct --bench mini-multihop --limit 20 \\
      --judge-url http://127.0.0.1:8765/v1 --judge-model smollm2        # + LLM judge (harness serve-model)
"""


def add_parser(sub: argparse._SubParsersAction) -> None:
    p = add_command(
        sub,
        "run",
        help="score methods on a bench (results go to DuckDB; a summary table is printed)",
        examples=EXAMPLES,
        handler=handle,
    )
    p.add_argument(
        "--method",
        nargs="+",
        default=None,
        help="a method, a comma list, or 'all'; spaces after commas are fine. Without it every method "
        "runs, which needs --yes",
    )
    p.add_argument("--bench", default="mini-multihop", help="bench name (see `harness list benches`)")
    add_protocol_arg(p)
    add_model_arg(p, help="model name, local HF dir, or served name")
    p.add_argument(
        "--backend",
        default="auto",
        choices=["auto", "transformers", "llamacpp", "openai", "vllm"],
        help="auto (default): openai with --base-url, llamacpp for a packaged preset or a .gguf, "
        "transformers for a local HF directory (e.g. a training checkpoint)",
    )
    p.add_argument(
        "--base-url", action="append", default=None, help="OpenAI-compatible endpoint (repeatable)"
    )
    p.add_argument(
        "--tokenizer", default=None, help="tokenizer (HF dir or model name) for the openai backend"
    )
    p.add_argument("--limit", type=positive_int, default=None, help="first N questions of each dataset")
    p.add_argument(
        "--sample", type=positive_int, default=None, help="seeded random N questions of each dataset"
    )
    p.add_argument("--seed", type=int, default=0, help="selection seed (with --sample) and sampling seed")
    p.add_argument(
        "--top-k", type=positive_int, default=None, help="override the protocol's top-k (changes its id)"
    )
    add_corpus_arg(p)
    add_data_dir_arg(
        p, help="full datasets: a FlashRAG-layout folder or a Hugging Face hub cache (see DATA.md)"
    )
    add_db_arg(p)
    p.add_argument(
        "--resume",
        action="store_true",
        help="per method: continue the newest identical run, or reuse it when it is complete",
    )
    p.add_argument("--batch-size", type=positive_int, default=8, help="questions solved together (default 8)")
    _add_execution_args(p)


def _add_execution_args(p: argparse.ArgumentParser) -> None:
    """The options after ``--batch-size`` (in this order in ``--help``): how the in-process model
    runs, the openai backend's retries, the confirmation, the label, the judge, the remote retriever."""
    p.add_argument(
        "--threads",
        type=positive_int,
        default=None,
        help="llama.cpp / transformers threads (default $OMP_NUM_THREADS, else 1); 2 on an idle "
        "2-core machine is about twice as fast, but collapses when another process is busy, so more "
        "threads than cores free (the load average) are lowered, with one line",
    )
    add_device_arg(p, what="the model of the transformers backend", default=None)
    p.add_argument(
        "--slots",
        type=positive_int,
        default=None,
        help="sequences the model decodes together (llama.cpp parallel slots, transformers / vLLM "
        "batch); default 1 for llama.cpp, where one slot makes a greedy rerun repeat exactly, 8 otherwise",
    )
    p.add_argument(
        "--draft",
        choices=("none", "ngram"),
        default=None,
        help="llama.cpp: 'ngram' drafts tokens from an earlier repeat of the last 4 and checks them "
        "in one decode call (speculative decoding: faster on repetitive output, but greedy answers "
        "then depend on --threads); 'none' (default) decodes one token per call",
    )
    p.add_argument(
        "--request-timeout",
        type=positive_float,
        default=None,
        help="openai backend: seconds per request before it is retried (default 120)",
    )
    p.add_argument(
        "--retries",
        type=non_negative_int,
        default=None,
        help="openai backend: retries of a failed request before its sample is stored as an error (default 2)",
    )
    p.add_argument(
        "--yes",
        action="store_true",
        help="start without asking: needed with no --method, and on a terminal above "
        f"{CONFIRM_ABOVE} method x question pairs (the plan printed first says how many)",
    )
    p.add_argument("--label", default="", help="free-text label stored with the run")
    p.add_argument(
        "--output-path",
        type=Path,
        default=None,
        metavar="DIR",
        help="also write each run's results JSON and per-dataset samples JSONL under DIR/<model>/ "
        "(lm-evaluation-harness's --output_path --log_samples layout; docs/results-files.md)",
    )
    p.add_argument("--no-progress", action="store_true", help="no progress bars")
    add_judge_args(p, inline=True)
    add_remote_args(p)


def handle(args: argparse.Namespace) -> int:
    from harness.cli.judge_options import judge_spec_from_args, print_report, report_judge_failures
    from harness.eval.protocol import check_judge
    from harness.eval.runner import Runner, protocol_groups
    from harness.eval.scoring import RunScoring
    from harness.eval.setup import build_protocol
    from harness.judge.factory import make_judge
    from harness.judge.stored import judge_runs
    from harness.llm.adapters import check_model
    from harness.methods_registry import get_method, resolve_methods
    from harness.results.cost import load_prices, prices_path
    from harness.results.summary import run_summary

    # `--method direct, naive_rag` arrives as two words: one comma list either way; none: all
    method = ",".join(args.method) if args.method is not None else "all"
    proto = build_protocol(run_choices(args))
    # Methods bound to their own protocol (ARENA's gold-context setting) run under it, as separate
    # runs with their own table; the runner checks each method against its protocol: `all` skips,
    # with the reason, a method that refuses it; an explicit list lets the error stop the command.
    groups = protocol_groups([get_method(n) for n in resolve_methods(method)], proto, args.corpus)
    judge_spec = judge_spec_from_args(args)
    for p, _ in groups:  # a protocol that names a judge is scored by it, or not at all
        check_judge(p, *((judge_spec.model, judge_spec.prompt) if judge_spec is not None else (None, None)))
    cfg = run_config(
        args, proto, [m.name for _, ms in groups for m in ms], everything=method.strip() == "all"
    )
    runner = Runner(cfg, progress=not args.no_progress)
    plans = runner.plan_groups(groups)  # every check, before a model loads or a row is written
    check_model(cfg.backend, args.model)  # an unknown model leaves no results file behind
    show_plan_and_confirm(args, cfg, plans)
    runner.store  # noqa: B018 - opens and checks the results file (a damaged one stops here)
    judge = None
    if judge_spec is not None:  # built (and its server probed) before the run, not after it
        judge = make_judge(judge_spec, runner.store, progress=not args.no_progress)
    runs = []
    for (p, group), done in zip(groups, runner.execute(plans), strict=True):
        runs += done
        if done:  # a reader bound to its own protocol (ARENA) also counts its substitute references
            own = any(m.own_protocols for m in group)
            df = run_summary(runner.store, [r.run_id for r in done], RunScoring.of(p).primary, references=own)
            title = f"{args.bench} · protocol {p.name} ({p.protocol_id}) · {args.model}"
            print_summary(df, title=title, primary=p.primary_metric)
            print(what_the_numbers_are(df, args.model, cfg.method_models, p.primary_metric))
    status = 0
    if judge is not None:
        report = judge_runs(runner.store, [r.run_id for r in runs], judge)
        print_report(report, price_table=load_prices(prices_path(runner.store)))
        status = report_judge_failures(report)
    if args.output_path is not None:
        from harness.results.outputs import write_run_outputs

        for r in runs:
            paths = write_run_outputs(runner.store, r.run_id, args.output_path)
            print(f"wrote {paths[0]} and {len(paths) - 1} samples files", file=sys.stderr)
    return finish(args.db, runner.store, runs, status)


def run_config(
    args: argparse.Namespace, proto: Protocol, methods: list[str], *, everything: bool
) -> RunConfig:
    """The :class:`harness.eval.runner.RunConfig` of the command line: ``everything`` (``--method
    all`` or none) leaves out, counted, the questions a method cannot answer and skips, with the
    reason, a method that refuses the protocol."""
    from harness.eval.runner import RunConfig
    from harness.llm.adapters import auto_backend
    from harness.results.lifecycle import command_line

    backend = auto_backend(args.model, served=bool(args.base_url)) if args.backend == "auto" else args.backend
    return RunConfig(
        methods=methods,
        bench=args.bench,
        protocol=proto,
        model=args.model,
        backend=backend,
        backend_options=backend_options(args),
        corpus_path=args.corpus,
        retriever_url=args.retriever_url,
        data_dir=args.data_dir,
        db=args.db,
        resume=args.resume,
        batch_size=args.batch_size,
        label=args.label,
        command=command_line(),
        leave_out_unanswerable=everything,
        skip_refused=everything,
        method_models=trained_models(methods, args.model, backend) if everything else {},
    )


def what_the_numbers_are(df, model: str, method_models: dict[str, str], primary: str) -> str:
    """The line under a summary table: the model, the questions, what "trained" means, where to read
    more, and whether any method's primary metric separates from the others (the best one's 95%
    interval above every other's)."""
    per = df[df["dataset"] == "Avg."] if (df["dataset"] == "Avg.").any() else df
    per = per.drop_duplicates("method", keep="last") if len(per) else per
    n = int(per["n"].max()) if len(per) else 0
    from harness.llm.adapters import get_adapter

    own = get_adapter(model)  # --model <base>+<method>: that method's trained policy
    models = {**({own.method: model} if own is not None else {}), **method_models}
    trained = ", ".join(f"{m} ({a})" for m, a in models.items() if m in set(per["method"])) or "none"
    line = (
        f"{model}; up to {n} questions a method. Trained = an RL method with its shipped adapter (run label "
        f"'trained'; here: {trained}); 'untrained policy' = an RL method on the bare base model; training, "
        "records and held-out tables: docs/training.md."
    )
    if len(per) >= 2:
        ranked = per.sort_values("primary", ascending=False)
        best, rest = ranked.iloc[0], ranked.iloc[1:]
        if float(best["primary_lo"]) <= float(rest["primary_hi"].max()):
            line += f" No method separates from the others on {primary} here (the 95% intervals overlap the best one's)."
        else:
            line += f" {best['method']} separates from the others on {primary} (95% intervals)."
    return line


def trained_models(methods: Sequence[str], model: str, backend: str) -> dict[str, str]:
    """``--method all`` on a packaged model served by llama.cpp: each RL method whose trained policy
    is shipped on that model (``harness.llm.adapters``) runs with it (label ``trained``); the others,
    and every method named with ``--method``, run with ``model`` itself."""
    from harness.llm.adapters import trained_preset_for
    from harness.llm.model_files import is_preset

    if backend != "llamacpp" or not is_preset(model):
        return {}
    found = {m: trained_preset_for(m, model) for m in methods}
    return {m: p for m, p in found.items() if p is not None}


def show_plan_and_confirm(args: argparse.Namespace, cfg: RunConfig, plans: Sequence[Sequence[tuple]]) -> None:
    """Print the plan (with --method, --yes or on a terminal, so that a refusal below stays one
    line) and ask, or refuse, as :func:`harness.eval.plan.confirm` decides."""
    from harness.eval.plan import confirm, describe, interactive, method_plans, recorded_costs
    from harness.secrets import redact

    runs_planned = method_plans(plans)
    example = f"--method {runs_planned[0].method} --limit 5"
    if args.method is not None or args.yes or interactive():  # a refusal below is one line
        costs, note = recorded_costs(args.db, args.model, [r.method for r in runs_planned])
        head = f"plan: bench {args.bench}; model {redact(args.model)} ({cfg.backend}); results {args.db}"
        print(
            "\n".join(describe(runs_planned, costs, note, head=head, asked=cfg.protocol.name)),
            file=sys.stderr,
        )
    confirm(runs_planned, method_given=args.method is not None, yes=args.yes, example=example)


def finish(db: Path, store: Store, runs: Sequence[MethodRun], status: int) -> int:
    """The lines after the summary tables (prefix reuse, where the results are, the failed samples)
    and the exit status: 1 when a sample failed, else ``status``."""
    from harness.results.summary import prefill_lines
    from harness.secrets import redact

    for line in prefill_lines(store, [r.run_id for r in runs]):
        print(line, file=sys.stderr)
    print(f"results: {db}  runs: {', '.join(r.run_id for r in runs)}", file=sys.stderr)
    failed = [r for r in runs if r.n_errors]
    if failed:
        n = sum(r.n_errors for r in failed)
        print(
            redact(  # the reason may quote a URL with its credentials (a server echoing its target)
                f"error: {n} sample(s) failed after the backend's retries and are not scored "
                f"(first: {failed[0].first_error}); runs {', '.join(r.run_id for r in failed)} are marked "
                "incomplete: fix the cause and rerun with --resume to retry them"
            ),
            file=sys.stderr,
        )
        return 1
    return status


def backend_options(args: argparse.Namespace) -> dict[str, object]:
    """The backend options given on the command line (the backend's defaults for the others)."""
    opts: dict[str, object] = {}
    if args.base_url:
        opts["base_urls"] = args.base_url
    if args.tokenizer:
        opts["tokenizer"] = args.tokenizer
    if args.request_timeout is not None:
        opts["timeout"] = args.request_timeout
    if args.retries is not None:
        opts["retries"] = args.retries
    if args.threads is not None:
        if args.base_url:
            from harness.errors import ConfigError

            raise ConfigError("--threads sets an in-process model's threads; a --base-url server has its own")
        from harness.llm.server import fit_threads

        opts["threads"] = fit_threads(args.threads, "--threads")  # lowered where the cores are busy
    if args.device is not None:
        # auto picks transformers only for a local HF directory (a training checkpoint)
        hf_dir = args.backend == "auto" and Path(args.model).is_dir()
        if args.base_url or not (args.backend == "transformers" or hf_dir):
            from harness.errors import ConfigError

            raise ConfigError("--device places the transformers backend's model; use --backend transformers")
        opts["device"] = args.device
    if args.slots is not None:
        opts["max_batch_size"] = args.slots
    if args.draft is not None:
        opts["draft"] = args.draft
    return opts


def print_summary(df, title: str, primary: str = "em") -> None:
    """The run summary table (:func:`harness.results.summary.run_summary`): scores in % as the app and the
    exports print them, the protocol's primary metric first (marked *) with its 95% interval, an
    ``Avg.`` row per method over its datasets, seconds per question once per method."""
    import math

    from rich.console import Console
    from rich.table import Table

    from harness.results.cost import format_usd
    from harness.results.summary import AVG

    def pct(x: float) -> str:
        return "" if x is None or math.isnan(x) else f"{100 * x:.1f}"

    def with_ci(d: dict) -> str:
        if d["primary"] is None or math.isnan(d["primary"]):
            return ""
        return f"{pct(d['primary'])} [{pct(d['primary_lo'])}, {pct(d['primary_hi'])}]"

    def num(spec: str):
        return lambda x: "" if x is None or (isinstance(x, float) and math.isnan(x)) else format(x, spec)

    table = Table(title=title)
    scores = {"em": "EM", "f1": "F1", "cover_em": "cover-EM"}
    cols = [
        ("method", "method", str),
        ("dataset", "dataset", str),
        ("n", "n", str),
        *([("errors", "errors", str)] if df["errors"].sum() else []),  # failed, not scored
        (None, f"{scores.get(primary, primary)}* (%)", with_ci),
        *((key, f"{header} (%)", pct) for key, header in scores.items() if key != primary),
        ("retrievals", "retrievals/q", num(".2f")),
        ("llm_calls", "LLM calls/q", num(".2f")),
        ("tokens", "tokens/q", num(".0f")),
        ("seconds_per_q", "s/q", num(".2f")),
        ("answered", "answered", lambda x: pct(x) + "%" if pct(x) else ""),
        ("cost_usd_per_q", "$/q", format_usd),
        ("usd_per_correct", "$/correct", format_usd),
    ]
    caption = [
        "*: the protocol's primary metric, 95% interval in brackets (0/1 values: Wilson score per "
        f"dataset, stratified Agresti-Coull for {AVG}; otherwise the percentile bootstrap over "
        f"questions); {AVG}: the unweighted mean over the method's datasets; s/q: the method's "
        "wall time per question, once per method"
    ]
    if "own_refs" in df.columns:  # a reader's references: its own paragraphs vs the labelled substitute
        cols += [("own_refs", "own", num(".0f")), ("substitute_refs", "subst.", num(".0f"))]
        caption.append(
            "own / subst.: questions answered from their own paragraphs / from the gold + BM25 substitute"
        )
    table.caption = "\n".join(caption)
    for _, header, _ in cols:
        table.add_column(header, justify="left" if header in ("method", "dataset") else "right")
    for row in df.to_dict("records"):
        table.add_row(*[fmt(row) if key is None else fmt(row.get(key)) for key, _, fmt in cols])
        if row["dataset"] == AVG:
            table.add_section()
    Console(width=180).print(table)
