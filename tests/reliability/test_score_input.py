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


_PEAK = """
import sys, tracemalloc
from harness.cli import main
main(["score", sys.argv[1]])  # a one-row file first: every import and cache in place
tracemalloc.start()
code = main(["score", *sys.argv[2:]])
print("peak_bytes", tracemalloc.get_traced_memory()[1], "code", code)
"""


def _peak_mb(small: str, *args: str) -> float:
    """The most memory Python held while `harness score ARGS` ran, in a child process (MB; every
    allocation traced, imports done before)."""
    import subprocess
    import sys

    done = subprocess.run(
        [sys.executable, "-c", _PEAK, small, *args], capture_output=True, text=True, timeout=300, check=True
    )
    line = done.stdout.strip().splitlines()[-1].split()
    assert line[0] == "peak_bytes" and line[-1] == "0", done.stdout + done.stderr
    return int(line[1]) / 2**20


@pytest.mark.slow  # ~30 s: tracemalloc over 23 MB of rows in a child process
@pytest.mark.integration
def test_score_streams_a_large_file_in_bounded_memory(tmp_path):
    """Issue 45: `harness score` held about 3x its input (a 1 GB file peaked at 3.0 GB). JSON Lines
    are now scored a row at a time: for 23 MB of rows (long predictions) Python holds under a
    quarter of their size at the peak (tracemalloc, in a child process; the old code held 3x). Per-sample output is written as
    it goes and holds what the whole-file path wrote."""
    small, big = tmp_path / "small.jsonl", tmp_path / "big.jsonl"
    small.write_text(_row(0) + "\n")
    pad = "Paris " * 1000  # 6 KB of prediction per row
    with big.open("w") as f:
        for i in range(4_000):
            f.write(json.dumps({"id": i, "prediction": pad if i else "Paris", "golden_answers": ["Paris"]}))
            f.write("\n")
    size_mb = big.stat().st_size / 2**20
    assert size_mb > 22
    # 10 resamples: the bootstrap's own arrays (rows x resamples) are not what is measured here
    peak = _peak_mb(str(small), str(big), "--resamples", "10", "--per-sample", str(tmp_path / "per.jsonl"))
    print(f"\nharness score: {size_mb:.0f} MB file, {peak:.1f} MB held at the peak")
    assert peak < size_mb / 4, (peak, size_mb)
    lines = (tmp_path / "per.jsonl").read_text().splitlines()
    assert len(lines) == 4_000 and json.loads(lines[1])["metrics"]["em"] == 0.0
    assert json.loads(lines[0]) == {
        "line": 1,
        "id": "0",
        "prediction": "Paris",
        "golden_answers": ["Paris"],
        "metrics": json.loads(lines[0])["metrics"],
    }
