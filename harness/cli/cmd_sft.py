"""``harness sft``: supervised warm-up of a method's policy on demonstrations in its own tag dialect."""

from __future__ import annotations

import argparse
import json
import sys
import time
from pathlib import Path

from harness.cli import add_command

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

    import random

    import torch

    from harness.lifecycle import create_train_run, running
    from harness.llm.base import BackendSpec
    from harness.llm.transformers_backend import TransformersBackend
    from harness.protocol import preset, resolve_corpus
    from harness.retrieval.cache import CachedRetriever, ResultCache
    from harness.retrieval.factory import make_protocol_retriever
    from harness.rl.sft import build_demonstrations, train_sft
    from harness.rl.trainer import load_policy, rollout_protocol, save_final, training_examples
    from harness.store import Store

    cfg = recipe.sft
    proto = resolve_corpus(preset(args.protocol), args.corpus)
    rp = rollout_protocol(proto, recipe)  # the budgets RL rollouts use: same observations
    out = args.out or Path("runs") / f"{method.name}-{recipe.name}-sft"
    out.mkdir(parents=True, exist_ok=True)
    log = lambda s: print(s, file=sys.stderr)  # noqa: E731

    examples = training_examples(recipe, args.data_dir)
    random.Random(recipe.seed).shuffle(examples)
    if cfg.n_questions is not None:
        examples = examples[: cfg.n_questions]
    torch.manual_seed(recipe.seed)
    policy, _, tok = load_policy(args.model, recipe, with_reference=False)
    backend = TransformersBackend.from_model(policy, tok, BackendSpec(kind="transformers", model=args.model))
    retriever = CachedRetriever(make_protocol_retriever(rp, args.corpus), ResultCache.default())
    t0 = time.perf_counter()
    demos = build_demonstrations(method, examples, backend=backend, protocol=rp, retriever=retriever, cfg=cfg)
    log(
        f"demonstrations: {demos.kept} of {demos.asked} questions kept "
        f"({'gold answer in the observations' if cfg.answer_in_observation else 'answered'}); "
        f"{time.perf_counter() - t0:.1f}s"
    )
    (out / "demonstrations.jsonl").write_text(
        "".join(
            json.dumps({"id": t.example_id, "question": t.question, "response": t.response}) + "\n"
            for t in demos.trajectories
        )
    )

    store = Store(args.db)
    run_id = create_train_run(
        store,
        prefix="sft",
        method=method,
        recipe=recipe,
        protocol=rp,
        model=args.model,
        label=f"sft recipe {recipe.name}",
    )
    pad_id = tok.pad_token_id if tok.pad_token_id is not None else tok.eos_token_id
    with running(store, run_id):
        train_sft(
            policy,
            demos.trajectories,
            cfg,
            pad_id=pad_id,
            seed=recipe.seed,
            log=log,
            on_step=lambda step, m: store.add_train_steps(run_id, step, m),
        )
        final = save_final(policy, tok, out, recipe, method.name, args.model, stage="sft", log=log)
    print(f"checkpoint: {final}\nrun: {run_id} (metrics in {args.db}, table train_steps)")
    return 0
