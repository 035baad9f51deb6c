"""Readers for users' formats, on small files written here, including the malformed cases."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from harness.data.datasets import load_dataset, resolve_dataset_file
from harness.data.loaders import iter_records, load_file
from harness.errors import ConfigError, DataError
from harness.types import Evidence


def write_jsonl(path: Path, rows: list[dict]) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text("".join(json.dumps(r) + "\n" for r in rows), encoding="utf-8")
    return path


HOTPOT_ORIGINAL = {
    "_id": "5a8b57f25542995d1e6f1371",
    "question": "Were Scott Derrickson and Ed Wood of the same nationality?",
    "answer": "yes",
    "type": "comparison",
    "level": "hard",
    "supporting_facts": [["Scott Derrickson", 0], ["Ed Wood", 0]],
    "context": [
        ["Ed Wood (film)", ["Ed Wood is a 1994 film.", " It stars Johnny Depp."]],
        ["Scott Derrickson", ["Scott Derrickson (born 1966) is an American director.", " He lives in LA."]],
        ["Ed Wood", ["Edward Davis Wood Jr. was an American filmmaker."]],
    ],
}

HOTPOT_HF = {
    "id": "5a8b57f25542995d1e6f1371",
    "question": HOTPOT_ORIGINAL["question"],
    "answer": "yes",
    "type": "comparison",
    "level": "hard",
    "supporting_facts": {"title": ["Scott Derrickson", "Ed Wood"], "sent_id": [0, 0]},
    "context": {
        "title": [t for t, _ in HOTPOT_ORIGINAL["context"]],
        "sentences": [s for _, s in HOTPOT_ORIGINAL["context"]],
    },
}

MUSIQUE = {
    "id": "2hop__1_2",
    "question": "Who is the spouse of the Green performer?",
    "answer": "Miquette Giraudy",
    "answer_aliases": ["Miquette  Giraudy ", "M. Giraudy"],
    "answerable": True,
    "paragraphs": [
        {"idx": 0, "title": "Other", "paragraph_text": "Noise.", "is_supporting": False},
        {
            "idx": 1,
            "title": "Miquette Giraudy",
            "paragraph_text": "She married Steve Hillage.",
            "is_supporting": True,
        },
        {
            "idx": 2,
            "title": "Green (album)",
            "paragraph_text": "Green is by  Steve Hillage.",
            "is_supporting": True,
        },
    ],
    "question_decomposition": [
        {"id": 1, "question": "Green >> performer", "answer": "Steve Hillage", "paragraph_support_idx": 2},
        {"id": 2, "question": "#1 >> spouse", "answer": "Miquette Giraudy", "paragraph_support_idx": 1},
    ],
}

TWOWIKI = {
    "_id": "0f44750808e411ebbda4ac1f6bf848b6",
    "type": "comparison",
    "question": "Who was born earlier, Silas Hardy or Lee Mantle?",
    "answer": "Lee Mantle",
    "context": [
        [
            "Silas Hardy",
            ["Silas Hardy( 30 April 1867) was an English cricketer.", "He was born in Ilkeston."],
        ],
        ["Lee Mantle", ["Lee Mantle( 1851) was a British politician."]],
    ],
    "supporting_facts": [["Silas Hardy", 0], ["Lee Mantle", 0]],
    "evidences": [["Silas Hardy", "date of birth", "30 April 1867"], ["Lee Mantle", "date of birth", "1851"]],
}


def test_flashrag_jsonl(tmp_path: Path) -> None:
    p = write_jsonl(
        tmp_path / "nq" / "test.jsonl",
        [
            {
                "id": "test_0",
                "question": "who got the first nobel prize in physics",
                "golden_answers": ["Röntgen"],
            },
            {"id": "test_1", "question": "q2", "golden_answers": ["a", " a ", "b"], "metadata": {"x": 1}},
        ],
    )
    exs = load_file(p, "nq", "test")
    assert [(e.id, e.question, e.answers) for e in exs] == [
        ("test_0", "who got the first nobel prize in physics", ("Röntgen",)),
        ("test_1", "q2", ("a", "b")),
    ]
    assert exs[1].meta == {"x": 1} and exs[0].dataset == "nq" and exs[0].split == "test"
    # the same file through the FlashRAG folder layout
    assert resolve_dataset_file("nq", tmp_path) == p
    assert [e.id for e in load_dataset("nq", tmp_path)] == ["test_0", "test_1"]


@pytest.mark.parametrize("row", [HOTPOT_ORIGINAL, HOTPOT_HF], ids=["original", "hf"])
def test_hotpotqa_formats(tmp_path: Path, row: dict) -> None:
    p = tmp_path / "hotpot_dev_distractor_v1.json"
    p.write_text(json.dumps([row]))
    (rec,) = list(iter_records(p, "hotpotqa", "dev"))
    ex = rec.example
    assert ex.id == "5a8b57f25542995d1e6f1371" and ex.answers == ("yes",)
    assert (ex.qtype, ex.hops, ex.meta["level"]) == ("comparison", 2, "hard")
    assert ex.supporting == (
        Evidence("Scott Derrickson", "Scott Derrickson (born 1966) is an American director. He lives in LA."),
        Evidence("Ed Wood", "Edward Davis Wood Jr. was an American filmmaker."),
    )
    assert [p.title for p in rec.context] == ["Ed Wood (film)", "Scott Derrickson", "Ed Wood"]
    assert rec.context[0].text == "Ed Wood is a 1994 film. It stars Johnny Depp."
    assert [p.supporting for p in rec.context] == [False, True, True]
    # the original file name is found under --data-dir
    assert resolve_dataset_file("hotpotqa", tmp_path) == p


def test_2wiki_json(tmp_path: Path) -> None:
    p = tmp_path / "2wikimultihopqa" / "dev.json"
    p.parent.mkdir()
    p.write_text(json.dumps([TWOWIKI]))
    (ex,) = load_dataset("2wiki", tmp_path)
    assert ex.dataset == "2wikimultihopqa" and ex.split == "dev"
    assert (ex.id, ex.qtype, ex.hops, ex.answers) == (TWOWIKI["_id"], "comparison", 2, ("Lee Mantle",))
    assert (
        ex.supporting[0].text
        == "Silas Hardy( 30 April 1867) was an English cricketer. He was born in Ilkeston."
    )
    assert ex.meta["evidences"][1] == ["Lee Mantle", "date of birth", "1851"]


def test_musique_jsonl(tmp_path: Path) -> None:
    write_jsonl(tmp_path / "musique_ans_v1.0_dev.jsonl", [MUSIQUE])
    (ex,) = load_dataset("musique", tmp_path)
    assert ex.answers == ("Miquette Giraudy", "M. Giraudy")
    assert (ex.hops, ex.qtype) == (2, "2hop")
    assert ex.supporting == (
        Evidence("Green (album)", "Green is by Steve Hillage.", hop=0),
        Evidence("Miquette Giraudy", "She married Steve Hillage.", hop=1),
    )


def test_musique_unanswerable_row_is_refused(tmp_path: Path) -> None:
    p = write_jsonl(tmp_path / "m.jsonl", [MUSIQUE, {**MUSIQUE, "id": "2hop__9", "answerable": False}])
    with pytest.raises(DataError) as e:
        load_file(p, "musique", "dev")
    assert str(e.value).startswith(f"{p}:2: unanswerable MuSiQue-Full row")


def test_ircot_jsonl(tmp_path: Path) -> None:
    row = {
        "question_id": "5a8c",
        "question_text": "What position?",
        "answers_objects": [
            {"number": "", "date": {"day": "", "month": "", "year": ""}, "spans": ["Chief of Protocol"]}
        ],
        "contexts": [
            {"id": "0", "title": "A", "paragraph_text": "a  text", "is_supporting": True},
            {"id": "1", "title": "B", "paragraph_text": "b", "is_supporting": False},
        ],
    }
    (rec,) = list(iter_records(write_jsonl(tmp_path / "dev.jsonl", [row]), "hotpotqa", "dev"))
    assert rec.example.answers == ("Chief of Protocol",)
    assert rec.example.supporting == (Evidence("A", "a text"),)
    assert len(rec.context) == 2


def test_popqa_tsv_and_csv(tmp_path: Path) -> None:
    header = ["id", "subj", "prop", "obj", "s_wiki_title", "s_pop", "question", "possible_answers"]
    row = ["4222362", "George Rankin", "occupation", "politician", "George Rankin", "142",
           "What is George Rankin's occupation?", '["politician", "political leader"]']  # fmt: skip
    tsv = tmp_path / "popQA.tsv"
    tsv.write_text("\t".join(header) + "\n" + "\t".join(row) + "\n")
    (ex,) = load_dataset("popqa", tmp_path)
    assert (ex.id, ex.answers, ex.qtype, ex.meta["s_pop"]) == (
        "4222362",
        ("politician", "political leader"),
        "occupation",
        142,
    )
    csv_path = tmp_path / "popqa.csv"
    quoted = ",".join('"' + c.replace('"', '""') + '"' for c in row)
    csv_path.write_text(",".join(header) + "\n" + quoted + "\n")
    assert load_file(csv_path, "popqa", "test") == [ex]


def test_dpr_tsv_with_csv_quoting(tmp_path: Path) -> None:
    p = tmp_path / "trivia-test.qa.csv"
    p.write_text(
        "Who was the man behind The Chipmunks?\t['David Seville']\n"
        '"Which ""Lord"" wrote it?"\t"[\'Byron\', \'Lord Byron\']"\n'
    )
    exs = load_dataset("triviaqa", tmp_path)
    assert [(e.id, e.question, e.answers) for e in exs] == [
        ("triviaqa-test-0", "Who was the man behind The Chipmunks?", ("David Seville",)),
        ("triviaqa-test-1", 'Which "Lord" wrote it?', ("Byron", "Lord Byron")),
    ]


def test_bamboogle_csv_and_json(tmp_path: Path) -> None:
    p = tmp_path / "Bamboogle Prerelease - Sheet1.csv"
    p.write_text('Question,Answer\n"Who was president when Citibank was founded?",James Madison\n')
    (ex,) = load_dataset("bamboogle", tmp_path)
    assert (ex.id, ex.answers) == ("bamboogle-test-0", ("James Madison",))
    j = tmp_path / "b.json"
    j.write_text(json.dumps([{"question": "Q?", "answer": "james madison"}]))
    assert load_file(j, "bamboogle", "test")[0].answers == ("james madison",)


def test_hf_save_to_disk_dataset_dict(tmp_path: Path) -> None:
    import datasets

    datasets.DatasetDict({"validation": datasets.Dataset.from_list([HOTPOT_HF])}).save_to_disk(
        str(tmp_path / "hotpotqa")
    )
    (ex,) = load_dataset("hotpotqa", tmp_path)
    assert ex.id == HOTPOT_HF["id"] and [e.title for e in ex.supporting] == ["Scott Derrickson", "Ed Wood"]
    with pytest.raises(ConfigError, match="none named 'train'"):
        load_dataset("hotpotqa", tmp_path, split="train")


def test_hf_save_to_disk_row_errors_name_the_arrow_file_and_row(tmp_path: Path) -> None:
    import datasets

    rows = [{"question": f"q{i}?", "answer": "a", "question_id": f"x{i}"} for i in range(5)]
    rows[3]["question"] = ""
    folder = tmp_path / "triviaqa" / "test"
    datasets.Dataset.from_list(rows).save_to_disk(str(folder), num_shards=2)
    shards = sorted(folder.glob("*.arrow"))
    assert len(shards) == 2
    with pytest.raises(DataError) as e:
        load_dataset("triviaqa", tmp_path)
    assert shards[1].name in str(e.value) and shards[0].name not in str(e.value)
    assert "row 0: " in str(e.value)  # the 4th row is the first of the second shard (3 + 2 rows)


def test_a_folder_datasets_cannot_open_is_one_error(tmp_path: Path) -> None:
    folder = tmp_path / "nq" / "test"
    folder.mkdir(parents=True)
    (folder / "state.json").write_text("{not json")
    with pytest.raises(DataError, match="datasets cannot load it|not a Hugging Face save_to_disk folder"):
        load_dataset("nq", tmp_path)


def test_hf_datasets_save_to_disk(tmp_path: Path) -> None:
    datasets = pytest.importorskip("datasets")
    datasets.Dataset.from_list(
        [{"question": "who?", "answer": {"value": "Bob", "aliases": ["Robert"]}, "question_id": "tc_1"}]
    ).save_to_disk(str(tmp_path / "triviaqa" / "test"))
    (ex,) = load_dataset("triviaqa", tmp_path)
    assert (ex.id, ex.answers) == ("tc_1", ("Bob", "Robert"))


def test_parquet(tmp_path: Path) -> None:
    import pyarrow as pa
    import pyarrow.parquet as pq

    p = tmp_path / "nq" / "test.parquet"
    p.parent.mkdir()
    pq.write_table(pa.Table.from_pylist([{"id": "0", "question": "q", "golden_answers": ["a"]}]), str(p))
    assert [e.answers for e in load_dataset("nq", tmp_path)] == [("a",)]


def test_round_trip_packaged_rows_through_flashrag_jsonl(tmp_path: Path) -> None:
    for name in ("bamboogle", "musique"):
        ours = load_dataset(name)
        rows = [{"id": e.id, "question": e.question, "golden_answers": list(e.answers)} for e in ours]
        write_jsonl(tmp_path / name / f"{ours[0].split}.jsonl", rows)
        back = load_dataset(name, tmp_path)
        assert [(e.id, e.question, e.answers) for e in back] == [(e.id, e.question, e.answers) for e in ours]


# ---------------------------------------------------------------------------------------------
# malformed input: one clear error naming the file and line


def test_missing_field_names_file_and_line(tmp_path: Path) -> None:
    p = write_jsonl(
        tmp_path / "d.jsonl",
        [{"id": "1", "question": "q", "golden_answers": ["a"]}, {"id": "2", "golden_answers": ["a"]}],
    )
    with pytest.raises(DataError) as e:
        load_file(p, "nq", "test")
    assert str(e.value) == f"{p}:2: missing field 'question'"
    assert (e.value.path, e.value.line) == (str(p), 2)


def test_empty_answers_list(tmp_path: Path) -> None:
    p = write_jsonl(tmp_path / "d.jsonl", [{"id": "1", "question": "q", "golden_answers": ["", " "]}])
    with pytest.raises(DataError) as e:
        load_file(p, "nq", "test")
    assert str(e.value) == f"{p}:1: empty answers list in field 'golden_answers'"


def test_non_utf8_line(tmp_path: Path) -> None:
    p = tmp_path / "d.jsonl"
    p.write_bytes(
        b'{"id": "1", "question": "q", "golden_answers": ["a"]}\n{"id": "2", "question": "caf\xe9"}\n'
    )
    with pytest.raises(DataError) as e:
        load_file(p, "nq", "test")
    assert str(e.value).startswith(f"{p}:2: not UTF-8")


def test_non_utf8_in_a_tsv(tmp_path: Path) -> None:
    p = tmp_path / "nq-test.qa.csv"
    p.write_bytes(b"q1\t['a']\nq2\t['caf\xe9']\n")
    with pytest.raises(DataError) as e:
        load_dataset("nq", tmp_path)
    assert str(e.value).startswith(f"{p}:2: not UTF-8")


def test_bad_json_line(tmp_path: Path) -> None:
    p = tmp_path / "d.jsonl"
    p.write_text('{"id": "1", "question": "q", "golden_answers": ["a"]}\n{"id": "2", \n')
    with pytest.raises(DataError) as e:
        load_file(p, "nq", "test")
    assert str(e.value).startswith(f"{p}:2: bad JSON")


def test_bad_answers_literal_in_dpr_tsv(tmp_path: Path) -> None:
    p = tmp_path / "nq-test.qa.csv"
    p.write_text("q1\t['a']\nq2\t['unclosed\n")
    with pytest.raises(DataError) as e:
        load_dataset("nq", tmp_path)
    assert str(e.value).startswith(f"{p}:2: answers column is not a Python list literal")


def test_json_array_item_error_names_the_item(tmp_path: Path) -> None:
    p = tmp_path / "h.json"
    p.write_text(json.dumps([HOTPOT_ORIGINAL, {k: v for k, v in HOTPOT_ORIGINAL.items() if k != "answer"}]))
    with pytest.raises(DataError) as e:
        load_file(p, "hotpotqa", "dev")
    assert str(e.value) == f"{p}: item 1: missing field 'answer'"


def test_duplicate_id(tmp_path: Path) -> None:
    row = {"id": "x", "question": "q", "golden_answers": ["a"]}
    p = write_jsonl(tmp_path / "d.jsonl", [row, row])
    with pytest.raises(DataError) as e:
        load_file(p, "nq", "test")
    assert str(e.value) == f"{p}:2: duplicate id 'x'"


def test_unknown_row_layout(tmp_path: Path) -> None:
    p = write_jsonl(tmp_path / "d.jsonl", [{"foo": 1}])
    with pytest.raises(DataError) as e:
        load_file(p, "nq", "test")
    assert str(e.value).startswith(f"{p}:1: unrecognised row layout with keys ['foo']")


def test_unknown_dataset_name() -> None:
    with pytest.raises(ConfigError) as e:
        load_dataset("hotpot")
    assert str(e.value) == (
        "unknown dataset 'hotpot' (did you mean hotpotqa?); known: nq, triviaqa, popqa, hotpotqa, 2wikimultihopqa (2wiki), musique, bamboogle"
    )


def test_nothing_under_data_dir_lists_the_paths_tried(tmp_path: Path) -> None:
    with pytest.raises(ConfigError) as e:
        load_dataset("musique", tmp_path)
    msg = str(e.value)
    assert msg.startswith(f"no musique data under {tmp_path}; looked for:")
    assert (
        str(tmp_path / "musique" / "dev.jsonl") in msg and str(tmp_path / "musique_ans_v1.0_dev.jsonl") in msg
    )


def test_other_split_needs_data_dir() -> None:
    with pytest.raises(ConfigError, match="only the 'dev' split is packaged"):
        load_dataset("hotpotqa", split="train")


def hub_cache(root: Path, files: dict[str, list[dict]], *, revision: str = "0123abcd") -> Path:
    """A Hugging Face hub cache of RUC-NLPIR/FlashRAG_datasets as ``huggingface-cli download``
    leaves it: blobs, a snapshot of symlinks, refs/main."""
    repo = root / "datasets--RUC-NLPIR--FlashRAG_datasets"
    snap = repo / "snapshots" / revision
    for i, (rel, rows) in enumerate(files.items()):
        blob = write_jsonl(repo / "blobs" / f"blob{i}", rows)
        (snap / rel).parent.mkdir(parents=True, exist_ok=True)
        (snap / rel).symlink_to(blob)
    (repo / "refs").mkdir(parents=True)
    (repo / "refs" / "main").write_text(revision)
    return repo


def test_a_hugging_face_hub_cache_is_read_at_its_main_snapshot(tmp_path: Path) -> None:
    ours = load_dataset("bamboogle")
    rows = [{"id": e.id, "question": e.question, "golden_answers": list(e.answers)} for e in ours]
    repo = hub_cache(tmp_path / "hub", {"bamboogle/test.jsonl": rows})
    want = [(e.id, e.question, e.answers) for e in ours]
    for data_dir in (tmp_path / "hub", repo):  # the hub root or the repo folder
        assert (
            resolve_dataset_file("bamboogle", data_dir)
            == repo / "snapshots" / "0123abcd" / "bamboogle" / "test.jsonl"
        )
        assert [(e.id, e.question, e.answers) for e in load_dataset("bamboogle", data_dir)] == want


def test_a_hub_cache_without_its_main_snapshot_is_one_clear_error(tmp_path: Path) -> None:
    repo = hub_cache(
        tmp_path / "hub", {"nq/test.jsonl": [{"id": "1", "question": "q", "golden_answers": ["a"]}]}
    )
    (repo / "refs" / "main").write_text("ffffffff")  # points at a snapshot that is not there
    with pytest.raises(ConfigError, match="without a snapshot for its main ref"):
        load_dataset("nq", tmp_path / "hub")
