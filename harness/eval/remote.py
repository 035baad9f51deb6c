"""Remote retrieval in a protocol: ``--retriever-url`` on ``harness run``, ``eval-retrieval`` and
``train`` (see docs/remote-retrieval.md).

Any Search-R1-compatible ``POST /retrieve`` server works through :class:`RetrievalClient`
(batched queries, retries with backoff, timeouts). What the protocol records about it:

- the server describes itself (``GET /health`` of ``harness serve-retriever``: corpus id, content
  hash and size, retriever spec, index id): the protocol's corpus and retriever become the
  server's, after checking the corpus against the one the protocol pins (a different corpus is an
  error: the scores would not be comparable); ``remote.described_by = "server"``, id suffix
  ``-remote``;
- the user declares the retriever spec (``--retriever-declare``) for a server that says nothing:
  ``described_by = "user"``, id suffix ``-remote-declared``; a server that does describe itself
  must agree with the declaration;
- nobody describes it: the protocol's own corpus and retriever are assumed, unverified;
  ``described_by = "nobody"``, id suffix ``-remote-unverified``.

Unless the server described itself, the protocol's corpus must be at hand (the packaged one, or
``--corpus``): hits are mapped to its passage ids (:class:`harness.retrieval.client.PassageIds`),
and a hit that maps to none makes the retrieval metrics of its question not computable.
"""

from __future__ import annotations

from pathlib import Path

from pydantic import BaseModel

from harness.errors import ConfigError
from harness.eval.protocol import resolve_corpus
from harness.protocol import CorpusRef, Protocol, RemoteRetrieval
from harness.retrieval.base import Retriever
from harness.retrieval.client import RemoteSpec, RetrievalClient
from harness.secrets import redact


def remote_protocol(
    protocol: Protocol,
    client: RetrievalClient,
    *,
    declared: BaseModel | None = None,
    corpus_path: Path | None = None,
) -> Protocol:
    """``protocol`` with its retrieval served by ``client``'s server (see the module docstring).

    ``corpus_path`` resolves the corpus hash of a protocol whose corpus the user supplies, when
    the server does not describe its corpus; without it such a protocol keeps an unpinned corpus."""
    info = client.info()  # an unreachable server fails here, with the URL
    described = info.get("spec") is not None and info.get("corpus") is not None
    url = client.shown_url  # messages show the URL redacted
    if not described:
        remote = RemoteRetrieval(described_by="user" if declared is not None else "nobody")
        out = protocol.with_(
            retriever=(declared or protocol.retriever).model_dump(), remote=remote.model_dump()
        )
        if not out.resolved and corpus_path is not None:
            out = resolve_corpus(out, corpus_path)
        return out
    spec, corpus = client.spec, client.corpus_spec
    assert corpus is not None and not isinstance(spec, RemoteSpec)
    if declared is not None and declared != spec:
        raise ConfigError(
            f"--retriever-declare says {declared.model_dump_json()}, but {url}/health says the server "
            f"runs {spec.model_dump_json()}; drop --retriever-declare or point at the right server"
        )
    ref = protocol.corpus
    if ref.content_hash is not None and ref.content_hash != corpus.content_hash:
        raise ConfigError(
            f"retrieval server {url} serves corpus {corpus.id!r} (content hash {corpus.content_hash[:12]}..., "
            f"{corpus.n_passages} passages), but protocol {protocol.name!r} pins corpus {ref.id!r} "
            f"({ref.content_hash[:12]}...); serve the protocol's corpus or choose another protocol"
        )
    if ref.n_passages is not None and ref.n_passages != corpus.n_passages:
        raise ConfigError(
            f"retrieval server {url} serves {corpus.n_passages} passages, but protocol {protocol.name!r} "
            f"pins {ref.n_passages} (corpus {ref.id!r}); serve the protocol's corpus"
        )
    corpus_ref = CorpusRef(id=ref.id, content_hash=corpus.content_hash, n_passages=corpus.n_passages)
    return protocol.with_(
        corpus=corpus_ref.model_dump(),
        retriever=spec.model_dump(),
        remote=RemoteRetrieval(described_by="server", index_id=client.index_id).model_dump(),
    )


def protocol_retriever(
    protocol: Protocol, corpus_path: Path | None = None, retriever_url: str | None = None
) -> Retriever:
    """The retriever ``protocol`` pins: in-process (:func:`make_protocol_retriever`), or a client of
    ``retriever_url`` when the protocol's retrieval is remote. A server that described itself
    must still serve the index the protocol recorded (e.g. when a run is resumed)."""
    if protocol.remote is None:
        from harness.retrieval.factory import make_protocol_retriever

        return make_protocol_retriever(protocol, corpus_path)
    if not retriever_url:
        raise ConfigError(
            f"protocol {protocol.name!r} ({protocol.protocol_id}) uses a remote retriever: pass --retriever-url"
        )
    from harness.retrieval.factory import protocol_corpus

    # A server that described itself serves the protocol's corpus (checked by content hash) with its
    # ids. Any other server's hits are mapped to the protocol corpus's passage ids, which needs that
    # corpus here: Search-R1's own server sends no ids, or row numbers (client.PassageIds).
    corpus = None if protocol.remote.described_by == "server" else protocol_corpus(protocol, corpus_path)
    client = RetrievalClient(retriever_url, corpus=corpus)
    if protocol.remote.described_by == "server" and client.index_id != protocol.remote.index_id:
        raise ConfigError(
            f"retrieval server {client.shown_url} now serves index {client.index_id}, but protocol "
            f"{protocol.name!r} ({protocol.protocol_id}) recorded {protocol.remote.index_id}"
        )
    return client


def parse_declared(value: str | None) -> BaseModel | None:
    """``--retriever-declare``: a preset name or a JSON spec (as ``--retriever``), or None."""
    if value is None:
        return None
    from harness.retrieval.factory import parse_spec

    return parse_spec(value)


def describe_remote(protocol: Protocol, url: str) -> str:
    """One line for stderr: what the protocol says about the remote retriever."""
    r = protocol.remote
    assert r is not None
    what = {
        "server": f"described by the server: {protocol.retriever.kind} index {r.index_id}",
        "user": f"declared by you: {protocol.retriever.kind} (unverified)",
        "nobody": f"the server does not describe itself: {protocol.retriever.kind} assumed, UNVERIFIED",
    }[r.described_by]
    corpus = protocol.corpus
    hash_ = f"{corpus.content_hash[:12]}..." if corpus.content_hash else "unpinned"
    return f"retrieval: remote {redact(url)} ({what}; corpus {corpus.id} {hash_})"
