"""``harness serve-retriever`` against what Search-R1's client sends and what its server answers.

Upstream facts, pinned at ``PeterGriffinJin/Search-R1@a14dc3a4ffc6fe88c1e95038d9738e21ba3f7a06``:

- the client, ``search_r1/llm_agent/generation.py`` (``LLMGenerationManager._batch_search``):
  ``requests.post(search_url, json={"queries": queries, "topk": self.config.topk,
  "return_scores": True}).json()`` and then ``['result']``; ``queries`` holds the stripped text
  between ``<search>`` and ``</search>`` of every rollout that searched this turn, so it is ``[]``
  on a turn where none did and ``""`` for ``<search> </search>`` (``postprocess_predictions``:
  ``match.group(2).strip()``). ``_passages2string`` reads ``doc_item['document']['contents']``.
- the server, ``search_r1/search/retrieval_server.py``: ``QueryRequest(queries: List[str],
  topk: Optional[int] = None, return_scores: bool = False)`` (pydantic's lax types);
  ``if not request.topk: request.topk = config.retrieval_topk``; the reply is
  ``{"result": [[{"document": doc, "score": score}, ...], ...]}`` (``return_scores``) or
  ``{"result": [[doc, ...], ...]}``, rendered by FastAPI; a Lucene index with stored raw documents
  gives ``doc = {"title": contents.split("\\n")[0].strip('"'), "text": "\\n".join(rest),
  "contents": contents}``, one without gives the corpus row (wiki-18: ``{"id", "contents"}``).
"""

from __future__ import annotations

import json

import pytest
import requests

from harness.retrieval.bm25 import Bm25sRetriever
from harness.retrieval.corpus import open_corpus
from harness.retrieval.server import ServerLimits
from tests.retrieval.helpers import TINY, write_jsonl
from tests.retrieval.test_server import Served

pytestmark = pytest.mark.integration

SEARCHR1 = "PeterGriffinJin/Search-R1@a14dc3a4ffc6fe88c1e95038d9738e21ba3f7a06"
CORPUS = [
    *TINY,
    {"id": "d6", "contents": '"Zürich"\nZürich is the largest city in Switzerland.\nIt has a lake.'},
]


@pytest.fixture
def served(tmp_path):
    corpus = open_corpus(write_jsonl(tmp_path / "c.jsonl", CORPUS))
    s = Served(Bm25sRetriever(corpus), default_topk=2, limits=ServerLimits(max_topk=50))
    yield s
    s.stop()
    corpus.close()


def searchr1_client_turn(url: str, queries: list[str], topk: int = 3) -> list[str]:
    """What upstream's ``batch_search`` does with one turn's queries (its payload, its parsing)."""
    payload = {"queries": queries, "topk": topk, "return_scores": True}
    results = requests.post(url, json=payload, timeout=30).json()["result"]
    out = []
    for result in results:
        ref = ""
        for idx, doc_item in enumerate(result):
            content = doc_item["document"]["contents"]
            title, text = content.split("\n")[0], "\n".join(content.split("\n")[1:])
            ref += f"Doc {idx + 1}(Title: {title}) {text}\n"
        out.append(ref)
    return out


def test_searchr1_client_survives_a_turn_without_searches_and_a_blank_search(served):
    url = served.url + "/retrieve"
    assert searchr1_client_turn(url, []) == []
    got = searchr1_client_turn(url, ["capital of France", "", "cats and mice"])
    assert got[1] == ""  # the blank search: nothing found, the batch still answered
    assert got[0].startswith('Doc 1(Title: "France") France is a country in Europe.')
    assert got[2] == 'Doc 1(Title: "Cat") The cat sat on the mat. Cats chase mice.\n'
    r = requests.post(url, json={"queries": [], "topk": 3, "return_scores": True}, timeout=30)
    assert (r.status_code, r.content) == (200, b'{"result":[]}')
    r = requests.post(url, json={"queries": ["   ", ""], "topk": 3, "return_scores": True}, timeout=30)
    assert (r.status_code, r.json()) == (200, {"result": [[], []]})


@pytest.mark.parametrize(
    ("fields", "n_hits", "scored"),
    [
        ({"topk": 0}, 2, False),  # `if not request.topk`: the server's default (2 here)
        ({"topk": None}, 2, False),
        ({}, 2, False),
        ({"topk": "3"}, 3, False),  # pydantic's lax int
        ({"topk": 3.0}, 3, False),
        ({"topk": 3, "return_scores": "true"}, 3, True),  # pydantic's lax bool
        ({"topk": 3, "return_scores": 1}, 3, True),
        ({"topk": 3, "return_scores": False, "unknown": "ignored"}, 3, False),
    ],
)
def test_loosely_typed_fields_are_read_as_upstream_reads_them(served, fields, n_hits, scored):
    r = requests.post(served.url + "/retrieve", json={"queries": ["capital of France"], **fields}, timeout=30)
    assert r.status_code == 200
    (hits,) = r.json()["result"]
    assert len(hits) == n_hits
    assert all(("score" in h) == scored and ("document" in h) == scored for h in hits)


@pytest.mark.parametrize(
    ("fields", "message"),
    [
        ({"queries": [1]}, "queries.0: Input should be a valid string"),  # List[str]: no int -> str
        ({"queries": "paris"}, "queries: Input should be a valid list"),
        ({"queries": ["paris"], "topk": 2.5}, "topk: Input should be a valid integer"),
        ({"queries": ["paris"], "return_scores": "maybe"}, "return_scores: Input should be a valid boolean"),
        ({"topk": 3}, "queries: Field required"),
    ],
)
def test_what_upstream_rejects_is_still_a_one_line_422(served, fields, message):
    r = requests.post(served.url + "/retrieve", json=fields, timeout=30)
    assert r.status_code == 422
    assert message in r.json()["detail"] and "\n" not in r.json()["detail"]


def upstream_reply(docs_per_query: list[list[dict]], scores: list[list[float]], return_scores: bool) -> bytes:
    """Upstream's response loop and FastAPI's JSONResponse.render, for the same hits."""
    resp = []
    for i, single_result in enumerate(docs_per_query):
        if return_scores:
            resp.append(
                [
                    {"document": doc, "score": score}
                    for doc, score in zip(single_result, scores[i], strict=True)
                ]
            )
        else:
            resp.append(single_result)
    return json.dumps(
        {"result": resp}, ensure_ascii=False, allow_nan=False, indent=None, separators=(",", ":")
    ).encode("utf-8")


def upstream_lucene_doc(content: str) -> dict[str, str]:
    """``BM25Retriever._search`` on an index that stores raw documents."""
    return {
        "title": content.split("\n")[0].strip('"'),
        "text": "\n".join(content.split("\n")[1:]),
        "contents": content,
    }


@pytest.mark.parametrize("return_scores", [True, False])
def test_reply_bytes_are_upstreams_for_the_same_hits(served, return_scores):
    queries = ["largest city in Switzerland", "capital of France"]
    r = requests.post(
        served.url + "/retrieve",
        json={"queries": queries, "topk": 2, "return_scores": return_scores},
        timeout=30,
    )
    ours = r.json()["result"]
    items = [[h["document"] if return_scores else h for h in per_q] for per_q in ours]
    # the same hits, as upstream would serve them from a wiki-18 corpus row ({"id", "contents"}
    # first, in that order) ...
    docs = [[{k: d[k] for k in d} for d in per_q] for per_q in items]
    assert all(list(d)[:2] == ["id", "contents"] for per_q in docs for d in per_q)
    # ... with title and text split from contents exactly as upstream's Lucene branch splits them
    for d in (d for per_q in docs for d in per_q):
        up = upstream_lucene_doc(d["contents"])
        assert (d["title"], d["text"]) == (up["title"], up["text"])
    assert docs[0][0]["title"] == "Zürich" and docs[0][0]["text"].endswith("\nIt has a lake.")
    scores = [[h["score"] for h in per_q] for per_q in ours] if return_scores else [[], []]
    assert r.content == upstream_reply(docs, scores, return_scores)
    assert "Zürich".encode() in r.content  # ensure_ascii=False, as FastAPI renders upstream's reply
