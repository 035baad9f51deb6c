"""Issue 33, item 5: a credential written into any part of a URL (userinfo, any query parameter,
a path parameter) is never printed, stored or sent to the wrong place.

- A base URL with a query (``/v1?api_key=K``) is extended by parsing: the requests go to
  ``/v1/completions?api_key=K``, never ``/v1/?api_key=Kcompletions``.
- ``?code=``, ``?bearer=`` and ``/v1;KEY`` reach neither ``runs.command`` nor ``samples.error``
  nor stderr.
- A retriever URL's credentials are in no message, and ``/health`` goes before its query.
"""

from __future__ import annotations

import sys

import pytest

from harness.cli import main
from harness.errors import ServerError
from tests.reliability.fake_openai import FakeOpenAI
from tests.reliability.helpers import TOTAL, rows, run_args


@pytest.mark.integration
def test_a_base_url_with_a_query_keeps_it_after_the_path(tok_dir, tmp_path, capsys):
    db = tmp_path / "r.duckdb"
    with FakeOpenAI() as srv:
        url = srv.url.replace("http://", "http://me:sk-SECRET1@") + "?api_key=sk-SECRET2"
        assert main(run_args(url, tok_dir, db)) == 0, capsys.readouterr().err
        posts = [p for p in srv.paths if "completions" in p]
    assert len(posts) == TOTAL
    assert set(posts) == {"/v1/completions?api_key=sk-SECRET2"}
    assert "/v1/models?api_key=sk-SECRET2" in srv.paths
    out = capsys.readouterr()
    assert "sk-SECRET" not in out.out + out.err
    assert "sk-SECRET" not in str(rows(db, "SELECT command FROM runs"))


@pytest.mark.integration
@pytest.mark.parametrize(
    "tail",
    ["?code=sk-SECRET", "?bearer=sk-SECRET", ";sk-SECRET", ";key=sk-SECRET?x=sk-SECRET"],
)
def test_any_url_credential_is_never_stored_or_printed(tail, tok_dir, tmp_path, capsys, monkeypatch):
    db = tmp_path / "r.duckdb"
    with FakeOpenAI(fault="500", fault_when="Question") as srv:
        argv = run_args(srv.url + tail, tok_dir, db)
        monkeypatch.setattr(sys, "argv", ["harness", *argv])  # what runs.command records
        assert main(argv) == 1  # every sample fails: reasons name the URL
    out = capsys.readouterr()
    assert "sk-SECRET" not in out.out + out.err
    [(command,)] = rows(db, "SELECT command FROM runs")
    errors = rows(db, "SELECT error FROM samples WHERE extraction_status = 'error'")
    assert len(errors) == TOTAL
    assert "sk-SECRET" not in command + str(errors)
    assert "***" in command and "***" in errors[0][0]


@pytest.mark.integration
def test_a_retriever_url_is_redacted_and_extended_by_parsing(capsys):
    from harness.retrieval.client import RetrievalClient

    with FakeOpenAI(fault="500") as srv:  # answers GET /health with 404 (a server without /health)
        base = srv.url.removesuffix("/v1").replace("http://", "http://u:sk-SECRET1@")
        client = RetrievalClient(base + "/retrieve?token=sk-SECRET2", retries=0)
        assert client.info() == {}
        assert srv.paths == ["/health?token=sk-SECRET2"]
        assert "sk-SECRET" not in repr(client) + client.shown_url
    dead = RetrievalClient(base + "/retrieve?token=sk-SECRET2", retries=0, connect_timeout=0.5)
    with pytest.raises(ServerError) as e:
        dead.info()
    assert "sk-SECRET" not in str(e.value)
    assert "/health?token=***" in str(e.value)


def test_an_error_line_never_shows_a_url_credential(tmp_path, capsys):
    """A retriever URL that cannot be reached: the one error line shows it redacted."""
    db = tmp_path / "r.duckdb"
    url = "http://u:sk-SECRET1@127.0.0.1:9/retrieve?token=sk-SECRET2"
    argv = ["eval-retrieval", "--bench", "mini-multihop", "--limit", "1", "--retriever-url", url]
    code = main([*argv, "--db", str(db)])
    err = capsys.readouterr().err
    assert code != 0
    assert "sk-SECRET" not in err and "Traceback" not in err
    assert "u:***@127.0.0.1:9" in err
