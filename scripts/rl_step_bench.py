"""Time one RL step of the learning recipe with rollouts on llama.cpp and on transformers, side by
side in one sitting (issue 43's speed acceptance: at most 1/5 of the recorded 420-1,359 s).

    python scripts/rl_step_bench.py                                   # base SmolLM2 + a fresh LoRA
    python scripts/rl_step_bench.py --model runs/search_r1-cpu-sft-rl-sft/final   # from the SFT checkpoint
    python scripts/rl_step_bench.py --backends llamacpp --out /tmp/bench.json
    python scripts/rl_step_bench.py --model runs/sft/final --recipe-override trunk_dtype='"bfloat16"'
    python scripts/rl_step_bench.py --model runs/sft/final --threads 2 --backends llamacpp llamacpp-q8_0 transformers
    python scripts/rl_step_bench.py --model runs/sft/final --recipe-override trunk_dtype='"bfloat16"' adapted_dtype='"bfloat16"'
    python scripts/rl_step_bench.py --model runs/long-sft/final --threads 2 --recipe cpu-grpo-long \
        --backends llamacpp-q8_0 llamacpp transformers --recipe-override heldout_every=0 save_every=0
    python scripts/rl_step_bench.py --model runs/sft/final --threads 2 --backends llamacpp-q8_0 --rollout-engines 1

Each backend runs ``harness train --method search_r1 --recipe cpu-sft-grpo --steps 1`` (the
recorded run's recipe by default; ``--recipe cpu-grpo-long`` is the learning recipe: 4 questions x groups of 8, DAPO dynamic sampling over up to 2 rounds, 2
optimizer updates, 48 tokens a turn, one search) in its own process, one after the other, with
one thread for torch and one for llama.cpp, and the same seed, so both draw the same questions
(the first 4 of the RL order). The step's ``seconds`` (rollouts + learner update; ``seconds_rollout``
and ``seconds_sync`` beside it) come from the run's ``train_steps``. What differs between the two:
the tokens sampled (two engines' numerics), hence the rewards, hence how many dynamic-sampling
rounds each needed; the table reports the rounds and response lengths so that a reader can see it. ``llamacpp-q8_0`` is ``--rollout-backend
llamacpp --rollout-weights q8_0`` (the base re-quantised to Q8_0 once per run, its seconds in the step's).
The machine is whatever runs it: on a shared one, say so beside the numbers. Beside the wall
seconds each run reports ``cpu_seconds`` (user + system CPU of the train process and everything it
started, the llama.cpp child included: what the step cost whatever else ran) and the 1-minute load
average before and after it. ``--recipe-override`` goes to both runs alike.
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import subprocess
import sys
import tempfile
from pathlib import Path

KEYS = (
    "seconds",
    "seconds_rollout",
    "seconds_sync",
    "seconds_update",
    "cpu_seconds_update",
    "ds_rounds",
    "sampled/response_len_mean",
    "sampled/searches_mean",
    "engine/logp_abs_diff",
    "engine/ratio_std",
)


def run_one(
    backend: str,
    model: str,
    recipe: str,
    work: Path,
    threads: int,
    overrides: list[str],
    engines: int | None = None,
) -> dict[str, float]:
    import duckdb

    db = work / f"{backend}.duckdb"
    engine, _, weights = backend.partition("-")
    env = dict(os.environ, OMP_NUM_THREADS=str(threads))
    cmd = [
        sys.executable,
        "-m",
        "harness",
        "train",
        "--method",
        "search_r1",
        "--recipe",
        recipe,
        "--model",
        model,
        "--steps",
        "1",
        "--rollout-backend",
        engine,
        *(["--rollout-weights", weights] if weights else []),
        *(["--rollout-engines", str(engines)] if engines is not None and engine == "llamacpp" else []),
        "--rollout-threads",
        str(threads),
        "--out",
        str(work / backend),
        "--db",
        str(db),
        *(["--recipe-override", *overrides] if overrides else []),
    ]
    load0 = os.getloadavg()[0]
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    subprocess.run(cmd, check=True, env=env)
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    cpu = (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)
    with duckdb.connect(str(db), read_only=True) as c:
        rows = c.execute("select metric, value from train_steps where step = 0").fetchall()
    got = dict(rows)
    out = {k: float(got[k]) for k in KEYS if k in got}
    out.update({"cpu_seconds": cpu, "load_before": load0, "load_after": os.getloadavg()[0]})
    return out


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--model", default="default", help="the starting policy (default: the packaged SmolLM2)")
    ap.add_argument("--recipe", default="cpu-sft-grpo", help="search_r1 recipe (default: the recorded run's)")
    ap.add_argument(
        "--backends",
        nargs="+",
        default=["llamacpp", "transformers"],
        choices=["llamacpp", "llamacpp-q8_0", "transformers"],
        help="rollout backends to time (llamacpp-q8_0: llamacpp with --rollout-weights q8_0)",
    )
    ap.add_argument("--threads", type=int, default=1, help="threads for torch and for llama.cpp (default 1)")
    ap.add_argument(
        "--recipe-override",
        nargs="*",
        default=[],
        help="recipe fields for both runs (harness train --recipe-override), e.g. trunk_dtype='\"bfloat16\"'",
    )
    ap.add_argument(
        "--rollout-engines",
        type=int,
        default=None,
        help="llama.cpp engines for the llamacpp backends (harness train --rollout-engines; default: "
        "harness train's, one per thread)",
    )
    ap.add_argument("--out", type=Path, default=None, help="also write the numbers as JSON here")
    args = ap.parse_args(argv)
    results: dict[str, dict[str, float]] = {}
    with tempfile.TemporaryDirectory(prefix="rl-step-bench-") as tmp:
        for b in args.backends:
            results[b] = run_one(
                b,
                args.model,
                args.recipe,
                Path(tmp),
                args.threads,
                args.recipe_override,
                args.rollout_engines,
            )
            print(f"{b}: {json.dumps(results[b])}", file=sys.stderr)
    cols = (*KEYS, "cpu_seconds", "load_before", "load_after")
    print("| rollout backend | " + " | ".join(cols) + " |")
    print("|---" * (len(cols) + 1) + "|")
    for b, m in results.items():
        print(f"| {b} | " + " | ".join(f"{m[k]:.3f}" if k in m else "-" for k in cols) + " |")
    if args.out is not None:
        args.out.write_text(
            json.dumps(
                {
                    "model": args.model,
                    "recipe": args.recipe,
                    "recipe_override": args.recipe_override,
                    "threads": args.threads,
                    "rollout_engines": args.rollout_engines,
                    "steps": results,
                },
                indent=1,
            )
            + "\n"
        )
    return 0


if __name__ == "__main__":
    sys.exit(main())
