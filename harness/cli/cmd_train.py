"""``harness train``: train a method with RL following its paper's recipe."""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

from harness.cli import add_command, positive_int
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

EXAMPLES = """\
  harness train --method eval_rar --recipe cpu-smoke                  # a few steps on this CPU
  harness train --method search_r1 --recipe cpu-smoke --steps 10 --out runs/sr1
  harness train --method search_r1 --recipe cpu-smoke --recipe-override algo.lr=5e-6 algo.group_size=4
  harness train --method search_r1 --recipe cpu-smoke --out runs/sr1 --resume   # continue from the checkpoint
  harness train --method search_r1 --recipe paper --show                         # print the recipe and exit
  harness train --method search_r1 --recipe cpu-smoke --device cuda --recipe-override dtype=auto  # one GPU, bf16
  harness run --method search_r1 --model runs/sr1/final --bench mini-multihop   # evaluate the result
  harness train --method search_r1 --recipe cpu-grpo-long --model runs/sft/final --rollout-backend llamacpp
  harness train --method search_r1 --recipe cpu-sft-grpo --rollout-backend transformers  # rollouts on the learner
"""


def add_parser(sub: argparse._SubParsersAction) -> None:
    p = add_command(
        sub,
        "train",
        help="train a method with RL (GRPO / DAPO / REINFORCE++) per its recipe",
        examples=EXAMPLES,
        handler=handle,
    )
    p.add_argument("--method", required=True, help="a trainable method (see `harness list methods`)")
    p.add_argument("--recipe", default="cpu-smoke", help="recipe name of the method (default cpu-smoke)")
    add_model_arg(p)
    p.add_argument("--steps", type=positive_int, default=None, help="override the recipe's number of steps")
    p.add_argument(
        "--recipe-override",
        nargs="*",
        default=[],
        metavar="KEY=VALUE",
        help="override recipe fields (dotted keys, JSON values)",
    )
    add_protocol_arg(p, help="environment for rollouts (corpus, retriever)")
    add_corpus_arg(p)
    add_data_dir_arg(
        p, help="directory with the training splits (the packaged data holds dev/test questions only)"
    )
    p.add_argument("--out", type=Path, default=None, help="output dir (default runs/<method>-<recipe>)")
    add_db_arg(p)
    p.add_argument("--resume", action="store_true", help="continue from --out/checkpoint")
    p.add_argument("--show", action="store_true", help="print the resolved recipe as JSON and exit")
    add_device_arg(p, what="the policy, its reference, the critic and every training tensor")
    p.add_argument(
        "--rollout-backend",
        choices=["auto", "transformers", "llamacpp", "vllm"],
        default="auto",
        help="where rollouts are generated: llamacpp (llama.cpp over the base GGUF with the learner's LoRA "
        "written as a GGUF adapter each step), transformers (the learner's own model); vllm is not wired "
        "yet. auto (default): llamacpp on the CPU for a LoRA recipe over a packaged model or a checkpoint "
        "of one, else transformers (harness/rl/rollout_engine.py)",
    )
    p.add_argument(
        "--rollout-threads",
        type=positive_int,
        default=None,
        help="llama.cpp threads for the rollouts (default: OMP_NUM_THREADS, else 1)",
    )
    add_remote_args(p)


def handle(args: argparse.Namespace) -> int:
    from harness.methods_registry import get_trainable

    overrides = list(args.recipe_override)
    if args.steps is not None:
        overrides.append(f"steps={args.steps}")
    method, recipe = get_trainable(args.method, args.recipe, overrides)
    if args.show:
        print(json.dumps(recipe.model_dump(mode="json"), indent=2))
        return 0
    return run_training(method, recipe, args)


def run_training(method, recipe, args: argparse.Namespace) -> int:
    from harness.device import describe_device, resolve_device
    from harness.eval.setup import RunSetup
    from harness.llm.base import make_backend
    from harness.results.lifecycle import running
    from harness.rl.rollout_engine import default_rollout_backend
    from harness.rl.trainer import Trainer, rollout_protocol

    setup = RunSetup.from_choices(run_choices(args))  # the protocol; --retriever-url asked now
    proto = setup.protocol
    out = args.out or Path("runs") / f"{method.name}-{recipe.name}"
    device = resolve_device(args.device)  # a GPU asked for but absent fails here, before any row
    rollout_backend = args.rollout_backend
    if rollout_backend == "auto":
        rollout_backend = default_rollout_backend(recipe, args.model, device)
    if rollout_backend == "vllm":
        from harness.errors import ConfigError

        raise ConfigError(
            "--rollout-backend vllm is not wired into the trainer yet (its weight-update path needs the "
            "vllm tox env to test); use llamacpp or transformers"
        )
    out.mkdir(parents=True, exist_ok=True)
    store = setup.store
    rp = rollout_protocol(proto, recipe)
    run_id = setup.train_run(
        prefix="train",
        method=method,
        recipe=recipe,
        protocol=rp,
        model=args.model,
        label=f"recipe {recipe.name}",
        runtime=describe_device(device),
    )
    # a bad aux model or dead server still ends the run's row (failed), never `running`
    with running(store, run_id):
        aux = {role: make_backend(spec) for role, spec in recipe.aux_models.items()}
        retriever = setup.retriever(rp)
        trainer = Trainer(
            method,
            recipe,
            model=args.model,
            out_dir=out,
            protocol=proto,
            retriever=retriever,
            store=store,
            resume=args.resume,
            aux_models=aux,
            run_id=run_id,
            data_dir=setup.data_dir,
            log=lambda s: print(s, file=sys.stderr),
            device=str(device),
            rollout_backend=rollout_backend,
            rollout_threads=args.rollout_threads,
        )
        result = trainer.train()
    print(f"checkpoint: {result.checkpoint}\nrun: {run_id} (metrics in {args.db}, table train_steps)")
    return 0
