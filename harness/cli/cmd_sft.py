"""``harness sft``: supervised warm-up of a method's policy on demonstrations in its own tag dialect."""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

from harness.cli import add_command
from harness.cli.options import (
    add_corpus_arg,
    add_data_dir_arg,
    add_db_arg,
    add_device_arg,
    add_model_arg,
    add_protocol_arg,
    output_dir,
    run_choices,
)

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
    add_model_arg(p)
    p.add_argument(
        "--recipe-override",
        nargs="*",
        default=[],
        metavar="KEY=VALUE",
        help="override recipe fields (dotted keys, JSON values), e.g. sft.lr=1e-4",
    )
    add_protocol_arg(p, help="environment of the demonstrations (corpus, retriever)")
    add_corpus_arg(p)
    add_data_dir_arg(p)
    p.add_argument("--out", type=Path, default=None, help="output dir (default runs/<method>-<recipe>-sft)")
    add_db_arg(p)
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

    from harness.eval.setup import RunSetup
    from harness.rl.sft import run_sft

    final, run_id = run_sft(
        method,
        recipe,
        model=args.model,
        setup=RunSetup.from_choices(run_choices(args)),
        out=output_dir(args.out or Path("runs") / f"{method.name}-{recipe.name}-sft"),
        log=lambda s: print(s, file=sys.stderr),
        device=args.device,
    )
    print(f"checkpoint: {final}\nrun: {run_id} (metrics in {args.db}, table train_steps)")
    return 0
