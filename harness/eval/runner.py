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

Everything is checked before anything is written: the bench, each method against its protocol,
the questions it can answer (:meth:`Runner.plan_groups`); then the results file is opened (a
damaged one stops here), and a new run's backend is built before its row is created, so a bad
model or a dead server leaves no row. A resumed run is claimed first (:meth:`Store.claim_run`
refuses one another live process is writing).

A sample whose generation failed for good (a turn with ``stop_reason == "error"``: the backend's
retries ran out) is stored as an error with its reason and no metrics, never as a scored answer;
the run then ends ``incomplete`` (``MethodRun.n_errors``) and ``--resume`` retries those samples.
"""

from __future__ import annotations

import contextlib
import sys
import threading
import time
from collections import Counter
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass, field
from functools import cache
from pathlib import Path
from typing import Any

from harness.errors import ConfigError
from harness.eval.setup import RunSetup
from harness.llm.adapters import get_adapter
from harness.llm.model_files import is_preset
from harness.method import Method
from harness.protocol import Protocol
from harness.results import lifecycle
from harness.results.store import ERROR_STATUS, ScoredSample, Store
from harness.rollout.base import RunContext
from harness.types import QAExample, Trajectory

TICK_S = 1.0  # the progress bar is redrawn this often while a generation runs (its elapsed time)


@dataclass
class RunConfig:
    methods: list[str]
    bench: str
    protocol: Protocol
    model: str = "smollm2-135m-instruct"
    backend: str = "transformers"
    backend_options: dict[str, object] = field(default_factory=dict)
    corpus_path: Path | None = None
    retriever_url: str | None = None  # the server of a protocol whose retrieval is remote
    data_dir: Path | None = None
    db: Path = Path("results/harness.duckdb")
    resume: bool = False
    batch_size: int = 8
    label: str = ""
    command: str = ""
    # questions a method cannot answer at all (Method.cannot_answer): left out of its run with a
    # note (True, `--method all`) or refused before the run starts (False)
    leave_out_unanswerable: bool = False
    # a method that refuses the protocol: skipped with the reason (True, `--method all`) or an error
    skip_refused: bool = False
    # method -> the model it runs with instead of ``model`` (``harness run --method all``: an RL
    # method's shipped trained adapter on the same base, harness.llm.adapters)
    method_models: dict[str, str] = field(default_factory=dict)

    def model_for(self, method: str) -> str:
        return self.method_models.get(method, self.model)

    def __post_init__(self) -> None:
        if self.batch_size < 1:
            raise ConfigError(f"batch size must be a positive integer, got {self.batch_size}")


@dataclass
class MethodRun:
    method: str
    run_id: str
    n_total: int
    seconds: float
    n_errors: int = 0  # samples stored as errors (the run is then `incomplete`)
    first_error: str | None = None


def sample_error(t: Trajectory) -> str | None:
    """Why ``t`` failed, or None: a generation or LLM call that failed for good (``stop_reason
    "error"``, after the backend's retries), or a trajectory the method marked as failed. Such a
    sample is stored as an error, never scored."""
    failed = [turn for turn in t.turns if turn.stop_reason == "error"]
    if failed:
        why = next((turn.error for turn in failed if turn.error), None)
        what = f"{len(failed)} of its {len(t.turns)} model call(s) failed (first: turn {failed[0].index})"
        return f"{what}: {why}" if why else what
    if t.error:
        return t.error
    if t.extraction_status == ERROR_STATUS:
        return "the method marked the sample as failed"
    return None


def score_trajectory(t: Trajectory, gold_ids: Sequence[str], protocol: Protocol) -> dict[str, float]:
    """The protocol's metrics (:class:`harness.eval.scoring.RunScoring`): answer metrics on the
    prediction and on each alternative prediction (``em[first_answer]``), retrieval metrics where
    gold passages are known."""
    from harness.eval.scoring import RunScoring

    return RunScoring.of(protocol).score(t, gold_ids)


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
    from harness.eval.protocol import preset, resolve_corpus

    own = preset(method.own_protocols[0])
    decoding = own.decoding.model_copy(update={"seed": protocol.decoding.seed})
    own = own.with_(selection=protocol.selection.model_dump(), decoding=decoding.model_dump())
    return own if own.resolved else resolve_corpus(own, corpus_path)


def protocol_groups(
    methods: Sequence[Method], protocol: Protocol, corpus_path: Path | None = None
) -> list[tuple[Protocol, list[Method]]]:
    """``methods`` grouped by the protocol each runs under (:func:`own_protocol`), the user's
    ``protocol`` first; a group with no method is left out. A method bound to its own protocol
    runs there as a separate run (``harness run``'s plan names it); :meth:`Runner.plan_groups` then
    checks each method against its group's protocol."""
    groups: dict[str, tuple[Protocol, list[Method]]] = {protocol.name: (protocol, [])}
    for m in methods:
        p = own_protocol(m, protocol, corpus_path)
        groups.setdefault(p.name, (p, []))[1].append(m)
    return [(p, ms) for p, ms in groups.values() if ms]


class Runner:
    def __init__(self, cfg: RunConfig, *, progress: bool = True):
        from pydantic import ValidationError

        from harness.data.benches import get_bench
        from harness.llm.base import BackendSpec

        get_bench(cfg.bench)  # an unknown bench is refused before the results file is created
        try:
            self.backend_spec = BackendSpec(kind=cfg.backend, model=cfg.model, **cfg.backend_options)
        except ValidationError as e:
            why = "; ".join(err["msg"] for err in e.errors())
            raise ConfigError(f"backend options: {why}") from None
        self.cfg = cfg
        self.progress = progress
        # the results file, the retrievers and the run rows: the run set-up every command shares
        self.setup = RunSetup(
            cfg.protocol,
            db=cfg.db,
            corpus=cfg.corpus_path,
            data_dir=cfg.data_dir,
            retriever_url=cfg.retriever_url,
        )
        self._backend = None
        self._backends: dict[str, Any] = {}  # model -> backend, for a method's own model (method_models)

    @property
    def store(self) -> Store:
        """The results file, opened (and checked: a damaged file is one error) on first use."""
        return self.setup.store

    # lazily built so `--method direct` needs no index and a resumed finished run needs no model
    def backend(self):
        if self._backend is None:
            from harness.llm.base import make_backend

            self._backend = make_backend(self.backend_spec)
        return self._backend

    def backend_for(self, model: str):
        """The backend serving ``model``: the run's own, or one per method model (``method_models``:
        the run's backend spec with that model), built on first use."""
        if model == self.cfg.model:
            return self.backend()
        if model not in self._backends:
            from harness.llm.base import make_backend

            self._backends[model] = make_backend(self.backend_spec.model_copy(update={"model": model}))
        return self._backends[model]

    def retriever(self, protocol: Protocol | None = None):
        """The retriever ``protocol`` (default: the run's) pins: :meth:`RunSetup.retriever`."""
        return self.setup.retriever(protocol)

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
        from harness.eval.scoring import RunScoring

        RunScoring.of(proto)  # a metric the run cannot score is refused before anything runs
        plan = []
        for method in methods:
            try:
                check_protocol(method, proto)
                method.spec(proto)  # a method refusing the protocol fails here, before any run
                self._check_fits(method, proto)
            except ConfigError as e:
                if not self.cfg.skip_refused:
                    raise
                print(f"skipping {method.name}: {e}", file=sys.stderr)
                continue
            mine = self.answerable(method, examples)
            if not mine:
                print(
                    f"skipping {method.name}: no question of bench {self.cfg.bench!r} it can answer",
                    file=sys.stderr,
                )
                continue
            plan.append((method, mine, proto))
        return plan

    def _check_fits(self, method: Method, proto: Protocol) -> None:
        """ConfigError when the protocol's ``max_new_tokens`` leaves no room for a prompt in the
        backend's context, where the spec alone says how long that is (llama.cpp, vLLM)."""
        limit = self.backend_spec.context_limit
        want = proto.decoding.max_new_tokens
        if limit is not None and want >= limit:
            raise ConfigError(
                f"method {method.name!r} under protocol {proto.name!r} generates up to "
                f"max_new_tokens={want} per call, which leaves no room for a prompt in the "
                f"{self.backend_spec.kind} backend's {limit}-token context: choose another method, or a "
                "model and backend with a longer context"
            )

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
        return self.execute(self.plan_groups(groups), on_batch)

    def plan_groups(
        self, groups: Sequence[tuple[Protocol, Sequence[Method]]]
    ) -> list[list[tuple[Method, list, Protocol]]]:
        """Check every method of every group and select its questions; nothing is written."""
        plans = [self._plan(methods, proto) for proto, methods in groups]
        if not any(plans):
            names = ", ".join(p.name for p, _ in groups)
            raise ConfigError(f"no method runs under protocol {names} on bench {self.cfg.bench!r}")
        spec = self.backend_spec
        if spec.kind == "openai":  # a dead or wrong endpoint is one line before anything is written
            from harness.llm.openai_backend import probe_urls

            probe_urls(spec.base_urls, model=spec.model, api_key_env=spec.api_key_env)
        return plans

    def execute(
        self,
        plans: Sequence[Sequence[tuple[Method, list, Protocol]]],
        on_batch: Callable[[str, int, int], None] | None = None,
    ) -> list[list[MethodRun]]:
        """Run the planned methods (:meth:`plan_groups`), one run each, in order."""
        return [[self._run_method(m, ex, on_batch, p) for m, ex, p in plan] for plan in plans]

    def _context(self, method: Method, proto: Protocol, todo: list) -> RunContext:
        return RunContext(
            backend=self.backend_for(self.cfg.model_for(method.name)) if todo else None,  # type: ignore[arg-type]
            protocol=proto,
            retriever=self.retriever(proto) if (todo and method.uses_retrieval) else None,
            sampling=proto.decoding.sampling(),
        )

    # long: one run's life in order (resume or create its row, build the backend and retriever,
    # solve, score and store batch by batch under `lifecycle.running`), which must end the row
    # whatever fails in between
    def _run_method(self, method: Method, examples, on_batch, proto: Protocol) -> MethodRun:
        cfg = self.cfg
        model = cfg.model_for(method.name)
        spec = method.spec(proto)
        store = self.store
        run_id = None
        if cfg.resume:  # claimed: refuses a run another live process is writing
            found = lifecycle.resume_run(
                store,
                method=method.name,
                model=model,
                protocol_id=proto.protocol_id,
                method_spec_hash=spec.spec_hash,
                bench=cfg.bench,
            )
            if found is not None and found[1]:  # finished before: reused, nothing runs
                run = store.get_run(found[0])
                with _progress(
                    len(examples), len(examples), f"{method.name} (complete, reused)", self.progress
                ):
                    pass
                return MethodRun(method.name, found[0], len(examples), run.seconds or 0.0)
            run_id = found[0] if found is not None else None
        done: set[tuple[str, str]] = set()
        if run_id is not None:
            try:
                done = store.finished_samples(run_id)
                todo = [(i, e, g) for i, (e, g) in enumerate(examples) if (e.dataset, e.id) not in done]
                ctx = self._context(method, proto, todo)
            except BaseException:  # the claim is released: the run stays resumable
                lifecycle.release(store, run_id)
                raise
        else:
            todo = [(i, e, g) for i, (e, g) in enumerate(examples)]
            ctx = self._context(method, proto, todo)  # a bad model or dead server fails before any row
            # an RL method run with a packaged model (a base instruct model no method here was
            # trained from) is an untrained policy, not a trained one; with a shipped adapter of its
            # own (harness.llm.adapters) a trained one, whose hash and training the run stores
            adapter = get_adapter(model)
            if adapter is not None and adapter.method != method.name:
                raise ConfigError(
                    f"model {model!r} is {adapter.method!r}'s trained policy; run it with --method {adapter.method}"
                )
            label = cfg.label or (
                "trained"
                if adapter is not None
                else "untrained policy"
                if method.trained and is_preset(model)
                else ""
            )
            run_id = self.setup.eval_run(
                method=method.name,
                spec=spec,
                model=model,
                backend=cfg.backend,
                protocol=proto,
                bench=cfg.bench,
                label=label,
                command=cfg.command,
                n_expected=len(examples),
                runtime=adapter.runtime() if adapter is not None else None,
            )
        from harness.eval.scoring import RunScoring

        scoring = RunScoring.of(proto)
        n_errors, first_error = 0, None
        with (
            lifecycle.running(store, run_id) as active,
            _progress(len(examples), len(done), f"{method.name}", self.progress) as bar,
        ):
            finished, size = 0, 0  # of the current batch: reported by the rollout engine as they end

            def on_finished(n: int) -> None:
                nonlocal finished
                n = min(n, size - finished)  # a method rolling out twice reports no question twice
                if n > 0:
                    finished += n
                    bar.update(n)

            ctx.on_finished = on_finished
            ctx.on_turn = lambda turn: bar.set_postfix_str(
                f"turn {turn}", refresh=False
            )  # the ticker draws it
            for batch in _batches(todo, cfg.batch_size):
                finished, size = 0, len(batch)
                t0 = time.perf_counter()
                trajs = method.solve([e for _, e, _ in batch], ctx)
                if len(trajs) != len(batch):
                    raise RuntimeError(
                        f"method {method.name} returned {len(trajs)} trajectories for {len(batch)}"
                    )
                per = (time.perf_counter() - t0) / len(batch)
                scored = []
                for (i, _e, g), t in zip(batch, trajs, strict=True):
                    why = sample_error(t)
                    if why is not None:  # stored with its reason, never scored
                        t.extraction_status, t.error = ERROR_STATUS, why
                        n_errors += 1
                        first_error = first_error or why
                    metrics = {} if why is not None else scoring.score(t, g if method.uses_retrieval else ())
                    scored.append(
                        ScoredSample(
                            trajectory=t, metrics=metrics, position=i, gold_ids=list(g), latency_s=per
                        )
                    )
                store.add_samples(run_id, scored, heartbeat=True)
                bar.update(len(batch) - finished)  # those the engine did not report (one-call methods)
                if on_batch is not None:
                    on_batch(method.name, len(batch), bar.n)
            active.status = "incomplete" if n_errors else "complete"
        return MethodRun(method.name, run_id, len(examples), active.seconds, n_errors, first_error)


@contextlib.contextmanager
def _progress(
    total: int, initial: int, desc: str, enabled: bool, *, file: Any = None, tick_s: float = TICK_S
) -> Iterator[Any]:
    """A tqdm bar over a method's questions that is redrawn every ``tick_s`` seconds by a thread of
    its own, so its elapsed time advances while one long generation runs (tqdm redraws only on an
    update: issue 61 saw "0/9 [00:00<?" for 3 minutes)."""
    from tqdm import tqdm

    bar = tqdm(
        total=total,
        initial=initial,
        desc=desc,
        unit="q",
        disable=not enabled,
        file=file if file is not None else sys.stderr,
        dynamic_ncols=True,
    )
    stop = threading.Event()

    def tick() -> None:
        while not stop.wait(tick_s):
            bar.refresh()

    ticker = threading.Thread(target=tick, name="progress-tick", daemon=True)
    if enabled:
        ticker.start()
    try:
        yield bar
    finally:
        stop.set()
        if enabled:
            ticker.join()
        bar.close()
