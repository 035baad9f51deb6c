"""The README's ``export-verl`` example and the commands the exported ``run.sh`` tells the user to
run are commands that exist and run as written."""

from __future__ import annotations

import re
import shlex
from pathlib import Path

import pytest

from harness.cli import build_parser, main
from harness.errors import ConfigError

ROOT = Path(__file__).resolve().parents[2]


def readme_export_verl() -> list[str]:
    (line,) = [
        x for x in (ROOT / "README.md").read_text().splitlines() if x.startswith("harness export-verl ")
    ]
    return shlex.split(line.split("#")[0])[1:]


def test_the_readme_example_runs_and_run_sh_names_only_real_commands(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    args = readme_export_verl()
    assert main(args) == 0
    out = tmp_path / args[args.index("--out") + 1]
    script = (out / "run.sh").read_text()
    commands = re.findall(r"^#\s+(harness .*?)(?: &)?$", script, flags=re.MULTILINE)
    assert commands, "run.sh names the retriever to start"
    parser = build_parser()
    for command in commands:
        parser.parse_args(shlex.split(command)[1:])  # an unknown flag exits (SystemExit 2)


def test_a_recipe_whose_train_split_is_not_packaged_names_the_way_out():
    with pytest.raises(ConfigError) as e:
        from harness.cli.cmd_export_verl import check_packaged
        from harness.methods_registry import get_trainable

        method, recipe = get_trainable("search_r1", "paper", [])
        check_packaged(method.name, recipe)
    message = str(e.value)
    assert "\n" not in message and "--data-dir" in message and "--recipe cpu-smoke" in message
    assert "nq/train" in message
