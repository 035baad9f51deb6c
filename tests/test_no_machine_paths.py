"""Committed records and pages hold no machine's absolute paths: a record under results/ or a page
under docs/ that names /work/..., /home/... and the like says where one machine kept a file, which
no reader has (results/learning-2026-11-26.json once stored its checkpoints that way). Scratch
paths under /tmp in an example command are fine; the binary results databases are not read here."""

from __future__ import annotations

import gzip
import re
from pathlib import Path

import pytest

from harness.errors import ConfigError
from harness.rl.learning_record import portable_model

ROOT = Path(__file__).resolve().parents[1]
MACHINE_PATH = re.compile(
    r"(?<![\w.~-])(/(?:work|home|root|Users|mnt|srv|opt)/[^\s\"'`),]*|[A-Z]:\\Users\\[^\s\"',]*)"
)


def _texts():
    for path in sorted((ROOT / "results").rglob("*.json")) + sorted((ROOT / "docs").rglob("*.md")):
        yield path, path.read_text(encoding="utf-8")
    for path in sorted((ROOT / "results").rglob("*.json.gz")):
        yield path, gzip.decompress(path.read_bytes()).decode("utf-8")


def test_records_and_pages_hold_no_machine_paths():
    found = [
        f"{path.relative_to(ROOT)}:{text.count(chr(10), 0, m.start()) + 1}: {m.group(0)}"
        for path, text in _texts()
        for m in MACHINE_PATH.finditer(text)
    ]
    assert not found, "machine paths in committed files:\n" + "\n".join(found[:20])


def test_the_pattern_finds_what_it_must():
    hits = [
        m.group(0)
        for m in MACHINE_PATH.finditer('"model": "/work/learn-run/sft/final", /home/u/x, C:\\Users\\me\\m')
    ]
    assert hits == ["/work/learn-run/sft/final", "/home/u/x", "C:\\Users\\me\\m"]
    assert not MACHINE_PATH.findall("results/x.json, ~/venv-vllm/bin/pip, /tmp/scale-bench, src/work/a")


def test_a_learning_record_keeps_checkpoints_relative_to_the_working_directory(tmp_path):
    assert portable_model("smollm2-135m-instruct", tmp_path) == "smollm2-135m-instruct"
    assert portable_model(str(tmp_path / "learn-run" / "sft" / "final"), tmp_path) == "learn-run/sft/final"
    with pytest.raises(ConfigError, match="outside the working directory"):
        portable_model("/elsewhere/ckpt", tmp_path)
