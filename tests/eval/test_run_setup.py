"""The run set-up every command shares (harness/eval/setup.py): the choices in, the protocol,
results file, retriever and run rows out; and the argparse glue in front of it
(harness/cli/options.py)."""

from __future__ import annotations

import sys
from pathlib import Path
from types import SimpleNamespace

import pytest

from harness.cli import build_parser
from harness.cli.options import DEFAULT_DB, run_choices
from harness.data.benches import Selection
from harness.errors import ConfigError
from harness.eval.protocol import preset
from harness.eval.setup import RunChoices, RunSetup, build_protocol
from harness.results.store import Store


def test_the_protocol_carries_the_selection_top_k_and_seed():
    mini = preset("mini")
    plain = build_protocol(RunChoices(protocol="mini", db=DEFAULT_DB))
    assert plain.protocol_id == mini.protocol_id  # train / sft: the preset as it is
    first = build_protocol(RunChoices(protocol="mini", db=DEFAULT_DB, limit=5, seed=0, top_k=7))
    assert first.selection == Selection(mode="first", n=5)
    assert (first.top_k, first.decoding.seed) == (7, 0)
    drawn = build_protocol(RunChoices(protocol="mini", db=DEFAULT_DB, sample=20, seed=3))
    assert drawn.selection == Selection(mode="random", n=20, seed=3)
    assert drawn.decoding.seed == 3 and drawn.top_k == mini.top_k
    assert len({plain.protocol_id, first.protocol_id, drawn.protocol_id}) == 3


def test_limit_and_sample_together_and_a_declared_retriever_without_a_url_are_refused():
    with pytest.raises(ConfigError, match=r"^give --limit \(first N\) or --sample \(random N\), not both$"):
        build_protocol(RunChoices(protocol="mini", db=DEFAULT_DB, limit=1, sample=1))
    with pytest.raises(ConfigError, match="^--retriever-declare needs --retriever-url$"):
        build_protocol(RunChoices(protocol="mini", db=DEFAULT_DB, retriever_declare="bm25s"))
    with pytest.raises(ConfigError, match="must be an http"):
        build_protocol(RunChoices(protocol="mini", db=DEFAULT_DB, retriever_url="ftp://x"))


def test_run_choices_read_each_command_s_options():
    parser = build_parser()
    run = run_choices(parser.parse_args(["run", "--sample", "4", "--seed", "2", "--top-k", "5"]))
    assert run == RunChoices(protocol="mini", db=DEFAULT_DB, sample=4, seed=2, top_k=5)
    sft = parser.parse_args(["sft", "--method", "m", "--recipe", "r", "--data-dir", "d", "--db", "x.duckdb"])
    assert run_choices(sft) == RunChoices(protocol="mini", db=Path("x.duckdb"), data_dir=Path("d"))
    train = parser.parse_args(["train", "--method", "m", "--retriever-url", "http://h/retrieve"])
    assert run_choices(train) == RunChoices(protocol="mini", db=DEFAULT_DB, retriever_url="http://h/retrieve")


def test_the_results_file_and_the_retriever_wait_for_their_first_use(tmp_path, monkeypatch):
    import harness.eval.setup

    built = []
    monkeypatch.setattr(
        harness.eval.setup, "protocol_retriever", lambda p, corpus, url: built.append((p.top_k, corpus, url))
    )
    db, corpus = tmp_path / "r.duckdb", tmp_path / "c.jsonl"
    setup = RunSetup(preset("mini"), db=db, corpus=corpus, retriever_url="http://h/retrieve")
    assert not db.exists() and not built  # nothing is opened or built by the set-up itself
    assert isinstance(setup.store, Store) and setup.store is setup.store and db.exists()
    retriever = setup.retriever()
    assert setup.retriever(preset("mini")) is retriever  # one per protocol id
    assert setup.retriever(preset("mini").with_(top_k=5)) is not retriever
    assert built == [(3, corpus, "http://h/retrieve"), (5, corpus, "http://h/retrieve")]


def test_harness_train_passes_data_dir_to_the_trainer(tmp_path, monkeypatch):
    """`--data-dir` reaches the trainer (it was parsed and dropped before the run set-up)."""
    import harness.rl.trainer as trainer_module
    from harness.cli import main

    seen = {}

    class Trainer:
        def __init__(self, method, recipe, **kw):
            seen.update(kw)

        def train(self):
            return SimpleNamespace(checkpoint=tmp_path / "final")

    monkeypatch.setattr(trainer_module, "Trainer", Trainer)
    argv = ["train", "--method", "search_r1", "--recipe", "cpu-smoke", "--db", str(tmp_path / "t.duckdb")]
    argv += ["--out", str(tmp_path / "o"), "--data-dir", str(tmp_path / "splits")]
    monkeypatch.setattr(sys, "argv", ["harness", *argv])
    assert main(argv) == 0
    assert seen["data_dir"] == tmp_path / "splits"
