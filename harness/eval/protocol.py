"""The named evaluation protocols (``mini`` and the papers' registered ones), the resolution of a
protocol's corpus from the user's file, and the check that a run is judged as its protocol asks.
The protocol value itself (fields, canonical JSON, ``protocol_id``) is :mod:`harness.protocol`.
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

from harness import plugins
from harness.errors import ConfigError
from harness.protocol import CorpusRef, Protocol, standard_metrics
from harness.registry import Registry
from harness.retrieval.spec import Bm25sSpec


def check_judge(protocol: Protocol, model: str | None, prompt: str | None) -> None:
    """ConfigError unless a run under ``protocol`` is judged as it requires: by nobody when the
    protocol names no judge (``harness judge`` may still judge its runs later), else by exactly its
    judge (``model``/``prompt``: what ``--judge-model``/``--judge-prompt`` give; None: no judge)."""
    ref = protocol.judge
    if ref is None:
        return
    want = f"--judge-model {ref.model} --judge-prompt {ref.prompt_id} (prompt hash {ref.prompt_hash})"
    where = f"protocol {protocol.name!r} ({protocol.protocol_id}) is scored by an LLM judge"
    if model is None or prompt is None:
        raise ConfigError(f"{where}: pass --judge-url with {want}")
    from harness.judge.prompts import get_prompt

    if model != ref.model or prompt != ref.prompt_id:
        raise ConfigError(f"{where}: {want}, not --judge-model {model} --judge-prompt {prompt}")
    got = get_prompt(prompt).prompt_hash
    if got != ref.prompt_hash:
        raise ConfigError(
            f"{where}: judge prompt {prompt!r} now hashes to {got}, the protocol pins {ref.prompt_hash}; "
            "the prompt changed since the protocol was defined (define a new protocol)"
        )


def closed_corpus_ref() -> CorpusRef:
    from harness.data.packaged import closed_corpus_info

    info = closed_corpus_info()
    return CorpusRef(id=info.id, content_hash=info.content_hash, n_passages=info.n_passages)


def mini() -> Protocol:
    """The packaged closed corpus (real HotpotQA / 2Wiki / MuSiQue / PopQA paragraphs), bm25s BM25
    (k1 0.9, b 0.4, porter), top-3, 4 turns, 500 observation tokens, greedy. Runs on a laptop CPU."""
    return Protocol(
        name="mini",
        description="packaged closed corpus (~28k real paragraphs), bm25s, top-3, 4 turns, greedy",
        corpus=closed_corpus_ref(),
        retriever=Bm25sSpec(),
        metrics=standard_metrics(),
    )


# Named protocols: name -> factory. ``mini`` is the harness' own; the papers' evaluation protocols
# are registered from their folders (``PLUGIN = Plugin(protocols={...})`` in
# ``methods/<paper>/__init__.py``) on first use.
PROTOCOLS: Registry[Callable[[], Protocol]] = Registry("protocol", discover=plugins.register("protocols"))
PROTOCOLS.register("mini", mini)


def preset(name: str) -> Protocol:
    """The named protocol ``name`` (see ``harness list protocols``)."""
    p = PROTOCOLS.get(name)()
    if p.name != name:
        raise ConfigError(f"protocol factory for {name!r} returned a protocol named {p.name!r}")
    return p


def resolve_corpus(protocol: Protocol, corpus_path: Path | None) -> Protocol:
    """Fill the corpus hash of a protocol whose corpus the user supplies, from the file itself."""
    if protocol.resolved:
        return protocol
    if corpus_path is None:
        raise ConfigError(
            f"protocol {protocol.name!r} uses corpus {protocol.corpus.id!r}, which is not packaged: "
            "pass --corpus PATH (wiki-18 jsonl)"
        )
    from harness.retrieval.corpus import corpus_spec

    spec = corpus_spec(corpus_path, corpus_id=protocol.corpus.id)
    return protocol.with_(
        corpus=CorpusRef(
            id=protocol.corpus.id, content_hash=spec.content_hash, n_passages=spec.n_passages
        ).model_dump()
    )


def describe_protocols() -> list[tuple[str, ...]]:
    """Rows for ``harness list protocols``: name, id, corpus, retriever, top-k/turns, description."""
    rows = []
    for name in PROTOCOLS.names():
        p = preset(name)
        pid = p.protocol_id if p.resolved else f"{p.protocol_id}*"
        rows.append(
            (
                name,
                pid,
                p.corpus.id + ("" if p.resolved else " (hash from your file)"),
                p.retriever.kind,
                f"top-{p.top_k}, {p.max_turns} turns",
                p.description,
            )
        )
    return rows
