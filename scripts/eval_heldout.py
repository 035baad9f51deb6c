"""Evaluate a model on a split's held-out questions with both metrics of issue 43, into a record.

    # the SFT checkpoint: greedy EM, then 8 samples a question at temperature 1 (mean@8 EM, pass@8)
    python scripts/eval_heldout.py run --record results/heldout-learning-400.json --label SFT \\
        --model runs/long-sft/final --samples 8 --temperature 1
    # the untrained policy and the retrieve-then-read baseline (greedy only)
    python scripts/eval_heldout.py run --record results/heldout-learning-400.json --label untrained \\
        --model smollm2-135m-instruct --samples 0
    python scripts/eval_heldout.py run --record results/heldout-learning-400.json --label naive_rag \\
        --method naive_rag --model smollm2-135m-instruct --samples 0
    python scripts/eval_heldout.py template-majority --record results/heldout-learning-400.json
    # one evaluation in two parts side by side (one engine each), then joined into one record
    python scripts/eval_heldout.py run --split learning-multihop --method r_search --model smollm2+r_search \
        --label RL --samples 0 --questions 0:201 --record runs/records/rl-a.json
    python scripts/eval_heldout.py run --split learning-multihop --method r_search --model smollm2+r_search \
        --label RL --samples 0 --questions 201:402 --record runs/records/rl-b.json
    python scripts/eval_heldout.py merge runs/records/rl-a.json runs/records/rl-b.json --label RL \
        --record runs/records/rl.json
    python scripts/eval_heldout.py pairs results/heldout-learning-400.json "template majority,naive_rag"
    python scripts/eval_heldout.py tables results/heldout-learning-400.json --pair naive_rag,SFT
    # a run's checkpoint kept at step 20, evaluated afterwards as the run's held-out step 20
    python scripts/eval_heldout.py step --run runs/long --saved runs/long/kept/step-20 \
        --model runs/long-sft/final --samples 0 --threads 2 --db runs/long.duckdb
    python scripts/eval_heldout.py step --run runs/long --saved runs/long/final \
        --model runs/long-sft/final --samples 0 --threads 2 --db runs/long.duckdb
    # mean@8 of the run's start (step 0) in parts, one thread each, two side by side; merged into
    # heldout/step-0.json when the parts cover the 400 questions
    python scripts/eval_heldout.py step --run runs/long --saved start --model runs/long-sft/final \
        --samples 8 --threads 1 --questions 0:200
    python scripts/eval_heldout.py step --run runs/long --saved start --model runs/long-sft/final \
        --samples 8 --threads 1 --questions 200:400
    # a warm start before RL: groups of 8 at temperature 1 on the first 16 RL questions (train side)
    python scripts/eval_heldout.py spread --model runs/long-sft/final --label SFT --recipe cpu-grpo-long

``run`` calls ``harness.rl.heldout_eval.evaluate_heldout`` (what the trainer calls every
``heldout_every`` steps): llama.cpp over the packaged base with the checkpoint as a GGUF LoRA
adapter, the ``mini`` protocol (as ``harness run``), one thread and one slot by default. The record
(JSON, relative paths only) keeps every question's greedy answer and sampled answers; an evaluation
of the same label is replaced. ``--limit N`` evaluates the first N held-out questions only and
writes nothing unless ``--record`` is given with ``--partial-ok`` (a timing or smoke check).
``step`` is the trainer's held-out evaluation of a saved checkpoint folder, deferred (a run made
with ``heldout_every=0`` and its checkpoints kept; the run's ``final/``, LoRA merged, is evaluated
as a model, its difference to the packaged base one adapter): the same files (``<run>/heldout/step-N.gguf``
and ``.json``), paired against ``<run>/heldout/step-0.json`` when that exists, and with ``--db``
the same rows in the run's ``train_steps``; ``--saved start`` is the run's policy before its first
update (step 0), and ``--questions LO:HI`` evaluates part of the held-out set, merged into
``step-N.json`` once the parts cover it (``harness.rl.heldout_eval.merge_parts``). ``tables`` prints the markdown tables (``harness.rl.heldout_eval.evals_table`` /
``comparisons_table``); ``--pair A,B`` adds the paired comparison B - A.
"""

from __future__ import annotations

import argparse
import os
import sys
from pathlib import Path


def _record(path: Path, split: str) -> dict:
    from harness.rl.heldout_eval import RECORD_SCHEMA, load_record

    if path.exists():
        rec = load_record(path)
        if rec["split"] != split:
            from harness.errors import ConfigError

            raise ConfigError(f"{path}: a record of split {rec['split']!r}, not {split!r}")
        return rec
    return {"schema": RECORD_SCHEMA, "split": split, "evaluations": []}


def _write(path: Path, rec: dict) -> None:
    import json

    from harness.results.lifecycle import code_commit

    rec = {**rec, "commit": code_commit()}
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(rec, indent=1, ensure_ascii=False) + "\n")


def _protocol(name: str | None):
    """The protocol preset ``name`` (None: ``mini``, what ``harness run`` evaluates under)."""
    from harness.eval.protocol import mini, preset

    return mini() if name is None else preset(name)


def _reward(method: str, recipe_name: str | None):
    """(the reward in force at the recipe's last step, its context with the recipe's auxiliary
    models opened, a function closing them), or Nones without ``--reward-recipe``."""
    if recipe_name is None:
        return None, lambda: None
    from harness.llm.base import make_backend
    from harness.method import RewardContext
    from harness.methods_registry import get_trainable

    _m, recipe = get_trainable(method, recipe_name)
    last = recipe.steps - 1
    aux = {role: make_backend(spec) for role, spec in recipe.aux_models.items()}

    def close() -> None:
        for b in aux.values():
            b.close()

    return (recipe.reward_at(last), RewardContext(step=last, models=aux, total_steps=recipe.steps)), close


def run(args: argparse.Namespace) -> int:
    from harness.errors import ConfigError
    from harness.results.lifecycle import code_commit
    from harness.rl.heldout_eval import heldout_questions
    from harness.rl.learning_record import portable_model

    # the model as the record will keep it, asked now: a checkpoint outside the working directory
    # was refused only after the whole evaluation had run (73 minutes of one, 2026-11-29)
    args.model_entry = portable_model(args.model) if Path(args.model).exists() else args.model
    if args.record is not None and not code_commit():
        # asked before the work, as the model path is: a record of unknown code cannot be traced
        raise ConfigError(
            f"{args.record}: no git commit here and HARNESS_COMMIT is unset, so the record would name no code; "
            "run from a git checkout, or set HARNESS_COMMIT to the commit this copy was exported from"
        )
    qs = heldout_questions(args.split)
    if args.limit is not None:
        qs = qs[: args.limit]
        if args.record is not None and not args.partial_ok:
            raise ConfigError("--limit evaluates part of the held-out set: add --partial-ok to record it")
    args.first = 0
    if args.questions is not None:
        if args.limit is not None:
            raise ConfigError("--questions and --limit: give one")
        args.first, hi = _range(args.questions)
        qs = qs[args.first : hi]
    reward, close = _reward(args.method, args.reward_recipe)
    try:
        ev = _run_eval(args, qs, reward)
    finally:
        close()
    return _finish(args, ev)


def _run_eval(args: argparse.Namespace, qs: list, reward):
    from harness.rl.heldout_eval import evaluate_heldout

    return evaluate_heldout(
        args.model,
        qs,
        method=args.method,
        samples=args.samples,
        temperature=args.temperature,
        seed=args.seed,
        adapters=[Path(a) for a in args.adapter],
        engine=args.engine,
        threads=args.threads,
        slots=args.slots,
        batch_size=args.batch_size,
        n_ctx=args.n_ctx,
        label=args.label,
        progress=not args.no_progress,
        protocol=_protocol(args.protocol),
        reward=reward,
        first=args.first,
    )


def _finish(args: argparse.Namespace, ev) -> int:
    from harness.rl.heldout_eval import put_eval

    load = os.getloadavg()
    from dataclasses import replace

    ev = replace(
        ev,
        model=args.model_entry,
        meta={
            **ev.meta,
            "loadavg_at_end": [round(x, 2) for x in load],
            "limit": args.limit,
            **({"questions": [args.first, args.first + ev.n]} if args.questions is not None else {}),
        },
    )
    print(ev.line(), f"({ev.seconds:.0f} s, load average {load[0]:.2f} {load[1]:.2f} {load[2]:.2f})")
    if args.record is not None:
        rec = put_eval(_record(args.record, args.split), ev)
        _write(args.record, rec)
        print(f"{args.record}: {len(rec['evaluations'])} evaluations")
    return 0


def _range(spec: str) -> tuple[int, int]:
    from harness.errors import ConfigError

    lo, sep, hi = spec.partition(":")
    if not sep or not lo.isdigit() or not hi.isdigit() or int(lo) >= int(hi):
        raise ConfigError(f"--questions {spec!r}: expected LO:HI with LO < HI, e.g. 0:200")
    return int(lo), int(hi)


def merge(args: argparse.Namespace) -> int:
    """The parts of one evaluation (``run --questions LO:HI``, each in its own record) as one
    evaluation of the whole held-out set in ``--record`` (:func:`harness.rl.heldout_eval.merge_parts`)."""
    from dataclasses import replace

    from harness.errors import ConfigError
    from harness.rl.heldout_eval import heldout_questions, load_record, merge_parts, put_eval, record_evals

    parts = []
    split = None
    # the code that evaluated: the parts' records' commit (this process only joins them)
    commits: set[str] = set()
    for f in args.parts:
        rec = load_record(f)
        split = split or rec["split"]
        if rec["split"] != split:
            raise ConfigError(f"{f}: split {rec['split']!r}, not {split!r} as the first part")
        parts += [e for e in record_evals(rec) if e.label == args.label]
        commits.add(str(rec.get("commit", "")))
    if not parts:
        raise ConfigError(f"no evaluation labelled {args.label!r} in {', '.join(map(str, args.parts))}")
    ev = merge_parts(parts, heldout_questions(split))
    ordered = sorted(commits)
    ev = replace(ev, meta={**ev.meta, "commit": ordered[0] if len(ordered) == 1 else ordered})
    rec = put_eval(_record(args.record, split), ev)
    _write(args.record, rec)
    print(f"{args.record}: {ev.line()} (from {len(parts)} parts)")
    return 0


def step(args: argparse.Namespace) -> int:
    """A run's saved checkpoint, evaluated as the trainer does at a held-out step."""
    import json

    from harness.errors import ConfigError
    from harness.rl.heldout_eval import HeldoutEval, evaluate_step, heldout_questions
    from harness.rl.recipe import Recipe
    from harness.rl.trainer import saved_policy, start_policy

    part = _range(args.questions) if args.questions is not None else None
    if str(args.saved) == "start":
        # the run's policy before its first update, with the recipe the run saved
        recipe_file = args.run / "checkpoint" / "recipe.json"
        if not recipe_file.is_file():
            raise ConfigError(
                f"--saved start: {recipe_file} is missing (the run's recipe); give a kept checkpoint"
            )
        recipe = Recipe.model_validate_json(recipe_file.read_text())
        model, policy, n = args.model, start_policy(args.model, recipe), 0
    elif (args.saved / "harness_train.json").is_file():
        # the run's final checkpoint (LoRA merged; no checkpoint is saved at the last step):
        # evaluated as a model, its difference to the packaged base one adapter
        model, policy = str(args.saved), None
        recipe = Recipe.model_validate_json((args.saved / "recipe.json").read_text())
        n = int(json.loads((args.saved / "harness_train.json").read_text())["steps"])
    else:
        model = args.model
        policy, recipe, n = saved_policy(args.model, args.saved)
    start_file = args.run / "heldout" / "step-0.json"
    start = HeldoutEval.from_dict(json.loads(start_file.read_text())) if start_file.is_file() else None
    ev = evaluate_step(
        recipe,
        model,
        policy,
        n,
        args.run,
        samples=args.samples,
        start=start if start is not None and start.k == args.samples else None,
        threads=args.threads,
        questions=part,
    )
    whole = len(ev.sample_ids) == len(heldout_questions(recipe.split))
    if args.db is not None and whole:
        # opened only now: an evaluation holds it for minutes, and two may run side by side
        from harness.results.store import Store
        from harness.rl.heldout_eval import record_heldout_eval

        run_id = json.loads((args.run / "train-run.json").read_text())["run_id"]
        record_heldout_eval(Store(args.db, create=False), run_id, n, ev, against=start)
    print(f"{args.run}/heldout/step-{n}: {ev.line()}")
    return 0


def spread(args: argparse.Namespace) -> int:
    """The warm start before RL: k samples a question at the rollout temperature on the first RL
    questions of the recipe (training side, never held out), under the recipe's rollout budgets."""
    import json

    from harness.eval.protocol import mini
    from harness.methods_registry import get_trainable
    from harness.rl.heldout_eval import evaluate_heldout
    from harness.rl.trainer import rl_examples, rollout_protocol, training_examples

    _method, recipe = get_trainable(args.method, args.recipe)
    qs = rl_examples(recipe, training_examples(recipe), args.model)[: args.questions]
    ev = evaluate_heldout(
        args.model,
        qs,
        method=args.method,
        samples=recipe.algo.group_size,
        temperature=recipe.algo.temperature,
        seed=recipe.seed,
        protocol=rollout_protocol(mini(), recipe),
        threads=args.threads,
        label=f"{args.label} on the first {len(qs)} RL questions",
        progress=not args.no_progress,
    )
    load = os.getloadavg()
    out = {
        "model": args.label,
        "recipe": recipe.name,
        "questions": len(qs),
        "group_size": ev.k,
        "temperature": ev.temperature,
        "spread_share": ev.spread_share(),
        "mean_em": float(ev.mean_at_k().mean()),
        "pass_em": float(ev.pass_at_k().mean()),
        "greedy_em": float(sum(ev.greedy_em) / ev.n),
        "sampled_top_answer_share": ev.sampled_answers().top_share,
        "seconds": round(ev.seconds, 1),
        "loadavg_at_end": [round(x, 2) for x in load],
    }
    print(json.dumps(out, indent=1))
    if args.out is not None:
        args.out.write_text(json.dumps({**out, "evaluation": ev.to_dict()}, indent=1) + "\n")
    return 0


def template_majority(args: argparse.Namespace) -> int:
    from harness.rl.heldout_eval import put_eval, template_majority_eval

    ev = template_majority_eval(args.split)
    print(ev.line())
    rec = put_eval(_record(args.record, args.split), ev)
    _write(args.record, rec)
    return 0


def tables(args: argparse.Namespace) -> int:
    from harness.errors import ConfigError
    from harness.rl.heldout_eval import (
        check_record,
        comparisons_table,
        load_record,
        record_evals,
        record_tables,
    )

    rec = load_record(args.record)
    if not args.no_check:
        check_record(rec)
    evs = record_evals(rec)
    print(record_tables(rec))
    by = {e.label: e for e in evs}
    pairs = []
    for spec in args.pair:
        a, sep, b = spec.partition(",")
        if not sep or a not in by or b not in by:
            raise ConfigError(f"--pair {spec!r}: expected A,B, two labels of the record ({', '.join(by)})")
        pairs.append((by[a], by[b]))
    if pairs:
        print()
        print(comparisons_table(pairs))
    return 0


def set_pairs(args: argparse.Namespace) -> int:
    from harness.errors import ConfigError
    from harness.rl.heldout_eval import load_record, record_tables

    rec = load_record(args.record)
    pairs = []
    for spec in args.pair:
        a, sep, b = spec.partition(",")
        if not sep:
            raise ConfigError(f"pair {spec!r}: expected A,B (two labels of the record)")
        pairs.append([a, b])
    rec = {**rec, "pairs": pairs}
    record_tables(rec)  # every label exists
    _write(args.record, rec)
    return 0


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    sub = ap.add_subparsers(dest="cmd", required=True)
    r = sub.add_parser("run", help="evaluate one model and add it to the record")
    r.add_argument(
        "--model", required=True, help="a packaged preset or a harness sft / train checkpoint directory"
    )
    r.add_argument("--label", required=True, help="the evaluation's name in the record (SFT, untrained, ...)")
    r.add_argument("--method", default="search_r1", help="the method that answers (default search_r1)")
    r.add_argument(
        "--split", default="learning-400", help="the packaged split whose held-out part is evaluated"
    )
    r.add_argument(
        "--samples", type=int, default=8, help="sampled answers a question (0: greedy only; default 8)"
    )
    r.add_argument("--temperature", type=float, default=1.0, help="of the sampled answers (default 1)")
    r.add_argument("--seed", type=int, default=0, help="sampling seed (default 0)")
    r.add_argument("--adapter", action="append", default=[], help="an extra GGUF LoRA adapter (repeatable)")
    r.add_argument(
        "--protocol", default=None, help="a protocol preset (default: mini; ARENA: arena-gold-context)"
    )
    r.add_argument("--engine", choices=["llamacpp", "transformers"], default="llamacpp")
    r.add_argument("--threads", type=int, default=1, help="engine threads (default 1)")
    r.add_argument("--slots", type=int, default=1, help="llama.cpp parallel slots (default 1)")
    r.add_argument(
        "--n-ctx",
        type=int,
        default=None,
        help="llama.cpp tokens a slot, prompt plus answer (default 4096; ARENA's MuSiQue prompts with "
        "its 1,024 new tokens need 8192)",
    )
    r.add_argument("--batch-size", type=int, default=8, help="questions solved together (default 8)")
    r.add_argument(
        "--reward-recipe",
        default=None,
        help="score each greedy answer with the method's own training reward, the one this recipe of "
        "--method uses at its last step (its reader / judge models opened as the recipe says)",
    )
    r.add_argument("--limit", type=int, default=None, help="the first N held-out questions only")
    r.add_argument("--partial-ok", action="store_true", help="record an evaluation made with --limit")
    r.add_argument(
        "--questions",
        default=None,
        metavar="LO:HI",
        help="held-out questions LO to HI-1 only: a part of the evaluation, run beside the others (one engine "
        "each) and joined with `merge`",
    )
    r.add_argument("--record", type=Path, default=None, help="the record JSON to add the evaluation to")
    r.add_argument("--no-progress", action="store_true")
    r.set_defaults(fn=run)
    mg = sub.add_parser("merge", help="join the parts of one evaluation (run --questions) into a record")
    mg.add_argument("parts", type=Path, nargs="+", help="the records holding the parts")
    mg.add_argument("--label", required=True, help="the evaluation's label in the parts")
    mg.add_argument("--record", type=Path, required=True, help="the record to add the whole evaluation to")
    mg.set_defaults(fn=merge)
    st = sub.add_parser("step", help="a run's saved checkpoint evaluated as its held-out step (deferred)")
    st.add_argument("--run", type=Path, required=True, help="the run's --out folder")
    st.add_argument(
        "--saved",
        type=Path,
        required=True,
        help="a checkpoint folder (recipe.json, progress.json, policy_state.pt), the run's final/, or 'start': "
        "the policy before the first update (step 0; the recipe from <run>/checkpoint/recipe.json)",
    )
    st.add_argument(
        "--questions",
        default=None,
        metavar="LO:HI",
        help="only held-out questions LO to HI-1, written as heldout/step-N.qLO-HI.json; the parts are merged "
        "into step-N.json once they cover the set (each samples with the whole evaluation's seeds)",
    )
    st.add_argument("--model", required=True, help="the run's --model (its warm start; unused for final/)")
    st.add_argument("--samples", type=int, default=0, help="sampled answers a question (default 0: greedy)")
    st.add_argument(
        "--threads",
        type=int,
        default=None,
        help="engine threads (give the run's --rollout-threads, as the trainer does; default: the engine's own)",
    )
    st.add_argument(
        "--db", type=Path, default=None, help="the run's results database (adds train_steps rows)"
    )
    st.set_defaults(fn=step)
    sp = sub.add_parser(
        "spread",
        help="before RL: the share of groups with a reward spread at the rollout temperature, on RL questions",
    )
    sp.add_argument("--model", required=True, help="the warm start (a harness sft checkpoint directory)")
    sp.add_argument("--label", required=True, help="its name in the output")
    sp.add_argument("--method", default="search_r1")
    sp.add_argument("--recipe", required=True, help="the RL recipe (its group size, temperature, budgets)")
    sp.add_argument("--questions", type=int, default=16, help="the first N RL questions (default 16)")
    sp.add_argument("--threads", type=int, default=1)
    sp.add_argument("--out", type=Path, default=None, help="write the numbers and every sample as JSON")
    sp.add_argument("--no-progress", action="store_true")
    sp.set_defaults(fn=spread)
    t = sub.add_parser("template-majority", help="add the template-majority baseline to the record")
    t.add_argument("--record", type=Path, required=True)
    t.add_argument("--split", default="learning-400")
    t.set_defaults(fn=template_majority)
    b = sub.add_parser("tables", help="print the record's markdown tables")
    b.add_argument("record", type=Path)
    b.add_argument(
        "--pair", action="append", default=[], metavar="A,B", help="add the paired comparison B - A"
    )
    b.add_argument("--no-check", action="store_true", help="skip checking the rows against the split")
    b.set_defaults(fn=tables)
    pp = sub.add_parser("pairs", help="set the paired comparisons the record's tables show")
    pp.add_argument("record", type=Path)
    pp.add_argument("pair", nargs="+", metavar="A,B", help="the comparison B - A")
    pp.set_defaults(fn=set_pairs)
    args = ap.parse_args(argv)
    return args.fn(args)


if __name__ == "__main__":
    from harness.errors import script_exit

    sys.exit(script_exit(main))
