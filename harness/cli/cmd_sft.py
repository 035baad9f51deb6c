"""``harness sft``: supervised warm-up of a method's policy on demonstrations in its own tag dialect."""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

from harness.cli import add_command
from harness.device import add_device_arg

EXAMPLES = """\
  harness sft --method search_r1 --recipe cpu-sft-rl --out runs/sft           # warm-up on this CPU
  harness sft --method search_r1 --recipe cpu-sft-rl --show                   # print the recipe's sft block
  harness sft --method search_r1 --recipe cpu-sft-rl --recipe-override sft.n_questions=64 sft.epochs=1
  harness train --method search_r1 --recipe cpu-sft-rl --model runs/sft/final --out runs/rl   # then RL
  harness run --method search_r1 --model runs/sft/final --bench mini-singlehop --sample 100 --seed 20
"""


def add_parser(sub: argparse._SubParsersAction) -> None:
    p = add_command(
        sub,
        "sft",
        help="supervised warm-up on demonstrations rolled out in the method's own dialect (recipe.sft)",
        examples=EXAMPLES,
        handler=handle,
    )
    p.add_argument("--method", required=True, help="a trainable method (see `harness list methods`)")
    p.add_argument("--recipe", required=True, help="a recipe of the method with an sft block")
    p.add_argument("--model", default="smollm2-135m-instruct", help="base model: name or local HF dir")
    p.add_argument(
        "--recipe-override",
        nargs="*",
        default=[],
        metavar="KEY=VALUE",
        help="override recipe fields (dotted keys, JSON values), e.g. sft.lr=1e-4",
    )
    p.add_argument("--protocol", default="mini", help="environment of the demonstrations (corpus, retriever)")
    p.add_argument(
        "--corpus", type=Path, default=None, help="corpus jsonl for protocols without a packaged one"
    )
    p.add_argument("--data-dir", type=Path, default=None, help="directory with the training splits")
    p.add_argument("--out", type=Path, default=None, help="output dir (default runs/<method>-<recipe>-sft)")
    p.add_argument("--db", type=Path, default=Path("results/harness.duckdb"), help="results database")
    p.add_argument("--show", action="store_true", help="print the resolved sft config as JSON and exit")
    add_device_arg(p, what="the policy being trained")


def handle(args: argparse.Namespace) -> int:
    from harness.errors import ConfigError
    from harness.methods_registry import get_trainable

    method, recipe = get_trainable(args.method, args.recipe, list(args.recipe_override))
    if recipe.sft is None:
        raise ConfigError(
            f"recipe {recipe.name!r} of {method.name!r} has no sft block; pick a recipe with one"
        )
    if args.show:
        print(json.dumps(recipe.sft.model_dump(mode="json"), indent=2))
        return 0

    from harness.protocol import preset, resolve_corpus
    from harness.rl.sft import run_sft

    final, run_id = run_sft(
        method,
        recipe,
        model=args.model,
        protocol=resolve_corpus(preset(args.protocol), args.corpus),
        corpus=args.corpus,
        data_dir=args.data_dir,
        out=args.out or Path("runs") / f"{method.name}-{recipe.name}-sft",
        db=args.db,
        log=lambda s: print(s, file=sys.stderr),
        device=args.device,
    )
    print(f"checkpoint: {final}\nrun: {run_id} (metrics in {args.db}, table train_steps)")
    return 0
