"""Issue 45, failure 4: ``harness train --resume`` silently started over where nothing was saved
(``save_every: 0``, every ``cpu-smoke`` recipe), and the killed run's row stayed ``running``
forever, even when resuming from a checkpoint worked.

The trainer itself is replaced by a stand-in (what is checked is the command's bookkeeping, not
training); the last test saves and resumes a real checkpoint of a toy model. The killed run is a real dead
process: its row's owner is the pid of a child that has exited."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path
from types import SimpleNamespace

import pytest

from harness.cli import main
from harness.errors import ConfigError
from tests.reliability.helpers import one_line, rows


@pytest.fixture
def trained(tmp_path, monkeypatch):
    """``harness train`` with a stand-in trainer that counts its runs (and whether it resumed)."""
    import harness.rl.trainer as trainer_module

    calls: list[dict] = []

    class Trainer:
        def __init__(self, method, recipe, **kw):
            calls.append(kw)

        def train(self):
            return SimpleNamespace(checkpoint=tmp_path / "out" / "final")

    monkeypatch.setattr(trainer_module, "Trainer", Trainer)
    db, out = tmp_path / "t.duckdb", tmp_path / "out"
    argv = ["train", "--method", "search_r1", "--recipe", "cpu-smoke", "--db", str(db), "--out", str(out)]

    def train(*extra: str) -> int:
        monkeypatch.setattr(sys, "argv", ["harness", *argv, *extra])
        return main([*argv, *extra])

    return SimpleNamespace(train=train, calls=calls, db=db, out=out)


def _kill9(db: Path) -> str:
    """Make the newest train run look killed by ``kill -9``: ``running``, owned by a dead pid."""
    dead = subprocess.Popen([sys.executable, "-c", "pass"])
    dead.wait()
    import duckdb

    with duckdb.connect(str(db)) as con:
        (run_id,) = con.execute("SELECT run_id FROM runs ORDER BY started_at DESC LIMIT 1").fetchone()
        con.execute(
            "UPDATE runs SET status = 'running', ended_at = NULL, owner_pid = ? WHERE run_id = ?",
            [dead.pid, run_id],
        )
    return run_id


@pytest.mark.integration
def test_resume_with_nothing_saved_is_refused_in_one_line(trained, capsys):
    assert trained.train() == 0
    killed = _kill9(trained.db)
    capsys.readouterr()
    assert trained.train("--resume") == 2
    line = one_line(capsys.readouterr().err)
    assert line.startswith("error: --resume: nothing was saved under ") and "save_every" in line, line
    assert len(trained.calls) == 1  # nothing was trained again from step 1
    assert rows(trained.db, "SELECT run_id, status FROM runs") == [(killed, "interrupted")]


@pytest.mark.integration
def test_resume_says_where_it_resumes_from_and_closes_the_dead_run(trained, capsys):
    assert trained.train() == 0
    killed = _kill9(trained.db)
    ckpt = trained.out / "checkpoint"
    ckpt.mkdir()
    (ckpt / "trainer_state.pt").write_bytes(b"stand-in")
    (ckpt / "progress.json").write_text(json.dumps({"step": 2, "steps": 3, "run_id": killed}))
    capsys.readouterr()
    assert trained.train("--resume") == 0
    err = capsys.readouterr().err
    assert f"resuming from {ckpt}: step 2 of 3, saved by run {killed}" in err, err
    assert trained.calls[-1]["resume"] is True
    status = dict(rows(trained.db, "SELECT run_id, status FROM runs"))
    assert status.pop(killed) == "interrupted"  # no longer `running` forever
    assert list(status.values()) == ["complete"]  # the resumed run


def test_a_real_checkpoint_says_its_step_and_run(toy_model_dir, tmp_path):
    """The trainer's checkpoint records what ``--resume`` prints (read without loading the state),
    and a trainer resumed from it runs the steps left."""
    from harness.rl.checkpoint import saved_checkpoint
    from harness.rl.trainer import Trainer
    from tests.rl.test_trainer import PROTO, FavouriteWords, examples, toy_recipe

    recipe = toy_recipe(2).model_copy(update={"save_every": 1})

    def trainer(resume: bool) -> Trainer:
        return Trainer(
            FavouriteWords(),
            recipe,
            model=str(toy_model_dir),
            out_dir=tmp_path / "out",
            protocol=PROTO,
            retriever=None,
            examples=examples(4),
            log=lambda s: None,
            run_id="train-toy-1",
            resume=resume,
        )

    assert saved_checkpoint(tmp_path / "out") is None
    assert len(trainer(False).train().steps) == 2
    ckpt, progress = saved_checkpoint(tmp_path / "out")
    assert ckpt == tmp_path / "out" / "checkpoint"
    assert progress == {"step": 1, "steps": 2, "run_id": "train-toy-1"}
    assert [s.step for s in trainer(True).train().steps] == [1]  # only the step after the checkpoint


def test_kept_policies_are_the_trained_ones_every_n_steps_and_the_last(toy_model_dir, tmp_path):
    """``--keep-every 2`` over 3 steps keeps steps 2 and 3 (the last: the final checkpoint has its
    LoRA merged), each loadable by ``saved_policy`` with its step and recipe; the last kept one is
    the final model's weights, and step 2's differs from it (the policy trained in step 3)."""
    import torch
    from transformers import AutoModelForCausalLM

    from harness.rl.trainer import Trainer, saved_policy
    from tests.rl.test_trainer import PROTO, FavouriteWords, examples, toy_recipe

    recipe = toy_recipe(3)
    out = tmp_path / "out"
    Trainer(
        FavouriteWords(),
        recipe,
        model=str(toy_model_dir),
        out_dir=out,
        protocol=PROTO,
        retriever=None,
        examples=examples(4),
        log=lambda s: None,
        run_id="train-toy-2",
        keep_every=2,
    ).train()
    assert sorted(p.name for p in (out / "kept").iterdir()) == ["step-2", "step-3"]
    final = AutoModelForCausalLM.from_pretrained(str(out / "final")).state_dict()
    last, r, step = saved_policy(str(toy_model_dir), out / "kept" / "step-3")
    assert step == 3 and r == recipe
    assert all(torch.equal(v, final[k]) for k, v in last.state_dict().items())
    two, _, step = saved_policy(str(toy_model_dir), out / "kept" / "step-2")
    assert step == 2 and any(not torch.equal(v, final[k]) for k, v in two.state_dict().items())
    with pytest.raises(ConfigError, match="--keep-every -1"):
        Trainer(
            FavouriteWords(), recipe, model="x", out_dir=out, protocol=PROTO, retriever=None, keep_every=-1
        )


def test_resume_of_a_run_never_started_writes_no_file(trained, capsys):
    assert trained.train("--resume") == 2
    line = one_line(capsys.readouterr().err)
    assert line.startswith("error: --resume: nothing was saved under ") and "save_every 0" in line, line
    assert not trained.db.exists() and not trained.out.exists() and trained.calls == []
