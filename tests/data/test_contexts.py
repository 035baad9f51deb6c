"""Each question's own ordered paragraphs: the packaged contexts file, ``meta["context"]`` on loaded
examples (packaged and the user's files), and the typed accessor."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from harness.data import ContextParagraph, example_context, load_dataset, load_file, packaged
from harness.errors import DataError
from harness.types import QAExample
from tests.data.test_loaders import HOTPOT_HF, HOTPOT_ORIGINAL, MUSIQUE, TWOWIKI, write_jsonl

CONTEXTS = {"hotpotqa": 1405, "2wikimultihopqa": 166, "musique": 292}


def test_contexts_file_counts_and_manifest() -> None:
    cmap = packaged.context_map()
    assert {ds: len(v) for ds, v in cmap.items()} == CONTEXTS
    f = packaged.manifest().file("corpus/contexts.jsonl.gz")
    assert f.rows == sum(CONTEXTS.values()) == 1863
    for ds in CONTEXTS:
        # exactly the questions whose gold passages are in the closed corpus
        assert set(cmap[ds]) == set(packaged.get_subset(ds, "closed").ids)
    sizes = {ds: sorted({len(ids) for ids in v.values()}) for ds, v in cmap.items()}
    assert sizes == {"hotpotqa": [2, 5, 6, 8, 9, 10], "2wikimultihopqa": [10], "musique": [20]}


@pytest.mark.parametrize("dataset", list(CONTEXTS))
def test_packaged_examples_carry_their_context_in_order(dataset: str) -> None:
    cmap = packaged.context_map()[dataset]
    corpus = packaged.context_paragraphs()
    with_ctx = 0
    for ex in load_dataset(dataset):
        ctx = example_context(ex)
        if ex.id not in cmap:
            assert ctx is None and "context" not in ex.meta
            continue
        with_ctx += 1
        assert ctx is not None and tuple(p.passage_id for p in ctx) == cmap[ex.id]
        assert all(p == corpus[p.passage_id] for p in ctx)
        assert set(ex.gold_passage_ids) <= {p.passage_id for p in ctx}  # gold is among the references
    assert with_ctx == CONTEXTS[dataset]


def test_known_contexts() -> None:
    hp = load_dataset("hotpotqa")[0]  # "Were Scott Derrickson and Ed Wood of the same nationality?"
    ctx = example_context(hp)
    assert [p.title for p in ctx] == [
        "Ed Wood (film)",
        "Scott Derrickson",
        "Woodson, Arkansas",
        "Tyler Bates",
        "Ed Wood",
        "Deliver Us from Evil (2014 film)",
        "Adam Collis",
        "Sinister (film)",
        "Conrad Brooks",
        "Doctor Strange (2016 film)",
    ]
    assert [p.passage_id for p in ctx] == [f"closed-{i:06d}" for i in range(1, 11)]
    assert ctx[1].text.startswith("Scott Derrickson (born July 16, 1966) is an American director")
    mu = {ex.id: ex for ex in load_dataset("musique")}["3hop1__654651_55349_651302"]
    ids = [p.passage_id for p in example_context(mu)]
    assert len(ids) == 20
    # the gold paragraphs (hop order) sit where MuSiQue put them
    assert [ids.index(e.passage_id) for e in mu.supporting] == [11, 2, 1]


def test_repeated_paragraphs_are_kept_as_the_dataset_has_them() -> None:
    cmap = packaged.context_map()["2wikimultihopqa"]
    repeats = [qid for qid, ids in cmap.items() if len(set(ids)) < len(ids)]
    assert len(repeats) == 6
    ex = {e.id: e for e in load_dataset("2wikimultihopqa")}[repeats[0]]
    assert len(example_context(ex)) == 10


def test_other_datasets_have_no_context() -> None:
    for name in ("popqa", "nq", "bamboogle"):
        assert not any("context" in ex.meta for ex in load_dataset(name))


def test_context_is_plain_json_and_not_in_the_dataset_rows() -> None:
    hp = load_dataset("hotpotqa")[0]
    d = hp.to_dict()
    assert json.loads(json.dumps(d))["meta"]["context"][0] == {
        "title": "Ed Wood (film)",
        "text": example_context(hp)[0].text,
        "passage_id": "closed-000001",
    }
    # the packaged dataset file itself has no context (the contexts file holds it)
    _, row = next(packaged.iter_gz_jsonl(packaged.dataset_path("hotpotqa")))
    assert "meta" not in row or "context" not in row["meta"]


@pytest.mark.parametrize("row", [HOTPOT_ORIGINAL, HOTPOT_HF], ids=["original", "hf"])
def test_load_file_keeps_hotpotqa_context(tmp_path: Path, row: dict) -> None:
    p = tmp_path / "hotpot_dev_distractor_v1.json"
    p.write_text(json.dumps([row]))
    (ex,) = load_file(p, "hotpotqa", "dev")
    assert example_context(ex) == (
        ContextParagraph("Ed Wood (film)", "Ed Wood is a 1994 film. It stars Johnny Depp."),
        ContextParagraph(
            "Scott Derrickson", "Scott Derrickson (born 1966) is an American director. He lives in LA."
        ),
        ContextParagraph("Ed Wood", "Edward Davis Wood Jr. was an American filmmaker."),
    )
    assert ex.meta["level"] == "hard"  # the row's other meta is kept


def test_load_file_keeps_2wiki_and_musique_context(tmp_path: Path) -> None:
    p = tmp_path / "dev.json"
    p.write_text(json.dumps([TWOWIKI]))
    (tw,) = load_file(p, "2wikimultihopqa", "dev")
    assert [c.title for c in example_context(tw)] == ["Silas Hardy", "Lee Mantle"]
    (mu,) = load_file(write_jsonl(tmp_path / "m.jsonl", [MUSIQUE]), "musique", "dev")
    assert [(c.title, c.text) for c in example_context(mu)] == [
        ("Other", "Noise."),
        ("Miquette Giraudy", "She married Steve Hillage."),
        ("Green (album)", "Green is by Steve Hillage."),
    ]


def test_popqa_gold_paragraphs_are_not_a_reader_context(tmp_path: Path) -> None:
    row = {
        "id": "1",
        "question": "What is X's occupation?",
        "possible_answers": '["poet"]',
        "paragraphs": [{"title": "X", "text": "X was a poet.", "is_supporting": True}],
    }
    (ex,) = load_file(write_jsonl(tmp_path / "p.jsonl", [row]), "popqa", "test")
    assert ex.supporting and example_context(ex) is None


def test_malformed_context_names_the_question() -> None:
    ex = QAExample("q1", "hotpotqa", "dev", "q", ("a",), meta={"context": [{"title": "T"}]})
    with pytest.raises(DataError, match=r"hotpotqa:q1: meta\['context'\]: paragraph 0"):
        example_context(ex)


def test_load_packaged_hotpotqa_with_contexts(benchmark) -> None:
    def load() -> int:
        packaged._packaged_examples.cache_clear()
        packaged.context_paragraphs.cache_clear()
        packaged.context_map.cache_clear()
        return sum(1 for ex in load_dataset("hotpotqa") if "context" in ex.meta)

    assert benchmark(load) == 1405
