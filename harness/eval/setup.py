"""One run set-up for every command that runs a method: ``harness run``, ``harness train``,
``harness sft`` and any later one.

The command's choices go in as plain typed values (:class:`RunChoices`; the argparse glue that
fills them is :func:`harness.cli.options.run_choices`); out comes a ready :class:`RunSetup`:

- ``protocol``: the preset with the question selection, top-k, seed, a remote retriever's
  description (``retriever_url``) and the user's corpus applied (:func:`build_protocol`);
- ``store``: the results file, opened (and checked) on first use;
- ``retriever(protocol)``: the retriever that protocol pins (in process, or a client of the
  remote server), behind the result cache, built on first use and kept per protocol id;
- ``eval_run(...)`` / ``train_run(...)``: the run's ``running`` row (:mod:`harness.results.lifecycle`).

Everything past the protocol is lazy, so each command keeps its own order of side effects: a
``--method direct`` run needs no index, a dead retrieval server fails inside a training run's
``running`` block (its row ends ``failed``), and SFT opens the results file only after its
demonstrations are rolled out.
"""

from __future__ import annotations

import sys
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

import harness.eval.protocol
from harness.data.benches import Selection
from harness.errors import ConfigError
from harness.eval.protocol import resolve_corpus
from harness.eval.remote import protocol_retriever
from harness.protocol import Protocol
from harness.results.lifecycle import create_run, create_train_run, new_run_id
from harness.results.store import Store
from harness.results.training_state import record_for_model
from harness.retrieval.cache import CachedRetriever, ResultCache

if TYPE_CHECKING:
    from harness.method import Method, MethodSpec


@dataclass(frozen=True)
class RunChoices:
    """What the command was asked for (its options, as values; the command gives every default)."""

    protocol: str
    db: Path
    corpus: Path | None = None
    data_dir: Path | None = None
    retriever_url: str | None = None
    retriever_declare: str | None = None  # with retriever_url: what a server without /health runs
    # `harness run` only: the question selection, the top-k override and the seed
    limit: int | None = None
    sample: int | None = None
    seed: int | None = None  # None: the preset's decoding seed
    top_k: int | None = None


def build_protocol(choices: RunChoices) -> Protocol:
    """The protocol preset with the selection (``limit`` / ``sample``), ``top_k``, the seed, a
    remote retriever's description (``retriever_url``) and the corpus (``corpus``) applied."""
    if choices.limit is not None and choices.sample is not None:
        raise ConfigError("give --limit (first N) or --sample (random N), not both")
    proto = harness.eval.protocol.preset(choices.protocol)  # looked up when called: a test may swap it
    if choices.limit is not None:
        proto = proto.with_(selection=Selection(mode="first", n=choices.limit))
    elif choices.sample is not None:
        seed = {} if choices.seed is None else {"seed": choices.seed}
        proto = proto.with_(selection=Selection(mode="random", n=choices.sample, **seed))
    if choices.top_k is not None:
        proto = proto.with_(top_k=choices.top_k)
    if choices.seed is not None:
        decoding = proto.decoding.model_copy(update={"seed": choices.seed})
        proto = proto.with_(decoding=decoding.model_dump())
    proto = remote_protocol_at(
        proto, choices.retriever_url, declared=choices.retriever_declare, corpus=choices.corpus
    )
    if proto.remote is None:  # a remote protocol's corpus is pinned by the server (or --corpus) above
        proto = resolve_corpus(proto, choices.corpus)
    return proto


def remote_protocol_at(
    proto: Protocol, url: str | None, *, declared: str | None = None, corpus: Path | None = None
) -> Protocol:
    """``proto`` with remote retrieval when ``url`` is given (else ``proto``); prints one line on
    stderr saying what the protocol records about the server (see :mod:`harness.eval.remote`)."""
    if url is None:
        if declared is not None:
            raise ConfigError("--retriever-declare needs --retriever-url")
        return proto
    from harness.eval.remote import describe_remote, parse_declared, remote_protocol
    from harness.retrieval.client import RetrievalClient

    if not url.startswith(("http://", "https://")):
        raise ConfigError(f"--retriever-url must be an http(s) URL, got {url!r}")
    client = RetrievalClient(url)
    try:
        out = remote_protocol(proto, client, declared=parse_declared(declared), corpus_path=corpus)
    finally:
        client.close()
    print(describe_remote(out, client.base_url), file=sys.stderr)
    return out


class RunSetup:
    """A command's protocol, results file, retrievers and run rows (see the module docstring)."""

    def __init__(
        self,
        protocol: Protocol,
        *,
        db: Path,
        corpus: Path | None = None,
        data_dir: Path | None = None,
        retriever_url: str | None = None,
    ):
        self.protocol = protocol
        self.db = db
        self.corpus = corpus
        self.data_dir = data_dir
        self.retriever_url = retriever_url
        self._store: Store | None = None
        self._retrievers: dict[str, CachedRetriever] = {}  # protocol id -> retriever

    @classmethod
    def from_choices(cls, choices: RunChoices) -> RunSetup:
        """The set-up of ``choices``; the protocol is built (and a remote server asked) now."""
        return cls(
            build_protocol(choices),
            db=choices.db,
            corpus=choices.corpus,
            data_dir=choices.data_dir,
            retriever_url=choices.retriever_url,
        )

    @property
    def store(self) -> Store:
        """The results file, opened (and checked: a damaged file is one error) on first use."""
        if self._store is None:
            self._store = Store(self.db)
        return self._store

    def retriever(self, protocol: Protocol | None = None) -> CachedRetriever:
        """The retriever ``protocol`` (default: this set-up's) pins, built on first use; results
        are cached by (index id, query, k), so a rerun or a resumed run never searches again."""
        proto = protocol or self.protocol
        if proto.protocol_id not in self._retrievers:
            inner = protocol_retriever(proto, self.corpus, self.retriever_url)
            self._retrievers[proto.protocol_id] = CachedRetriever(inner, ResultCache.default())
        return self._retrievers[proto.protocol_id]

    def eval_run(
        self,
        *,
        method: str,
        spec: MethodSpec,
        model: str,
        backend: str,
        protocol: Protocol,
        bench: str,
        label: str,
        command: str,
        n_expected: int,
        runtime: dict[str, Any] | None = None,
    ) -> str:
        """The ``running`` row of a new evaluation run of ``method`` (owned by this process, so
        ``--resume`` may claim it later); its id. ``runtime``: stored with the run's versions (a
        shipped adapter's ``adapter_sha256`` and ``trained_by``: :mod:`harness.llm.adapters`)."""
        return create_run(
            self.store,
            run_id=new_run_id(method),
            kind="eval",
            method=method,
            model=model,
            backend=backend,
            protocol=protocol,
            method_spec_hash=spec.spec_hash,
            method_spec_json=spec.model_dump_json(),
            bench=bench,
            label=label,
            command=command,
            n_expected=n_expected,
            owned=True,
            # what trained the model (an adapter's or checkpoint's hash, the algorithm): the one
            # record the views read a run's training state from (harness.results.training_state);
            # a shipped adapter's own record (harness.llm.adapters) where the caller has one
            runtime={**record_for_model(model), **(runtime or {})},
        )

    def train_run(
        self,
        *,
        prefix: str,
        method: Method,
        recipe: Any,
        protocol: Protocol,
        model: str,
        label: str,
        runtime: dict[str, Any] | None = None,
    ) -> str:
        """The ``running`` row of a training run (``harness train`` / ``harness sft``): see
        :func:`harness.results.lifecycle.create_train_run`; its id."""
        return create_train_run(
            self.store,
            prefix=prefix,
            method=method,
            recipe=recipe,
            protocol=protocol,
            model=model,
            label=label,
            runtime=runtime,
        )
