"""Issue 45, failure 3 and the error line of failure 7: a credential in a URL is written to no
store or cache and printed in no line.

- ``harness run --retriever-url 'http://u:PASS@HOST/retrieve?token=T'`` against a server without
  ``/health`` (Search-R1's own has none) stored ``remote-http://u:PASS@HOST?token=T`` as the index
  id of the retrieval cache (``$RAR_HARNESS_CACHE/results.sqlite``). Every file under the cache
  directory and the results database (its bytes, and every text of every table) is searched.
- The final ``error: N sample(s) failed ... (first: ...)`` line printed the first failure's reason
  as is: a server that echoes its request target printed ``?api_key=K``.
"""

from __future__ import annotations

import json
import sys
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

import duckdb
import pytest

from harness.cli import main
from tests.reliability.fake_openai import FakeOpenAI
from tests.reliability.helpers import rows, run_args

PASSWORD, TOKEN = "pw-PLANTED-4f1", "tok-PLANTED-9c2"


class SearchR1WithoutHealth:
    """A Search-R1-style ``POST /retrieve`` on 127.0.0.1 with no ``/health`` (404), as upstream's
    ``search_r1/search/retrieval_server.py``: one fixed passage per query, as many as asked."""

    def __init__(self) -> None:
        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def log_message(self, *args: object) -> None:
                pass

            def _send(self, code: int, body: bytes) -> None:
                self.send_response(code)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(body)))
                self.end_headers()
                self.wfile.write(body)

            def do_GET(self) -> None:
                self._send(404, b'{"detail": "Not Found"}')

            def do_POST(self) -> None:
                body = json.loads(self.rfile.read(int(self.headers.get("Content-Length") or 0)))
                doc = {"document": {"contents": '"Paris"\nParis is the capital of France.'}, "score": 1.0}
                result = [[doc] * int(body.get("topk") or 3) for _ in body["queries"]]
                self._send(200, json.dumps({"result": result}).encode())

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.server.daemon_threads = True
        self.thread = threading.Thread(target=self.server.serve_forever, daemon=True)

    def __enter__(self) -> SearchR1WithoutHealth:
        self.thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.server.shutdown()
        self.server.server_close()
        self.thread.join(timeout=5)

    @property
    def port(self) -> int:
        return self.server.server_address[1]


def _texts_of(db: Path) -> str:
    """Every value of every table of the DuckDB file, as text (DuckDB may compress strings on disk,
    so its bytes alone prove nothing)."""
    out = []
    with duckdb.connect(str(db), read_only=True) as con:
        for (table,) in con.execute("SELECT table_name FROM duckdb_tables()").fetchall():
            out.append(str(con.execute(f'SELECT * FROM "{table}"').fetchall()))
    return "\n".join(out)


@pytest.mark.integration
def test_a_retriever_url_credential_is_in_no_file_of_the_cache_or_the_results(
    tok_dir, tmp_path, capsys, monkeypatch
):
    cache, db = tmp_path / "cache", tmp_path / "results" / "r.duckdb"
    monkeypatch.setenv("RAR_HARNESS_CACHE", str(cache))
    with SearchR1WithoutHealth() as retriever, FakeOpenAI() as llm:
        url = f"http://u:{PASSWORD}@127.0.0.1:{retriever.port}/retrieve?token={TOKEN}"
        base = llm.url.replace("http://", f"http://me:{PASSWORD}@") + f"?api_key={TOKEN}"
        argv = run_args(base, tok_dir, db, "--retriever-url", url)
        argv[argv.index("direct")] = "naive_rag"
        monkeypatch.setattr(sys, "argv", ["harness", *argv])
        assert main(argv) == 0, capsys.readouterr().err
    out = capsys.readouterr()
    assert PASSWORD not in out.out + out.err and TOKEN not in out.out + out.err
    files = [p for p in [*cache.rglob("*"), *db.parent.rglob("*")] if p.is_file()]
    assert any(p.name == "results.sqlite" for p in files), files  # the retrieval cache was written
    for p in files:
        data = p.read_bytes()
        assert PASSWORD.encode() not in data and TOKEN.encode() not in data, p
    texts = _texts_of(db)
    assert "127.0.0.1" in texts  # the stored records do name the server, redacted
    assert PASSWORD not in texts and TOKEN not in texts


@pytest.mark.integration
def test_the_final_error_line_is_redacted(tok_dir, tmp_path, capsys):
    db = tmp_path / "r.duckdb"
    with FakeOpenAI(fault="500_echo") as srv:
        assert main(run_args(srv.url + "?api_key=sk-ECHOED", tok_dir, db)) == 1
    err = capsys.readouterr().err
    (line,) = [x for x in err.splitlines() if "sample(s) failed" in x]
    assert "serving /v1/completions?api_key=***" in line, line
    assert "sk-ECHOED" not in err
    assert "sk-ECHOED" not in str(rows(db, "SELECT error FROM samples"))
