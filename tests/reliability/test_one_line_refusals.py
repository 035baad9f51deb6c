"""Issue 45, failures 6-7: each refused in one line (no traceback), before any work.

- every recipe number is bounded: ``algo.group_size=10**12`` was accepted and 8 GB allocated;
- deeply nested YAML/JSON in a recipe file, a ``--recipe-override`` and a corpus row;
- huge integer ids (past Python's 4,300-digit conversion limit) in ``score`` and ``index`` inputs;
- ``harness index`` over a corpus with a 100 MB passage.
"""

from __future__ import annotations

import json
import os

import pytest

from harness.cli import main
from harness.errors import ConfigError
from tests.reliability.helpers import one_line

TRAIN = ["train", "--method", "search_r1", "--recipe", "cpu-smoke", "--show"]


@pytest.mark.parametrize(
    ("overrides", "named"),
    [
        (["algo.group_size=1000000000000"], "algo.group_size = 1000000000000 is beyond its bound of 1024"),
        (["algo.lr=1e300"], "algo.lr = 1e+300 is beyond its bound of 10"),
        (["steps=1000000000000"], "steps = 1000000000000 is beyond its bound"),
        (["max_new_tokens=1000000000000"], "max_new_tokens = 1000000000000 is beyond its bound"),
        (
            ["algo.group_size=1000", "algo.train_batch_size=2000", "algo.mini_batch_size=2000"],
            "= 2000000 rollouts per step is beyond the bound",
        ),
        (["algo.kl_coef=" + "[" * 5000 + "]" * 5000], "nested too deeply"),
        # issue 61: both were tracebacks (AttributeError; ValueError past Python's 4,300 digits)
        (["algo=5"], "after overrides is invalid: algo: Input should be a valid dictionary"),
        (
            ["algo.lr=" + "1" * 100_000],
            "recipe override 'algo.lr': cannot read its value of 100000 characters",
        ),
    ],
)
def test_recipe_numbers_are_bounded_and_nesting_is_one_line(overrides, named, capsys):
    assert main([*TRAIN, "--recipe-override", *overrides]) == 2
    line = one_line(capsys.readouterr().err)
    assert line.startswith("error: ") and named in line, line


def test_every_shipped_recipe_is_inside_the_bounds():
    from harness.method import TrainableMethod
    from harness.methods_registry import get_method, resolve_methods

    n = 0
    for name in resolve_methods("all"):
        method = get_method(name)
        if isinstance(method, TrainableMethod):
            n += len(method.recipes())  # each one validated, bounds included
    assert n >= 10


def test_a_deeply_nested_recipe_file_is_one_line(tmp_path):
    from harness.rl.recipe_files import load_recipes

    path = tmp_path / "recipes.yaml"
    path.write_text("paper:\n  steps: {value: " + "[" * 5000 + "]" * 5000 + ", source: x}\n")
    with pytest.raises(ConfigError, match="nested too deeply"):
        load_recipes(path, "search_r1")


@pytest.fixture
def index_log(monkeypatch):
    """``harness index`` logs through a handler bound to the stderr of its first call; give each
    test its own (pytest swaps stderr per test)."""
    import logging

    monkeypatch.setattr(logging.getLogger("harness.retrieval"), "handlers", [])


def _error_line(err: str) -> str:
    """The one ``error:`` line of a command that also shows progress on stderr."""
    assert "Traceback" not in err, err
    (line,) = [x for x in err.splitlines() if x.startswith("error:")]
    return line


def _corpus(tmp_path, bad: str):
    ok = json.dumps({"id": "1", "contents": '"Paris"\nParis is the capital of France.'})
    path = tmp_path / "corpus.jsonl"
    path.write_text(ok + "\n" + bad + "\n")
    return path


@pytest.mark.parametrize(
    ("bad", "named"),
    [
        ('{"id": ' + "9" * 5000 + ', "contents": "x"}', "unreadable JSON number"),
        ('{"id": "2", "contents": "x", "meta": ' + "[" * 5000 + "]" * 5000 + "}", "nested too deeply"),
    ],
)
def test_index_refuses_a_damaged_corpus_row_in_one_line(bad, named, tmp_path, capsys, monkeypatch, index_log):
    monkeypatch.setenv("RAR_HARNESS_CACHE", str(tmp_path / "cache"))
    path = _corpus(tmp_path, bad)
    assert main(["index", "--corpus", str(path), "--retriever", "bm25s"]) == 2
    line = _error_line(capsys.readouterr().err)
    assert f"{path}:2:" in line and named in line, line


def test_index_refuses_a_100_mb_passage(tmp_path, capsys, monkeypatch, index_log):
    monkeypatch.setenv("RAR_HARNESS_CACHE", str(tmp_path / "cache"))
    path = _corpus(tmp_path, json.dumps({"id": "2", "contents": "word " * 20_000_000}))
    assert main(["index", "--corpus", str(path), "--retriever", "bm25s"]) == 2
    line = _error_line(capsys.readouterr().err)
    assert f"{path}:2:" in line and "a passage of 100000000 characters is over the limit" in line, line
    assert not list((tmp_path / "cache").glob("indexes/*/index.json"))  # nothing was built


def test_score_refuses_a_huge_integer_id_in_one_line(tmp_path, capsys):
    path = tmp_path / "p.jsonl"
    row = '{"id": ' + "9" * 5000 + ', "prediction": "Paris", "golden_answers": ["Paris"]}'
    path.write_text(row + "\n")
    assert main(["score", str(path)]) == 2
    line = one_line(capsys.readouterr().err)
    assert f"{path}:1:" in line and "unreadable JSON number" in line, line


@pytest.mark.parametrize(
    "argv",
    [
        ["train", "--method", "search_r1", "--recipe", "cpu-smoke", "--out", "{file}"],
        ["sft", "--method", "search_r1", "--recipe", "cpu-sft-rl", "--out", "{file}/sub"],
        ["export-verl", "--method", "search_r1", "--recipe", "cpu-smoke", "--out", "{file}"],
        ["export", "--format", "csv", "--out", "{dir}"],
    ],
)
def test_out_that_is_a_file_or_a_directory_is_one_line(argv, tmp_path, capsys, monkeypatch):
    """``--out`` naming an existing file where a directory is made (FileExistsError,
    NotADirectoryError) or a directory where a file is written (IsADirectoryError)."""
    from tests.leaderboard import fixtures

    monkeypatch.chdir(tmp_path)
    (tmp_path / "file").write_text("keep me")
    (tmp_path / "dir").mkdir()
    db = fixtures.build(tmp_path / "r.duckdb")
    args = [a.format(file=tmp_path / "file", dir=tmp_path / "dir") for a in argv]
    args += ["--db", str(db.path)] if argv[0] != "export-verl" else []
    args += ["--protocol", db.protocol.protocol_id] if argv[0] == "export" else []
    assert main(args) == 2
    line = one_line(capsys.readouterr().err)
    assert line.startswith("error: --out ") and ("is a file" in line or "is a directory" in line), line
    assert (tmp_path / "file").read_text() == "keep me"


def test_a_recipe_file_that_is_not_utf8_is_one_line(tmp_path):
    """Issue 61: invalid UTF-8 in a recipes file was a UnicodeDecodeError traceback."""
    from harness.rl.recipe_files import load_recipes

    path = tmp_path / "recipes.yaml"
    path.write_bytes(b"paper:\n  steps: {value: 1, source: \xff\xfe}\n")
    with pytest.raises(ConfigError) as e:
        load_recipes(path, "search_r1")
    assert str(e.value) == f"{path}: not UTF-8 text (byte 35: invalid start byte); save it as UTF-8"


@pytest.mark.parametrize("fmt", ["markdown", "csv"])
def test_export_to_a_full_disk_is_one_line(fmt, tmp_path, capsys):
    """Issue 61: ``export --out /dev/full`` was an OSError traceback (ENOSPC)."""
    from tests.leaderboard import fixtures

    if not os.path.exists("/dev/full"):
        pytest.skip("no /dev/full here")
    db = fixtures.build(tmp_path / "r.duckdb")
    argv = ["export", "--format", fmt, "--out", "/dev/full", "--db", str(db.path)]
    assert main([*argv, "--protocol", db.protocol.protocol_id]) == 2
    line = one_line(capsys.readouterr().err)
    assert line == "error: --out /dev/full: cannot write it (the disk is full); give --out somewhere writable"


def test_score_per_sample_into_a_folder_is_one_line_before_scoring(tmp_path, capsys):
    """Issue 61: ``score --per-sample DIR`` was an IsADirectoryError traceback after the scoring."""
    path = tmp_path / "p.jsonl"
    path.write_text('{"id": "1", "prediction": "Paris", "golden_answers": ["Paris"]}\n')
    (tmp_path / "out").mkdir()
    assert main(["score", str(path), "--per-sample", str(tmp_path / "out")]) == 2
    line = one_line(capsys.readouterr().err)
    out = tmp_path / "out"
    assert line == f"error: --per-sample {out} is a directory; give a file path (e.g. {out}/out.jsonl)"
    assert sorted(tmp_path.iterdir()) == sorted([path, out])  # no temporary file left


@pytest.mark.parametrize("damage", ["retrieval item", "prompt texts", "metrics"])
def test_a_hand_damaged_pin_file_is_one_line_before_any_replay(damage, tmp_path, capsys):
    """A pin item edited by hand (``scores`` no longer a list) or a truncated ``.prompts.json.gz``
    was a traceback (TypeError, EOFError) after the whole replay; now one line, first."""
    import shutil
    from pathlib import Path

    src = Path(__file__).resolve().parents[2] / "results" / "regress" / "exact.json"
    pins = tmp_path / "exact.json"
    shutil.copy(src, pins)
    shutil.copy(src.with_name("exact.prompts.json.gz"), tmp_path / "exact.prompts.json.gz")
    if damage == "retrieval item":
        data = json.loads(pins.read_text())
        key = next(iter(data["layers"]["retrieval"]))
        data["layers"]["retrieval"][key]["scores"] = "7.98"
        pins.write_text(json.dumps(data))
        named = f"retrieval item {key!r} is damaged ('scores' must be a list of numbers)"
    elif damage == "metrics":  # issue 61: `metrics = "x"` was an AttributeError traceback
        data = json.loads(pins.read_text())
        key = next(iter(data["layers"]["extraction"]))
        data["layers"]["extraction"][key]["metrics"] = "x"
        pins.write_text(json.dumps(data))
        named = f"extraction item {key!r} is damaged ('metrics' must be an object of metric name -> number)"
    else:
        gz = tmp_path / "exact.prompts.json.gz"
        gz.write_bytes(gz.read_bytes()[:100])
        named = "exact.prompts.json.gz: damaged prompt texts (EOFError"
    assert main(["regress", "--layers", "exact", "--exact-against", str(pins)]) == 2
    line = one_line(capsys.readouterr().err)
    assert named in line, line


@pytest.mark.integration  # runs the scripts as processes
@pytest.mark.parametrize(
    ("script", "args", "named"),
    [
        ("ship_adapter.py", ["check", "smollm2+nothing", "--label", "x"], "'smollm2+nothing' is no shipped"),
        (
            "eval_heldout.py",
            ["merge", "no-such.json", "--label", "x", "--record", "out.json"],
            "no-such.json",
        ),
        (  # a checkpoint the record could name only by a machine path: refused before evaluating (it
            # was refused after the whole evaluation, 73 minutes of one); one line, so nothing ran
            "eval_heldout.py",
            [
                "run",
                "--method",
                "eval_rar",
                "--model",
                "/",
                "--label",
                "x",
                "--samples",
                "0",
                "--record",
                "r.json",
            ],
            "eval model / is outside the working directory",
        ),
    ],
)
def test_the_learning_scripts_refuse_in_one_line(script, args, named, tmp_path):
    """A refusal of a ``scripts/`` entry point is one line and exit 2, as ``harness``'s are (it was
    a ConfigError traceback)."""
    import subprocess
    import sys
    from pathlib import Path

    root = Path(__file__).resolve().parents[2]
    done = subprocess.run(
        [sys.executable, str(root / "scripts" / script), *args],
        cwd=tmp_path,
        env={**os.environ, "PYTHONPATH": str(root)},
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert done.returncode == 2, done.stderr
    line = one_line(done.stderr)
    assert line.startswith("error: ") and named in line, line
