"""The evaluation runner behind ``harness run``.

For each method: resolve (or resume) its run, load the bench under the protocol's selection, skip
finished samples, solve in batches, score, and write every batch to the store in one transaction
as soon as it is done. Ctrl-C or a crash loses at most the batch in flight; ``--resume`` continues.
"""

from __future__ import annotations

import json
import platform
import subprocess
import sys
import time
import uuid
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path

from harness.errors import ConfigError
from harness.method import Method, RunContext
from harness.protocol import Protocol
from harness.store import RunRecord, ScoredSample, Store
from harness.types import QAExample, SamplingParams, Trajectory

ANSWER_METRICS = ("em", "f1", "cover_em", "cover_em_tokens")


@dataclass
class RunConfig:
    methods: list[str]
    bench: str
    protocol: Protocol
    model: str = "smollm2-135m-instruct"
    backend: str = "transformers"
    backend_options: dict[str, object] = field(default_factory=dict)
    corpus_path: Path | None = None
    data_dir: Path | None = None
    db: Path = Path("results/harness.duckdb")
    resume: bool = False
    batch_size: int = 8
    label: str = ""
    command: str = ""


@dataclass
class MethodRun:
    method: str
    run_id: str
    n_total: int
    n_done_before: int
    seconds: float


def git_commit() -> str:
    try:
        out = subprocess.run(
            ["git", "rev-parse", "HEAD"],
            capture_output=True,
            text=True,
            timeout=5,
            cwd=Path(__file__).resolve().parent,
        )
    except (OSError, subprocess.TimeoutExpired):
        return ""
    return out.stdout.strip() if out.returncode == 0 else ""


def versions() -> dict[str, str]:
    from importlib.metadata import PackageNotFoundError, version

    out = {"python": platform.python_version()}
    for pkg in (
        "rar-harness",
        "torch",
        "transformers",
        "bm25s",
        "duckdb",
        "faiss-cpu",
        "sentence-transformers",
    ):
        try:
            out[pkg] = version(pkg)
        except PackageNotFoundError:
            continue
    return out


def score_trajectory(t: Trajectory, gold_ids: Sequence[str], top_k: int) -> dict[str, float]:
    """Answer metrics on the prediction; retrieval metrics where gold passages are known."""
    from harness.metrics.registry import score_answer
    from harness.metrics.retrieval import evidence_recall, retrieval_recall_at_k

    m = score_answer(t.prediction, t.answers, names=ANSWER_METRICS)
    if gold_ids:
        first = next((turn for turn in t.turns if turn.kind == "retrieve"), None)
        first_ids = first.doc_ids if first is not None else []
        m[f"retrieval_recall@{top_k}"] = retrieval_recall_at_k(first_ids, gold_ids, top_k)
        m["evidence_recall"] = evidence_recall(t.retrieved_doc_ids, gold_ids)
    return m


def _batches(items: list, n: int) -> list[list]:
    return [items[i : i + n] for i in range(0, len(items), n)]


class Runner:
    def __init__(self, cfg: RunConfig, *, progress: bool = True):
        self.cfg = cfg
        self.store = Store(cfg.db)
        self.progress = progress
        self._backend = None
        self._retriever = None

    # lazily built so `--method direct` needs no index and a resumed finished run needs no model
    def backend(self):
        if self._backend is None:
            from harness.llm.base import BackendSpec, make_backend

            spec = BackendSpec(kind=self.cfg.backend, model=self.cfg.model, **self.cfg.backend_options)
            self._backend = make_backend(spec)
        return self._backend

    def retriever(self):
        if self._retriever is None:
            from harness.retrieval.cache import CachedRetriever, ResultCache
            from harness.retrieval.factory import make_protocol_retriever

            # results are cached by (index id, query, k): a rerun or a resumed run never re-searches
            inner = make_protocol_retriever(self.cfg.protocol, self.cfg.corpus_path)
            self._retriever = CachedRetriever(inner, ResultCache.default())
        return self._retriever

    def load_examples(self) -> list[tuple[QAExample, list[str]]]:
        from harness.data.benches import get_bench, load_bench

        bench = get_bench(self.cfg.bench)
        out = []
        for _entry, examples in load_bench(bench, self.cfg.protocol.selection, data_dir=self.cfg.data_dir):
            for e in examples:
                out.append((e, e.gold_passage_ids))
        return out

    def run(
        self, methods: Sequence[Method], on_batch: Callable[[str, int, int], None] | None = None
    ) -> list[MethodRun]:
        examples = self.load_examples()
        if not examples:
            raise ConfigError(f"bench {self.cfg.bench!r} selected no examples")
        results = []
        for method in methods:
            results.append(self._run_method(method, examples, on_batch))
        return results

    def _run_method(self, method: Method, examples, on_batch) -> MethodRun:
        cfg = self.cfg
        proto = cfg.protocol
        spec = method.spec(proto)
        run_id = None
        if cfg.resume:
            run_id = self.store.find_resumable(
                method=method.name,
                model=cfg.model,
                protocol_id=proto.protocol_id,
                method_spec_hash=spec.spec_hash,
                bench=cfg.bench,
            )
        done: set[tuple[str, str]] = set()
        if run_id is not None:
            done = self.store.finished_samples(run_id)
            self.store.set_run_status(run_id, "running")
        else:
            run_id = f"{method.name}-{time.strftime('%Y%m%d-%H%M%S')}-{uuid.uuid4().hex[:6]}"
            label = cfg.label or (
                "untrained policy" if method.trained and cfg.model == "smollm2-135m-instruct" else ""
            )
            self.store.create_run(
                RunRecord(
                    run_id=run_id,
                    kind="eval",
                    method=method.name,
                    model=cfg.model,
                    backend=cfg.backend,
                    protocol_id=proto.protocol_id,
                    protocol_name=proto.name,
                    protocol_json=proto.model_dump_json(),
                    method_spec_hash=spec.spec_hash,
                    method_spec_json=spec.model_dump_json(),
                    bench=cfg.bench,
                    label=label,
                    git_commit=git_commit(),
                    versions_json=json.dumps(versions()),
                    command=cfg.command,
                    n_expected=len(examples),
                )
            )
        todo = [(i, e, g) for i, (e, g) in enumerate(examples) if (e.dataset, e.id) not in done]
        ctx = RunContext(
            backend=self.backend() if todo else None,  # type: ignore[arg-type]
            protocol=proto,
            retriever=self.retriever() if (todo and method.uses_retrieval) else None,
            sampling=SamplingParams(
                temperature=proto.decoding.temperature, top_p=proto.decoding.top_p, seed=proto.decoding.seed
            ),
        )
        t_start = time.perf_counter()
        bar = _progress(len(examples), len(done), f"{method.name}", self.progress)
        status = "failed"
        try:
            for batch in _batches(todo, cfg.batch_size):
                t0 = time.perf_counter()
                trajs = method.solve([e for _, e, _ in batch], ctx)
                if len(trajs) != len(batch):
                    raise RuntimeError(
                        f"method {method.name} returned {len(trajs)} trajectories for {len(batch)}"
                    )
                per = (time.perf_counter() - t0) / len(batch)
                scored = [
                    ScoredSample(
                        trajectory=t,
                        metrics=score_trajectory(t, g if method.uses_retrieval else (), proto.top_k),
                        position=i,
                        gold_ids=list(g),
                        latency_s=per,
                    )
                    for (i, _e, g), t in zip(batch, trajs, strict=True)
                ]
                self.store.add_samples(run_id, scored)
                bar.update(len(batch))
                if on_batch is not None:
                    on_batch(method.name, len(batch), bar.n)
            status = "complete"
        except KeyboardInterrupt:
            status = "interrupted"
            raise
        finally:
            bar.close()
            prev = self.store.get_run(run_id)
            seconds = (prev.seconds or 0.0) + (time.perf_counter() - t_start) if prev else 0.0
            self.store.finish_run(run_id, status, seconds)
        return MethodRun(method.name, run_id, len(examples), len(done), seconds)


def _progress(total: int, initial: int, desc: str, enabled: bool):
    from tqdm import tqdm

    return tqdm(
        total=total,
        initial=initial,
        desc=desc,
        unit="q",
        disable=not enabled,
        file=sys.stderr,
        dynamic_ncols=True,
    )


SUMMARY_SQL = """
WITH m AS (
  SELECT run_id, dataset, sample_id,
         max(value) FILTER (WHERE metric = 'em') AS em,
         max(value) FILTER (WHERE metric = 'f1') AS f1,
         max(value) FILTER (WHERE metric = 'cover_em') AS cover_em
  FROM sample_metrics WHERE run_id IN ({ids}) GROUP BY ALL
)
SELECT r.method, s.dataset, count(*) AS n,
       avg(m.em) AS em, avg(m.f1) AS f1, avg(m.cover_em) AS cover_em,
       avg(s.n_retrievals) AS retrievals, avg(s.n_llm_calls) AS llm_calls,
       avg(s.prompt_tokens + s.completion_tokens) AS tokens,
       avg(s.latency_s) AS seconds_per_q,
       avg(CASE WHEN s.extraction_status IN ('ok', 'multiple_answers') THEN 1.0 ELSE 0.0 END) AS answered
FROM samples s JOIN runs r USING (run_id) JOIN m USING (run_id, dataset, sample_id)
WHERE s.run_id IN ({ids})
GROUP BY ALL ORDER BY r.method, s.dataset
"""


def summary(store: Store, run_ids: Sequence[str]):
    """Per method x dataset: n, EM, F1, cover-EM, mean retrievals / LLM calls / tokens, seconds,
    and cost per question / per correct answer (USD; NaN where a price is unknown, see harness.cost)."""
    from harness.cost import cost_summary

    ids = ", ".join(f"'{r}'" for r in run_ids)
    df = store.query(SUMMARY_SQL.format(ids=ids))
    costs = cost_summary(store, run_ids)[["method", "dataset", "cost_usd_per_q", "usd_per_correct"]]
    return df.merge(costs, on=["method", "dataset"], how="left")
