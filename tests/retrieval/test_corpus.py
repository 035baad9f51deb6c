"""Corpus reading: validation errors name file:line, the content hash is stable and defined,
the prepared (memory-mapped) form answers lookups and is reused until the file changes."""

from __future__ import annotations

import gzip
import hashlib
import json
import os
from pathlib import Path

import pytest

from harness.errors import DataError
from harness.retrieval import corpus as corpus_mod
from harness.retrieval.corpus import iter_rows, open_corpus
from tests.retrieval.helpers import TINY, write_jsonl

# sha256 of the TINY rows as the module docstring defines it, computed once and pinned here so a
# change of the definition (which would silently change every protocol id) fails this test.
TINY_HASH = "eb3204c5d95d74d0057ddf9df70f86769e5286c514a9bd101ae7b5840053274a"


def _expected_hash(rows: list[dict]) -> str:
    sha = hashlib.sha256()
    for r in rows:
        line = json.dumps([r["id"], r["contents"]], ensure_ascii=False, separators=(",", ":")) + "\n"
        sha.update(line.encode("utf-8"))
    return sha.hexdigest()


def test_hash_is_the_documented_definition_and_pinned(tiny_corpus):
    assert tiny_corpus.spec.content_hash == _expected_hash(TINY)
    assert tiny_corpus.spec.content_hash == TINY_HASH
    assert tiny_corpus.spec.n_passages == 5
    assert tiny_corpus.spec.id == "tiny"


def test_hash_ignores_compression_key_order_extra_keys_and_blank_lines(tmp_path: Path):
    rows = [
        '{"contents": "\\"Paris\\"\\nParis is the capital of France.", "id": "d1", "extra": 1}',
        "",
        *[json.dumps(r) for r in TINY[1:]],
        "   ",
    ]
    p = write_jsonl(tmp_path / "other.jsonl.gz", rows, gz=True)
    c = open_corpus(p)
    assert c.spec.content_hash == TINY_HASH
    assert c.spec.id == "other"


def test_title_text_rows_and_integer_ids(tmp_path: Path):
    p = write_jsonl(
        tmp_path / "tt.jsonl",
        [
            {"id": 7, "title": "Paris", "text": "Paris is the capital of France."},
            {"id": "8", "contents": "x"},
        ],
    )
    c = open_corpus(p)
    assert c.get("7") == '"Paris"\nParis is the capital of France.'
    assert c.id_at(0) == "7"
    assert len(c) == 2


def test_hash_changes_with_content_and_order(tmp_path: Path):
    a = open_corpus(write_jsonl(tmp_path / "a.jsonl", TINY)).spec.content_hash
    b = open_corpus(write_jsonl(tmp_path / "b.jsonl", TINY[::-1])).spec.content_hash
    edited = [dict(TINY[0], contents=TINY[0]["contents"] + " "), *TINY[1:]]
    c = open_corpus(write_jsonl(tmp_path / "c.jsonl", edited)).spec.content_hash
    assert len({a, b, c}) == 3


@pytest.mark.parametrize(
    ("line", "message"),
    [
        ("{not json", "invalid JSON"),
        ('["a", "b"]', "expected a JSON object, got list"),
        ('{"contents": "x"}', "missing 'id'"),
        ('{"id": "z9"}', "missing 'contents' (or 'title' and 'text')"),
        ('{"id": "z9", "title": "T"}', "missing 'contents' (or 'title' and 'text')"),
        ('{"id": "z9", "contents": 5}', "'contents' must be a string, got int"),
        ('{"id": true, "contents": "x"}', "'id' must be a string or an integer, got bool"),
        ('{"id": "  ", "contents": "x"}', "empty 'id'"),
        ('{"id": "z9", "contents": "  \\n "}', "empty passage"),
    ],
)
def test_bad_rows_name_file_and_line(tmp_path: Path, line: str, message: str):
    p = write_jsonl(tmp_path / "bad.jsonl", [*TINY[:2], "", line, TINY[2]])
    with pytest.raises(DataError) as e:
        open_corpus(p)
    assert e.value.line == 4
    assert str(e.value).startswith(f"{p}:4: ")
    assert message in str(e.value)


def test_duplicate_id_names_both_lines(tmp_path: Path):
    p = write_jsonl(
        tmp_path / "dup.jsonl", [*TINY, {"id": "x", "contents": "y"}, {"id": "d2", "contents": "again"}]
    )
    with pytest.raises(DataError) as e:
        open_corpus(p)
    assert e.value.line == 7
    assert "duplicate id 'd2' (first on line 2)" in str(e.value)


def test_missing_empty_and_broken_files(tmp_path: Path):
    with pytest.raises(DataError, match="corpus file not found"):
        open_corpus(tmp_path / "nope.jsonl")
    with pytest.raises(DataError, match="the corpus has no passages"):
        open_corpus(write_jsonl(tmp_path / "empty.jsonl", ["", "  "]))
    good = write_jsonl(tmp_path / "t.jsonl.gz", TINY * 1, gz=True).read_bytes()
    broken = tmp_path / "broken.jsonl.gz"
    broken.write_bytes(good[: len(good) // 2])
    with pytest.raises(DataError, match="cannot read the file"):
        open_corpus(broken)
    latin = tmp_path / "latin.jsonl"
    latin.write_bytes(b'{"id": "a", "contents": "caf\xe9"}\n')
    with pytest.raises(DataError, match=r"latin.jsonl:1: not valid UTF-8"):
        open_corpus(latin)


def test_lookup_and_batches(tiny_corpus):
    c = tiny_corpus
    assert c.get("d3") == TINY[2]["contents"]
    assert "d4" in c and "zz" not in c
    assert c.row_of("d5") == 4 and c.row_of("d6") is None
    with pytest.raises(KeyError):
        c.get("missing")
    batches = list(c.iter_batches(2))
    assert [b.start for b in batches] == [0, 2, 4]
    assert [i for b in batches for i in b.ids] == [r["id"] for r in TINY]
    assert [t for b in batches for t in b.contents] == [r["contents"] for r in TINY]
    h = c.hit(0, 1.5)
    assert (h.doc_id, h.title, h.text, h.score) == ("d1", "Paris", "Paris is the capital of France.", 1.5)


def test_unicode_ids_and_contents_round_trip(tmp_path: Path):
    rows = [{"id": "é-1", "contents": '"Zürich"\n北京 and naïve café'}, {"id": "2", "contents": "plain"}]
    c = open_corpus(write_jsonl(tmp_path / "u.jsonl", rows))
    assert c.get("é-1") == rows[0]["contents"]
    assert c.id_at(0) == "é-1"


def test_prepared_form_is_reused_until_the_file_changes(tiny_path: Path, monkeypatch: pytest.MonkeyPatch):
    first = open_corpus(tiny_path)
    calls = []
    real = corpus_mod._prepare
    monkeypatch.setattr(corpus_mod, "_prepare", lambda *a: (calls.append(a), real(*a)))
    again = open_corpus(tiny_path)
    assert calls == [] and again.spec == first.spec
    write_jsonl(tiny_path, TINY[:3])
    st = tiny_path.stat()
    os.utime(tiny_path, ns=(st.st_atime_ns, st.st_mtime_ns + 10**9))
    changed = open_corpus(tiny_path)
    assert len(calls) == 1
    assert changed.spec.n_passages == 3 and changed.spec.content_hash == _expected_hash(TINY[:3])


def test_damaged_prepared_form_is_rebuilt(tiny_path: Path):
    c = open_corpus(tiny_path)
    (c.store / "contents.bin").write_bytes(b"garbage")
    c.close()
    again = open_corpus(tiny_path)
    assert again.get("d1") == TINY[0]["contents"]


def test_iter_rows_streams_gzip(tmp_path: Path):
    p = tmp_path / "s.jsonl.gz"
    with gzip.open(p, "wt") as f:
        for i in range(1000):
            f.write(json.dumps({"id": str(i), "contents": f"passage {i}"}) + "\n")
    rows = iter_rows(p)
    first = next(rows)
    assert (first.line, first.id, first.contents) == (1, "0", "passage 0")
    assert sum(1 for _ in rows) == 999


def test_corpus_id_override(tiny_path: Path):
    c = open_corpus(tiny_path, corpus_id="mini")
    assert c.spec.id == "mini" and c.spec.content_hash == TINY_HASH


def test_corpus_spec_helper(tiny_path: Path):
    from harness.retrieval.corpus import corpus_spec

    spec = corpus_spec(tiny_path, corpus_id="wiki-tiny")
    assert (spec.id, spec.content_hash, spec.n_passages) == ("wiki-tiny", TINY_HASH, 5)


def test_packaged_closed_corpus_hash_matches_the_manifest():
    from harness.data.packaged import closed_corpus_info
    from harness.retrieval.corpus import corpus_spec, default_corpus_path

    info = closed_corpus_info()
    spec = corpus_spec(default_corpus_path())
    assert (spec.id, spec.content_hash, spec.n_passages) == (info.id, info.content_hash, info.n_passages)
