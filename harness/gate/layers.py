"""The regression gate's exact layers: what is deterministic is compared exactly, in order.

Each layer computes ``{item key: value}`` from the tree as it is, with no model run:

1. ``specs``: every registered protocol's id (``protocol <name>``) and every method's
   ``MethodSpec`` hash under each protocol it runs under (``method <name> @ <protocol>``);
2. ``retrieval``: for each distinct in-process retriever of the protocols whose corpus is
   packaged (bm25s over the closed corpus; pyserini only where it is installed), the top-k passage
   ids and scores (k: the largest ``top_k`` of those protocols; a smaller k is a prefix, as
   :func:`harness.retrieval.bm25.top_k_rows` breaks ties by row) for a fixed query set: the first
   ``QUESTIONS_PER_DATASET`` questions of each ``mini`` dataset and the recorded search queries;
   scores are equal within ``SCORE_TOLERANCE``;
3. ``prompts``: every method replayed (its own ``solve``, over :class:`~harness.gate.replay.ReplayBackend`
   and the protocol's real retriever) on the recorded slice of questions: the hash of every
   rendered prompt, per call, and of each trajectory's whole response (model text, observations
   and injected messages), with the texts kept beside the baseline for a readable diff;
4. ``extraction``: the same replayed trajectories' extracted answers, extraction statuses and
   every metric of the protocol; and every registered answer metric on the recorded (prediction,
   gold answers) pairs; exact.

Two passes are replayed per method: ``recorded`` (the showcase model's outputs, where the method
has them) and ``synthetic`` (a fixed two-turn script in the method's own tags, with two answer
spans, so every method and extractor is exercised whatever was recorded).
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from harness.errors import ConfigError

LAYERS = ("specs", "retrieval", "prompts", "extraction")
QUESTIONS_PER_DATASET = 10
SCORE_TOLERANCE = 1e-6  # absolute, on bm25s scores (float32 postings summed in float64)
REPLAY_PROTOCOL = "mini"  # the protocol shared methods are replayed under
RECORDED = Path("results/regress/recorded.json")

RetrieverFor = Callable[[Any], Any]  # Protocol -> Retriever


def sha(text: str) -> str:
    return hashlib.sha256(text.encode()).hexdigest()[:16]


@dataclass(frozen=True)
class Recorded:
    """``results/regress/recorded.json`` (written by ``scripts/regress_record_outputs.py``)."""

    slice: tuple[str, ...]  # "dataset/sample_id"
    outputs: dict[str, dict[str, list[str]]]  # method -> "dataset/sample_id" -> outputs in call order
    search_queries: tuple[str, ...]
    predictions: tuple[tuple[str, tuple[str, ...]], ...]

    @classmethod
    def load(cls, path: Path = RECORDED) -> Recorded:
        if not path.is_file():
            raise ConfigError(
                f"{path}: no recorded outputs; write them with scripts/regress_record_outputs.py"
            )
        d = json.loads(path.read_text())
        return cls(
            slice=tuple(d["slice"]),
            outputs=d["outputs"],
            search_queries=tuple(d["search_queries"]),
            predictions=tuple((p["prediction"], tuple(p["answers"])) for p in d["predictions"]),
        )


# -- layer 1: specs -------------------------------------------------------------------------------
def protocols_of(name: str) -> list[str]:
    """The named protocols method ``name`` runs under: its own, else every shared one."""
    from harness.eval.protocol import PROTOCOLS
    from harness.methods_registry import METHODS, get_method

    own = get_method(name).own_protocols
    if own:
        return [p for p in PROTOCOLS.names() if p in own]
    bound = {p for n in METHODS.names() for p in get_method(n).own_protocols}
    return [p for p in PROTOCOLS.names() if p not in bound]


def spec_items() -> tuple[dict[str, str], dict[str, Scope]]:
    from harness.eval.protocol import PROTOCOLS, preset
    from harness.methods_registry import METHODS, get_method

    items = {f"protocol {p}": preset(p).protocol_id for p in PROTOCOLS.names()}
    scopes: dict[str, Scope] = {f"protocol {p}": ((), (p,)) for p in PROTOCOLS.names()}
    for n in METHODS.names():
        method = get_method(n)
        for p in protocols_of(n):
            items[f"method {n} @ {p}"] = method.spec(preset(p)).spec_hash
            scopes[f"method {n} @ {p}"] = ((n,), (p,))
    return items, scopes


# -- layer 2: retrieval ---------------------------------------------------------------------------
def packaged_protocols() -> list[Any]:
    """The registered protocols whose corpus is the packaged one (checkable on any machine)."""
    from harness.eval.protocol import PROTOCOLS, closed_corpus_ref, preset

    closed = closed_corpus_ref()
    return [
        p
        for p in (preset(n) for n in PROTOCOLS.names())
        if p.remote is None and p.corpus.content_hash == closed.content_hash
    ]


def retriever_label(protocol: Any) -> str:
    spec = protocol.retriever
    canon = json.dumps(spec.model_dump(mode="json"), sort_keys=True, separators=(",", ":"))
    return f"{protocol.corpus.id}/{spec.kind}:{hashlib.sha256(canon.encode()).hexdigest()[:8]}"


def query_set(recorded: Recorded) -> list[str]:
    from harness.data.benches import load_bench

    qs = [e.question for _, examples in load_bench("mini") for e in examples[:QUESTIONS_PER_DATASET]]
    return list(dict.fromkeys([*qs, *recorded.search_queries]))


def retrieval_items(
    recorded: Recorded, retriever_for: RetrieverFor
) -> tuple[dict[str, dict[str, list]], dict[str, Scope]]:
    groups: dict[str, tuple[Any, int]] = {}
    users: dict[str, list[str]] = {}  # label -> the protocols searching with it
    for p in packaged_protocols():
        if p.retriever.kind == "pyserini" and not _importable("pyserini"):
            continue  # checked in pyserini's own env only
        label = retriever_label(p)
        k = max(p.top_k, groups[label][1]) if label in groups else p.top_k
        groups[label] = (groups.get(label, (p, 0))[0], k)
        users.setdefault(label, []).append(p.name)
    items: dict[str, dict[str, list]] = {}
    scopes: dict[str, Scope] = {}
    queries = query_set(recorded)
    for label, (protocol, k) in sorted(groups.items()):
        hits = retriever_for(protocol).search(queries, k)
        for q, h in zip(queries, hits, strict=True):
            items[f"{label} k={k} | {q}"] = {"ids": [x.doc_id for x in h], "scores": [x.score for x in h]}
            scopes[f"{label} k={k} | {q}"] = ((), tuple(users[label]))
    return items, scopes


def _importable(name: str) -> bool:
    import importlib.util

    return importlib.util.find_spec(name) is not None


# -- layers 3 and 4: replay -----------------------------------------------------------------------
def replay_plan() -> list[tuple[str, str]]:
    """(method, protocol) pairs replayed: a shared method under ``mini``, a method with its own
    protocols under the first of them whose corpus is packaged; none: only the specs layer covers it."""
    from harness.methods_registry import METHODS, get_method

    packaged = {p.name for p in packaged_protocols()}
    plan = []
    for n in METHODS.names():
        own = get_method(n).own_protocols
        if not own:
            plan.append((n, REPLAY_PROTOCOL))
            continue
        mine = [p for p in protocols_of(n) if p in packaged]
        if mine:
            plan.append((n, mine[0]))
    return plan


def _question_key(question: str) -> str:
    """What the replay backend looks for in a prompt: the question without the '?' a method may add."""
    return question.strip().rstrip("?").strip()


def synthetic_outputs(dialect: dict[str, Any], question: str, answer: str, turn_first: bool) -> list[str]:
    """A fixed script in the method's tags (its ``MethodSpec.dialect``; Search-R1's tags when it
    has none): with ``turn_first`` a search, then an answer; else the answer at once. The answer
    text holds two answer spans (a wrong one first) and a closing line, so an extractor's choice
    among them is visible."""
    q_open, q_close = dialect.get("query_open", "<search>"), dialect.get("query_close", "</search>")
    a_open, a_close = dialect.get("answer_open", "<answer>"), dialect.get("answer_close", "</answer>")
    answer_text = (
        f"I am not sure yet: {a_open} unknown {a_close}\nOn reflection, the answer is {a_open} {answer} "
        f"{a_close}\nSo the answer is: {answer}."
    )
    search = f"Let me look this up.\n{q_open} {question} {q_close}"
    return [search, answer_text] if turn_first else [answer_text]


# long: per (method, protocol) of the plan, its recorded and synthetic passes over the slice fill
# the four keyed maps the exact layer compares; pieces split out would each take all four
def replay_items(recorded: Recorded, retriever_for: RetrieverFor) -> tuple[dict, dict, dict, dict]:
    """(prompt hashes, prompt texts, extraction items, their scopes) of every method in
    :func:`replay_plan`; a key's scope is its (method, protocol), the key's ``method@protocol``
    prefix."""
    from harness.data.benches import load_bench
    from harness.eval.protocol import preset
    from harness.eval.scoring import RunScoring
    from harness.methods_registry import get_method
    from harness.rollout.base import RunContext

    from .replay import ReplayBackend

    by_id = {f"{e.dataset}/{e.id}": e for _, examples in load_bench("mini") for e in examples}
    missing = [k for k in recorded.slice if k not in by_id]
    if missing:
        raise ConfigError(f"{RECORDED}: slice question {missing[0]} is not in the mini bench")
    slice_examples = [by_id[k] for k in recorded.slice]
    hashes: dict[str, str] = {}
    texts: dict[str, str] = {}
    extraction: dict[str, Any] = {}
    plan = replay_plan()
    for name, pname in plan:
        method = get_method(name)
        protocol = preset(pname)
        examples = [e for e in slice_examples if method.cannot_answer(e) is None]
        if not examples:
            extraction[f"{name}@{pname}"] = {"skipped": "the method cannot answer any slice question"}
            continue
        dialect = method.spec(protocol).dialect or {}
        passes: dict[str, dict[str, list[str]]] = {}
        if name in recorded.outputs:
            passes["recorded"] = {
                _question_key(e.question): recorded.outputs[name].get(f"{e.dataset}/{e.id}", [])
                for e in examples
            }
        passes["synthetic"] = {
            _question_key(e.question): synthetic_outputs(dialect, e.question, e.answers[0], i % 2 == 1)
            for i, e in enumerate(examples)
        }
        scoring = RunScoring.of(protocol)
        for pass_name, scripts in passes.items():
            prefix = f"{name}@{pname}/{pass_name}"
            backend = ReplayBackend(scripts)
            ctx = RunContext(
                backend=backend,  # type: ignore[arg-type]
                protocol=protocol,
                retriever=retriever_for(protocol) if method.uses_retrieval else None,
                sampling=protocol.decoding.sampling(),
            )
            try:
                trajs = method.solve(examples, ctx)
            # a regression that breaks a method is this layer's failure, named (any other error propagates)
            except (
                ConfigError,
                ValueError,
                TypeError,
                KeyError,
                IndexError,
                AttributeError,
                RuntimeError,
            ) as e:
                hashes[prefix] = texts[prefix] = f"error: {type(e).__name__}: {e}"
                extraction[prefix] = {"error": f"{type(e).__name__}: {e}"}
                continue
            by_q = {_question_key(e.question): e for e in examples}
            n_calls: dict[str, int] = {}
            for q, prompt in backend.calls:
                e = by_q[q]
                i = n_calls.get(q, 0)
                n_calls[q] = i + 1
                key = f"{prefix}/{e.dataset}/{e.id}/call{i}"
                hashes[key], texts[key] = sha(prompt), prompt
            for e, t in zip(examples, trajs, strict=True):
                key = f"{prefix}/{e.dataset}/{e.id}"
                hashes[f"{key}/response"], texts[f"{key}/response"] = sha(t.response), t.response
                gold = e.gold_passage_ids if method.uses_retrieval else ()
                extraction[key] = {
                    "prediction": t.prediction,
                    "status": t.extraction_status,
                    "metrics": scoring.score(t, gold),
                }
    by_prefix = {f"{n}@{p}": ((n,), (p,)) for n, p in plan}
    scopes = {k: by_prefix[k.split("/", 1)[0]] for k in [*hashes, *extraction]}
    return hashes, texts, extraction, scopes


def prediction_items(recorded: Recorded) -> dict[str, Any]:
    """Every registered answer metric on each recorded (prediction, gold answers) pair."""
    from harness.metrics.registry import METRICS, get_metric, score_answer

    names = [n for n in METRICS.names() if not n.endswith("@k") and get_metric(n).kind == "answer"]
    return {
        f"predictions/{i:03d}": {
            "prediction": pred,
            "metrics": score_answer(pred, list(golds), names),
        }
        for i, (pred, golds) in enumerate(recorded.predictions)
    }


# -- all layers -----------------------------------------------------------------------------------
# What an item is about: the methods and the protocols it belongs to (``harness.gate.pins`` keeps
# an item in the pin file of the plugin folder that registers them; an empty scope is the engine's).
Scope = tuple[tuple[str, ...], tuple[str, ...]]


@dataclass
class Current:
    """What the tree computes now, layer by layer (only the layers asked for), and each item's
    :data:`Scope` (layer -> key -> (methods, protocols))."""

    items: dict[str, dict[str, Any]]
    prompt_texts: dict[str, str]
    scopes: dict[str, dict[str, Scope]] = field(default_factory=dict)


def compute(
    layers: Iterable[str] = LAYERS,
    *,
    recorded: Recorded | None = None,
    retriever_for: RetrieverFor | None = None,
) -> Current:
    layers = list(layers)
    unknown = [x for x in layers if x not in LAYERS]
    if unknown:
        raise ConfigError(f"unknown gate layer {unknown[0]!r}; known: {', '.join(LAYERS)}")
    rec = recorded or Recorded.load()
    get = retriever_for or cached_retrievers()
    items: dict[str, dict[str, Any]] = {}
    scopes: dict[str, dict[str, Scope]] = {}
    texts: dict[str, str] = {}
    if "specs" in layers:
        items["specs"], scopes["specs"] = spec_items()
    if "retrieval" in layers:
        items["retrieval"], scopes["retrieval"] = retrieval_items(rec, get)
    if "prompts" in layers or "extraction" in layers:
        hashes, texts, extraction, replayed = replay_items(rec, get)
        if "prompts" in layers:
            items["prompts"] = hashes
            scopes["prompts"] = {k: replayed[k] for k in hashes}
        if "extraction" in layers:
            predictions = prediction_items(rec)
            items["extraction"] = {**extraction, **predictions}
            scopes["extraction"] = {
                **{k: replayed[k] for k in extraction},
                **dict.fromkeys(predictions, ((), ())),
            }
    order = [x for x in LAYERS if x in items]
    return Current(
        items={x: items[x] for x in order}, prompt_texts=texts, scopes={x: scopes[x] for x in order}
    )


def cached_retrievers() -> RetrieverFor:
    """Protocol -> its retriever (:func:`harness.retrieval.factory.make_protocol_retriever` over
    the packaged corpus), built once per distinct retriever."""
    from harness.retrieval.factory import make_protocol_retriever

    built: dict[str, Any] = {}

    def get(protocol: Any) -> Any:
        label = retriever_label(protocol)
        if label not in built:
            built[label] = make_protocol_retriever(protocol, progress=False)
        return built[label]

    return get
