"""The ``harness`` parser imports only the invoked engine command's module; with no command, with
``--help`` first or with a name that is no engine command it builds the whole tree, as before."""

from __future__ import annotations

import importlib

import pytest

import harness.cli as cli


@pytest.fixture
def imported(monkeypatch) -> list[str]:
    names: list[str] = []
    real = importlib.import_module

    def recording(name: str, package: str | None = None):
        names.append(name)
        return real(name, package)

    monkeypatch.setattr(cli.importlib, "import_module", recording)
    return names


@pytest.mark.parametrize(
    ("argv", "module"),
    [
        (["score", "p.jsonl"], "harness.cli.cmd_score"),
        (["serve-retriever", "--help"], "harness.cli.cmd_serve_retriever"),
    ],
)
def test_an_engine_command_imports_only_its_module(imported, argv, module) -> None:
    parser = cli.build_parser(argv)
    assert [n for n in imported if n.startswith("harness.cli.cmd_")] == [module]
    assert parser.parse_args(["score", "p.jsonl"] if argv[0] == "score" else [argv[0]]).command == argv[0]


@pytest.mark.parametrize("argv", [[], ["--help"], ["bogus"], ["serve_retriever"], ["export"]])
def test_the_listing_and_other_names_build_every_command(imported, argv) -> None:
    cli.build_parser(argv)
    commands = {n for n in imported if n.startswith("harness.cli.cmd_")}
    assert {"harness.cli.cmd_score", "harness.cli.cmd_run", "harness.cli.cmd_train"} <= commands


@pytest.mark.integration
def test_a_refused_rl_step_answers_before_torch_is_imported(tmp_path) -> None:
    """Issue 60: ``harness train --rollout-backend llamacpp`` with a recipe that has no LoRA is
    refused from the recipe alone: validating the recipe (``harness.rl.config``, the policy-loss
    registry) and the refusal import no torch (it was 1.6 s of the refusal's 2.6-3.0 s)."""
    import subprocess
    import sys

    code = (
        "import sys\n"
        "from harness.cli import main\n"
        f"rc = main(['train', '--method', 'search_r1', '--recipe', 'cpu-smoke', '--rollout-backend', "
        f"'llamacpp', '--db', {str(tmp_path / 'r.duckdb')!r}, '--out', {str(tmp_path / 'o')!r}])\n"
        "print(rc, 'torch' in sys.modules)\n"
    )
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
    assert done.stdout.split() == ["2", "False"], done.stderr[-500:]
    assert "needs a LoRA recipe" in done.stderr
    assert not (tmp_path / "o").exists() and not (tmp_path / "r.duckdb").exists()
