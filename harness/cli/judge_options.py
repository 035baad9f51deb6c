"""Command-line options for the LLM judge (``harness judge`` and ``harness run --judge-url``), and
the printed report. Nothing heavy is imported at module level."""

from __future__ import annotations

import argparse
import math
import sys
from typing import TYPE_CHECKING

from harness.cli import non_negative_int, positive_float, positive_int

if TYPE_CHECKING:
    from harness.judge.factory import JudgeSpec
    from harness.judge.stored import JudgeRunReport


def prompt_help() -> str:
    """``--judge-prompt``'s help: every registered judge prompt (the engine's and each plugin's
    manifest's ``judge_prompts``), so a paper's prompt is listed without an edit here."""
    # imported here, not at module level: this module stays light (see above); listing the names
    # reads the plugin manifests only (harness.plugins)
    from harness.judge.prompts import JUDGE_PROMPTS

    names = ", ".join(JUDGE_PROMPTS.names())
    return f"judge prompt: {names}; '<id>+logit' scores by the label's probability (needs logprobs)"


def report_judge_failures(report: JudgeRunReport) -> int:
    """One stderr line counting judge requests that failed for good (timeout / error: not scored,
    asked again on the next run); the exit status, 1 when there are any."""
    from harness.judge.parsers import RETRY_STATUSES

    n = sum(v for k, v in report.outcome.status_counts.items() if k in RETRY_STATUSES)
    if not n:
        return 0
    print(
        f"error: {n} judge request(s) failed after their retries ({report.judge_model}); those "
        "predictions have no judge score: run the judge again to retry them",
        file=sys.stderr,
    )
    return 1


def add_judge_args(p: argparse.ArgumentParser, *, inline: bool = False) -> None:
    """The judge's options; ``inline`` (``harness run``): an optional group, off unless a URL is given."""
    title = "LLM judge (optional: judge the predictions after the run)" if inline else "LLM judge"
    g = p.add_argument_group(title)
    g.add_argument(
        "--judge-url",
        default=None,
        help="OpenAI-compatible judge endpoint, e.g. http://127.0.0.1:8765/v1 (`harness serve-model`)",
    )
    g.add_argument(
        "--judge-model",
        default=None,
        help="the model name the judge server serves (e.g. smollm2, gpt-4o-mini)",
    )
    g.add_argument("--judge-prompt", default="default", help=prompt_help())
    g.add_argument(
        "--judge-concurrency", type=positive_int, default=4, help="judge requests in flight (default 4)"
    )
    if inline:
        return
    g.add_argument(
        "--judge-backend",
        default="openai",
        choices=["openai", "llamacpp", "transformers"],
        help="openai (with --judge-url) or an in-process backend over --judge-model",
    )
    g.add_argument(
        "--judge-timeout", type=positive_float, default=60.0, help="seconds per request (default 60)"
    )
    g.add_argument(
        "--judge-retries", type=non_negative_int, default=5, help="retries with back-off (default 5)"
    )
    g.add_argument(
        "--judge-rpm", type=positive_float, default=None, help="at most this many requests per minute"
    )
    g.add_argument(
        "--judge-api-key-env", default="OPENAI_API_KEY", help="environment variable holding the API key"
    )


def judge_spec_from_args(args: argparse.Namespace) -> JudgeSpec | None:
    """The judge the flags ask for; None when no judge is asked for (``harness run`` without one)."""
    from harness.errors import ConfigError
    from harness.judge.factory import JudgeSpec

    backend = getattr(args, "judge_backend", "openai")
    if args.judge_url is None and backend == "openai":
        if args.judge_model is not None:
            raise ConfigError("--judge-model needs --judge-url (or --judge-backend llamacpp|transformers)")
        return None
    if args.judge_model is None:
        raise ConfigError("--judge-model is required with a judge (the name the server serves)")
    kw: dict[str, object] = {}
    for flag, field in (
        ("judge_timeout", "timeout"),
        ("judge_retries", "retries"),
        ("judge_rpm", "requests_per_minute"),
        ("judge_api_key_env", "api_key_env"),
    ):
        if getattr(args, flag, None) is not None:
            kw[field] = getattr(args, flag)
    try:
        return JudgeSpec(
            model=args.judge_model,
            url=args.judge_url,
            backend=backend,
            prompt=args.judge_prompt,
            concurrency=args.judge_concurrency,
            **kw,
        )
    except ValueError as e:  # pydantic's ValidationError
        raise ConfigError(f"judge options: {e}") from e


def _fmt(x: object, spec: str = "{:.3f}") -> str:
    if x is None or (isinstance(x, float) and math.isnan(x)):
        return "-"
    return spec.format(x)


def print_report(report: JudgeRunReport, *, price_table=None) -> None:
    """Scores, status counts, requests and cost, and the confusion counts against EM / cover-EM."""
    from rich.console import Console
    from rich.table import Table

    console = Console(width=160, file=sys.stdout)
    o = report.outcome
    t = Table(title=f"{report.metric} over {len(report.samples)} stored predictions")
    for h in ("method", "dataset", "n", "scored", "judge"):
        t.add_column(h, justify="left" if h in ("method", "dataset") else "right")
    for r in report.scores.itertuples(index=False):
        t.add_row(r.method, r.dataset, str(r.n), str(r.scored), _fmt(r.judge))
    console.print(t)

    statuses = ", ".join(f"{k} {v}" for k, v in sorted(o.status_counts.items()))
    cost = ""
    if price_table is not None and o.asked:
        from harness.results.cost import format_usd

        usd = price_table.token_cost(report.judge_model, o.prompt_tokens, o.completion_tokens)
        cost = (
            f"; cost {format_usd(usd)}"
            if usd is not None
            else "; cost unknown (no price for the judge model)"
        )
    console.print(
        f"verdicts: {statuses}\nrequests: {o.asked} asked, {o.cached} from the cache, {o.duplicates} duplicates; "
        f"{o.prompt_tokens} prompt + {o.completion_tokens} completion tokens in {o.seconds:.1f} s{cost}\n"
        f"wrote {report.metric_rows} sample metric rows"
    )
    not_scored = sum(
        v for k, v in o.status_counts.items() if k not in ("ok", "fallback_parse", "no_prediction")
    )
    if not_scored:
        console.print(
            f"[yellow]{not_scored} prediction(s) have no judge score (status above); "
            "timeouts and errors are asked again on the next run[/yellow]"
        )
    if report.agreement.empty:
        return
    a = Table(title="judge vs string metrics (counts): judge correct/incorrect x metric 1/0")
    for h in ("method", "dataset", "metric", "n", "J+ M1", "J+ M0", "J- M1", "J- M0", "not scored", "agree"):
        a.add_column(h, justify="left" if h in ("method", "dataset", "metric") else "right")
    for r in report.agreement.itertuples(index=False):
        a.add_row(
            r.method,
            r.dataset,
            r.metric,
            str(r.n),
            str(r.judge_correct_metric_1),
            str(r.judge_correct_metric_0),
            str(r.judge_incorrect_metric_1),
            str(r.judge_incorrect_metric_0),
            str(r.not_scored),
            _fmt(r.agreement, "{:.0%}"),
        )
    console.print(a)
