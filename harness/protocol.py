"""The evaluation protocol value: everything that changes a score, pinned and hashed.

The value only (layer L3 of ``docs/architecture.md``): the named presets, their registry and
the resolution of a user's corpus are in :mod:`harness.eval.protocol`.

A score is only comparable with another score under the same ``protocol_id``. The protocol pins
the *environment* every method is scored in, and every field is read by the code that runs it:

- ``corpus`` and ``retriever``: the index the run's retriever is built from (a content hash that
  does not match the corpus file is refused); ``remote``: retrieval from a server instead;
- ``top_k``, ``max_turns``, ``max_obs_tokens``: the rollout budgets every method runs with
  (``harness.rollout.engine.RolloutConfig.from_protocol``, and each method's spec);
- ``decoding``: the sampling parameters and per-turn token budget of every generation;
- ``selection``: which questions of each bench dataset are loaded;
- ``metrics`` (name -> version): exactly the metrics ``harness run`` scores every sample with
  (:class:`harness.eval.scoring.RunScoring`; an unknown metric, one a run cannot compute, or a
  version other than the registered one is refused before the run starts);
- ``primary_metric``: the metric the run summary shows first and the leaderboard opens on;
- ``judge``: when set, a run under the protocol must be judged by that judge (model, prompt and
  prompt hash) or it is refused (:func:`harness.eval.protocol.check_judge`).

What is specific to a method (its prompt, tag dialect, document renderer and answer extractor) is
pinned by the method's own ``MethodSpec`` hash stored with every run, not here: protocol format 1
had ``renderer``, ``prompt_template`` and ``answer_extractor`` overrides that no code read (they
changed the id, never a score), and ``split_policy``, whose one value restated what each bench
entry's split already is (``harness.data.benches.BenchEntry.split``; a run records its bench).
Format 2 removed them.

``protocol_id`` = first 12 hex digits of sha256 over the canonical JSON of every field except
``name`` and ``description`` (so a renamed copy with identical settings has the same id), plus
``"format": PROTOCOL_FORMAT``. The format number changes when the meaning of the fields changes:
format 2 (this one) made every field act and changed every id once, on purpose; runs stored under
format-1 ids are never compared with format-2 runs. When retrieval is served by a remote server
(``remote``, see :class:`RemoteRetrieval`) the id carries a suffix that says so: ``-remote`` (the
server described itself), ``-remote-declared`` (the user declared what it serves) or
``-remote-unverified`` (nobody did).
"""

from __future__ import annotations

import hashlib
import json
from typing import Literal

from pydantic import BaseModel, ConfigDict, Field, model_validator

from harness.data.benches import Selection
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
# the canonical JSON (so adding them changed no id; kept as the one canonical form since).
_DECODING_OMITTED_AT = {"top_k": 0, "repetition_penalty": 1.0}


class JudgeRef(_Frozen):
    """The judge a protocol's runs are scored with: the served model name, the judge prompt as
    ``--judge-prompt`` names it (``default``, ``arena+logit``) and that prompt's hash
    (``harness list judge-prompts``), so an edited prompt is refused rather than silently used."""

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


# The version of what the protocol's fields mean; part of every id (see the module docstring).
PROTOCOL_FORMAT = 2

# The metrics ``harness run`` scores by default: every answer metric (``f1_squad`` too: the F1 of
# papers without HotpotQA's yes/no rule) and the retrieval metrics a trajectory carries the inputs
# of (``retrieval_recall@k`` binds k to the protocol's top_k). ``answer_recall@k`` needs the
# documents' texts, which trajectories do not store: ``harness score`` computes it from a file.
STANDARD_METRICS = (
    "em",
    "f1",
    "f1_squad",
    "cover_em",
    "cover_em_tokens",
    "retrieval_recall@k",
    "evidence_recall",
)


def standard_metrics() -> dict[str, str]:
    """``{name: registered version}`` of :data:`STANDARD_METRICS`."""
    from harness.metrics.registry import METRICS

    return {n: METRICS.get(n).version for n in STANDARD_METRICS}


class Protocol(_Frozen):
    name: str
    description: str = ""
    corpus: CorpusRef
    retriever: RetrieverSpec = Field(default_factory=Bm25sSpec)
    top_k: int = 3
    max_turns: int = 4
    max_obs_tokens: int = 500
    decoding: Decoding = Decoding()
    selection: Selection = Selection()
    metrics: dict[str, str] = Field(default_factory=standard_metrics)  # metric name -> version
    primary_metric: str = "em"  # one of ``metrics``: the summary's first column, the leaderboard's default
    judge: JudgeRef | None = None  # set: every run under the protocol is judged by it, or refused
    remote: RemoteRetrieval | None = None  # None: the retriever runs in-process

    @model_validator(mode="after")
    def _check_metrics(self) -> Protocol:
        if not self.metrics:
            raise ValueError("a protocol scores at least one metric (metrics: name -> version)")
        if self.primary_metric not in self.metrics:
            raise ValueError(
                f"primary_metric {self.primary_metric!r} is not one of the protocol's metrics "
                f"({', '.join(self.metrics)})"
            )
        return self

    # -- identity ------------------------------------------------------------------------------
    def canonical_json(self) -> str:
        data = self.model_dump(mode="json", exclude={"name", "description"})
        data["format"] = PROTOCOL_FORMAT
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
