"""The evaluation runner behind ``harness run``.

For each method: resolve (or resume) its run, load the bench under the protocol's selection, skip
finished samples, solve in batches, score, and write every batch to the store in one transaction
as soon as it is done. Ctrl-C or a crash loses at most the batch in flight; ``--resume`` continues.

Protocols a method is bound to (``Method.own_protocols``: ARENA's gold-context reader setting)
are never mixed with the open-retrieval ones: a bound method runs only under its own protocol
(:func:`own_protocol` derives it from the user's, same selection and seed) and every other method
is refused there (:func:`check_protocol`). Before any run is recorded, the questions a method
cannot answer at all (``Method.cannot_answer``) are refused, or left out and counted when
``RunConfig.leave_out_unanswerable`` is set (``harness run --method all``).
"""

from __future__ import annotations

import json
import platform
import subprocess
import sys
import time
import uuid
from collections import Counter
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from functools import cache
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
    # questions a method cannot answer at all (Method.cannot_answer): left out of its run with a
    # note (True, `--method all`) or refused before the run starts (False)
    leave_out_unanswerable: bool = False


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


# -- protocols bound to a method -----------------------------------------------------------------


@cache
def bound_protocols() -> dict[str, tuple[str, ...]]:
    """Protocol name -> the registered methods bound to it (``Method.own_protocols``)."""
    from harness.methods_registry import METHODS

    out: dict[str, list[str]] = {}
    for name in METHODS.names():
        for proto in METHODS.get(name).own_protocols:
            out.setdefault(proto, []).append(name)
    return {k: tuple(v) for k, v in out.items()}


def check_protocol(method: Method, protocol: Protocol) -> None:
    """ConfigError unless ``method`` may be scored under ``protocol``: a bound method only under
    its own protocols, any other method under none of them."""
    if method.own_protocols:
        if protocol.name not in method.own_protocols:
            own = " or ".join(method.own_protocols)
            raise ConfigError(
                f"method {method.name!r} is scored only under its own protocol {own}, never mixed with "
                f"protocol {protocol.name!r} rows; `harness run` runs it there as a separate run"
            )
        return
    owners = bound_protocols().get(protocol.name)
    if owners:
        raise ConfigError(
            f"protocol {protocol.name!r} is the own setting of method {', '.join(owners)}; method "
            f"{method.name!r} is not scored under it (use an open-retrieval protocol, e.g. --protocol mini)"
        )


def own_protocol(method: Method, protocol: Protocol, corpus_path: Path | None = None) -> Protocol:
    """The protocol ``method`` runs under when the user asked for ``protocol``: ``protocol`` itself
    unless the method is bound to others; then its first own protocol with the user's selection
    and decoding seed (its other settings are the method's setting, pinned by its own id)."""
    if not method.own_protocols or protocol.name in method.own_protocols:
        return protocol
    from harness.protocol import preset, resolve_corpus

    own = preset(method.own_protocols[0])
    decoding = own.decoding.model_copy(update={"seed": protocol.decoding.seed})
    own = own.with_(selection=protocol.selection.model_dump(), decoding=decoding.model_dump())
    return own if own.resolved else resolve_corpus(own, corpus_path)


class Runner:
    def __init__(self, cfg: RunConfig, *, progress: bool = True):
        self.cfg = cfg
        self.store = Store(cfg.db)
        self.progress = progress
        self._backend = None
        self._retrievers: dict[str, object] = {}  # protocol id -> retriever

    # lazily built so `--method direct` needs no index and a resumed finished run needs no model
    def backend(self):
        if self._backend is None:
            from harness.llm.base import BackendSpec, make_backend

            spec = BackendSpec(kind=self.cfg.backend, model=self.cfg.model, **self.cfg.backend_options)
            self._backend = make_backend(spec)
        return self._backend

    def retriever(self, protocol: Protocol | None = None):
        proto = protocol or self.cfg.protocol
        if proto.protocol_id not in self._retrievers:
            from harness.retrieval.cache import CachedRetriever, ResultCache
            from harness.retrieval.factory import make_protocol_retriever

            # results are cached by (index id, query, k): a rerun or a resumed run never re-searches
            inner = make_protocol_retriever(proto, self.cfg.corpus_path)
            self._retrievers[proto.protocol_id] = CachedRetriever(inner, ResultCache.default())
        return self._retrievers[proto.protocol_id]

    def load_examples(self, protocol: Protocol | None = None) -> list[tuple[QAExample, list[str]]]:
        from harness.data.benches import get_bench, load_bench

        proto = protocol or self.cfg.protocol
        bench = get_bench(self.cfg.bench)
        out = []
        for _entry, examples in load_bench(bench, proto.selection, data_dir=self.cfg.data_dir):
            for e in examples:
                out.append((e, e.gold_passage_ids))
        return out

    def answerable(
        self, method: Method, examples: list[tuple[QAExample, list[str]]]
    ) -> list[tuple[QAExample, list[str]]]:
        """The examples ``method`` can answer; the others are refused (ConfigError) or, with
        ``leave_out_unanswerable``, left out with a note on stderr."""
        bad = [(e, why) for e, _ in examples if (why := method.cannot_answer(e)) is not None]
        if not bad:
            return examples
        per = ", ".join(f"{ds} {n}" for ds, n in Counter(e.dataset for e, _ in bad).items())
        first, why = bad[0]
        what = (
            f"method {method.name!r} cannot answer {len(bad)} of the {len(examples)} selected questions "
            f"({per}; e.g. {first.dataset} {first.id!r}: {why})"
        )
        if not self.cfg.leave_out_unanswerable:
            raise ConfigError(f"{what}; choose a bench whose questions it can answer (e.g. mini-multihop)")
        print(f"{what}: left out of its run", file=sys.stderr)
        drop = {(e.dataset, e.id) for e, _ in bad}
        return [(e, g) for e, g in examples if (e.dataset, e.id) not in drop]

    def _plan(self, methods: Sequence[Method], proto: Protocol) -> list[tuple[Method, list, Protocol]]:
        examples = self.load_examples(proto)
        if not examples:
            raise ConfigError(f"bench {self.cfg.bench!r} selected no examples")
        plan = []
        for method in methods:
            check_protocol(method, proto)
            method.spec(proto)  # a method refusing the protocol fails here, before any run
            mine = self.answerable(method, examples)
            if not mine:
                print(
                    f"skipping {method.name}: no question of bench {self.cfg.bench!r} it can answer",
                    file=sys.stderr,
                )
                continue
            plan.append((method, mine, proto))
        return plan

    def run(
        self,
        methods: Sequence[Method],
        on_batch: Callable[[str, int, int], None] | None = None,
        *,
        protocol: Protocol | None = None,
    ) -> list[MethodRun]:
        """Score ``methods`` under ``protocol`` (default: the config's), one run each."""
        return self.run_groups([(protocol or self.cfg.protocol, list(methods))], on_batch)[0]

    def run_groups(
        self,
        groups: Sequence[tuple[Protocol, Sequence[Method]]],
        on_batch: Callable[[str, int, int], None] | None = None,
    ) -> list[list[MethodRun]]:
        """Score each group's methods under its protocol (one run per method; the runs of a group
        in order). Every method of every group is checked (protocol, spec, answerable questions)
        before the first run is recorded; a method left with no answerable question is skipped
        with a note."""
        plans = [self._plan(methods, proto) for proto, methods in groups]
        return [[self._run_method(m, ex, on_batch, p) for m, ex, p in plan] for plan in plans]

    def _run_method(self, method: Method, examples, on_batch, proto: Protocol) -> MethodRun:
        cfg = self.cfg
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
            retriever=self.retriever(proto) if (todo and method.uses_retrieval) else None,
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


# The trajectory meta key under which a reader method records where its references came from
# (ARENA: "dataset" = the question's own paragraphs, "gold+bm25" = the labelled substitute).
REFERENCE_SOURCE_KEY = "arena_context"

REFERENCES_SQL = """
SELECT r.method, s.dataset,
       count(*) FILTER (WHERE json_extract_string(s.meta_json, '$.{key}') = 'dataset') AS own_refs,
       count(*) FILTER (WHERE json_extract_string(s.meta_json, '$.{key}') <> 'dataset') AS substitute_refs
FROM samples s JOIN runs r USING (run_id)
WHERE s.run_id IN ({ids})
GROUP BY ALL ORDER BY r.method, s.dataset
"""


def reference_sources(store: Store, run_ids: Sequence[str]):
    """Per method x dataset: how many questions were answered from their own paragraphs
    (``own_refs``) and how many from a substitute (``substitute_refs``), from the trajectories'
    ``meta["arena_context"]``; methods that record none count 0 and 0."""
    ids = ", ".join(f"'{r}'" for r in run_ids)
    return store.query(REFERENCES_SQL.format(ids=ids, key=REFERENCE_SOURCE_KEY))
