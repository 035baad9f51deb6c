"""``harness train``: train a method with RL following its paper's recipe."""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path
from typing import NoReturn

from harness.cli import add_command, positive_int
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
from harness.cli.retrieval_options import add_remote_args
from harness.errors import ConfigError

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
  OMP_NUM_THREADS=2 harness train --method search_r1 --recipe cpu-grpo-long --model runs/sft/final \\
      --rollout-weights q8_0 --rollout-threads 2    # the fastest on 2 cores: two one-thread engines
  harness train --method search_r1 --recipe cpu-grpo-long --rollout-threads 2 --rollout-engines 1  # one engine
  harness train --method search_r1 --recipe cpu-grpo-long --model runs/sft/final --keep-every 20 \\
      --recipe-override heldout_every=0     # held-out evaluations afterwards: scripts/eval_heldout.py step
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
    p.add_argument(
        "--resume",
        action="store_true",
        help="continue from --out/checkpoint (saved every save_every steps; refused in one line when "
        "nothing was saved); the row of the run that died writing --out is marked interrupted",
    )
    p.add_argument(
        "--keep-every",
        type=int,
        default=0,
        metavar="N",
        help="keep the policy every N steps and at the last in --out/kept/step-<N> (the next checkpoint "
        "replaces the last): a run that defers its held-out evaluations (--recipe-override heldout_every=0) "
        "evaluates them afterwards with scripts/eval_heldout.py step (default 0: keep none)",
    )
    p.add_argument("--show", action="store_true", help="print the resolved recipe as JSON and exit")
    add_device_arg(p, what="the policy, its reference, the critic and every training tensor")
    p.add_argument(
        "--rollout-backend",
        choices=["auto", "transformers", "llamacpp", "vllm"],
        default="auto",
        help="where rollouts are generated: llamacpp (llama.cpp over the base GGUF with the learner's LoRA "
        "written as a GGUF adapter each step), transformers (the learner's own model), vllm (vLLM in this "
        "process, the learner's weights, LoRA merged, reloaded into it each step; needs vLLM installed). auto (default): llamacpp where it applies (on the CPU, a LoRA recipe over a packaged model or a "
        "checkpoint of one; measured faster: harness/rl/rollout_engine.py), else transformers",
    )
    p.add_argument(
        "--rollout-threads",
        type=positive_int,
        default=None,
        help="llama.cpp threads for the rollouts (default: OMP_NUM_THREADS, else 1)",
    )
    p.add_argument(
        "--rollout-engines",
        type=positive_int,
        default=None,
        help="llama.cpp engines the rollout threads are split between, one slot each, a group's "
        "requests kept on one engine (harness/llm/llamacpp_engines.py). Default: one per rollout "
        "thread, at most one per group of a round (2 threads: two one-thread engines, measured faster "
        "than one two-thread engine: harness/rl/rollout_engine.py default_rollout_engines)",
    )
    p.add_argument(
        "--rollout-weights",
        choices=["packaged", "q8_0"],
        default="packaged",
        help="what llama.cpp rollouts serve as the base model: the packaged GGUF as it is, or its "
        "weights re-quantised to Q8_0 once per run (faster on the CPU; harness/llm/gguf_requant.py)",
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
    out = output_dir(args.out or Path("runs") / f"{method.name}-{recipe.name}")
    if args.rollout_backend != "auto":  # refused here, in seconds: before torch is imported (issue 60)
        check_rollout_backend(args, recipe, args.rollout_backend)

    from harness.device import describe_device, resolve_device
    from harness.eval.setup import RunSetup
    from harness.llm.base import make_backend
    from harness.results.lifecycle import running
    from harness.rl.checkpoint import saved_checkpoint
    from harness.rl.trainer import Trainer, rollout_protocol

    if args.resume and saved_checkpoint(out) is None and not Path(args.db).exists():
        nothing_saved(out, recipe)  # no row to close either: refused before any file is made
    device = resolve_device(args.device)  # a GPU asked for but absent fails here, before any row
    rollout_backend = rollout_backend_of(args, recipe, device)
    setup = RunSetup.from_choices(run_choices(args))  # the protocol; --retriever-url asked now
    proto = setup.protocol
    if args.rollout_engines not in (None, 1) and rollout_backend != "llamacpp":
        raise ConfigError(
            f"--rollout-engines {args.rollout_engines}: only llama.cpp rollouts run on several engines, "
            f"and this run rolls out on {rollout_backend}; drop it or add --rollout-backend llamacpp"
        )
    if args.rollout_weights != "packaged" and rollout_backend != "llamacpp":
        raise ConfigError(
            f"--rollout-weights {args.rollout_weights}: only llama.cpp rollouts serve re-quantised weights, "
            f"and this run rolls out on {rollout_backend}; drop it or add --rollout-backend llamacpp"
        )
    store = setup.store
    if args.resume:
        resume_from(store, out, recipe)
    out.mkdir(parents=True, exist_ok=True)
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
    (out / RUN_FILE).write_text(json.dumps({"run_id": run_id}))  # whose row a later --resume closes
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
            rollout_weights=args.rollout_weights,
            rollout_engines=rollout_engines_of(args, recipe),
            keep_every=args.keep_every,
        )
        result = trainer.train()
    print(f"checkpoint: {result.checkpoint}\nrun: {run_id} (metrics in {args.db}, table train_steps)")
    return 0


def rollout_engines_of(args: argparse.Namespace, recipe) -> int:
    """``--rollout-engines``, its default resolved (:func:`harness.rl.rollout_engine.default_rollout_engines`
    over the rollout threads and the groups of a round)."""
    from harness.llm.server import llama_threads
    from harness.rl.rollout_engine import default_rollout_engines

    if args.rollout_engines is not None:
        return int(args.rollout_engines)
    return default_rollout_engines(llama_threads(args.rollout_threads), recipe.algo.train_batch_size)


def rollout_backend_of(args: argparse.Namespace, recipe, device) -> str:
    """``--rollout-backend``, ``auto`` resolved (:func:`harness.rl.rollout_engine.default_rollout_backend`);
    llamacpp is refused in one line where it cannot serve the recipe or model
    (:func:`harness.rl.rollout_engine.check_llamacpp_rollout`), vllm where vLLM is not installed."""
    if args.rollout_backend != "auto":
        return str(args.rollout_backend)  # checked by check_rollout_backend before torch was imported
    from harness.rl.rollout_engine import default_rollout_backend

    rollout_backend = default_rollout_backend(recipe, args.model, device)
    check_rollout_backend(args, recipe, rollout_backend)
    return rollout_backend


def check_rollout_backend(args: argparse.Namespace, recipe, rollout_backend: str) -> None:
    """Refuse ``rollout_backend`` in one line where it cannot serve the recipe or model: llamacpp
    (:func:`harness.rl.rollout_engine.check_llamacpp_rollout`), vllm where vLLM is not installed."""
    if rollout_backend == "llamacpp":  # refused now, not after the model is converted and loaded
        from harness.rl.rollout_engine import check_llamacpp_rollout

        check_llamacpp_rollout(recipe, args.model, args.rollout_weights)
    if rollout_backend == "vllm":
        import importlib.util

        if importlib.util.find_spec("vllm") is None:
            from harness.llm.vllm_backend import INSTALL_HINT

            raise ConfigError(
                f"--rollout-backend vllm: vLLM is not installed ({INSTALL_HINT}); or use llamacpp"
            )


RUN_FILE = "train-run.json"  # under --out: the run that trains into it (its row id)


def resume_from(store, out: Path, recipe) -> None:
    """Before ``--resume`` writes anything: end the row of the run that trained into ``out`` when its
    process died (``interrupted``), then say which checkpoint the run continues from, or refuse in
    one line when none was saved (the run would silently start over at step 1)."""
    from harness.results.lifecycle import close_dead_run
    from harness.rl.checkpoint import saved_checkpoint

    marker, previous = out / RUN_FILE, None
    if marker.exists():
        try:
            previous = str(json.loads(marker.read_text())["run_id"])
        except (OSError, ValueError, KeyError, TypeError) as e:
            raise ConfigError(
                f"{marker} is damaged ({type(e).__name__}); it only names the run that trained into {out}: "
                "delete it and rerun"
            ) from None
    closed = previous is not None and close_dead_run(store, previous)
    closed_note = (
        f"; the row of run {previous}, whose process died, is now marked interrupted" if closed else ""
    )
    found = saved_checkpoint(out)
    if found is None:
        nothing_saved(out, recipe, closed_note)
    ckpt, progress = found
    said = (
        f"step {progress['step']} of {progress.get('steps', recipe.steps)}, saved by run {progress.get('run_id') or '?'}"
        if "step" in progress
        else "a checkpoint that does not record its step (the trainer logs it)"
    )
    print(f"resuming from {ckpt}: {said}{closed_note}", file=sys.stderr)


def nothing_saved(out: Path, recipe, note: str = "") -> NoReturn:
    """The one-line refusal of ``--resume`` where no checkpoint was saved under ``out``."""
    every = recipe.save_every
    why = (
        f"recipe {recipe.name} has save_every 0: no checkpoint before the final model"
        if not every
        else f"recipe {recipe.name} saves one every {every} step(s), and the run stopped before the first"
    )
    raise ConfigError(
        f"--resume: nothing was saved under {out} (no {out / 'checkpoint' / 'trainer_state.pt'}; {why})"
        f"{note}; drop --resume to start over, with --recipe-override save_every=N to be able to resume"
    )
