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
    from harness.cli.cmd_export_verl import check_packaged
    from harness.methods_registry import get_trainable

    with pytest.raises(ConfigError) as e:
        method, recipe = get_trainable("search_r1", "paper", [])
        check_packaged(method.name, recipe)
    message = str(e.value)
    assert "\n" not in message and "--data-dir" in message and "--recipe cpu-smoke" in message
    assert "nq/train" in message


REFUSED = {  # a command a user types -> what the refusal is about
    "paper split not packaged, and a pre-fill": ["--method", "tiresrag_r1"],
    "pre-fill without a local chat template": ["--method", "tiresrag_r1", "--recipe", "cpu-smoke"],
    "a step's trajectories do not split over 8 GPUs": ["--method", "arena", "--recipe", "cpu-smoke"],
}


@pytest.mark.parametrize("case", list(REFUSED))
def test_every_refusal_names_a_command_that_works_as_written(case, tmp_path, monkeypatch, capsys):
    monkeypatch.chdir(tmp_path)
    assert main(["export-verl", *REFUSED[case], "--out", "J"]) == 2
    err = capsys.readouterr().err.strip()
    assert err.count("\n") == 0 and "; run: harness export-verl " in err, err
    assert not (tmp_path / "J").exists()  # a refusal writes nothing
    suggestion = shlex.split(err.rsplit("; run: ", 1)[1])
    assert suggestion[:2] == ["harness", "export-verl"]
    assert main(suggestion[1:]) == 0, capsys.readouterr().err
    assert (tmp_path / "J" / "run.sh").is_file()


def test_a_model_preset_is_written_as_its_hf_folder(tmp_path):
    from harness.llm.model_files import ensure_hf_model

    out = tmp_path / "J"
    assert (
        main(
            [
                "export-verl",
                "--method",
                "tiresrag_r1",
                "--recipe",
                "cpu-smoke",
                "--model",
                "smollm2-135m-instruct",
                "--out",
                str(out),
            ]
        )
        == 0
    )
    folder = ensure_hf_model("smollm2-135m-instruct")
    assert (folder / "config.json").is_file() and (folder / "model.safetensors").is_file()
    script = (out / "run.sh").read_text()
    assert f"MODEL={folder}" in script and '"actor_rollout_ref.model.path=${MODEL}"' in script
    assert (out / "verl_job.yaml").is_file()  # its chat template, with TIRESRAG-R1's pre-fill
