"""The evaluation protocol: everything that changes a score, pinned and hashed.

A score is only comparable with another score under the same ``protocol_id``. The protocol pins
the *environment* every method is scored in: corpus (id and content hash), retriever and its
settings, top-k, turn and observation budgets, decoding, the data selection, metric versions and
the judge. What is specific to a method (its prompt, tag dialect, document renderer and answer
extractor) is pinned by the method's own ``MethodSpec`` hash stored with every run; a protocol may
also *override* those (fields ``renderer``/``prompt_template``/``answer_extractor``, default
``"method"`` = each method's own, recorded in the run), which changes the protocol id.

``protocol_id`` = first 12 hex digits of sha256 over the canonical JSON of every field except
``name`` and ``description`` (so a renamed copy with identical settings has the same id). When
retrieval is served by a remote server (``remote``, see :class:`RemoteRetrieval`) the id carries a
suffix that says so: ``-remote`` (the server described itself), ``-remote-declared`` (the user
declared what it serves) or ``-remote-unverified`` (nobody did).
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Callable
from pathlib import Path
from typing import Literal

from pydantic import BaseModel, ConfigDict, Field

from harness import plugins
from harness.data.benches import Selection
from harness.errors import ConfigError
from harness.registry import Registry
from harness.retrieval.spec import Bm25sSpec, RetrieverSpec
from harness.types import SamplingParams


class _Frozen(BaseModel):
    model_config = ConfigDict(frozen=True, extra="forbid")


class CorpusRef(_Frozen):
    """Which corpus. ``content_hash`` is None in a preset whose corpus the user supplies
    (e.g. wiki-18); it is filled from the actual file when a run starts (``Protocol.resolve``)."""

    id: str
    content_hash: str | None = None
    n_passages: int | None = None


class Decoding(_Frozen):
    """The run's :class:`~harness.types.SamplingParams` (see there for ``top_k`` and
    ``repetition_penalty``) and the token budget per turn. ``top_k`` and ``repetition_penalty``
    enter the protocol id only when set (not 0 / 1.0), so the ids from before they existed hold."""

    temperature: float = 0.0  # greedy, as Search-R1's validation (`do_sample: False`)
    top_p: float = 1.0
    max_new_tokens: int = 500  # per turn; Search-R1 data.max_response_length=500 (its evaluate.sh)
    seed: int = 0
    top_k: int = Field(default=0, ge=0)  # 0: off
    repetition_penalty: float = Field(default=1.0, gt=0)  # 1.0: off

    def sampling(self) -> SamplingParams:
        """The sampling parameters a run under this decoding generates with."""
        return SamplingParams(
            temperature=self.temperature,
            top_p=self.top_p,
            top_k=self.top_k,
            seed=self.seed,
            repetition_penalty=self.repetition_penalty,
        )


# Decoding fields added after protocol ids were published, with the value that leaves them out of
# the canonical JSON (and so leaves every earlier id unchanged).
_DECODING_OMITTED_AT = {"top_k": 0, "repetition_penalty": 1.0}


class JudgeRef(_Frozen):
    model: str
    prompt_id: str
    prompt_hash: str


class RemoteRetrieval(_Frozen):
    """Retrieval from a Search-R1-compatible server (``--retriever-url``) instead of in-process.

    ``described_by``: ``server``: its ``GET /health`` gave the corpus (id, content hash, size), the
    retriever spec and the index id, and the protocol's ``corpus`` and ``retriever`` are those;
    ``user``: the user declared the retriever spec (not checkable); ``nobody``: the server says
    nothing, so the protocol's corpus and retriever are assumed, unverified. The URL itself is not
    part of the protocol (the same server on another host or port is the same environment); runs
    store it in their command line.
    """

    described_by: Literal["server", "user", "nobody"]
    index_id: str | None = None

    @property
    def id_suffix(self) -> str:
        return {"server": "-remote", "user": "-remote-declared", "nobody": "-remote-unverified"}[
            self.described_by
        ]


class Protocol(_Frozen):
    name: str
    description: str = ""
    corpus: CorpusRef
    retriever: RetrieverSpec = Field(default_factory=Bm25sSpec)
    top_k: int = 3
    max_turns: int = 4
    max_obs_tokens: int = 500
    renderer: str = "method"
    prompt_template: str = "method"
    answer_extractor: str = "method"
    decoding: Decoding = Decoding()
    split_policy: Literal["canonical"] = "canonical"  # test if the set has one, else dev (Search-R1/FlashRAG)
    selection: Selection = Selection()
    metrics: dict[str, str] = Field(default_factory=dict)  # metric name -> version
    primary_metric: str = "em"
    judge: JudgeRef | None = None
    remote: RemoteRetrieval | None = None  # None: the retriever runs in-process

    # -- identity ------------------------------------------------------------------------------
    def canonical_json(self) -> str:
        data = self.model_dump(mode="json", exclude={"name", "description"})
        if data["remote"] is None:  # in-process retrieval: ids stay what they were before the field
            del data["remote"]
        for key, off in _DECODING_OMITTED_AT.items():
            if data["decoding"][key] == off:
                del data["decoding"][key]
        return json.dumps(data, sort_keys=True, separators=(",", ":"))

    @property
    def protocol_id(self) -> str:
        digest = hashlib.sha256(self.canonical_json().encode()).hexdigest()[:12]
        return digest + (self.remote.id_suffix if self.remote is not None else "")

    @property
    def resolved(self) -> bool:
        return self.corpus.content_hash is not None

    def with_(self, **changes: object) -> Protocol:
        """A copy with some fields changed (validated)."""
        data = self.model_dump()
        data.update(changes)
        return Protocol.model_validate(data)


def _metric_versions() -> dict[str, str]:
    from harness.metrics.registry import metric_versions

    return metric_versions()


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
        metrics=_metric_versions(),
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
