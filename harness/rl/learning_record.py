"""The committed record of a learning run, and the tables ``docs/training.md`` prints from it.

A learning run (SFT warm-up, then RL; ``tests/rl/test_learning_sft_rl.py``) is judged on the
held-out questions of its split. Its record is one small JSON file under ``results/``: for every
checkpoint evaluated (the untrained model, the SFT checkpoint, RL checkpoints, the final one) and
for the template-majority baseline, the per-question ``id``, ``prediction``, ``em`` and ``f1`` of
its ``harness run`` on the held-out questions; and the per-step curves of the SFT and RL runs
(``train_steps``). :func:`learning_tables` renders the documented tables from the record alone
(Wilson intervals for EM, paired bootstraps between checkpoints: :mod:`harness.rl.heldout`), so a
test checks that ``docs/training.md`` prints exactly what the record holds.

Build one with ``python scripts/learning_record.py build`` (``--help``) from the run's databases.
"""

from __future__ import annotations

import json
import math
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from harness.errors import ConfigError
from harness.metrics.normalize import normalize_answer
from harness.rl.heldout import (
    HeldoutReport,
    heldout_report,
    paired_diff,
    report_from_rows,
    restrict,
    template_majority_report,
)

SCHEMA = 1
BASELINE = "template majority"
# RL curve columns: (logged metric, column title, format); the sampled/* metrics are over every
# rollout generated, kept for the update or not (harness.rl.trainer)
RL_CURVE = (
    ("sampled/reward/total_mean", "reward", "{:.3f}"),
    ("sampled/reward/em_mean", "EM", "{:.3f}"),
    ("sampled/reward/total_std", "reward std", "{:.3f}"),
    ("sampled/zero_variance_groups", "all-equal groups", "{:.0%}"),
    ("ds_rounds", "rounds", "{:.0f}"),
    ("kl", "KL to SFT", "{:.4f}"),
    ("approx_kl", "KL old-new", "{:.1e}"),  # about 1e-5 to 1e-4 per update: 4 decimals would show 0
    ("entropy", "entropy", "{:.3f}"),
    ("sampled/response_len_mean", "response tokens", "{:.1f}"),
    ("clip_frac", "clip frac", "{:.3f}"),
    ("grad_norm", "grad norm", "{:.3f}"),
    ("engine/logp_abs_diff", "engine-learner logp diff", "{:.4f}"),
    ("seconds", "seconds", "{:.0f}"),
)


@dataclass(frozen=True)
class Checkpoint:
    """One evaluated model of the record: its ``label`` (``untrained``, ``SFT``, ``SFT+RL step k``,
    ``SFT+RL``, or the baseline), what was evaluated (``model``), the RL steps behind it (None
    before RL) and its held-out report."""

    label: str
    model: str | None
    rl_steps: int | None
    report: HeldoutReport


def checkpoint_entry(label: str, model: str | None, rl_steps: int | None, report: HeldoutReport) -> dict:
    """The record's entry of one checkpoint (rows sorted by question id)."""
    order = sorted(range(len(report.sample_ids)), key=lambda i: report.sample_ids[i])
    return {
        "label": label,
        "model": model,
        "rl_steps": rl_steps,
        "eval_run_id": report.run_id,
        "rows": [
            {
                "id": report.sample_ids[i],
                "prediction": report.predictions[i],
                "em": report.em_values[i],
                "f1": report.f1_values[i],
            }
            for i in order
        ],
    }


def eval_entry(label: str, rl_steps: int | None, db: Path, run_label: str) -> dict:
    """:func:`checkpoint_entry` of the eval run labelled ``run_label`` in the database ``db`` (its
    ``--model`` as the run stored it)."""
    from harness.results.store import Store

    store = Store(db)
    runs = store.query("SELECT run_id, model FROM runs WHERE label = $l", {"l": run_label})
    if len(runs) != 1:
        raise ConfigError(f"{db}: {len(runs)} runs labelled {run_label!r} (need exactly one)")
    run_id, model = str(runs["run_id"].iloc[0]), str(runs["model"].iloc[0])
    return checkpoint_entry(label, portable_model(model), rl_steps, heldout_report(store, run_id))


def portable_model(model: str, cwd: Path | None = None) -> str:
    """``model`` as a committed record keeps it: a name as it is, a checkpoint folder relative to the
    working directory (``cwd``, default the current one), never a machine's absolute path."""
    path = Path(model)
    if not path.is_absolute():
        return model
    here = (cwd or Path.cwd()).resolve()
    if not path.is_relative_to(here):
        raise ConfigError(
            f"eval model {model} is outside the working directory {here}: build the record from the "
            "folder that holds the checkpoints, so it keeps no machine path"
        )
    return str(path.relative_to(here))


def train_curve(db: Path, run_id: str) -> dict[str, list[float | None]]:
    """Every metric of one training run's ``train_steps`` (held-out metrics left out) as
    ``{"step": [1, 2, ...], metric: [value or None per step]}``, steps numbered from 1."""
    from harness.results.store import Store

    df = Store(db).query(
        "SELECT step, metric, value FROM train_steps WHERE run_id = $r AND metric NOT LIKE 'heldout/%'",
        {"r": run_id},
    )
    if not len(df):
        raise ConfigError(f"{db}: training run {run_id!r} logged no steps")
    wide = df.pivot_table(index="step", columns="metric", values="value", aggfunc="first").sort_index()
    out: dict[str, list[Any]] = {"step": [int(s) + 1 for s in wide.index]}
    for m in sorted(wide.columns):
        out[m] = [None if math.isnan(v) else float(v) for v in wide[m]]
    return out


def stitched_curve(curves: list[dict]) -> tuple[dict, list[list[int]]]:
    """One curve from the curves of a run and the runs it resumed (oldest first): each run's steps
    up to the first step of the run that resumed it (a resume restarts from the last checkpoint,
    so steps logged after it by a run that then died are redone), and the first and last step each
    run gives; a metric one run never logged is None on its steps. Refused in one line when a run
    does not continue where the one before it left off."""
    names = sorted({k for c in curves for k in c if k != "step"})
    merged: dict = {"step": [], **{k: [] for k in names}}
    segments: list[list[int]] = []
    for i, c in enumerate(curves):
        stop = curves[i + 1]["step"][0] if i + 1 < len(curves) else None
        keep = [j for j, s in enumerate(c["step"]) if stop is None or s < stop]
        if not keep or (merged["step"] and c["step"][keep[0]] != merged["step"][-1] + 1):
            raise ConfigError(
                f"run {i + 1} of the resumed chain (steps {c['step'][0]}-{c['step'][-1]}) does not continue "
                f"after step {merged['step'][-1] if merged['step'] else 0}"
                f"{f' before step {stop}' if stop is not None else ''}: "
                "give --resumed-from in the order the runs ran"
            )
        for k in ["step", *names]:
            merged[k].extend(c[k][j] if k in c else None for j in keep)
        segments.append([c["step"][keep[0]], c["step"][keep[-1]]] if keep else [])
    return merged, segments


def load_record(path: Path) -> dict:
    rec = json.loads(Path(path).read_text())
    if rec.get("schema") != SCHEMA:
        raise ConfigError(f"{path}: schema {rec.get('schema')!r}, this code reads schema {SCHEMA}")
    return rec


def write_record(path: Path, record: dict) -> None:
    Path(path).write_text(json.dumps(record, indent=1, ensure_ascii=False) + "\n")


def checkpoints(record: dict) -> list[Checkpoint]:
    """The record's checkpoints with their reports, in record order."""
    out = []
    for c in record["checkpoints"]:
        rows = c["rows"]
        rep = report_from_rows(
            c.get("eval_run_id") or c["label"],
            [r["id"] for r in rows],
            [r["prediction"] for r in rows],
            [r["em"] for r in rows],
            [r["f1"] for r in rows],
        )
        out.append(Checkpoint(c["label"], c["model"], c["rl_steps"], rep))
    return out


def check_record(record: dict, data_dir: Path | None = None) -> None:
    """Every checkpoint covers exactly the split's held-out questions, and the baseline's rows are
    :func:`template_majority_report` of the split recomputed now (one ConfigError line otherwise)."""
    from harness.rl.split import load_split

    held = {i for ids in load_split(record["split"]).heldout.values() for i in ids}
    cps = checkpoints(record)
    partial = {c["label"] for c in record["checkpoints"] if c.get("partial")}
    for c in cps:
        got = set(c.report.sample_ids)
        if got != held and not (c.label in partial and got < held):
            raise ConfigError(
                f"record checkpoint {c.label!r}: {len(c.report.sample_ids)} questions, not the "
                f"{len(held)} held-out questions of split {record['split']!r}"
                + (" (a partial checkpoint must be a subset of them)" if c.label in partial else "")
            )
    base = [c for c in cps if c.label == BASELINE]
    if len(base) != 1:
        raise ConfigError(f"record: {len(base)} {BASELINE!r} rows (need one)")
    fresh = template_majority_report(record["split"], data_dir=data_dir)
    if (
        checkpoint_entry(BASELINE, None, None, fresh)["rows"]
        != next(c for c in record["checkpoints"] if c["label"] == BASELINE)["rows"]
    ):
        raise ConfigError(f"record: the {BASELINE!r} rows differ from the split's baseline recomputed now")


def _interval(a: Any, fmt: str = "{:.3f}") -> str:
    return f"{fmt.format(a.mean)} [{fmt.format(a.lo)}, {fmt.format(a.hi)}]"


def _signed(a: Any) -> str:
    return f"{a.mean:+.3f} [{a.lo:+.3f}, {a.hi:+.3f}]"


def heldout_table(cps: Sequence[Checkpoint]) -> str:
    lines = [
        "| checkpoint | held-out n | EM [95% Wilson] | F1 [95% bootstrap] | answered | top answer (share) | answer entropy |",
        "|---|---|---|---|---|---|---|",
    ]
    for c in cps:
        r, a = c.report, c.report.answers
        lines.append(
            f"| {c.label} | {r.em.n} | {_interval(r.em)} | {_interval(r.f1)} | {a.answered:.0%} | "
            f"{f'`{a.top_answer}`' if a.top_answer else 'none'} ({a.top_share:.0%}) | {a.entropy_bits:.2f} bits |"
        )
    return "\n".join(lines)


def comparisons(cps: Sequence[Checkpoint]) -> list[tuple[str, str]]:
    """The pairs (a, b) the paired table shows as b - a: SFT against the untrained model and the
    baseline, every RL checkpoint against SFT."""
    labels = [c.label for c in cps]
    pairs = [(a, "SFT") for a in ("untrained", BASELINE) if a in labels and "SFT" in labels]
    pairs += [("SFT", c.label) for c in cps if c.rl_steps is not None and "SFT" in labels]
    return pairs


def _norm(prediction: str | None) -> str:
    return normalize_answer(prediction) if prediction else ""


def paired_table(cps: Sequence[Checkpoint]) -> str:
    """b - a question by question; when one of the two was evaluated on part of the held-out
    questions only (a partial checkpoint), on the questions both were evaluated on, and the
    ``questions`` column says how many. ``answers changed``: questions whose normalised prediction
    differs (did the policy move at all on them, right or wrong)."""
    by = {c.label: c.report for c in cps}
    lines = [
        "| comparison (same questions) | questions | EM difference [95% paired bootstrap] | F1 difference [95% paired bootstrap] | right only in the first | right only in the second | answers changed |",
        "|---|---|---|---|---|---|---|",
    ]
    for a, b in comparisons(cps):
        ra, rb = by[a], by[b]
        common = set(ra.sample_ids) & set(rb.sample_ids)
        ra, rb = restrict(ra, common), restrict(rb, common)
        em, f1 = paired_diff(ra, rb, "em"), paired_diff(ra, rb, "f1")
        pa = dict(zip(ra.sample_ids, ra.predictions, strict=True))
        pb = dict(zip(rb.sample_ids, rb.predictions, strict=True))
        changed = sum(_norm(pa[q]) != _norm(pb[q]) for q in common)
        lines.append(
            f"| {b} - {a} | {len(common)} | {_signed(em.diff)} | {_signed(f1.diff)} | {em.b_only} | {em.a_only} "
            f"| {changed} |"
        )
    return "\n".join(lines)


def rl_curve_table(curve: dict[str, list[float | None]]) -> str:
    cols = [(m, t, f) for m, t, f in RL_CURVE if m in curve]
    lines = ["| step | " + " | ".join(t for _m, t, _f in cols) + " |", "|---" * (len(cols) + 1) + "|"]
    for i, step in enumerate(curve["step"]):
        cells = []
        for m, _t, f in cols:
            v = curve[m][i]
            cells.append("" if v is None else f.format(v))
        lines.append(f"| {step} | " + " | ".join(cells) + " |")
    return "\n".join(lines)


def learning_tables(record: dict) -> str:
    """The markdown ``docs/training.md`` prints from the record: held-out scores per checkpoint,
    the paired differences, and the RL run's per-step curve (when the record has one)."""
    cps = checkpoints(record)
    parts = [heldout_table(cps), paired_table(cps)]
    if "rl" in record.get("curves", {}):
        parts.append(rl_curve_table(record["curves"]["rl"]))
    return "\n\n".join(parts)
