"""``harness data show`` and ``harness list benches|datasets|...`` through ``harness.cli.main``."""

from __future__ import annotations

import json
import sys
import types
from pathlib import Path

import pytest

from harness.cli import main


def test_list_benches(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["list", "benches"]) == 0
    out = capsys.readouterr().out
    lines = out.splitlines()

    def row(*cells: str) -> bool:
        return any(all(c in line for c in cells) for line in lines)

    for name in ("singlehop", "multihop", "all", "mini-singlehop", "mini-multihop", "mini", "r1searcher"):
        assert f"│ {name} " in out
    assert row("nq", "3,610", "3,610")
    assert row("triviaqa", "11,313", "11,313")
    assert row("popqa", "all", "2,140", "14,267", "1,000")
    assert row("hotpotqa", "closed", "1,405", "7,405")
    assert row("2wikimultihopqa", "closed", "166", "12,576")
    assert row("musique", "closed", "292", "2,417")
    assert row("bamboogle", "125", "125")
    assert row("musique", "r1searcher500", "500")


def test_list_datasets(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["list", "datasets"]) == 0
    out = capsys.readouterr().out
    assert "2wikimultihopqa (2wiki)" in out
    assert any(
        "popqa" in line and "14,267" in line and "2,140" in line and "15%" in line
        for line in out.splitlines()
    )


def test_data_show(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["data", "show", "2wiki", "--n", "1", "--with-gold"]) == 0
    out = capsys.readouterr().out
    assert out.splitlines()[0] == "2wikimultihopqa: 2WikiMultihopQA, dev split"
    assert "questions:   12,576 (canonical size 12,576; 100.0%)" in out
    assert "gold:        166 with gold passages, 166 of them in the closed corpus" in out
    assert "subsets:     closed 166, r1searcher500 500" in out
    assert "[0f44750808e411ebbda4ac1f6bf848b6] Who was born earlier, Silas Hardy or Lee Mantle?" in out
    assert "  gold:    Silas Hardy -> closed-" in out


def test_data_show_user_dir(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    (tmp_path / "bamboogle").mkdir()
    f = tmp_path / "bamboogle" / "test.jsonl"
    f.write_text(json.dumps({"id": "b0", "question": "Who?", "golden_answers": ["Me", "I"]}) + "\n")
    assert main(["data", "show", "bamboogle", "--data-dir", str(tmp_path)]) == 0
    out = capsys.readouterr().out
    assert f"source:      {f}" in out
    assert "questions:   1 (canonical size 125; 0.8%)" in out
    assert "[b0] Who?\n  answers: Me | I" in out


def test_data_show_errors_are_one_line(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["data", "show", "hotpot"]) == 2
    err = capsys.readouterr().err
    assert (
        err.startswith("error: unknown dataset 'hotpot' (did you mean hotpotqa?); known: nq, triviaqa")
        and err.count("\n") == 1
    )
    (tmp_path / "nq").mkdir()
    (tmp_path / "nq" / "test.jsonl").write_text('{"id": "1", "question": "q", "golden_answers": []}\n')
    assert main(["data", "show", "nq", "--data-dir", str(tmp_path)]) == 2
    err = capsys.readouterr().err
    assert err == f"error: {tmp_path / 'nq' / 'test.jsonl'}:1: empty answers list in field 'golden_answers'\n"


def test_list_described_by_other_modules(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    fake = types.ModuleType("harness.methods_registry")
    fake.describe_methods = lambda: [("search_r1", "Search-R1 [paper]"), ("direct", "no retrieval")]
    monkeypatch.setitem(sys.modules, "harness.methods_registry", fake)
    assert main(["list", "methods"]) == 0
    out = capsys.readouterr().out
    assert "search_r1" in out and "Search-R1 [paper]" in out and "no retrieval" in out


def test_list_when_the_module_is_missing(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.setitem(sys.modules, "harness.eval.protocol", None)  # import raises ModuleNotFoundError
    assert main(["list", "protocols"]) == 2
    err = capsys.readouterr().err
    assert (
        err
        == "error: `harness list protocols` needs harness.eval.protocol.describe_protocols(), and harness.eval.protocol does not exist yet\n"
    )
    fake = types.ModuleType("harness.methods_registry")
    monkeypatch.setitem(sys.modules, "harness.methods_registry", fake)
    assert main(["list", "methods"]) == 2
    assert "which harness.methods_registry does not define" in capsys.readouterr().err
