"""``harness export-verl``: write a verl job (data, reward, agent loop, launch script) for a method."""

from __future__ import annotations

import argparse
from pathlib import Path

from harness.cli import add_command
from harness.cli.options import add_data_dir_arg, add_model_arg, output_dir

EXAMPLES = """\
  harness export-verl --method search_r1 --recipe cpu-smoke --out verl-jobs/search_r1   # packaged questions
  harness export-verl --method search_r1 --data-dir ~/data/flashrag --out verl-jobs/search_r1  # the paper's train set
  harness export-verl --method eval_rar --recipe paper --model Qwen/Qwen2.5-3B --n-gpus 8 --out verl-jobs/eval_rar
  harness export-verl --method r_search --retriever-url http://10.0.0.5:8000/retrieve --out verl-jobs/r_search
  harness export-verl --method tiresrag_r1 --model /models/Qwen2.5-3B-Instruct --out verl-jobs/tiresrag_r1
  harness export-verl --method tiresrag_r1 --recipe cpu-smoke --model smollm2-135m-instruct --out verl-jobs/t  # a preset
  harness export-verl --method arena --test-bench mini-multihop --out verl-jobs/arena
  harness export-verl --method search_r1 --rollout sglang --out verl-jobs/search_r1_sglang
  bash verl-jobs/search_r1/run.sh --dry-run   # verl's own config validation, then exit (no GPU)
  bash verl-jobs/search_r1/run.sh --dry-run --data-dir /shared/data   # the job moved, its data elsewhere
  # then, on the GPU cluster: harness serve-retriever --port 8000 &  bash verl-jobs/search_r1/run.sh
"""


def add_parser(sub: argparse._SubParsersAction) -> None:
    p = add_command(
        sub,
        "export-verl",
        help="export a method's training job to verl (multi-GPU, multi-node)",
        examples=EXAMPLES,
        handler=handle,
    )
    p.add_argument("--method", required=True, help="a trainable method")
    p.add_argument("--recipe", default="paper", help="recipe to export (default: paper)")
    p.add_argument("--recipe-override", nargs="*", default=[], metavar="KEY=VALUE")
    p.add_argument("--out", type=Path, required=True, help="output directory")
    add_model_arg(
        p,
        default="Qwen/Qwen2.5-3B",
        help="a model preset (written as a local HF folder, e.g. smollm2-135m-instruct), or a path or hub "
        "id as verl will load it",
    )
    p.add_argument(
        "--chat-template",
        type=Path,
        default=None,
        help="the model's chat template (Jinja file), for a method that pre-fills the assistant turn "
        "(its prompt ends with an assistant message) when --model is not a local directory",
    )
    p.add_argument("--n-gpus", type=int, default=8, help="GPUs per node (trainer.n_gpus_per_node)")
    p.add_argument(
        "--rollout",
        choices=["vllm", "sglang"],
        default="vllm",
        help="verl's inference server (actor_rollout_ref.rollout.name; default vllm: docs/verl.md); both "
        "are written with the tokenizer in the server, which the agent loop's stop strings need",
    )
    p.add_argument(
        "--retriever-url", default="http://127.0.0.1:8000/retrieve", help="harness serve-retriever URL"
    )
    add_data_dir_arg(p)
    p.add_argument("--test-bench", default="mini-multihop", help="validation bench")
    p.add_argument("--test-limit", type=int, default=None, help="first N validation questions per dataset")


def handle(args: argparse.Namespace) -> int:
    from harness.errors import ConfigError
    from harness.verl.job import ExportRefusal

    try:
        files = export(args)
    except ExportRefusal as e:  # one line, ending with the command that works
        raise ConfigError(f"{e}; run: {suggested_command(args, e.fix)}") from None
    for f in files:
        print(f)
    return 0


def export(args: argparse.Namespace) -> list[Path]:
    from harness.llm.model_files import is_preset, resolve_model
    from harness.methods_registry import get_trainable
    from harness.verl.job import export_verl

    method, recipe = get_trainable(args.method, args.recipe, args.recipe_override)
    if args.data_dir is None:
        check_packaged(method.name, recipe)
    # a model preset is written as a Hugging Face folder (converted once into the harness cache, as
    # `harness sft` and `harness train` load it); anything else is given to verl as it is
    model_path = str(resolve_model(args.model)) if is_preset(args.model) else args.model
    return export_verl(
        method,
        recipe,
        output_dir(args.out),
        retriever_url=args.retriever_url,
        test_bench=args.test_bench,
        test_limit=args.test_limit,
        n_gpus=args.n_gpus,
        model_path=model_path,
        data_dir=args.data_dir,
        chat_template=args.chat_template,
        rollout=args.rollout,
    )


def suggested_command(args: argparse.Namespace, fix: dict[str, str]) -> str:
    """The ``harness export-verl`` command the user ran (every option not at its default), with
    ``fix`` applied (option -> value)."""
    import shlex

    defaults = vars(build_export_parser().parse_args(["--method", "x", "--out", "x"]))
    flags = {"--method": args.method, "--out": str(args.out)}
    for name, value in vars(args).items():
        flag = "--" + name.replace("_", "-")
        if name in defaults and name not in ("method", "out", "recipe_override") and value != defaults[name]:
            flags[flag] = str(value)
    flags.update(fix)
    words = ["harness", "export-verl"]
    for flag, value in flags.items():
        words += [flag, value]
    if args.recipe_override:
        words += ["--recipe-override", *args.recipe_override]
    return shlex.join(words)


def build_export_parser() -> argparse.ArgumentParser:
    """This command's own parser (its options and defaults)."""
    parser = argparse.ArgumentParser(prog="harness export-verl", add_help=False)
    sub = parser.add_subparsers()
    add_parser(sub)
    return sub.choices["export-verl"]


def check_packaged(method: str, recipe) -> None:
    """One line, before any work, when the recipe trains on splits that are not packaged (a
    paper's train set): it names ``--data-dir`` and a recipe whose questions are packaged."""
    from harness.data.benches import get_bench
    from harness.data.datasets import get_dataset_info
    from harness.llm.model_files import DEFAULT_MODEL
    from harness.verl.job import ExportRefusal

    bench = get_bench(recipe.bench)
    missing = [e.describe() for e in bench.entries if e.split != get_dataset_info(e.dataset).split]
    if missing:
        raise ExportRefusal(
            f"recipe {recipe.name!r} of {method} trains on bench {bench.name!r}, whose "
            f"{', '.join(missing)} questions are not packaged: pass --data-dir DIR (FlashRAG layout "
            f"DIR/<dataset>/train.jsonl, or the original files), or --recipe cpu-smoke (packaged questions, "
            f"for the packaged model {DEFAULT_MODEL})",
            {"--recipe": "cpu-smoke", "--model": DEFAULT_MODEL},
        )
