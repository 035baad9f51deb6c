"""``harness score`` end to end through ``harness.cli.main``: output, formats, and bad input."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from harness.cli import main
from harness.errors import DataError
from harness.eval.predictions import read_predictions, score_file

ROWS = [
    {
        "id": "q1",
        "question": "Where?",
        "prediction": "The cat sat on the mat",
        "golden_answers": ["cat on mat"],
    },
    {"id": "q2", "question": "Is it?", "pred": "no", "answers": ["no way"]},
    {"question": "Which?", "prediction": "a party", "golden_answers": ["art", "Art"]},
    {"id": 4, "prediction": "Paris", "golden_answers": ["paris", "Paris, France"]},
]
# em, f1, cover_em, cover_em_tokens per row
EXPECTED = {
    "em": [0.0, 0.0, 0.0, 1.0],
    "f1": [6 / 7, 0.0, 0.0, 1.0],
    "cover_em": [0.0, 0.0, 1.0, 1.0],  # "cat on mat" is not a substring of "cat sat on mat"
    "cover_em_tokens": [1.0, 0.0, 0.0, 1.0],
}


def _write_jsonl(path: Path, rows: list, blank_after_first: bool = True) -> Path:
    lines = [json.dumps(r) for r in rows]
    if blank_after_first:
        lines.insert(1, "")
    path.write_text("\n".join(lines) + "\n", encoding="utf-8")
    return path


def test_table_output(tmp_path: Path, capsys) -> None:
    path = _write_jsonl(tmp_path / "p.jsonl", ROWS)
    assert main(["score", str(path)]) == 0
    out = capsys.readouterr().out
    assert "(n=4)" in out
    for name in ("em", "f1", "cover_em", "cover_em_tokens"):
        assert name in out
    # f1 mean = (6/7 + 1) / 4 = 0.4642857 -> 46.43; em 25.00; cover_em and cover_em_tokens 50.00
    assert "46.43" in out and "25.00" in out and "50.00" in out
    assert "95% CI" in out and "1000 resamples, seed 0" in out


def test_json_output(tmp_path: Path, capsys) -> None:
    path = _write_jsonl(tmp_path / "p.jsonl", ROWS)
    assert main(["score", str(path), "--json"]) == 0
    report = json.loads(capsys.readouterr().out)
    assert report["n"] == 4
    assert list(report["metrics"]) == ["em", "f1", "cover_em", "cover_em_tokens"]
    for name, values in EXPECTED.items():
        agg = report["metrics"][name]
        assert agg["mean"] == pytest.approx(sum(values) / 4, abs=1e-12)
        assert agg["n"] == 4
        assert agg["lo"] <= agg["mean"] <= agg["hi"]
    assert report["metric_versions"] == {"em": "1", "f1": "1", "cover_em": "1", "cover_em_tokens": "1"}
    assert report["interval"] == {
        "method": "percentile bootstrap",
        "confidence": 0.95,
        "n_resamples": 1000,
        "seed": 0,
    }


def test_per_sample_output(tmp_path: Path, capsys) -> None:
    path = _write_jsonl(tmp_path / "p.jsonl", ROWS)
    out = tmp_path / "scored.jsonl"
    args = ["score", str(path), "--metrics", "em,f1,f1_squad", "--per-sample", str(out), "--json"]
    assert main(args) == 0
    assert "scored.jsonl (4 lines)" in capsys.readouterr().err
    recs = [json.loads(x) for x in out.read_text(encoding="utf-8").splitlines()]
    assert [r["line"] for r in recs] == [1, 3, 4, 5]  # physical line numbers; line 2 is blank
    assert [r.get("id") for r in recs] == ["q1", "q2", None, "4"]
    assert recs[2]["question"] == "Which?" and "id" not in recs[2]
    assert recs[1]["prediction"] == "no" and recs[1]["golden_answers"] == ["no way"]
    assert recs[1]["metrics"] == {"em": 0.0, "f1": 0.0, "f1_squad": pytest.approx(2 / 3, abs=1e-15)}
    assert [r["metrics"]["f1"] for r in recs] == pytest.approx(EXPECTED["f1"], abs=1e-15)
    assert sorted(p.name for p in tmp_path.iterdir()) == ["p.jsonl", "scored.jsonl"]  # no temp file left


def test_flashrag_intermediate_data(tmp_path: Path, capsys) -> None:
    items = [
        {
            "id": "test_0",
            "question": "who wrote hamlet",
            "golden_answers": ["William Shakespeare", "Shakespeare"],
            "metadata": {},
            "output": {
                "pred": "Shakespeare.",
                "retrieval_result": [
                    {"id": "10", "contents": '"Hamlet"\nA tragedy by William Shakespeare.'},
                    {"id": "11", "contents": '"Macbeth"\nAnother play.'},
                ],
                "metric_score": {"em": 1.0},
            },
        },
        {
            "id": "test_1",
            "question": "capital of france",
            "golden_answers": ["Paris"],
            "output": {"pred": "Lyon", "retrieval_result": [{"id": "3", "contents": '"Lyon"\nA city.'}]},
        },
    ]
    path = tmp_path / "intermediate_data.json"
    path.write_text(json.dumps(items, indent=4), encoding="utf-8")
    assert main(["score", str(path), "--json", "--metrics", "em,answer_recall@1,answer_recall@5"]) == 0
    report = json.loads(capsys.readouterr().out)
    assert report["n"] == 2
    assert report["metrics"]["em"]["mean"] == 0.5
    assert report["metrics"]["answer_recall@1"]["mean"] == 0.5
    out = tmp_path / "per.jsonl"
    assert main(["score", str(path), "--metrics", "em", "--per-sample", str(out)]) == 0
    recs = [json.loads(x) for x in out.read_text(encoding="utf-8").splitlines()]
    assert [(r["item"], r["id"], r["metrics"]["em"]) for r in recs] == [
        (1, "test_0", 1.0),
        (2, "test_1", 0.0),
    ]


def test_retrieval_metrics_from_jsonl(tmp_path: Path, capsys) -> None:
    rows = [
        {
            "id": "a",
            "prediction": "x",
            "answers": ["x"],
            "retrieved_ids": ["p1", "g1", "g2"],
            "gold_ids": ["g1", "g2"],
        },
        {"id": "b", "prediction": "y", "answers": ["z"], "retrieved_ids": [], "gold_ids": ["g3"]},
    ]
    path = _write_jsonl(tmp_path / "r.jsonl", rows, blank_after_first=False)
    args = ["score", str(path), "--json", "--metrics", "retrieval_recall@2,evidence_recall,em"]
    assert main(args) == 0
    m = json.loads(capsys.readouterr().out)["metrics"]
    assert m["retrieval_recall@2"]["mean"] == 0.25  # (0.5 + 0) / 2
    assert m["evidence_recall"]["mean"] == 0.5  # (1 + 0) / 2
    assert m["em"]["mean"] == 0.5


def test_score_file_api_matches_expected_values(tmp_path: Path) -> None:
    path = _write_jsonl(tmp_path / "p.jsonl", ROWS)
    report = score_file(path)
    assert set(report.values) == set(EXPECTED)
    for name, values in EXPECTED.items():
        assert report.values[name] == pytest.approx(values, abs=1e-15)
    assert [r.line for r in read_predictions(path).rows] == [1, 3, 4, 5]


# ---------------------------------------------------------------- bad input

GOOD = json.dumps(ROWS[0])


@pytest.mark.parametrize(
    ("content", "message"),
    [
        (
            GOOD + "\n" + json.dumps({"id": "x", "golden_answers": ["a"]}),
            ":2: missing prediction: expected one of the fields prediction, pred, output.pred",
        ),
        (
            GOOD + "\n" + json.dumps({"id": "x", "prediction": "a"}),
            ":2: missing gold answers: expected one of the fields golden_answers, answers",
        ),
        (
            GOOD + "\n" + json.dumps({"id": "x", "prediction": "a", "golden_answers": []}),
            ":2: field 'golden_answers' is an empty list",
        ),
        (
            GOOD + "\n" + json.dumps({"prediction": "a", "answers": ["a"]}),
            ":2: missing field 'id' or 'question'",
        ),
        (
            GOOD + "\n" + json.dumps({"id": "x", "prediction": None, "answers": ["a"]}),
            "field 'prediction' must be a string, got NoneType",
        ),
        (
            GOOD + "\n" + json.dumps({"id": "x", "prediction": "a", "answers": "a"}),
            "field 'answers' must be a list of strings, got str",
        ),
        (
            GOOD + "\n" + json.dumps({"id": "x", "prediction": "a", "answers": ["a", 3]}),
            "field 'answers': element 1 must be a string",
        ),
        (
            GOOD + "\n" + json.dumps({"id": "x", "prediction": "a", "pred": "b", "answers": ["a"]}),
            "ambiguous prediction: fields prediction and pred",
        ),
        (GOOD + "\n" + '{"id": "x", "prediction": "a",', ":2: invalid JSON"),
        (GOOD + "\n" + "[1, 2]", ":2: expected a JSON object, got list"),
        ("", ": no predictions in file"),
        ("[" + GOOD + ', {"id": "y"}]', "item 2 of the JSON array: missing prediction"),
        ('{"a": 1}', ":1: missing field 'id' or 'question'"),
    ],
)
def test_bad_input_is_one_clear_error_and_writes_nothing(
    tmp_path: Path, capsys, content: str, message: str
) -> None:
    path = tmp_path / "bad.jsonl"
    path.write_text(content, encoding="utf-8")
    out = tmp_path / "out.jsonl"
    assert main(["score", str(path), "--per-sample", str(out)]) == 2
    err = capsys.readouterr().err
    assert err.startswith(f"error: {path}")
    assert message in err
    assert err.count("\n") == 1
    assert not out.exists()
    assert sorted(p.name for p in tmp_path.iterdir()) == ["bad.jsonl"]


def test_non_utf8_line(tmp_path: Path, capsys) -> None:
    path = tmp_path / "latin1.jsonl"
    path.write_bytes(
        GOOD.encode() + b"\n" + '{"id": "x", "prediction": "caf\u00e9", "answers": ["a"]}'.encode("latin-1")
    )
    out = tmp_path / "out.jsonl"
    assert main(["score", str(path), "--per-sample", str(out)]) == 2
    err = capsys.readouterr().err
    assert f"error: {path}:2: not valid UTF-8" in err
    assert not out.exists()


def test_missing_file_unknown_metric_and_overwriting_input(tmp_path: Path, capsys) -> None:
    assert main(["score", str(tmp_path / "nope.jsonl")]) == 2
    assert "nope.jsonl: no such file" in capsys.readouterr().err
    path = _write_jsonl(tmp_path / "p.jsonl", ROWS)
    assert main(["score", str(path), "--metrics", "em,bleu"]) == 2
    assert "unknown metric 'bleu'" in capsys.readouterr().err
    assert main(["score", str(path), "--per-sample", str(path)]) == 2
    assert "would overwrite the input file" in capsys.readouterr().err
    assert main(["score", str(path), "--metrics", "em,evidence_recall"]) == 2
    assert f"{path}:1: missing field 'retrieved_ids'" in capsys.readouterr().err


def test_failure_while_writing_leaves_no_file(tmp_path: Path, monkeypatch) -> None:
    path = _write_jsonl(tmp_path / "p.jsonl", ROWS)
    out = tmp_path / "out.jsonl"
    calls = {"n": 0}
    real_dumps = json.dumps

    def failing_dumps(obj, **kw):
        calls["n"] += 1
        if calls["n"] == 3:
            raise OSError("disk full")
        return real_dumps(obj, **kw)

    monkeypatch.setattr("harness.eval.predictions.json.dumps", failing_dumps)
    with pytest.raises(OSError, match="disk full"):
        score_file(path, per_sample=out)
    assert sorted(p.name for p in tmp_path.iterdir()) == ["p.jsonl"]


def test_data_error_names_file_and_line(tmp_path: Path) -> None:
    path = tmp_path / "p.jsonl"
    path.write_text(GOOD + "\n\n" + json.dumps({"id": "x", "prediction": "a", "answers": []}) + "\n")
    with pytest.raises(DataError) as e:
        read_predictions(path)
    assert (e.value.path, e.value.line) == (str(path), 3)


def test_blocks_are_bounded_by_rows_and_by_prediction_characters() -> None:
    """JSON Lines are scored a block at a time: at most 2,048 rows, and at most 512 Ki characters of
    predictions unless one row alone is longer (a block's strings are held at once)."""
    from harness.eval.predictions import _BLOCK, _BLOCK_CHARS, PredictionRow, _blocks

    def rows(sizes):
        return [PredictionRow(line=i + 1, prediction="x" * n, golds=("x",)) for i, n in enumerate(sizes)]

    short = rows([1] * (2 * _BLOCK + 5))
    assert [len(b) for b in _blocks(short)] == [_BLOCK, _BLOCK, 5]
    long_rows = rows([6000] * 200)
    blocks = list(_blocks(long_rows))
    per_block = _BLOCK_CHARS // 6000
    assert [len(b) for b in blocks] == [per_block, per_block, 200 - 2 * per_block]
    huge = rows([10, _BLOCK_CHARS + 1, 10])  # a row longer than the bound is a block of its own
    assert [[r.line for r in b] for b in _blocks(huge)] == [[1], [2], [3]]
    assert [r for b in _blocks(long_rows) for r in b] == long_rows
