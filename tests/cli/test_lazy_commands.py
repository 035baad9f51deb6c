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
