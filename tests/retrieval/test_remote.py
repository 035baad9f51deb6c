"""Remote retrieval in a protocol (``--retriever-url``): what the protocol records about the server
(its own description, the user's declaration, or nothing), and ``harness run`` through
``harness serve-retriever`` giving the same predictions as the in-process retriever."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

import duckdb
import pytest

from harness.errors import ConfigError
from harness.eval.protocol import mini
from harness.eval.remote import protocol_retriever, remote_protocol
from harness.protocol import CorpusRef, Protocol
from harness.retrieval.bm25 import Bm25sRetriever
from harness.retrieval.client import RetrievalClient
from harness.retrieval.spec import Bm25sSpec, DenseSpec
from tests.retrieval.test_server import Served

pytestmark = pytest.mark.integration


def tiny_protocol(corpus, **changes) -> Protocol:
    ref = CorpusRef(id="tiny", content_hash=corpus.spec.content_hash, n_passages=len(corpus))
    return Protocol(name="tiny", corpus=ref, **changes)


@pytest.fixture
def served(tiny_corpus):
    s = Served(Bm25sRetriever(tiny_corpus))
    yield s
    s.stop()


@pytest.fixture
def silent(tiny_corpus):
    """A Search-R1-style server with no GET /health (as Search-R1's retrieval_server.py)."""
    from fastapi import FastAPI

    app = FastAPI()
    local = Bm25sRetriever(tiny_corpus)

    @app.post("/retrieve")
    def retrieve(body: dict):
        hits = local.search(body["queries"], body["topk"])
        docs = [
            [{"document": {"id": h.doc_id, "contents": h.contents}, "score": h.score} for h in hs]
            for hs in hits
        ]
        return {"result": docs}

    s = Served(app=app)
    yield s
    s.stop()


def test_a_server_that_describes_itself_pins_corpus_spec_and_index(served, tiny_corpus):
    local = tiny_protocol(tiny_corpus)
    with RetrievalClient(served.url + "/retrieve") as client:
        p = remote_protocol(local, client)
    assert p.remote is not None and p.remote.described_by == "server"
    assert p.remote.index_id == Bm25sRetriever(tiny_corpus).index_id
    assert p.retriever == Bm25sSpec() and p.corpus == local.corpus
    assert p.protocol_id.endswith("-remote") and p.protocol_id != local.protocol_id + "-remote"
    assert len(p.protocol_id) == 12 + len("-remote")
    # an in-process protocol keeps the id it had before the field existed (no "remote" key hashed)
    assert '"remote"' not in local.canonical_json() and len(local.protocol_id) == 12
    r = protocol_retriever(p, None, served.url + "/retrieve")
    assert isinstance(r, RetrievalClient)
    assert r.search(["capital of France"], 2) == Bm25sRetriever(tiny_corpus).search(["capital of France"], 2)


def test_a_server_with_another_corpus_is_refused(served):
    with RetrievalClient(served.url) as client, pytest.raises(ConfigError) as e:
        remote_protocol(mini(), client)
    assert f"retrieval server {served.url} serves corpus 'tiny' (content hash " in str(e.value)
    assert "but protocol 'mini' pins corpus" in str(e.value)


def test_a_declaration_must_agree_with_the_server(served, tiny_corpus):
    with RetrievalClient(served.url) as client:
        with pytest.raises(ConfigError, match="--retriever-declare says .*dense.* but .*/health says"):
            remote_protocol(tiny_protocol(tiny_corpus), client, declared=DenseSpec())
        p = remote_protocol(tiny_protocol(tiny_corpus), client, declared=Bm25sSpec())
    assert p.remote.described_by == "server"


def test_a_silent_server_is_unverified_or_declared(silent, tiny_corpus):
    local = tiny_protocol(tiny_corpus)
    with RetrievalClient(silent.url + "/retrieve") as client:
        unverified = remote_protocol(local, client)
        declared = remote_protocol(local, client, declared=DenseSpec())
    assert unverified.remote.described_by == "nobody" and unverified.retriever == local.retriever
    assert unverified.protocol_id.endswith("-remote-unverified")
    assert declared.remote.described_by == "user" and declared.retriever == DenseSpec()
    assert declared.protocol_id.endswith("-remote-declared")
    assert len({local.protocol_id, unverified.protocol_id, declared.protocol_id}) == 3
    with pytest.raises(ConfigError, match="uses a remote retriever: pass --retriever-url"):
        protocol_retriever(unverified, None, None)


def test_a_resumed_remote_run_refuses_a_server_with_another_index(served, tiny_corpus):
    p = remote_protocol(tiny_protocol(tiny_corpus), RetrievalClient(served.url))
    moved = p.with_(remote={"described_by": "server", "index_id": "bm25s-0000000000000000"})
    with pytest.raises(
        ConfigError, match=r"now serves index bm25s-.* but protocol 'tiny' .* recorded bm25s-0000"
    ):
        protocol_retriever(moved, None, served.url)


def test_an_unreachable_server_is_one_error_before_anything_runs(tmp_path):
    from tests.retrieval.test_server import free_port

    port = free_port()
    cmd = [sys.executable, "-m", "harness", "run", "--method", "naive_rag", "--limit", "1"]
    cmd += ["--retriever-url", f"http://127.0.0.1:{port}/retrieve", "--db", str(tmp_path / "r.duckdb")]
    proc = subprocess.run(cmd, capture_output=True, text=True, timeout=120)
    assert proc.returncode == 2
    assert proc.stderr.startswith(
        f"error: retrieval server http://127.0.0.1:{port}/health failed after 4 attempt(s)"
    )
    assert len(proc.stderr.splitlines()) == 1
    assert not (tmp_path / "r.duckdb").exists()


# -- acceptance: harness run through harness serve-retriever == in-process ----------------------------


def _rows(db: Path) -> list[tuple]:
    with duckdb.connect(str(db), read_only=True) as con:
        return con.execute(
            """SELECT r.method, s.dataset, s.sample_id, s.prediction, s.n_retrievals, s.retrieved_ids,
                      t.turn_index, t.kind, t.query, t.doc_ids, t.doc_scores
               FROM samples s JOIN runs r USING (run_id) LEFT JOIN turns t USING (run_id, dataset, sample_id)
               ORDER BY ALL"""
        ).fetchall()


def _protocols(db: Path) -> set[tuple[str, str]]:
    with duckdb.connect(str(db), read_only=True) as con:
        return set(con.execute("SELECT DISTINCT protocol_id, protocol_json FROM runs").fetchall())


@pytest.mark.slow  # ~2.5 min here: a bm25s index build and two `harness run` processes with a model
def test_run_through_serve_retriever_equals_in_process(tiny_dir: Path, tmp_path: Path):
    """The packaged closed corpus, bm25s, naive_rag (it retrieves for every question) with the tiny
    random Llama, 1 question per mini-multihop dataset. The server and the
    in-process run share only the built index (copied); the remote run's cache starts empty, so
    every search it makes goes to the server."""
    server_cache, local_cache, remote_cache = (tmp_path / n for n in ("server", "local", "remote"))
    base_env = {**os.environ, "OMP_NUM_THREADS": "1"}
    cmd = [sys.executable, "-m", "harness", "serve-retriever", "--port", "0"]
    server = subprocess.Popen(
        cmd,
        env={**base_env, "RAR_HARNESS_CACHE": str(server_cache)},
        stdout=subprocess.PIPE,
        stderr=subprocess.DEVNULL,
        text=True,
    )
    try:
        assert server.stdout is not None
        line = server.stdout.readline()
        assert " on http://127.0.0.1:" in line, line
        url = line.split(" on ", 1)[1].split()[0] + "/retrieve"
        local_cache.mkdir()
        for sub in ("indexes", "corpora"):  # the index the server built, without its result cache
            shutil.copytree(server_cache / sub, local_cache / sub)

        def run(db: Path, cache: Path, *extra: str) -> subprocess.CompletedProcess:
            args = [sys.executable, "-m", "harness", "run", "--method", "naive_rag"]
            args += ["--bench", "mini-multihop", "--limit", "1", "--model", str(tiny_dir)]
            args += ["--db", str(db), "--batch-size", "6", "--no-progress", *extra]
            proc = subprocess.run(
                args,
                env={**base_env, "RAR_HARNESS_CACHE": str(cache)},
                capture_output=True,
                text=True,
                timeout=600,
            )
            assert proc.returncode == 0, proc.stderr[-2000:]
            return proc

        remote = run(tmp_path / "remote.duckdb", remote_cache, "--retriever-url", url)
        run(tmp_path / "local.duckdb", local_cache)
    finally:
        server.terminate()
        server.wait(timeout=30)
    assert not (remote_cache / "indexes").exists()  # the remote run built nothing: it asked the server
    assert (
        "retrieval: remote http://127.0.0.1:" in remote.stderr
        and "described by the server: bm25s" in remote.stderr
    )
    rows = _rows(tmp_path / "remote.duckdb")
    assert len(rows) >= 3 and any(r[7] == "retrieve" for r in rows)
    assert rows == _rows(tmp_path / "local.duckdb")  # predictions, queries, doc ids and scores
    [(remote_id, remote_json)] = _protocols(tmp_path / "remote.duckdb")
    [(local_id, local_json)] = _protocols(tmp_path / "local.duckdb")
    assert (
        remote_id.endswith("-remote")
        and local_id == mini().with_(selection={"mode": "first", "n": 1}).protocol_id
    )
    recorded = Protocol.model_validate_json(remote_json)
    assert recorded.remote.described_by == "server"
    assert recorded.with_(remote=None) == Protocol.model_validate_json(local_json)


@pytest.mark.slow  # ~1 min here: prepares the closed corpus and builds its bm25s index
def test_eval_retrieval_through_a_server_equals_in_process(tmp_path, capsys):
    """`eval-retrieval --retrievers bm25s --retriever-url URL`: the server (bm25s over the closed
    corpus) and the in-process bm25s give the same recall, stored with the server's corpus."""
    from harness.cli import main
    from harness.results.store import Store
    from harness.retrieval.factory import make_retriever

    local = make_retriever("bm25s")
    s = Served(local)
    try:
        db = tmp_path / "r.duckdb"
        args = ["eval-retrieval", "--k", "1,5", "--limit", "5", "--db", str(db)]
        assert main([*args, "--retrievers", "bm25s", "--retriever-url", s.url + "/retrieve"]) == 0
    finally:
        s.stop()
    assert "remote: http://127.0.0.1:" in capsys.readouterr().out
    rows = Store(db).query(
        "SELECT retriever, dataset, k, recall, n, corpus_id, corpus_hash, retriever_spec FROM retrieval_evals"
    )
    by = {
        r: g.drop(columns="retriever").sort_values(["dataset", "k"]).reset_index(drop=True)
        for r, g in rows.groupby("retriever")
    }
    assert set(by) == {"bm25s", "remote"} and len(by["remote"]) == 6
    assert by["remote"].equals(by["bm25s"])
    assert set(by["remote"]["corpus_hash"]) == {local.corpus_spec.content_hash}


def test_train_and_eval_retrieval_check_the_server_before_any_work(served, tmp_path, capsys):
    """`harness train --retriever-url` pins the server's description before a row or checkpoint is
    written: a server with another corpus than the protocol's is one error line."""
    from harness.cli import main

    db, out = tmp_path / "t.duckdb", tmp_path / "run"
    args = ["train", "--method", "search_r1", "--recipe", "cpu-smoke", "--db", str(db), "--out", str(out)]
    assert main([*args, "--retriever-url", served.url + "/retrieve"]) == 2
    err = capsys.readouterr().err
    assert (
        err.startswith(f"error: retrieval server {served.url} serves corpus 'tiny'") and err.count("\n") == 1
    )
    assert not db.exists() and not out.exists()
    assert main([*args, "--retriever-declare", "bm25s"]) == 2
    assert capsys.readouterr().err == "error: --retriever-declare needs --retriever-url\n"
