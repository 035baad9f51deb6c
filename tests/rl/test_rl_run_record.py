"""The long run's committed record (scripts/rl_run_record.py): built from the run's folder and
database, every logged step and every held-out evaluation the trainer wrote, the later ones paired
with step 0; and the tables docs/training.md prints from a committed record are the record's."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from tests.rl.test_heldout_eval import _eval
from tests.support.scripts import load_script

ROOT = Path(__file__).resolve().parents[2]


def _script():
    return load_script("rl_run_record")


def test_build_keeps_every_step_and_evaluation_and_pairs_later_ones_with_step_0(tmp_path, monkeypatch):
    from harness.results.store import Store

    monkeypatch.chdir(tmp_path)
    out, db = Path("run"), Path("run.duckdb")
    (out / "heldout").mkdir(parents=True)
    (out / "train-run.json").write_text(json.dumps({"run_id": "r1"}))
    store = Store(db)
    for step in range(12):
        store.add_train_steps("r1", step, {"sampled/reward/total_mean": step / 10, "seconds": 100.0 + step})
        store.add_train_steps("r1", step, {"heldout/greedy_em": 0.5})  # left out of the curve
    store.add_train_steps("other", 0, {"seconds": 1.0})  # another run in the same database
    del store
    for step, em in ((0, [1, 0, 0, 1]), (10, [1, 1, 0, 1])):
        ev = _eval(f"step {step}", em)
        (out / "heldout" / f"step-{step}.json").write_text(json.dumps(ev.to_dict()))
    # a part of a later evaluation (evaluate_step's questions=) is not an evaluation of the record
    (out / "heldout" / "step-20.q0-2.json").write_text(json.dumps(_eval("step 20", [1, 1]).to_dict()))
    rec = Path("r.json")
    mod = _script()
    argv = ["build", "--out-dir", str(out), "--db", str(db), "--record", str(rec), "--about", "a test"]
    assert mod.main([*argv, "--command", "harness train x", "--split", "s"]) == 0
    got = json.loads(rec.read_text())
    assert got["curves"]["rl"]["step"] == list(range(1, 13))
    assert got["curves"]["rl"]["seconds"] == [100.0 + s for s in range(12)]
    assert "heldout/greedy_em" not in got["curves"]["rl"]
    assert [e["label"] for e in got["evaluations"]] == ["step 0", "step 10"]
    assert got["pairs"] == [["step 0", "step 10"]] and got["commands"] == ["harness train x"]
    text = mod.tables_of(got, every=5)
    rows = [line for line in text.splitlines() if line.startswith("| ") and line[2:4].strip().isdigit()]
    assert [r.split(" | ")[0] for r in rows] == ["| 1", "| 5", "| 10", "| 12"]  # every 5 and the last
    assert "| step 10 - step 0 | greedy_em |" in text


def test_build_stitches_a_resumed_run_from_its_checkpoint(tmp_path, monkeypatch):
    """A run that died after step 15 with a checkpoint at step 10, resumed under a new row: the
    record has steps 1-10 of the first run and 11-20 of the second (the first's 11-15 were
    redone), says which run logged which, and refuses runs given out of order."""
    from harness.errors import ConfigError
    from harness.results.store import Store

    monkeypatch.chdir(tmp_path)
    out, db = Path("run"), Path("run.duckdb")
    (out / "heldout").mkdir(parents=True)
    (out / "train-run.json").write_text(json.dumps({"run_id": "r2"}))
    store = Store(db)
    for step in range(15):
        store.add_train_steps("r1", step, {"seconds": 1.0, "kl": 0.5})  # only the first run logged kl
    for step in range(10, 20):
        store.add_train_steps("r2", step, {"seconds": 2.0})
    del store
    mod = _script()
    argv = ["build", "--out-dir", str(out), "--db", str(db), "--record", "r.json", "--about", "a test"]
    assert mod.main([*argv, "--resumed-from", "r1"]) == 0
    got = json.loads(Path("r.json").read_text())
    assert got["curves"]["rl"]["step"] == list(range(1, 21))
    assert got["curves"]["rl"]["seconds"] == [1.0] * 10 + [2.0] * 10
    assert got["curves"]["rl"]["kl"] == [0.5] * 10 + [None] * 10
    assert got["segments"] == [{"run_id": "r1", "steps": [1, 10]}, {"run_id": "r2", "steps": [11, 20]}]
    (out / "train-run.json").write_text(json.dumps({"run_id": "r1"}))
    with pytest.raises(ConfigError, match="give --resumed-from in the order the runs ran"):
        mod.main([*argv, "--resumed-from", "r2"])


@pytest.mark.parametrize("record", sorted((ROOT / "results").glob("long-run-*.json")), ids=lambda p: p.name)
def test_the_documented_long_run_tables_are_the_records(record):
    mod = _script()
    docs = (ROOT / "docs" / "training.md").read_text()
    marker = f"<!-- long-run tables: python scripts/rl_run_record.py tables results/{record.name} --every "
    assert marker in docs, f"docs/training.md prints no tables of {record.name}"
    every = int(docs.split(marker, 1)[1].split(" ", 1)[0])
    block = docs.split(marker, 1)[1].split("-->", 1)[1].split("<!-- end of long-run tables -->", 1)[0]
    assert block.strip() == mod.tables_of(json.loads(record.read_text()), every).strip()
