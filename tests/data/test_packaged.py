"""The packaged data: counts, validity, gold passages in the closed corpus, manifest hashes."""

from __future__ import annotations

import gzip
import hashlib
import json
import sys
from pathlib import Path

import pytest

from harness.data import packaged
from harness.data.datasets import DATASETS, get_dataset_info, load_dataset
from harness.types import split_contents

PACKAGED_ROWS = {
    "nq": 3610,
    "triviaqa": 11313,
    "popqa": 2140,
    "hotpotqa": 7405,
    "2wikimultihopqa": 12576,
    "musique": 2417,
    "bamboogle": 125,
}
CLOSED = {"popqa": 1000, "hotpotqa": 1405, "2wikimultihopqa": 166, "musique": 292}
CORPUS_PASSAGES = 27633


@pytest.fixture(scope="module")
def corpus_ids() -> set[str]:
    return {pid for pid, _ in packaged.iter_closed_corpus()}


@pytest.mark.parametrize("name", list(PACKAGED_ROWS))
def test_packaged_dataset_is_valid(name: str, corpus_ids: set[str]) -> None:
    info = get_dataset_info(name)
    examples = load_dataset(name)
    assert len(examples) == PACKAGED_ROWS[name] == packaged.manifest().dataset_file(name).rows
    assert len({ex.id for ex in examples}) == len(examples)
    for ex in examples:
        assert ex.dataset == name and ex.split == info.split
        assert ex.question.strip() == ex.question and ex.question
        assert ex.answers and all(a.strip() == a and a for a in ex.answers)
        assert len(set(ex.answers)) == len(ex.answers)
        for e in ex.supporting or ():
            assert e.title and e.text
            assert e.passage_id in corpus_ids
    closed = [ex.id for ex in examples if ex.supporting and all(e.passage_id for e in ex.supporting)]
    assert len(closed) == CLOSED.get(name, 0) == info.closed_count


def test_full_splits_match_the_canonical_sizes() -> None:
    for info in DATASETS:
        if info.name != "popqa":
            assert info.packaged_count == info.canonical_size
    assert get_dataset_info("popqa").canonical_size == 14267


def test_known_rows() -> None:
    hp = load_dataset("hotpotqa")[0]
    assert hp.id == "5a8b57f25542995d1e6f1371"
    assert hp.question == "Were Scott Derrickson and Ed Wood of the same nationality?"
    assert hp.answers == ("yes",)
    assert hp.hops == 2
    assert [e.title for e in hp.supporting] == ["Scott Derrickson", "Ed Wood"]
    nq = load_dataset("nq")[0]
    assert (nq.id, nq.question, nq.answers) == (
        "nq-test-0",
        "who got the first nobel prize in physics",
        ("Wilhelm Conrad Röntgen",),
    )
    assert load_dataset("bamboogle")[0].answers == ("james madison",)
    mu = {ex.id: ex for ex in load_dataset("musique")}["3hop1__654651_55349_651302"]
    assert mu.hops == 3 and mu.qtype == "3hop1"
    assert mu.answers == ("Denver", "Denver, Colorado")
    assert [e.hop for e in mu.supporting] == [0, 1, 2]
    assert [e.title for e in mu.supporting] == [
        "Insecurity (South Park)",
        "List of South Park cast members",
        "Dian Bachar",
    ]
    pq = load_dataset("popqa")[0]
    assert pq.id == "4222362" and pq.qtype == "occupation" and pq.meta["s_pop"] == 142
    assert pq.answers[:2] == ("politician", "political leader")
    tq = load_dataset("triviaqa")
    assert sum(len(ex.answers) for ex in tq) / len(tq) > 10  # aliases kept


def test_closed_corpus_format_and_size(corpus_ids: set[str]) -> None:
    rows = list(packaged.iter_closed_corpus())
    assert (
        len(rows)
        == len(corpus_ids)
        == CORPUS_PASSAGES
        == packaged.manifest().file("corpus/closed.jsonl.gz").rows
    )
    assert rows[0][0] == "closed-000001" and rows[-1][0] == f"closed-{CORPUS_PASSAGES:06d}"
    keys = set()
    for _, contents in rows:
        assert contents.startswith('"') and '"\n' in contents
        title, text = split_contents(contents)
        assert title and text and " ".join(text.split()) == text
        keys.add((title, text))
    assert len(keys) == len(rows)  # de-duplicated on (title, normalised text)
    parts = packaged.manifest().file("corpus/closed.jsonl.gz").parts
    assert sum(p.passages for p in parts) == CORPUS_PASSAGES
    assert [p.passages for p in parts] == [13624, 4533, 1304, 5697, 1475, 1000]


def test_closed_corpus_info_matches_the_retrieval_content_hash() -> None:
    from harness.retrieval.corpus import row_bytes

    sha = hashlib.sha256()
    for pid, contents in packaged.iter_closed_corpus():
        sha.update(row_bytes(pid, contents))
    info = packaged.closed_corpus_info()
    assert (info.id, info.content_hash, info.n_passages) == ("closed", sha.hexdigest(), CORPUS_PASSAGES)


def test_gold_map_agrees_with_the_datasets() -> None:
    gm = packaged.gold_map()
    expected = {
        (name, ex.id): tuple(ex.gold_passage_ids)
        for name in CLOSED
        for ex in load_dataset(name)
        if ex.gold_passage_ids
    }
    assert gm == expected
    assert len(gm) == sum(CLOSED.values())


def test_subsets() -> None:
    got = {(s.dataset, s.name): len(s.ids) for s in packaged.subsets()}
    assert got == {
        ("popqa", "closed"): 1000,
        ("popqa", "longtail"): 1399,
        ("hotpotqa", "closed"): 1405,
        ("hotpotqa", "r1searcher500"): 500,
        ("2wikimultihopqa", "closed"): 166,
        ("2wikimultihopqa", "r1searcher500"): 500,
        ("musique", "closed"): 292,
        ("musique", "r1searcher500"): 500,
    }
    for s in packaged.subsets():
        ids = [ex.id for ex in load_dataset(s.dataset)]
        pos = {i: n for n, i in enumerate(ids)}
        assert all(i in pos for i in s.ids)
        assert [pos[i] for i in s.ids] == sorted(pos[i] for i in s.ids)  # dataset order
    r1 = packaged.get_subset("hotpotqa", "r1searcher500")
    first = {ex.id: ex for ex in load_dataset("hotpotqa")}
    assert any(first[i].question.startswith("In the 1973 NFL season, the Pro Bowl") for i in r1.ids)


def test_manifest_hashes_match_the_files() -> None:
    root = packaged.packaged_dir()
    for f in packaged.manifest().files:
        path = root / f.path
        data = gzip.decompress(path.read_bytes()) if f.path.endswith(".gz") else path.read_bytes()
        assert hashlib.sha256(data).hexdigest() == f.sha256, f.path
        if f.path.endswith(".jsonl.gz"):
            assert data.count(b"\n") == f.rows


def test_packaged_folder_is_compact() -> None:
    total = sum(p.stat().st_size for p in packaged.packaged_dir().rglob("*") if p.is_file())
    assert total < 25 * 2**20


def test_load_dataset_returns_a_fresh_list() -> None:
    a = load_dataset("bamboogle")
    a.clear()
    assert len(load_dataset("bamboogle")) == 125


def test_load_packaged_triviaqa(benchmark) -> None:
    def load() -> int:
        packaged._packaged_examples.cache_clear()
        return len(load_dataset("triviaqa"))

    assert benchmark(load) == 11313


@pytest.mark.slow
def test_build_is_deterministic_and_up_to_date(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Rebuilding from the raw sources gives byte-identical files (needs ../shared/data/raw)."""
    import importlib.util

    root = Path(__file__).resolve().parents[2]
    spec = importlib.util.spec_from_file_location("build_data", root / "scripts" / "build_data.py")
    mod = importlib.util.module_from_spec(spec)
    monkeypatch.setitem(sys.modules, "build_data", mod)
    spec.loader.exec_module(mod)
    if not mod.DEFAULT_RAW.is_dir():
        pytest.skip(f"raw sources not here: {mod.DEFAULT_RAW}")
    assert mod.main(["--out", str(tmp_path)]) == 0
    ours = json.loads((packaged.packaged_dir() / "manifest.json").read_text())
    assert json.loads((tmp_path / "manifest.json").read_text()) == ours
    for name in ours["files"]:
        assert (tmp_path / name).read_bytes() == (packaged.packaged_dir() / name).read_bytes(), name
