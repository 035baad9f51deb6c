"""The retrieval commands: harness index, retrieve, eval-retrieval (serve-retriever's app is
tested in test_server.py)."""

from __future__ import annotations

import json

import pytest

from harness.cli import main


def test_index_then_check(tiny_path, capsys):
    assert main(["index", "--corpus", str(tiny_path)]) == 0
    out = capsys.readouterr().out
    assert "bm25s index bm25s-" in out and "tiny: 5 passages" in out
    assert main(["index", "--corpus", str(tiny_path), "--check"]) == 0


def test_check_without_index_is_an_error(tiny_path, capsys):
    assert main(["index", "--corpus", str(tiny_path), "--check"]) == 2
    assert "error: no bm25s index at" in capsys.readouterr().err


def test_retrieve_json_and_errors(tiny_path, capsys):
    assert (
        main(["retrieve", "capital of France", "mice", "--corpus", str(tiny_path), "--k", "2", "--json"]) == 0
    )
    lines = [json.loads(x) for x in capsys.readouterr().out.splitlines()]
    assert [(x["query"], [h["id"] for h in x["hits"]]) for x in lines] == [
        ("capital of France", ["d5", "d1"]),
        ("mice", ["d3"]),
    ]
    assert lines[1]["hits"][0]["title"] == "Cat"
    assert main(["retrieve", "  ", "--corpus", str(tiny_path)]) == 2
    assert "error: empty search query at position(s) 0" in capsys.readouterr().err
    assert main(["retrieve", "x", "--corpus", str(tiny_path), "--retriever", "bm26"]) == 2
    assert "unknown retriever 'bm26'" in capsys.readouterr().err


def test_retrieve_table(tiny_path, capsys):
    assert main(["retrieve", "berlin", "--corpus", str(tiny_path), "--k", "1"]) == 0
    out = capsys.readouterr().out
    assert "d2" in out and "Berlin is the capital of Germany." in out


def test_eval_retrieval_prints_and_stores_recall(tmp_path, capsys):
    from harness.data.benches import Selection, load_bench
    from harness.metrics.retrieval import retrieval_recall_at_k
    from harness.results.store import Store
    from harness.retrieval.factory import make_retriever

    db = tmp_path / "r.duckdb"
    code = main(["eval-retrieval", "--bench", "mini-multihop", "--k", "1,3", "--limit", "4", "--db", str(db)])
    assert code == 0
    out = capsys.readouterr().out
    assert "hotpotqa" in out and "musique" in out and "all (micro)" in out
    rows = Store(db).query(
        "SELECT bench, dataset, retriever, k, recall, n, corpus_id, retriever_spec FROM retrieval_evals "
        "ORDER BY dataset, k"
    )
    assert len(rows) == 6
    assert set(rows["dataset"]) == {"hotpotqa", "2wikimultihopqa", "musique"}
    assert (
        set(rows["n"]) == {4}
        and set(rows["bench"]) == {"mini-multihop"}
        and set(rows["corpus_id"]) == {"closed"}
    )
    assert json.loads(rows["retriever_spec"][0])["kind"] == "bm25s"
    # the stored figure is exactly the mean of retrieval_recall_at_k over the questions
    (_, examples), *_ = [
        x for x in load_bench("mini-multihop", Selection(mode="first", n=4)) if x[0].dataset == "hotpotqa"
    ]
    r = make_retriever("bm25s")
    ranked = r.search([ex.question for ex in examples], 3)
    expected = sum(
        retrieval_recall_at_k([h.doc_id for h in hits], ex.gold_passage_ids, 3)
        for hits, ex in zip(ranked, examples, strict=True)
    ) / len(examples)
    stored = rows[(rows["dataset"] == "hotpotqa") & (rows["k"] == 3)]["recall"].iloc[0]
    assert stored == pytest.approx(expected)


def test_eval_retrieval_rejects_bad_options(capsys):
    assert main(["eval-retrieval", "--k", "0,3", "--no-store"]) == 2
    assert "--k values must be >= 1" in capsys.readouterr().err
    assert main(["eval-retrieval", "--retrievers", "bm25s,nope", "--no-store"]) == 2
    assert "unknown retriever 'nope'" in capsys.readouterr().err
