"""Selections and benches."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from pydantic import ValidationError

from harness.data.benches import Bench, BenchEntry, Selection, get_bench, list_benches, load_bench
from harness.data.datasets import load_dataset
from harness.errors import ConfigError
from harness.plugins import manifests
from harness.types import QAExample


def toy(n: int) -> list[QAExample]:
    return [
        QAExample(id=f"q{i}", dataset="nq", split="test", question=f"q{i}?", answers=("a",)) for i in range(n)
    ]


def test_full_and_first() -> None:
    exs = toy(10)
    assert Selection().apply(exs) == exs
    assert [e.id for e in Selection(mode="first", n=3).apply(exs)] == ["q0", "q1", "q2"]
    assert Selection(mode="first", n=50).apply(exs) == exs


def test_random_is_seeded_ordered_and_nested() -> None:
    exs = toy(200)
    a = [e.id for e in Selection(mode="random", n=20, seed=7).apply(exs)]
    assert a == [e.id for e in Selection(mode="random", n=20, seed=7).apply(exs)]
    assert len(a) == 20 and len(set(a)) == 20
    assert a == sorted(a, key=lambda i: int(i[1:]))  # original order kept
    assert a != [f"q{i}" for i in range(20)]  # not the first 20
    assert a != [e.id for e in Selection(mode="random", n=20, seed=8).apply(exs)]
    bigger = {e.id for e in Selection(mode="random", n=40, seed=7).apply(exs)}
    assert set(a) <= bigger
    # the draw depends on ids, not on row order
    assert set(a) == {e.id for e in Selection(mode="random", n=20, seed=7).apply(exs[::-1])}


def test_random_pinned_on_packaged_data() -> None:
    ids = [e.id for e in Selection(mode="random", n=3, seed=0).apply(load_dataset("bamboogle"))]
    assert ids == [e.id for e in Selection(mode="random", n=3, seed=0).apply(load_dataset("bamboogle"))]
    assert len(ids) == 3 and ids != ["bamboogle-test-0", "bamboogle-test-1", "bamboogle-test-2"]


def test_selection_validation_and_describe() -> None:
    assert Selection().describe() == "full"
    assert Selection(mode="first", n=100).describe() == "first-100"
    assert Selection(mode="random", n=100, seed=3).describe() == "random-100-seed3"
    with pytest.raises(ValidationError, match="needs n >= 1"):
        Selection(mode="random")
    with pytest.raises(ValidationError, match="takes no n"):
        Selection(n=5)
    with pytest.raises(ValidationError):
        Selection(mode="sample", n=5)
    s = Selection(mode="first", n=2)
    with pytest.raises(ValidationError):
        s.n = 3  # frozen
    assert Selection.model_validate_json(s.model_dump_json()) == s


def test_bench_composition() -> None:
    def layout(name: str) -> list[tuple[str, str, str]]:
        return [(e.dataset, e.split, e.subset) for e in get_bench(name).entries]

    assert layout("singlehop") == [
        ("nq", "test", "all"),
        ("triviaqa", "test", "all"),
        ("popqa", "test", "all"),
    ]
    assert layout("multihop") == [
        ("hotpotqa", "dev", "all"),
        ("2wikimultihopqa", "dev", "all"),
        ("musique", "dev", "all"),
        ("bamboogle", "test", "all"),
    ]
    assert get_bench("all").datasets == get_bench("singlehop").datasets + get_bench("multihop").datasets
    assert layout("mini-singlehop") == [("popqa", "test", "closed")]
    assert layout("mini-multihop") == [
        ("hotpotqa", "dev", "closed"),
        ("2wikimultihopqa", "dev", "closed"),
        ("musique", "dev", "closed"),
    ]
    assert layout("mini") == layout("mini-singlehop") + layout("mini-multihop")
    assert layout("2wiki") == [("2wikimultihopqa", "dev", "all")]
    names = [b.name for b in list_benches()]
    assert names[:7] == [
        "singlehop",
        "multihop",
        "all",
        "mini-singlehop",
        "mini-multihop",
        "mini",
        "r1searcher",
    ]
    # the rest: the engine's own benches exactly, and the benches plugin manifests register (a
    # paper folder adds its training bench without touching this list; the shipped ones must be there)
    from_plugins = {b for m in manifests() for b in m.plugin.benches}
    assert {"searchr1-train", "r1searcher-train", "arena-train"} <= from_plugins
    assert from_plugins <= set(names[7:])
    assert set(names[7:]) - from_plugins == {
        "nq",
        "triviaqa",
        "popqa",
        "hotpotqa",
        "2wikimultihopqa",
        "musique",
        "bamboogle",
        # training bench: train splits, loaded from --data-dir
        "2wikimultihopqa-train",
    }
    assert layout("searchr1-train") == [("nq", "train", "all"), ("hotpotqa", "train", "all")]
    with pytest.raises(ConfigError, match="pass --data-dir for 'train'"):
        load_bench("searchr1-train")
    with pytest.raises(
        ConfigError, match=r"unknown bench 'minimal' \(did you mean mini or mini-multihop\?\); known: "
    ):
        get_bench("minimal")


def test_load_bench_counts() -> None:
    got = {e.describe(): len(x) for e, x in load_bench("mini")}
    assert got == {
        "popqa/test[closed]": 1000,
        "hotpotqa/dev[closed]": 1405,
        "2wikimultihopqa/dev[closed]": 166,
        "musique/dev[closed]": 292,
    }
    for _, exs in load_bench("mini-multihop"):
        assert all(ex.gold_passage_ids for ex in exs)
    got = {e.describe(): len(x) for e, x in load_bench("r1searcher")}
    assert list(got.values()) == [500, 500, 500, 125]
    got = {e.dataset: [x.id for x in xs] for e, xs in load_bench("multihop", Selection(mode="first", n=2))}
    assert got["hotpotqa"] == ["5a8b57f25542995d1e6f1371", "5a8c7595554299585d9e36b6"]
    assert got["musique"] == ["musique-dev-0", "musique-dev-1"]
    assert got["bamboogle"] == ["bamboogle-test-0", "bamboogle-test-1"]


def test_custom_bench_and_unknown_subset() -> None:
    b = Bench(name="x", description="", entries=(BenchEntry(dataset="nq", split="test", subset="closed"),))
    with pytest.raises(ConfigError, match="dataset 'nq' has no subset 'closed'; known: all"):
        load_bench(b)
    with pytest.raises(ValidationError):
        BenchEntry(dataset="nq", split="test", subset="tiny")


def test_subset_on_user_data_needs_the_packaged_ids(tmp_path: Path) -> None:
    (tmp_path / "musique").mkdir()
    (tmp_path / "musique" / "dev.jsonl").write_text(
        json.dumps({"id": "2hop__1", "question": "q", "golden_answers": ["a"]}) + "\n"
    )
    bench = Bench(
        name="m", description="", entries=(BenchEntry(dataset="musique", split="dev", subset="closed"),)
    )
    with pytest.raises(
        ConfigError, match=r"musique/dev\[closed\]: 292 of the subset's 292 ids are not in the loaded data"
    ):
        load_bench(bench, data_dir=tmp_path)
    assert [e.id for _, xs in load_bench("musique", data_dir=tmp_path) for e in xs] == ["2hop__1"]
