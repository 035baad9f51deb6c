"""Ship a trained policy as a GGUF LoRA adapter preset, and check a shipped one against its record.

    # a training run's final checkpoint -> methods/<paper>/trained/smollm2.gguf + smollm2.adapter.json
    python scripts/ship_adapter.py export --method eval_rar --recipe cpu-learn-grpo \\
        --checkpoint /work/runs/eval_rar/rl/final --record results/learning-eval_rar.json \\
        --rank 32 --storage f16
    # re-evaluate a shipped adapter on the first 20 held-out questions of its record and compare every
    # greedy answer with the committed one (exit 1 on any difference)
    python scripts/ship_adapter.py check smollm2+eval_rar --n 20 --label "SFT+RL step 50"
    # a run whose evaluation spans sessions: its warm start and policy kept in the repository meanwhile
    python scripts/ship_adapter.py export --method tiresrag_r1 --recipe cpu-learn-grpo \\
        --checkpoint runs/tiresrag_r1/sft/final --record results/learning-tiresrag_r1.json \\
        --rank 32 --to results/in-progress/tiresrag_r1

``export`` writes the checkpoint's difference to the packaged base (``harness.llm.gguf_lora``:
exact SVD factors, at most ``--rank`` directions each, stored ``--storage`` f32 or f16) and its
manifest (``harness.llm.adapters``: name ``<base alias>+<method>``, sha256, size, rank, storage,
``trained_by`` {method, recipe, algorithm}, the record; the algorithm line is read from the
checkpoint's own ``recipe.json``, overrides included). An adapter over 10 MB is refused: lower
``--rank`` or use f16, then ``check`` that the greedy answers are unchanged. ``check`` evaluates the
preset with ``harness.rl.heldout_eval.evaluate_heldout`` (llama.cpp, greedy, one thread, the record's
protocol) on the first N held-out questions (in the split's held-out order) of the evaluation
``--label``, answered in the same batches as the committed evaluation answered them
(``replay_ranges``: a greedy answer can depend on its batch neighbours), and lists each question
whose answer differs.
"""

from __future__ import annotations

import argparse
import inspect
import json
import sys
from pathlib import Path

BASE_ALIAS = {"smollm2-135m-instruct": "smollm2"}


def algorithm_of(recipe, steps: int | None = None) -> str:
    """One line naming the recipe's RL algorithm (estimator, clip, KL, dynamic sampling, reward) and
    the RL steps the policy had: ``steps`` (a checkpoint from the middle of a run), else the recipe's."""
    a = recipe.algo
    parts = [a.adv_estimator.upper(), f"clip {a.clip_low}/{a.clip_high}"]
    parts.append(f"KL {a.kl_estimator} {a.kl_coef}" if a.kl_placement != "none" and a.kl_coef else "no KL")
    if a.dynamic_sampling.enabled:
        parts.append("dynamic sampling")
    rewards = ", ".join(f"{s.reward} from step {s.start_step}" for s in recipe.reward_stages)
    done = recipe.steps if steps is None else steps
    of = "" if done == recipe.steps else f" of the recipe's {recipe.steps}"
    return f"{' '.join(parts[:1])} ({'; '.join(parts[1:])}); reward {rewards}; LoRA; {done} steps{of}"


def _recipe_of(checkpoint: Path, named):
    """The recipe that trained ``checkpoint``: its ``recipe.json`` (``save_final`` writes the recipe the
    run used, ``--recipe-override`` included, so the manifest's algorithm line says what was run),
    else the recipe ``named``. A checkpoint of another recipe is refused."""
    from harness.errors import ConfigError
    from harness.rl.recipe import Recipe

    path = checkpoint / "recipe.json"
    if not path.is_file():
        return named
    used = Recipe.model_validate_json(path.read_text())
    if used.name != named.name:
        raise ConfigError(
            f"{path}: the checkpoint was trained with recipe {used.name!r}, not --recipe {named.name}"
        )
    return used


def export(args: argparse.Namespace) -> int:
    from harness.errors import ConfigError
    from harness.llm.adapters import MAX_BYTES, SUFFIX, load_manifest
    from harness.llm.gguf_lora import checkpoint_adapter
    from harness.llm.model_files import canonical_name, sha256_file
    from harness.methods_registry import get_method

    method = get_method(args.method)
    recipe = _recipe_of(Path(args.checkpoint), method.recipes()[args.recipe])
    base = canonical_name(args.base)
    alias = BASE_ALIAS.get(base, base)
    folder = Path(args.to) if args.to else Path(inspect.getfile(type(method))).parent / "trained"
    info = json.loads((Path(args.checkpoint) / "harness_train.json").read_text())
    warm = info.get("stage") == "sft"
    if warm and not args.to:
        raise ConfigError(
            f"--checkpoint {args.checkpoint}: a warm start (harness sft) is not the method's trained policy; "
            "write it elsewhere with --to DIR"
        )
    folder.mkdir(parents=True, exist_ok=True)
    # a warm start's files and preset name say so: it is kept beside a run, never served as the method's policy
    stem = f"{alias}-sft" if warm else alias
    gguf = folder / f"{stem}.gguf"
    checkpoint_adapter(base, Path(args.checkpoint), gguf, max_rank=args.rank, storage=args.storage)
    size = gguf.stat().st_size
    if size > MAX_BYTES:
        gguf.unlink()
        raise ConfigError(f"{gguf}: {size} bytes, over {MAX_BYTES}; lower --rank or use --storage f16")
    rank = args.rank
    if rank is None:
        import gguf as gg

        rank = max(t.shape[0] for t in gg.GGUFReader(str(gguf)).tensors if t.name.endswith("lora_a"))
    manifest = {
        "name": f"{alias}+{method.name}" + ("-sft" if warm else ""),
        "base": base,
        "method": method.name,
        "gguf": gguf.name,
        "sha256": sha256_file(gguf),
        "size": size,
        "rank": int(rank),
        "storage": args.storage,
        "trained_by": {
            "method": method.name,
            "recipe": recipe.name,
            "algorithm": "SFT warm start on the method's own demonstrations (harness sft); LoRA"
            if warm
            else algorithm_of(recipe, int(info["steps"]) if "steps" in info else None),
        },
        "record": args.record,
    }
    path = folder / f"{stem}{SUFFIX}"
    path.write_text(json.dumps(manifest, indent=1) + "\n")
    load_manifest(path)  # what the harness will read
    print(f"wrote {gguf} ({size / 1e6:.2f} MB) and {path}: model preset {manifest['name']}")
    return 0


def check(args: argparse.Namespace) -> int:
    from harness.errors import ConfigError
    from harness.llm.adapters import get_adapter
    from harness.rl.heldout_eval import (
        evaluate_heldout,
        heldout_questions,
        load_record,
        record_evals,
        recorded_batch_size,
        replay_ranges,
    )

    preset = get_adapter(args.preset)
    if preset is None:
        raise ConfigError(f"{args.preset!r} is no shipped adapter preset (harness list models)")
    record_path = Path(args.record or preset.record)
    record = load_record(record_path)
    evs = [e for e in record_evals(record) if e.label == args.label]
    if not evs:
        labels = ", ".join(e.label for e in record_evals(record))
        raise ConfigError(f"{record_path}: no evaluation labelled {args.label!r} (have: {labels})")
    ev = evs[0]
    order = heldout_questions(record["split"])
    pos = {e.id: i for i, e in enumerate(order)}
    # the first N in held-out order, answered in the batches the committed evaluation used
    ranges = replay_ranges(ev, list(pos), args.n)
    protocol = None
    if args.protocol:
        from harness.eval.protocol import preset as protocol_preset

        protocol = protocol_preset(args.protocol)
    fresh: dict[str, str | None] = {}
    for lo, hi in ranges:
        got = evaluate_heldout(
            preset.name,
            order[lo:hi],
            method=preset.method,
            samples=0,
            threads=args.threads,
            batch_size=recorded_batch_size(ev),
            protocol=protocol,
            n_ctx=args.n_ctx,
            label=f"check {preset.name}",
            progress=not args.no_progress,
            first=lo,
        )
        fresh.update(zip(got.sample_ids, got.greedy, strict=True))
    committed = dict(zip(ev.sample_ids, ev.greedy, strict=True))
    ids = sorted(committed, key=pos.__getitem__)[: args.n]
    differ = [(i, committed[i], fresh[i]) for i in ids if committed[i] != fresh[i]]
    for i, want, got in differ:
        print(f"{i}: committed {want!r}, now {got!r}")
    print(
        f"{preset.name}: {len(ids) - len(differ)} of {len(ids)} greedy answers equal the committed ones ({record_path}, {args.label!r})"
    )
    return 1 if differ else 0


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    sub = ap.add_subparsers(dest="cmd", required=True)
    e = sub.add_parser("export", help="write a checkpoint's adapter and manifest into its method's folder")
    e.add_argument("--method", required=True)
    e.add_argument("--recipe", required=True, help="the recipe that trained it (recorded in trained_by)")
    e.add_argument("--checkpoint", required=True, help="a merged harness train / sft checkpoint directory")
    e.add_argument("--record", required=True, help="the results/ record of its held-out evaluation")
    e.add_argument(
        "--base", default="smollm2-135m-instruct", help="the packaged base (default smollm2-135m-instruct)"
    )
    e.add_argument("--rank", type=int, default=None, help="keep at most this rank (default: exact)")
    e.add_argument("--storage", choices=["f32", "f16"], default="f16", help="tensor type (default f16)")
    e.add_argument(
        "--to",
        default=None,
        help="write into this folder instead of methods/<paper>/trained/ (a run in progress, kept in "
        "results/in-progress/<method>/ until its evaluation is complete; a warm start: <alias>-sft.*)",
    )
    c = sub.add_parser("check", help="re-evaluate a shipped adapter and compare with its committed answers")
    c.add_argument("preset", help="the adapter preset, e.g. smollm2+search_r1")
    c.add_argument("--label", required=True, help="the record's evaluation of this policy")
    c.add_argument("--n", type=int, default=20, help="the first N held-out questions (default 20)")
    c.add_argument("--record", default=None, help="default: the manifest's record")
    c.add_argument("--protocol", default=None, help="default mini; ARENA: arena-gold-context")
    c.add_argument("--threads", type=int, default=1, help="llama.cpp threads (default 1)")
    c.add_argument(
        "--n-ctx",
        type=int,
        default=None,
        help="llama.cpp tokens a slot (default 4096; as the record's part used)",
    )
    c.add_argument("--no-progress", action="store_true")
    args = ap.parse_args(argv)
    return export(args) if args.cmd == "export" else check(args)


if __name__ == "__main__":
    from harness.errors import script_exit

    sys.exit(script_exit(main))
