"""Issue 33, item 7 (``harness score``): deeply nested JSON is one line, not a RecursionError
traceback; duplicate sample ids are refused with their line numbers, not scored twice."""

from __future__ import annotations

import json

import pytest

from harness.cli import main
from tests.reliability.helpers import one_line


def _row(rid: object, pred: str = "Paris") -> str:
    return json.dumps({"id": rid, "prediction": pred, "golden_answers": ["Paris"]})


@pytest.mark.parametrize("layout", ["jsonl", "array"])
def test_deeply_nested_json_is_one_line(layout, tmp_path, capsys):
    deep = "[" * 200_000 + "]" * 200_000
    path = tmp_path / f"p.{'jsonl' if layout == 'jsonl' else 'json'}"
    if layout == "jsonl":
        path.write_text(_row(1) + "\n" + '{"id": 2, "x": ' + deep + "}\n")
    else:
        path.write_text("[" + _row(1) + ", " + deep + "]")
    assert main(["score", str(path)]) == 2
    line = one_line(capsys.readouterr().err)
    assert "nested too deeply" in line and str(path) in line
    if layout == "jsonl":
        assert f"{path}:2:" in line


def test_duplicate_ids_are_refused_with_their_lines(tmp_path, capsys):
    path = tmp_path / "p.jsonl"
    path.write_text("\n".join([_row("a"), _row("b"), _row("a", "London"), _row(7), _row(7)]) + "\n")
    assert main(["score", str(path)]) == 2
    line = one_line(capsys.readouterr().err)
    assert line == (
        f"error: {path}: duplicate id 'a' on lines 1, 3 (1 more duplicated id(s)); each row needs its own id"
    )
    path.write_text("\n".join([_row("a"), _row("b")]) + "\n")  # distinct ids are fine
    assert main(["score", str(path)]) == 0
