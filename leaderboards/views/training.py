"""The training page: curves of RL / SFT runs, held-out points and tables, linked SFT runs."""

from __future__ import annotations

import math
import os
import shlex

import pandas as pd

# -- training runs (the training page) -------------------------------------------------------------
SFT_LABEL = "sft recipe "  # `harness sft` labels its train run "sft recipe <recipe>" (harness.rl.sft)
SFT_OUT_DEFAULT = "runs/{method}-{recipe}-sft"  # `harness sft --out`'s default (harness.cli.cmd_sft)
HELDOUT = "heldout/"  # harness.rl.heldout.record_heldout's metric prefix
HELDOUT_FIELDS = (
    "em",
    "em_lo",
    "em_hi",
    "f1",
    "n",
    "answered",
    "top_answer_share",
    "answer_entropy_bits",
    "em_diff",  # paired against the run's starting checkpoint (harness.rl.heldout.record_heldout)
    "em_diff_lo",
    "em_diff_hi",
)
# heldout/baseline/*: the template-majority baseline (harness.rl.heldout.record_baseline)
BASELINE = "baseline/"
SAMPLED = "sampled/"  # harness.rl.trainer: the rollout metrics over every rollout generated


def is_sft_run(label: str) -> bool:
    return str(label).startswith(SFT_LABEL)


def curve_metric(columns, name: str) -> str | None:
    """The logged name of a rollout metric: ``sampled/<name>`` (over every rollout generated; under
    DAPO dynamic sampling ``<name>`` covers only the kept groups) when logged, else ``<name>`` (runs
    logged before the trainer wrote ``sampled/``), else None."""
    cols = set(columns)
    for m in (SAMPLED + name, name):
        if m in cols:
            return m
    return None


def rollout_curves(wide: pd.DataFrame, names) -> pd.DataFrame:
    """The columns ``names`` of :func:`train_curves`'s frame under those names, each read from its
    logged name (:func:`curve_metric`); names not logged are left out."""
    found = {n: curve_metric(wide.columns, n) for n in names}
    return pd.DataFrame({n: wide[m] for n, m in found.items() if m is not None}, index=wide.index)


def reward_names(columns) -> list[str]:
    """The mean rewards a run logged (``reward/total_mean``, ``reward/outcome_mean``, one per
    component; not ``reward/total_std``), with or without the ``sampled/`` prefix, total and
    outcome first."""
    names = {
        n
        for n in (c.removeprefix(SAMPLED) for c in columns)
        if n.startswith("reward/") and n.endswith("_mean")
    }
    first = [n for n in ("reward/total_mean", "reward/outcome_mean") if n in names]
    return first + sorted(names - set(first))


def train_curves(steps: pd.DataFrame) -> pd.DataFrame:
    """``train_steps`` rows (``step, metric, value``) of one run as one column per metric, held-out
    metrics left out (they belong to checkpoints, :func:`heldout_points`); the index is the step
    1-based, as ``harness train`` prints "step 1/N": after the step shown as k, k optimizer steps
    are done, so a checkpoint's held-out step k sits at the same x."""
    rows = steps[~steps["metric"].str.startswith(HELDOUT)]
    wide = rows.pivot_table(index="step", columns="metric", values="value", aggfunc="first").sort_index()
    wide.index = wide.index + 1
    wide.index.name = "step"
    wide.columns.name = None
    return wide


def heldout_points(steps: pd.DataFrame) -> pd.DataFrame:
    """Held-out evaluations of one run's checkpoints (``heldout/*`` rows of ``train_steps``): one
    row per step with ``step`` as stored (optimizer steps behind the checkpoint, 0 = the run's
    starting model) and the columns of :data:`HELDOUT_FIELDS` (NaN where one was not logged)."""
    rows = steps[
        steps["metric"].str.startswith(HELDOUT) & ~steps["metric"].str.startswith(HELDOUT + BASELINE)
    ]
    wide = rows.assign(metric=rows["metric"].str.removeprefix(HELDOUT)).pivot_table(
        index="step", columns="metric", values="value", aggfunc="first"
    )
    out = wide.reindex(columns=list(HELDOUT_FIELDS)).sort_index().reset_index()
    out["step"] = out["step"].astype(int)
    out.columns.name = None
    return out


def sft_checkpoint(command: str, method: str, label: str) -> str | None:
    """The checkpoint directory an SFT run's command wrote (``<--out>/final``, or the default
    ``--out``), normalised; None for a run that is not an SFT run or a command that is not a
    command line."""
    if not is_sft_run(label):
        return None
    try:
        argv = shlex.split(command or "")
    except ValueError:
        return None
    out = SFT_OUT_DEFAULT.format(method=method, recipe=label.removeprefix(SFT_LABEL))
    for i, a in enumerate(argv):
        if a == "--out" and i + 1 < len(argv):
            out = argv[i + 1]
        elif a.startswith("--out="):
            out = a.removeprefix("--out=")
    return os.path.normpath(os.path.join(out, "final"))


def linked_sft_run(runs: pd.DataFrame, run_id: str) -> str | None:
    """The SFT run an RL run started from: the newest SFT run (``runs``: ``run_id, method, model,
    label, command``) of the same method whose checkpoint (:func:`sft_checkpoint`) is the RL run's
    ``--model`` as both commands spelled it (normalised). The store records no other link."""
    row = runs.set_index("run_id").loc[run_id]
    if is_sft_run(row["label"]):
        return None
    model = os.path.normpath(str(row["model"]))
    for r in runs.itertuples():  # newest first, as train_runs orders them
        if (
            r.run_id != run_id
            and r.method == row["method"]
            and sft_checkpoint(r.command, r.method, r.label) == model
        ):
            return str(r.run_id)
    return None


def heldout_table(chain: list[tuple[str, str, pd.DataFrame]]) -> pd.DataFrame:
    """The untrained / SFT / SFT+RL table from the held-out rows of a chain of training runs
    (``(run_id, label, train_steps rows)``, SFT runs first). Every held-out step of every run is a
    row named by its run label and step; ``checkpoint`` says which model it is: in an SFT run step 0
    is ``untrained`` and the last step ``SFT``; in another run step 0 is ``SFT`` and the last step
    ``SFT+RL`` when an SFT run precedes it in the chain (the caller vouches it started from that
    run's checkpoint), else ``start`` and ``RL``; steps between are ``<that> step k``. The first
    template-majority baseline a run of the chain logged (``heldout/baseline/*``) is a row
    ``template majority`` before that run's rows. Columns: ``checkpoint, run, step, EM [95%]``
    and ``EM vs start [95% paired]`` (text: the paired difference against the run's step 0) and
    :data:`HELDOUT_FIELDS`."""
    rows = []
    after_sft = False
    baseline_done = False
    for run_id, label, steps in chain:
        base = steps[steps["metric"].str.startswith(HELDOUT + BASELINE)]
        if len(base) and not baseline_done:
            b = dict(zip(base["metric"].str.removeprefix(HELDOUT + BASELINE), base["value"], strict=True))
            rows.append(
                {
                    "checkpoint": "template majority",
                    "run": label or run_id,
                    "run_id": run_id,
                    "step": None,
                    "EM [95%]": f"{b['em']:.3f} [{b['em_lo']:.3f}, {b['em_hi']:.3f}]",
                    "EM vs start [95% paired]": "",
                    **{f: b.get(f, math.nan) for f in HELDOUT_FIELDS},
                    "n": int(b["n"]),
                }
            )
            baseline_done = True
        pts = heldout_points(steps)
        sft = is_sft_run(label)
        first, last = ("untrained", "SFT") if sft else ("SFT", "SFT+RL") if after_sft else ("start", "RL")
        top = int(pts["step"].max()) if len(pts) else 0
        for p in pts.itertuples(index=False):
            rows.append(
                {
                    "checkpoint": first
                    if p.step == 0
                    else last
                    if p.step == top
                    else f"{last} step {p.step}",
                    "run": label or run_id,
                    "run_id": run_id,
                    "step": int(p.step),
                    "EM [95%]": f"{p.em:.3f} [{p.em_lo:.3f}, {p.em_hi:.3f}]",
                    "EM vs start [95% paired]": ""
                    if math.isnan(p.em_diff)
                    else f"{p.em_diff:+.3f} [{p.em_diff_lo:+.3f}, {p.em_diff_hi:+.3f}]",
                    **{f: getattr(p, f) for f in HELDOUT_FIELDS},
                    "n": None if math.isnan(p.n) else int(p.n),
                }
            )
        after_sft = after_sft or sft
    cols = ["checkpoint", "run", "run_id", "step", "EM [95%]", "EM vs start [95% paired]", *HELDOUT_FIELDS]
    return pd.DataFrame(rows, columns=cols)


__all__ = [
    "BASELINE",
    "HELDOUT",
    "HELDOUT_FIELDS",
    "SAMPLED",
    "SFT_LABEL",
    "SFT_OUT_DEFAULT",
    "curve_metric",
    "heldout_points",
    "heldout_table",
    "is_sft_run",
    "linked_sft_run",
    "reward_names",
    "rollout_curves",
    "sft_checkpoint",
    "train_curves",
]
