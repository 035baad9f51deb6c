"""A checkpoint on the held-out questions with both metrics of issue 43, paired by question.

:func:`evaluate_heldout` rolls out one model on a fixed list of held-out questions with the
method's own ``solve`` (its prompt, engine, retriever, renderer and extractor; the protocol is
``mini``'s unless given, so the numbers are those ``harness run`` stores) twice:

* **greedy**: one answer per question at the protocol's decoding (temperature 0): greedy EM, F1
  and cover-EM (``harness.metrics``);
* **sampled**: ``samples`` answers per question at the rollout ``temperature`` (top-p 1), every
  (question, sample) with its own seed: **mean@k EM** (per question the share of its k samples
  that are right, averaged over questions) and **pass@k** (per question 1 when any sample is
  right). With k samples per question and k rollouts in the pass, this is the unbiased pass@k of
  Chen et al. (arXiv:2107.03374 §2.1) at n = k. Sharpening (RL moving probability onto answers the
  policy already finds) shows in mean@k before greedy EM.

The engine is the one evaluation and the RL rollouts share on the CPU: llama.cpp (``xllamacpp``)
over the packaged base GGUF with the checkpoint as GGUF LoRA adapters
(:mod:`harness.llm.gguf_lora`): a merged ``harness sft`` / ``harness train`` checkpoint becomes its
exact low-rank difference to the packaged base (:func:`harness.llm.gguf_lora.checkpoint_adapter`), and a live learner's
adapter (``write_lora_gguf(policy, path)``) is passed in ``adapters``. ``engine="transformers"``
evaluates a checkpoint directory on the transformers backend instead (a GPU run). Runs of the two
engines are distinct runs (llama.cpp multiplies with 8-bit activations), never compared with each
other; :func:`compare` refuses two evaluations of different engines, protocols or questions (a
baseline that needs no model, template majority, pairs with any).

:func:`compare` is the paired comparison of two evaluations (:mod:`harness.metrics.paired`): exact
McNemar for greedy EM and pass@k (0/1 per question), the paired bootstrap for mean@k EM and greedy
F1. The collapse guard of each evaluation is the share of its most frequent normalised answer,
over the greedy answers and over all sampled ones (issue 43: at most 20%).
"""

from __future__ import annotations

import json
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any, Literal

import numpy as np

from harness.errors import ConfigError, DataError
from harness.metrics.bootstrap import Aggregate, bootstrap_ci, wilson_ci
from harness.metrics.paired import PairedTest, paired_test
from harness.rl.heldout import AnswerStats, answer_stats
from harness.types import QAExample

Engine = Literal["llamacpp", "transformers"]
ANSWER_METRICS = ("em", "f1", "cover_em")
COLLAPSE_SHARE = 0.20  # issue 43: no collapse = the most frequent answer takes at most 20%


@dataclass(frozen=True)
class HeldoutEval:
    """One model on the held-out questions. Per question (aligned with ``sample_ids``): the greedy
    prediction and its EM / F1 / cover-EM; ``sampled``: its k sampled predictions and their EM
    (``sampled_em``, k per question). ``k == 0`` when no samples were drawn. ``greedy_reward``: the
    method's own training reward ``reward`` (a name of its reward table) on each greedy trajectory,
    empty when not scored (a baseline has no reward of the method's)."""

    label: str
    model: str
    engine: str
    method: str
    protocol_id: str
    temperature: float
    seed: int
    sample_ids: tuple[str, ...]
    greedy: tuple[str | None, ...]
    greedy_em: tuple[float, ...]
    greedy_f1: tuple[float, ...]
    greedy_cover_em: tuple[float, ...]
    sampled: tuple[tuple[str | None, ...], ...] = ()
    sampled_em: tuple[tuple[float, ...], ...] = ()
    seconds: float = 0.0
    meta: dict[str, Any] = field(default_factory=dict)
    reward: str = ""
    greedy_reward: tuple[float, ...] = ()

    def __post_init__(self) -> None:
        n = len(self.sample_ids)
        if not n:
            raise ConfigError(f"held-out evaluation {self.label!r} has no questions")
        if len(set(self.sample_ids)) != n:
            raise ConfigError(f"held-out evaluation {self.label!r}: a question id occurs twice")
        lens = {len(self.greedy), len(self.greedy_em), len(self.greedy_f1), len(self.greedy_cover_em)}
        if lens != {n}:
            raise ConfigError(f"held-out evaluation {self.label!r}: greedy rows are not one per question")
        if bool(self.reward) != bool(self.greedy_reward) or (
            self.greedy_reward and len(self.greedy_reward) != n
        ):
            raise ConfigError(
                f"held-out evaluation {self.label!r}: reward {self.reward!r} needs one value per question "
                f"({len(self.greedy_reward)} for {n})"
            )
        if self.sampled or self.sampled_em:
            if len(self.sampled) != n or len(self.sampled_em) != n:
                raise ConfigError(
                    f"held-out evaluation {self.label!r}: sampled rows are not one per question"
                )
            ks = {len(s) for s in self.sampled} | {len(s) for s in self.sampled_em}
            if len(ks) != 1 or 0 in ks:
                raise ConfigError(
                    f"held-out evaluation {self.label!r}: questions have different numbers of samples {sorted(ks)}"
                )

    @property
    def n(self) -> int:
        return len(self.sample_ids)

    @property
    def k(self) -> int:
        return len(self.sampled_em[0]) if self.sampled_em else 0

    def mean_at_k(self) -> np.ndarray:
        """Per question: the share of its k samples whose EM is 1."""
        self._need_samples("mean@k")
        return np.asarray(self.sampled_em, dtype=np.float64).mean(axis=1)

    def pass_at_k(self) -> np.ndarray:
        """Per question: 1 when any of its k samples has EM 1."""
        self._need_samples("pass@k")
        return np.asarray(self.sampled_em, dtype=np.float64).max(axis=1)

    def spread_share(self) -> float:
        """The share of questions whose k samples do not all have the same EM: the groups GRPO
        learns from (an all-equal group has zero advantage; DAPO's dynamic sampling drops it)."""
        m = self.mean_at_k()
        return float(np.mean((m > 0) & (m < 1)))

    def _need_samples(self, what: str) -> None:
        if not self.k:
            raise ConfigError(f"held-out evaluation {self.label!r} drew no samples: no {what}")

    def greedy_answers(self) -> AnswerStats:
        return answer_stats(self.greedy)

    def sampled_answers(self) -> AnswerStats:
        self._need_samples("sampled answers")
        return answer_stats([p for row in self.sampled for p in row])

    def collapsed(self, share: float = COLLAPSE_SHARE) -> bool:
        """The most frequent answer (greedy, or over all samples) takes more than ``share``."""
        shares = [self.greedy_answers().top_share] + ([self.sampled_answers().top_share] if self.k else [])
        return max(shares) > share

    def summary(self) -> dict[str, Aggregate]:
        """Greedy EM and cover-EM (Wilson), greedy F1 (bootstrap); with samples mean@k EM (bootstrap,
        its values are not 0/1) and pass@k (Wilson)."""
        out = {
            "greedy_em": wilson_ci(self.greedy_em),
            "greedy_cover_em": wilson_ci(self.greedy_cover_em),
            "greedy_f1": bootstrap_ci(self.greedy_f1),
        }
        if self.greedy_reward:
            out["greedy_reward"] = bootstrap_ci(self.greedy_reward)
        if self.k:
            out["mean_em"] = bootstrap_ci(self.mean_at_k())
            out["pass_em"] = wilson_ci(self.pass_at_k())
        return out

    def metrics(self, prefix: str = "heldout/") -> dict[str, float]:
        """Flat numbers for ``train_steps`` (:func:`record_heldout_eval`): ``greedy_em`` with
        ``_lo``/``_hi``, ``mean@k_em``, ``pass@k_em``, the answer shares, ``n`` and ``k``."""
        m: dict[str, float] = {f"{prefix}n": float(self.n), f"{prefix}k": float(self.k)}
        for name, agg in self.summary().items():
            key = name.replace("mean_em", f"mean@{self.k}_em").replace("pass_em", f"pass@{self.k}_em")
            m |= {f"{prefix}{key}": agg.mean, f"{prefix}{key}_lo": agg.lo, f"{prefix}{key}_hi": agg.hi}
        g = self.greedy_answers()
        m |= {f"{prefix}greedy_top_answer_share": g.top_share, f"{prefix}greedy_answered": g.answered}
        if self.k:
            s = self.sampled_answers()
            m |= {
                f"{prefix}sampled_top_answer_share": s.top_share,
                f"{prefix}sampled_answered": s.answered,
                f"{prefix}spread_share": self.spread_share(),
            }
        return m

    def line(self) -> str:
        s = self.summary()
        parts = [
            f"{self.label}: greedy EM {_fmt(s['greedy_em'])}",
            f"cover-EM {s['greedy_cover_em'].mean:.3f}",
        ]
        if self.k:
            parts += [f"mean@{self.k} EM {_fmt(s['mean_em'])}", f"pass@{self.k} {s['pass_em'].mean:.3f}"]
        g = self.greedy_answers()
        parts.append(f"top answer {g.top_answer!r} {g.top_share:.0%} (n={self.n})")
        return ", ".join(parts)

    def to_dict(self) -> dict[str, Any]:
        """The record of this evaluation, rows sorted by question id."""
        order = sorted(range(self.n), key=lambda i: self.sample_ids[i])
        rows = []
        for i in order:
            row: dict[str, Any] = {
                "id": self.sample_ids[i],
                "greedy": self.greedy[i],
                "em": self.greedy_em[i],
                "f1": self.greedy_f1[i],
                "cover_em": self.greedy_cover_em[i],
            }
            if self.greedy_reward:
                row["reward"] = self.greedy_reward[i]
            if self.k:
                row["sampled"] = list(self.sampled[i])
                row["sampled_em"] = list(self.sampled_em[i])
            rows.append(row)
        return {
            "label": self.label,
            "model": self.model,
            "engine": self.engine,
            "method": self.method,
            "protocol_id": self.protocol_id,
            "temperature": self.temperature,
            "seed": self.seed,
            "k": self.k,
            "seconds": round(self.seconds, 1),
            "meta": self.meta,
            **({"reward": self.reward} if self.reward else {}),
            "rows": rows,
        }

    @classmethod
    def from_dict(cls, d: dict[str, Any]) -> HeldoutEval:
        rows = d["rows"]
        k = d.get("k", 0)
        return cls(
            label=d["label"],
            model=d["model"],
            engine=d["engine"],
            method=d["method"],
            protocol_id=d["protocol_id"],
            temperature=float(d["temperature"]),
            seed=int(d["seed"]),
            sample_ids=tuple(r["id"] for r in rows),
            greedy=tuple(r["greedy"] for r in rows),
            greedy_em=tuple(float(r["em"]) for r in rows),
            greedy_f1=tuple(float(r["f1"]) for r in rows),
            greedy_cover_em=tuple(float(r["cover_em"]) for r in rows),
            sampled=tuple(tuple(r["sampled"]) for r in rows) if k else (),
            sampled_em=tuple(tuple(float(x) for x in r["sampled_em"]) for r in rows) if k else (),
            seconds=float(d.get("seconds", 0.0)),
            meta=dict(d.get("meta", {})),
            reward=str(d.get("reward", "")),
            greedy_reward=tuple(float(r["reward"]) for r in rows) if d.get("reward") else (),
        )


def _fmt(a: Aggregate) -> str:
    return f"{a.mean:.3f} [{a.lo:.3f}, {a.hi:.3f}]"


@dataclass(frozen=True)
class HeldoutComparison:
    """``b - a`` on the same questions: ``greedy_em`` and ``pass_em`` (exact McNemar),
    ``greedy_f1``, ``greedy_reward`` and ``mean_em`` (paired bootstrap); the reward only when both
    were scored with the same one, the last two absent without samples."""

    a: str
    b: str
    tests: dict[str, PairedTest]

    def to_dict(self) -> dict[str, Any]:
        return {"a": self.a, "b": self.b, "tests": {k: t.to_dict() for k, t in self.tests.items()}}


def _aligned(a: HeldoutEval, b: HeldoutEval) -> tuple[np.ndarray, np.ndarray]:
    """Indices into a and b of the same questions, in a's order (same question set required)."""
    if set(a.sample_ids) != set(b.sample_ids):
        raise ConfigError(
            f"compare: {a.label!r} ({a.n} questions) and {b.label!r} ({b.n}) are not over the same "
            "questions; evaluate both on the same held-out ids"
        )
    for what in ("engine", "protocol_id"):
        if NO_ENGINE not in (a.engine, b.engine) and getattr(a, what) != getattr(b, what):
            raise ConfigError(
                f"compare: {a.label!r} and {b.label!r} differ in {what} ({getattr(a, what)} vs "
                f"{getattr(b, what)}); a paired comparison needs one engine and one protocol"
            )
    pos = {q: i for i, q in enumerate(b.sample_ids)}
    return np.arange(a.n), np.array([pos[q] for q in a.sample_ids])


def compare(a: HeldoutEval, b: HeldoutEval) -> HeldoutComparison:
    """The paired comparison ``b - a`` (see the module docstring); mean@k and pass@k only when both
    drew the same number of samples at the same temperature."""
    ia, ib = _aligned(a, b)
    tests = {
        "greedy_em": paired_test(np.asarray(a.greedy_em)[ia], np.asarray(b.greedy_em)[ib]),
        "greedy_f1": paired_test(np.asarray(a.greedy_f1)[ia], np.asarray(b.greedy_f1)[ib], test="bootstrap"),
    }
    if a.reward and a.reward == b.reward:
        tests["greedy_reward"] = paired_test(
            np.asarray(a.greedy_reward)[ia], np.asarray(b.greedy_reward)[ib], test="bootstrap"
        )
    if a.k and b.k:
        if a.k != b.k or a.temperature != b.temperature:
            raise ConfigError(
                f"compare: {a.label!r} drew {a.k} samples at temperature {a.temperature}, {b.label!r} "
                f"{b.k} at {b.temperature}; mean@k is paired only at the same k and temperature"
            )
        tests["mean_em"] = paired_test(a.mean_at_k()[ia], b.mean_at_k()[ib], test="bootstrap")
        tests["pass_em"] = paired_test(a.pass_at_k()[ia], b.pass_at_k()[ib])
    return HeldoutComparison(a.label, b.label, tests)


def comparison_line(c: HeldoutComparison) -> str:
    parts = []
    for name, t in c.tests.items():
        d = t.diff
        parts.append(
            f"{name} {d.mean:+.3f} [{d.lo:+.3f}, {d.hi:+.3f}] ({t.test}, p={t.p:.3g}, +{t.b_better}/-{t.a_better})"
        )
    return f"{c.b} - {c.a}: " + "; ".join(parts)


# -- the engine ----------------------------------------------------------------------------------


def packaged_base(model: str) -> tuple[str, list[Path]]:
    """(the packaged GGUF preset under ``model``, the chain of checkpoints from it to ``model``):
    ``model`` itself when it is a preset, else follow ``harness_train.json``'s ``base_model``
    (``harness train`` from a ``harness sft`` checkpoint records that checkpoint) to a preset."""
    from harness.llm.model_files import PRESETS, canonical_name

    chain: list[Path] = []
    name = model
    while canonical_name(name) not in PRESETS:
        record = Path(name) / "harness_train.json"
        if not record.is_file():
            raise ConfigError(
                f"held-out evaluation on llama.cpp: {name!r} is neither a packaged GGUF preset nor a checkpoint "
                "(harness_train.json); use engine='transformers'"
            )
        if len(chain) > 16 or Path(name) in chain:
            raise ConfigError(f"{record}: base_model chain does not reach a packaged preset")
        chain.append(Path(name))
        name = str(json.loads(record.read_text()).get("base_model", ""))
    return name, chain


def open_engine(
    model: str,
    *,
    engine: Engine = "llamacpp",
    adapters: Sequence[Path] = (),
    work_dir: Path,
    threads: int | None = None,
    slots: int = 1,
    device: str = "auto",
    spin: bool = False,
    n_ctx: int | None = None,
) -> Any:
    """The backend that evaluates ``model``: llama.cpp over its packaged base with the checkpoint's
    difference as an adapter plus ``adapters``, in a child process (torch runs in this one); or
    transformers over a checkpoint directory (``adapters`` refused there). ``spin``: the llama.cpp
    child's threads wait actively (for a caller that leaves it the cores, as the trainer does
    between steps; :class:`~harness.llm.llamacpp_backend.LlamaCppBackend`). ``n_ctx``: llama.cpp's
    tokens a slot (prompt plus answer; None: :class:`~harness.llm.base.BackendSpec`'s 4,096, too
    few for a protocol of many long paragraphs and 1,024 new tokens)."""
    from harness.llm.base import BackendSpec

    ctx = {} if n_ctx is None else {"n_ctx": n_ctx}
    if engine == "transformers":
        if adapters:
            raise ConfigError("held-out evaluation: GGUF adapters apply to engine 'llamacpp' only")
        if n_ctx is not None:
            raise ConfigError("held-out evaluation: n_ctx applies to engine 'llamacpp' only")
        from harness.llm.base import make_backend

        return make_backend(
            BackendSpec(
                kind="transformers", model=model, threads=threads, max_batch_size=slots, device=device
            )
        )
    if engine != "llamacpp":
        raise ConfigError(f"held-out evaluation: engine {engine!r} is not 'llamacpp' or 'transformers'")
    from harness.llm.adapters import get_adapter
    from harness.llm.gguf_lora import checkpoint_adapter
    from harness.llm.llamacpp_backend import LlamaCppBackend

    if get_adapter(model) is not None:  # a shipped adapter preset: the backend adds its adapter itself
        return LlamaCppBackend(
            BackendSpec(kind="llamacpp", model=model, threads=threads, max_batch_size=slots, **ctx),
            lora=[Path(a) for a in adapters],
            child=True,
            spin=spin,
        )
    base, chain = packaged_base(model)
    lora: list[Path] = []
    if chain:
        Path(work_dir).mkdir(parents=True, exist_ok=True)
        lora.append(checkpoint_adapter(base, chain[0], Path(work_dir) / "checkpoint-delta.gguf"))
    lora += [Path(a) for a in adapters]
    return LlamaCppBackend(
        BackendSpec(kind="llamacpp", model=base, threads=threads, max_batch_size=slots, **ctx),
        lora=lora,
        child=True,
        spin=spin,
    )


# -- the evaluation --------------------------------------------------------------------------------


def _solve(
    method: Any,
    examples: list[QAExample],
    ctx: Any,
    batch_size: int,
    seed_of: Callable[[int], int] | None,
    tick,
) -> list[Any]:
    from dataclasses import replace

    out: list[Any] = []
    for start in range(0, len(examples), batch_size):
        batch = examples[start : start + batch_size]
        if seed_of is not None:  # prompt i of the call is sampled with seed + i: one seed per row
            ctx.sampling = replace(ctx.sampling, seed=seed_of(start))
        trajs = method.solve(batch, ctx)
        if len(trajs) != len(batch):
            raise RuntimeError(f"method {method.name} returned {len(trajs)} trajectories for {len(batch)}")
        out.extend(trajs)
        tick(len(batch))
    return out


def recorded_batch_size(ev: HeldoutEval) -> int:
    """The batch size ``ev`` was answered in (``meta["batch_size"]``; 8, :func:`evaluate_heldout`'s
    default, for records written before it was kept)."""
    return int(ev.meta.get("batch_size", 8))


def replay_ranges(ev: HeldoutEval, order: Sequence[str], n: int) -> list[tuple[int, int]]:
    """The position ranges of ``order`` (the split's held-out questions, the order every evaluation
    and part runs in) to evaluate again so that the first ``n`` of ``ev``'s questions in that order
    are answered in the very batches ``ev`` answered them in.

    Why: llama.cpp's greedy answer to a question can depend on which questions share its batch
    (its matrix kernels differ with the batch's token count), so a re-evaluation of the first 20
    questions alone, or in another order, need not reproduce committed answers that were made 8 at
    a time from the start of each part (2026-11-29: 19 of 20 for Eval-RAR's shipped adapter, 20 of
    20 once batched as the evaluation was). Each range starts at a batch start of its part
    (``meta["parts"]`` of a merged evaluation, ``meta["questions"]`` of one part, else from 0) and
    covers whole batches of :func:`recorded_batch_size`, cut at the part's end; adjacent ranges of one part are
    joined, so solving a range ``batch_size`` at a time from its start replays the batches."""
    if n < 1:
        raise ConfigError(f"replay_ranges: n {n} (need >= 1)")
    pos = {q: i for i, q in enumerate(order)}
    missing = [q for q in ev.sample_ids if q not in pos]
    if missing:
        raise ConfigError(
            f"replay_ranges: question {missing[0]} of {ev.label!r} is not held out in this split"
        )
    batch = recorded_batch_size(ev)
    if "parts" in ev.meta:
        parts = [tuple(p["questions"]) for p in ev.meta["parts"]]
    elif ev.meta.get("questions"):
        parts = [tuple(ev.meta["questions"])]
    else:
        parts = [(0, len(ev.sample_ids))]
    wanted = sorted(pos[q] for q in ev.sample_ids)[:n]
    ranges: list[tuple[int, int]] = []
    for p in wanted:
        part = next(((a, b) for a, b in parts if a <= p < b), None)
        if part is None:
            raise ConfigError(f"replay_ranges: position {p} of {ev.label!r} is in none of its parts {parts}")
        lo, hi = part
        start = lo + (p - lo) // batch * batch
        end = min(start + batch, hi)
        if ranges and ranges[-1][1] == start and start != lo:
            ranges[-1] = (ranges[-1][0], end)
        elif not ranges or ranges[-1][1] <= start:
            ranges.append((start, end))
    return ranges


def _prediction(t: Any) -> str | None:
    """The trajectory's answer (None: none extracted); a failed generation stops the evaluation
    (a held-out number over fewer questions is not the same number)."""
    from harness.eval.runner import sample_error

    why = sample_error(t)
    if why is not None:
        raise ConfigError(f"held-out question {t.example_id}: {why}; rerun the evaluation")
    return t.prediction or None


# long: one evaluation in order (the engine opened, the greedy pass, the sampled pass, the engine
# closed whatever fails, then every answer scored); the pieces share a dozen settings and the engine
def evaluate_heldout(
    checkpoint: str,
    questions: Sequence[QAExample],
    *,
    method: str,
    samples: int = 8,
    temperature: float = 1.0,
    seed: int = 0,
    adapters: Sequence[Path] = (),
    engine: Engine = "llamacpp",
    backend: Any = None,
    protocol: Any = None,
    threads: int | None = None,
    slots: int = 1,
    batch_size: int = 8,
    work_dir: Path | None = None,
    label: str = "",
    progress: bool = True,
    spin: bool = False,
    first: int = 0,
    reward: tuple[str, Any] | None = None,
    n_ctx: int | None = None,
) -> HeldoutEval:
    """``checkpoint`` (a packaged preset, or a ``harness sft`` / ``harness train`` checkpoint
    directory) on ``questions``: greedy, then ``samples`` answers each at ``temperature`` (0: no
    sampled pass). ``adapters``: GGUF LoRA adapters applied on top (a live learner's current
    adapter); ``backend``: an engine already serving the policy (then ``checkpoint`` only names it
    and the caller closes the engine). ``protocol``: default ``mini`` (what ``harness run``
    evaluates under). ``spin``: see :func:`open_engine`. ``first``: the position of
    ``questions[0]`` in the list a whole evaluation covers, so that a part of it (questions
    ``first`` on) samples each question with the seeds the whole one would (:func:`merge_parts`).
    ``reward``: (a reward name of ``method``, its :class:`~harness.method.RewardContext`): score
    each greedy trajectory with the method's own training reward (``greedy_reward``).
    ``n_ctx``: llama.cpp's tokens a slot (:func:`open_engine`), stored in ``meta``.
    Nothing is written to a results database."""
    import tempfile

    from tqdm import tqdm

    from harness.eval.protocol import mini
    from harness.eval.setup import RunSetup
    from harness.method import RunContext, TrainableMethod
    from harness.methods_registry import get_method
    from harness.metrics.registry import score_answer
    from harness.types import SamplingParams

    if first < 0:
        raise ConfigError(f"evaluate_heldout: first {first} (need >= 0)")
    if samples < 0 or (samples and temperature <= 0):
        raise ConfigError(
            f"evaluate_heldout: samples {samples} at temperature {temperature} (need samples >= 0, temperature > 0)"
        )
    qs = list(questions)
    if not qs:
        raise ConfigError("evaluate_heldout: no questions")
    proto = protocol or mini()
    m = get_method(method)
    if reward is not None and not isinstance(m, TrainableMethod):
        # refused before any answer is generated: a baseline has no training reward to score with
        raise ConfigError(
            f"evaluate_heldout: method {method!r} is a baseline with no training reward; drop reward="
        )
    retriever = RunSetup(proto, db=Path("unused.duckdb")).retriever(proto) if m.uses_retrieval else None
    own = backend is None
    tmp = None
    if own:
        if work_dir is None:
            tmp = tempfile.TemporaryDirectory(prefix="heldout-")
            work_dir = Path(tmp.name)
        backend = open_engine(
            checkpoint,
            engine=engine,
            adapters=adapters,
            work_dir=work_dir,
            threads=threads,
            slots=slots,
            spin=spin,
            n_ctx=n_ctx,
        )
    t0 = time.perf_counter()
    try:
        bar = tqdm(
            total=len(qs) * (1 + samples), desc=f"held-out {label or checkpoint}", disable=not progress
        )
        ctx = RunContext(
            backend=backend, protocol=proto, retriever=retriever, sampling=proto.decoding.sampling()
        )
        greedy = _solve(m, qs, ctx, batch_size, None, bar.update)
        sampled: list[Any] = []
        if samples:
            expanded = [e for e in qs for _ in range(samples)]
            ctx.sampling = SamplingParams(temperature=temperature, top_p=1.0, seed=seed)
            base_seed = seed * 1_000_003 + first * samples
            sampled = _solve(
                m, expanded, ctx, batch_size * samples, lambda start: base_seed + start, bar.update
            )
        bar.close()
    finally:
        if own:
            backend.close()
        if tmp is not None:
            tmp.cleanup()
    scores = [
        score_answer(t.prediction or "", e.answers, ANSWER_METRICS) for t, e in zip(greedy, qs, strict=True)
    ]
    rewards: tuple[float, ...] = ()
    if reward is not None:
        assert isinstance(m, TrainableMethod)  # refused above otherwise
        rewards = tuple(float(r.total) for r in m.rewards(greedy, name=reward[0], ctx=reward[1]))
    sampled_preds = [
        [_prediction(t) for t in sampled[i * samples : (i + 1) * samples]] for i in range(len(qs))
    ]
    sampled_em = [
        [
            score_answer(t.prediction or "", e.answers, ("em",))["em"]
            for t in sampled[i * samples : (i + 1) * samples]
        ]
        for i, e in enumerate(qs)
    ]
    return HeldoutEval(
        label=label or checkpoint,
        model=checkpoint,
        engine=engine if own else type(backend).__name__,
        method=method,
        protocol_id=proto.protocol_id,
        temperature=temperature if samples else 0.0,
        seed=seed,
        sample_ids=tuple(e.id for e in qs),
        greedy=tuple(_prediction(t) for t in greedy),
        greedy_em=tuple(s["em"] for s in scores),
        greedy_f1=tuple(s["f1"] for s in scores),
        greedy_cover_em=tuple(s["cover_em"] for s in scores),
        sampled=tuple(tuple(r) for r in sampled_preds) if samples else (),
        sampled_em=tuple(tuple(r) for r in sampled_em) if samples else (),
        seconds=time.perf_counter() - t0,
        meta={
            "adapters": [Path(a).name for a in adapters],
            "threads": threads,
            "slots": slots,
            "batch_size": batch_size,
            **({} if n_ctx is None else {"n_ctx": n_ctx}),
        },
        reward=reward[0] if reward is not None else "",
        greedy_reward=rewards,
    )


def heldout_questions(split: str, data_dir: Path | None = None) -> list[QAExample]:
    """The held-out questions of a packaged split, in dataset order (what a recipe's ``split``
    holds out)."""
    from harness.rl.split import split_examples

    return split_examples(split, "heldout", data_dir)


def record_heldout_eval(
    store: Any, train_run_id: str, step: int, ev: HeldoutEval, *, against: HeldoutEval | None = None
) -> dict[str, float]:
    """Write ``ev.metrics()`` into ``train_steps`` of ``train_run_id`` at ``step``; with ``against``
    (the run's starting checkpoint, same questions, engine and k) also the paired differences
    ``heldout/diff/<metric>`` with ``_lo`` / ``_hi`` and ``_p``."""
    m = ev.metrics()
    if against is not None:
        for name, t in compare(against, ev).tests.items():
            key = f"heldout/diff/{name}"
            m |= {key: t.diff.mean, f"{key}_lo": t.diff.lo, f"{key}_hi": t.diff.hi, f"{key}_p": t.p}
    store.add_train_steps(train_run_id, step, m)
    return m


# -- the committed record of held-out evaluations ----------------------------------------------------

RECORD_SCHEMA = 1
NO_ENGINE = "none"  # a baseline whose answers need no model (template majority)


def template_majority_eval(split: str, data_dir: Path | None = None) -> HeldoutEval:
    """The template-majority baseline of ``split`` (:func:`harness.rl.heldout.template_majority`)
    as an evaluation: its answer is the greedy one, it draws no samples, needs no engine."""
    from harness.metrics.registry import score_answer
    from harness.rl.heldout import template_majority
    from harness.rl.split import split_examples

    majority = template_majority(split_examples(split, "train", data_dir))
    held = heldout_questions(split, data_dir)
    preds = [majority.get(e.qtype or "") for e in held]
    scores = [score_answer(p or "", e.answers, ANSWER_METRICS) for p, e in zip(preds, held, strict=True)]
    return HeldoutEval(
        label="template majority",
        model=NO_ENGINE,
        engine=NO_ENGINE,
        method=NO_ENGINE,
        protocol_id=NO_ENGINE,
        temperature=0.0,
        seed=0,
        sample_ids=tuple(e.id for e in held),
        greedy=tuple(preds),
        greedy_em=tuple(s["em"] for s in scores),
        greedy_f1=tuple(s["f1"] for s in scores),
        greedy_cover_em=tuple(s["cover_em"] for s in scores),
    )


def load_record(path: Path) -> dict[str, Any]:
    """A held-out record (``eval_heldout.py run --record``): a missing or unreadable file is one line."""
    try:
        rec = json.loads(Path(path).read_text(encoding="utf-8"))
    except FileNotFoundError:
        raise DataError(path, "no such held-out record (eval_heldout.py run --record writes one)") from None
    except (OSError, UnicodeDecodeError, json.JSONDecodeError) as e:
        raise DataError(path, f"not a readable held-out record JSON ({e})") from None
    if not isinstance(rec, dict):
        raise DataError(path, f"a held-out record is a JSON object, got {type(rec).__name__}")
    if rec.get("schema") != RECORD_SCHEMA:
        raise ConfigError(f"{path}: schema {rec.get('schema')!r}, this code reads schema {RECORD_SCHEMA}")
    return rec


def record_evals(record: dict[str, Any]) -> list[HeldoutEval]:
    return [HeldoutEval.from_dict(d) for d in record["evaluations"]]


def put_eval(record: dict[str, Any], ev: HeldoutEval) -> dict[str, Any]:
    """The record with ``ev`` added, replacing an evaluation of the same label."""
    evs = [d for d in record["evaluations"] if d["label"] != ev.label]
    return {**record, "evaluations": [*evs, ev.to_dict()]}


def check_record(record: dict[str, Any], data_dir: Path | None = None) -> None:
    """Every evaluation covers exactly the split's held-out questions (or, marked with
    ``meta.limit``, the first N of them: a run bounded in time, which pairs with nothing), and the
    template-majority rows (when present) are the baseline recomputed now."""
    held = {e.id for e in heldout_questions(record["split"], data_dir)}
    for ev in record_evals(record):
        if ev.meta.get("limit") and set(ev.sample_ids) < held:  # a bounded run on the first N, so marked
            continue
        if set(ev.sample_ids) != held:
            raise ConfigError(
                f"record evaluation {ev.label!r}: {ev.n} questions, not the {len(held)} held-out questions "
                f"of split {record['split']!r}"
            )
        if (
            ev.engine == NO_ENGINE
            and ev.to_dict() != template_majority_eval(record["split"], data_dir).to_dict()
        ):
            raise ConfigError(
                f"record: the {ev.label!r} rows differ from the split's baseline recomputed now"
            )


def evals_table(evs: Sequence[HeldoutEval]) -> str:
    """One row per evaluation: greedy EM (Wilson), cover-EM, F1, the method's own reward (when
    scored, with its name), mean@k EM (bootstrap), pass@k,
    the top answer's share (greedy / sampled) and the seconds it took."""
    lines = [
        "| evaluation | engine | n | greedy EM [95% Wilson] | greedy cover-EM | greedy F1 | greedy own reward | mean@k EM [95% bootstrap] | pass@k | top answer share greedy / sampled | seconds |",
        "|---|---|---|---|---|---|---|---|---|---|---|",
    ]
    for ev in evs:
        s = ev.summary()
        g = ev.greedy_answers()
        mean = f"{_fmt(s['mean_em'])} (k={ev.k}, T={ev.temperature:g})" if ev.k else "-"
        pas = f"{s['pass_em'].mean:.3f}" if ev.k else "-"
        top = f"{g.top_share:.0%}" + (f" / {ev.sampled_answers().top_share:.0%}" if ev.k else "")
        own = f"{s['greedy_reward'].mean:.3f} ({ev.reward})" if ev.reward else "-"
        lines.append(
            f"| {ev.label} | {ev.engine} | {ev.n} | {_fmt(s['greedy_em'])} | {s['greedy_cover_em'].mean:.3f} | "
            f"{s['greedy_f1'].mean:.3f} | {own} | {mean} | {pas} | {top} | {ev.seconds:.0f} |"
        )
    return "\n".join(lines)


def by_dataset_table(evs: Sequence[HeldoutEval], groups: Mapping[str, Sequence[str]]) -> str:
    """Greedy EM and F1 of each evaluation within each dataset of ``groups`` (dataset -> its held-out
    ids, a split's ``heldout``): a mean over all questions can hide a dataset the policy never
    answers. An evaluation's questions outside ``groups`` are refused (a record of another split)."""
    names = list(groups)
    of = {sid: d for d in names for sid in groups[d]}
    lines = [
        "| evaluation | " + " | ".join(f"{d} EM / F1 (n)" for d in names) + " |",
        "|---|" + "---|" * len(names),
    ]
    for ev in evs:
        stray = [sid for sid in ev.sample_ids if sid not in of]
        if stray:
            raise ConfigError(
                f"held-out evaluation {ev.label!r}: question {stray[0]!r} is in none of the datasets "
                f"{', '.join(names)} ({len(stray)} such)"
            )
        cells = []
        for d in names:
            idx = [i for i, sid in enumerate(ev.sample_ids) if of[sid] == d]
            if not idx:
                cells.append("-")
                continue
            em = float(np.mean([ev.greedy_em[i] for i in idx]))
            f1 = float(np.mean([ev.greedy_f1[i] for i in idx]))
            cells.append(f"{em:.3f} / {f1:.3f} ({len(idx)})")
        lines.append(f"| {ev.label} | " + " | ".join(cells) + " |")
    return "\n".join(lines)


def comparisons_table(pairs: Sequence[tuple[HeldoutEval, HeldoutEval]]) -> str:
    """``b - a`` per pair: each paired test's difference [95% paired bootstrap], its test and p."""
    lines = [
        "| comparison (same questions) | metric | difference [95% paired bootstrap] | test | p | better in the second / in the first |",
        "|---|---|---|---|---|---|",
    ]
    for a, b in pairs:
        for name, t in compare(a, b).tests.items():
            d = t.diff
            lines.append(
                f"| {b.label} - {a.label} | {name} | {d.mean:+.3f} [{d.lo:+.3f}, {d.hi:+.3f}] | {t.test} | "
                f"{t.p:.3g} | {t.b_better} / {t.a_better} |"
            )
    return "\n".join(lines)


def heldout_at_step(
    recipe: Any,
    model: str,
    policy: Any,
    step: int,
    out_dir: Path,
    *,
    store: Any = None,
    run_id: str = "",
    start: HeldoutEval | None = None,
    threads: int | None = None,
    data_dir: Path | None = None,
    log: Callable[[str], None] = print,
) -> HeldoutEval | None:
    """What the trainer calls after RL step ``step`` (0 = before the first update): when ``step``
    is a multiple of ``recipe.heldout_every``, evaluate the current policy on the held-out questions
    of ``recipe.split`` (``model``: the run's ``--model``; ``policy``: the learner's PEFT model,
    whose adapter is written as ``out_dir/heldout/step-<step>.gguf``, or None for ``model`` alone)
    with ``recipe.heldout_samples`` samples at ``recipe.algo.temperature``; write the evaluation to
    ``out_dir/heldout/step-<step>.json`` and its metrics to ``train_steps`` of ``run_id`` (paired
    against ``start``, the step-0 evaluation, when given). Returns it, or None off the schedule."""
    if not recipe.heldout_every or step % recipe.heldout_every:
        return None
    return evaluate_step(
        recipe,
        model,
        policy,
        step,
        out_dir,
        samples=recipe.heldout_samples,
        store=store,
        run_id=run_id,
        start=start,
        threads=threads,
        data_dir=data_dir,
        log=log,
    )


def evaluate_step(
    recipe: Any,
    model: str,
    policy: Any,
    step: int,
    out_dir: Path,
    *,
    samples: int,
    store: Any = None,
    run_id: str = "",
    start: HeldoutEval | None = None,
    threads: int | None = None,
    data_dir: Path | None = None,
    log: Callable[[str], None] = print,
    questions: tuple[int, int] | None = None,
) -> HeldoutEval:
    """:func:`heldout_at_step` off the schedule, with ``samples`` samples a question: what the
    trainer does at a held-out step, for a policy saved at ``step`` and evaluated afterwards
    (:func:`harness.rl.trainer.saved_policy`). The files are the same (``out_dir/heldout/step-<step>.gguf`` and
    ``.json``), so a run's record reads both kinds alike.

    ``questions``: ``(lo, hi)``, only the held-out questions ``lo`` to ``hi - 1``, written as the
    part ``step-<step>.q<lo>-<hi>.json`` (returned); when the parts of the same weights and settings
    cover the held-out set, they are merged (:func:`merge_parts`) into ``step-<step>.json``, which is
    what a whole evaluation writes, and recorded. Why: mean@8 over 400 questions costs hours on 2
    CPU cores (one thread an evaluation, two side by side, gives the most answers an hour), more
    than one sitting may hold."""
    from harness.llm.gguf_lora import write_lora_gguf

    qs = heldout_questions(recipe.split, data_dir)
    lo, hi = questions if questions is not None else (0, len(qs))
    if not 0 <= lo < hi <= len(qs):
        raise ConfigError(
            f"evaluate_step: questions {lo}:{hi} are not a part of the {len(qs)} held-out questions of "
            f"split {recipe.split!r}"
        )
    whole = (lo, hi) == (0, len(qs))
    name = f"step-{step}" if whole else f"step-{step}.q{lo}-{hi}"
    folder = Path(out_dir) / "heldout"
    folder.mkdir(parents=True, exist_ok=True)
    adapter, written = folder / f"step-{step}.gguf", folder / f"{name}.json"
    fresh = write_lora_gguf(policy, folder / f"{name}.new.gguf") if policy is not None else None
    done = _same_evaluation(written, adapter, fresh, model, recipe, samples)
    if fresh is not None:
        fresh.replace(adapter)  # an atomic rename: parts of one step may run side by side
    weights = _sha256(adapter) if fresh is not None else None
    if done is not None and (whole or done.meta.get("adapter_sha256") == weights):
        log(f"{written}: the same weights and settings were evaluated already; reused")
        if whole and store is not None and run_id:
            record_heldout_eval(store, run_id, step, done, against=start)
        return done if whole else _merge_step_parts(folder, step, done, qs, store, run_id, start, log)
    adapters = [adapter] if fresh is not None else []
    ev = evaluate_heldout(
        model,
        qs[lo:hi],
        method=recipe.method,
        samples=samples,
        temperature=recipe.algo.temperature,
        seed=recipe.seed,
        adapters=adapters,
        threads=threads,
        # a folder of the step's own: evaluations of two steps may run side by side (one thread each
        # gives more throughput on 2 cores than one evaluation on two), each with its checkpoint delta
        work_dir=folder / "engine" / name,
        label=f"step {step}",
        progress=False,
        spin=True,  # the trainer's own engine is suspended while this runs (Trainer._train)
        first=lo,
    )
    if not whole:
        ev = replace(ev, meta={**ev.meta, "questions": [lo, hi], "adapter_sha256": weights})
    written.write_text(json.dumps(ev.to_dict(), indent=1, ensure_ascii=False) + "\n")
    if not whole:
        log(f"{written}: {ev.line()}")
        return _merge_step_parts(folder, step, ev, qs, store, run_id, start, log)
    if store is not None and run_id:
        record_heldout_eval(store, run_id, step, ev, against=start)
    log(ev.line() + (f"\n  {comparison_line(compare(start, ev))}" if start is not None else ""))
    return ev


def _sha256(path: Path) -> str:
    import hashlib

    return hashlib.sha256(Path(path).read_bytes()).hexdigest()


def merge_parts(parts: Sequence[HeldoutEval], questions: Sequence[QAExample]) -> HeldoutEval:
    """One evaluation of ``questions`` from evaluations of its disjoint parts, each made with the
    same model, engine, method, protocol, samples, temperature and seed, and sampled with the
    whole evaluation's seeds (:func:`evaluate_heldout`'s ``first``): so the parts of a deterministic
    engine give what one evaluation would. Rows in ``questions``' order; the seconds add up;
    ``meta`` is the first part's with ``parts`` ([lo, hi], seconds, threads and any ``n_ctx`` of
    each) in place of its own range."""
    if not parts:
        raise ConfigError("merge_parts: no parts")
    key = ("label", "model", "engine", "method", "protocol_id", "temperature", "seed", "k", "reward")
    for p in parts[1:]:
        other = [k for k in key if getattr(p, k) != getattr(parts[0], k)]
        if other:
            raise ConfigError(
                f"merge_parts: the parts of {parts[0].label!r} differ in {', '.join(other)}; evaluate every "
                "part with the same settings"
            )
    row: dict[str, tuple[HeldoutEval, int]] = {}
    for p in parts:
        for i, q in enumerate(p.sample_ids):
            if q in row:
                raise ConfigError(f"merge_parts: question {q} is in two parts of {p.label!r}")
            row[q] = (p, i)
    ids = [e.id for e in questions]
    missing = [q for q in ids if q not in row]
    if missing or len(row) != len(ids):
        raise ConfigError(
            f"merge_parts: the parts of {parts[0].label!r} cover {len(row)} questions, not the {len(ids)} "
            f"asked (first missing: {missing[0] if missing else 'none; others extra'})"
        )

    def col(name: str) -> tuple[Any, ...]:
        return tuple(getattr(row[q][0], name)[row[q][1]] for q in ids)

    meta = {k: v for k, v in parts[0].meta.items() if k != "questions"}
    meta["parts"] = [
        {
            "questions": p.meta.get("questions"),
            "seconds": round(p.seconds, 1),
            "threads": p.meta.get("threads"),
            **({"n_ctx": p.meta["n_ctx"]} if "n_ctx" in p.meta else {}),
        }
        for p in sorted(parts, key=lambda p: ids.index(p.sample_ids[0]))
    ]
    k = parts[0].k
    return replace(
        parts[0],
        sample_ids=tuple(ids),
        greedy=col("greedy"),
        greedy_em=col("greedy_em"),
        greedy_f1=col("greedy_f1"),
        greedy_cover_em=col("greedy_cover_em"),
        sampled=col("sampled") if k else (),
        sampled_em=col("sampled_em") if k else (),
        seconds=sum(p.seconds for p in parts),
        meta=meta,
        greedy_reward=col("greedy_reward") if parts[0].reward else (),
    )


def _merge_step_parts(
    folder: Path,
    step: int,
    part: HeldoutEval,
    questions: Sequence[QAExample],
    store: Any,
    run_id: str,
    start: HeldoutEval | None,
    log: Callable[[str], None],
) -> HeldoutEval:
    """After ``part`` of step ``step`` is written: when the parts in ``folder`` of its weights and
    settings cover ``questions`` (a chain of ranges from 0 to the end), write their merge as
    ``step-<step>.json``, record it, and return it; else return ``part``."""
    same = []
    for f in sorted(folder.glob(f"step-{step}.q*-*.json")):
        p = HeldoutEval.from_dict(json.loads(f.read_text()))
        if p.meta.get("adapter_sha256") == part.meta.get("adapter_sha256") and all(
            getattr(p, k) == getattr(part, k) for k in ("model", "method", "k", "seed", "temperature")
        ):
            same.append(p)
    ranges = {tuple(p.meta["questions"]): p for p in same}
    chain, at = [], 0
    while at < len(questions):
        nxt = [r for r in ranges if r[0] == at]
        if not nxt:
            log(
                f"{folder}/step-{step}: held-out questions {at} on not evaluated yet with these weights and settings"
            )
            return part
        r = max(nxt, key=lambda r: r[1])
        chain.append(ranges[r])
        at = r[1]
    ev = merge_parts(chain, questions)
    (folder / f"step-{step}.json").write_text(json.dumps(ev.to_dict(), indent=1, ensure_ascii=False) + "\n")
    if store is not None and run_id:
        record_heldout_eval(store, run_id, step, ev, against=start)
    log(
        f"{folder}/step-{step}.json (merged from {len(chain)} parts): "
        + ev.line()
        + (f"\n  {comparison_line(compare(start, ev))}" if start is not None else "")
    )
    return ev


def _same_evaluation(
    written: Path, adapter: Path, fresh: Path | None, model: str, recipe: Any, samples: int
) -> HeldoutEval | None:
    """The evaluation already in ``written`` when it is of the same weights (``fresh``, the adapter
    just written, byte for byte the ``adapter`` it evaluated; both absent for ``model`` alone) under
    the same settings (model, method, samples, temperature, seed); else None. Why: an evaluation
    is deterministic given these, and one over the 400 held-out questions costs half an hour on 2
    CPU cores (docs/training.md), so a run restarted into a folder holding the step-0 evaluation
    of the same warm start does not redo it."""
    if not written.is_file() or (fresh is not None) != adapter.is_file():
        return None
    if fresh is not None and fresh.read_bytes() != adapter.read_bytes():
        return None
    d = json.loads(written.read_text())
    same = (d.get("model"), d.get("method"), d.get("k", 0), d.get("seed")) == (
        model,
        recipe.method,
        samples,
        recipe.seed,
    )
    if not same or (samples and d.get("temperature") != recipe.algo.temperature):
        return None
    return HeldoutEval.from_dict(d)


def record_tables(record: dict[str, Any]) -> str:
    """The markdown docs print from a record: :func:`evals_table` of its evaluations, then
    :func:`comparisons_table` of its ``pairs`` ([a, b] labels: b - a) when it names any."""
    evs = record_evals(record)
    by = {e.label: e for e in evs}
    parts = [evals_table(evs)]
    pairs = record.get("pairs") or []
    missing = [x for pair in pairs for x in pair if x not in by]
    if missing:
        raise ConfigError(
            f"record pairs name {missing[0]!r}, which is not one of its evaluations ({', '.join(by)})"
        )
    if pairs:
        parts.append(comparisons_table([(by[a], by[b]) for a, b in pairs]))
    return "\n\n".join(parts)
