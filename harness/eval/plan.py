"""The plan ``harness run`` prints before it starts, and the confirmation a large run needs.

A plan is known before anything is written: :meth:`harness.eval.runner.Runner.plan_groups` has
checked every method against its protocol, the bench and the backend, and selected its questions.
The estimate of LLM calls and time comes from the method's recorded cost: the mean LLM calls and
seconds per question of the finished samples of its earlier runs with the same model in the
results file (read-only; a plan never creates that file). A method never run with that model has
no estimate, and the plan says so.
"""

from __future__ import annotations

import sys
from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

from harness.errors import ConfigError, HarnessError

# method x question pairs above which an interactive run asks before starting (a few hours of the
# packaged model on a laptop CPU: ~10 s per question with the search methods)
CONFIRM_ABOVE = 500


@dataclass(frozen=True)
class MethodPlan:
    """One planned run: a method, the protocol it runs under, its questions per dataset."""

    method: str
    protocol: str
    protocol_id: str
    questions: tuple[tuple[str, int], ...]  # (dataset, n) in bench order

    @property
    def n(self) -> int:
        return sum(n for _, n in self.questions)


@dataclass(frozen=True)
class Cost:
    """A method's recorded cost per question with one model: means over ``samples`` finished samples."""

    llm_calls: float
    seconds: float
    samples: int


def method_plans(plans: Sequence[Sequence[tuple]]) -> list[MethodPlan]:
    """The runs of :meth:`Runner.plan_groups`'s result (per group: (method, examples, protocol))."""
    out = []
    for plan in plans:
        for method, examples, proto in plan:
            per = Counter(e.dataset for e, _ in examples)
            out.append(MethodPlan(method.name, proto.name, proto.protocol_id, tuple(per.items())))
    return out


COST_SQL = """
SELECT r.method, avg(s.n_llm_calls) AS llm_calls, avg(s.latency_s) AS seconds, count(*) AS samples
FROM samples s JOIN runs r USING (run_id)
WHERE r.kind = 'eval' AND r.model = $model AND list_contains($methods, r.method)
  AND coalesce(s.extraction_status <> $error, true)
GROUP BY r.method
"""


def recorded_costs(db: Path, model: str, methods: Sequence[str]) -> tuple[dict[str, Cost], str]:
    """Per method, its recorded cost with ``model`` in the results file ``db`` (none when the file
    does not exist yet), and a note saying where the estimates come from or why there are none."""
    if not db.exists():
        return {}, f"no estimate: {db} holds no earlier run yet"
    from harness.results.store import ERROR_STATUS, DamagedStoreError, Store

    try:  # a damaged file is refused here, in one line, before the plan is printed
        df = Store(db, read_only=True, lock_timeout=1.0).query(
            COST_SQL, {"model": model, "methods": list(methods), "error": ERROR_STATUS}
        )
    except DamagedStoreError:
        raise
    except HarnessError as e:  # a run writing it right now holds its lock: the plan waits for no one
        return {}, f"no estimate: {db} could not be read ({e})"
    costs = {
        str(r.method): Cost(float(r.llm_calls or 0.0), float(r.seconds or 0.0), int(r.samples))
        for r in df.itertuples(index=False)
    }
    return costs, f"estimates: the mean per question of each method's earlier runs with this model in {db}"


def format_duration(seconds: float) -> str:
    if seconds < 90:
        return f"{seconds:.0f} s"
    if seconds < 90 * 60:
        return f"{seconds / 60:.0f} min"
    if seconds < 48 * 3600:
        return f"{seconds / 3600:.1f} h"
    return f"{seconds / 86400:.1f} days"


def describe(
    runs: Sequence[MethodPlan], costs: dict[str, Cost], note: str, *, head: str, asked: str
) -> list[str]:
    """The plan as lines: ``head``, one line per run (its protocol, marked when it is the method's
    own rather than the ``asked`` one; questions per dataset; estimated LLM calls and time where a
    cost is recorded), a total, and ``note``."""
    lines = [head]
    width = max(len(r.method) for r in runs)
    calls = seconds = 0.0
    unknown = []
    for r in runs:
        per = ", ".join(f"{ds} {n}" for ds, n in r.questions)
        c = costs.get(r.method)
        if c is None:
            est = "no recorded cost"
            unknown.append(r.method)
        else:
            calls += c.llm_calls * r.n
            seconds += c.seconds * r.n
            est = f"~{c.llm_calls * r.n:,.0f} LLM calls, ~{format_duration(c.seconds * r.n)}"
        own = "" if r.protocol == asked else ", its own protocol: a separate run"
        lines.append(
            f"  {r.method:<{width}}  {r.protocol} ({r.protocol_id}{own})  {r.n:,} questions ({per}); {est}"
        )
    total = f"total: {len(runs)} run(s), {sum(r.n for r in runs):,} questions"
    if len(unknown) < len(runs):
        total += f"; ~{calls:,.0f} LLM calls, ~{format_duration(seconds)}"
        if unknown:
            total += f" for the {len(runs) - len(unknown)} with a recorded cost"
    lines += [total, note]
    return lines


def interactive() -> bool:
    """Both stdin and stderr are a terminal: someone can answer a question."""
    return sys.stdin.isatty() and sys.stderr.isatty()


def confirm(runs: Sequence[MethodPlan], *, method_given: bool, yes: bool, example: str) -> None:
    """Refuse (ConfigError, one line) a run that needs ``--yes`` and lacks it: every method because
    none was named, or (on a terminal) more than :data:`CONFIRM_ABOVE` method x question pairs; on a
    terminal the question is asked instead."""
    size = sum(r.n for r in runs)
    if yes:
        return
    if not method_given:
        why = f"no --method given: this runs all {len(runs)} methods, {size:,} questions across the runs"
    elif size > CONFIRM_ABOVE and interactive():
        why = f"this runs {len(runs)} method(s), {size:,} questions across the runs"
    else:
        return
    if interactive():
        print(f"{why}. Start? [y/N] ", end="", file=sys.stderr, flush=True)
        if sys.stdin.readline().strip().lower() in ("y", "yes"):
            return
        raise ConfigError("not started; nothing was written")
    raise ConfigError(f"{why}; nothing was written: pass --yes to run it, or choose, e.g. {example}")
