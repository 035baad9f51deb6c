"""Turn a training run's resumable checkpoint into a model directory ``harness run`` evaluates.

    python scripts/export_train_checkpoint.py --method search_r1 --recipe cpu-sft-grpo \\
        --model runs/sft/final --out runs/rl --to runs/rl/step-10
    harness run --method search_r1 --model runs/rl/step-10 --backend transformers \\
        --bench mini-singlehop --sample 100 --seed 20                # held-out EM of that checkpoint

``harness train`` with the recipe's ``save_every`` writes ``OUT/checkpoint/`` (the policy's state
with its LoRA adapters, the optimizer, the step) for ``--resume``, and a plain merged model only at
the end (``OUT/final``). This loads the policy exactly as the trainer does
(``harness.rl.trainer.load_policy`` on the run's ``--model`` and recipe), puts the checkpoint's
weights in, and writes it with the trainer's own ``save_final`` (LoRA merged), so a checkpoint in
the middle of a run is evaluated on the held-out questions like the final one. The step is printed
and written to ``harness_train.json`` (``steps``).
"""

from __future__ import annotations

import argparse
import json
import shutil
import sys
import tempfile
from pathlib import Path


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--method", required=True, help="the method trained (e.g. search_r1)")
    ap.add_argument("--recipe", required=True, help="the recipe of the run (e.g. cpu-sft-grpo)")
    ap.add_argument(
        "--recipe-override", nargs="*", default=[], metavar="KEY=VALUE", help="as harness train's"
    )
    ap.add_argument("--model", required=True, help="the run's --model (its starting model)")
    ap.add_argument("--out", required=True, type=Path, help="the run's --out (holds checkpoint/)")
    ap.add_argument("--to", required=True, type=Path, help="the model directory to write")
    args = ap.parse_args(argv)

    import torch

    from harness.errors import ConfigError
    from harness.methods_registry import get_trainable
    from harness.rl.trainer import load_policy, save_final

    state = args.out / "checkpoint"
    if not (state / "policy_state.pt").is_file():
        raise ConfigError(
            f"{state}/policy_state.pt: no checkpoint (a run writes one every recipe save_every steps)"
        )
    step = int(torch.load(state / "trainer_state.pt", map_location="cpu", weights_only=False)["step"])
    _method, recipe = get_trainable(args.method, args.recipe, args.recipe_override)
    policy, _ref, tok = load_policy(args.model, recipe, with_reference=False)
    policy.load_state_dict(torch.load(state / "policy_state.pt", map_location="cpu", weights_only=True))
    with tempfile.TemporaryDirectory(dir=args.to.parent) as tmp:
        final = save_final(policy, tok, Path(tmp), recipe, args.method, args.model, log=lambda _m: None)
        info = json.loads((final / "harness_train.json").read_text())
        (final / "harness_train.json").write_text(json.dumps({**info, "steps": step}))
        shutil.rmtree(args.to, ignore_errors=True)
        final.rename(args.to)
    print(f"{args.to}: checkpoint of {args.out} at step {step}")
    return 0


if __name__ == "__main__":
    from harness.errors import script_exit

    sys.exit(script_exit(main))
