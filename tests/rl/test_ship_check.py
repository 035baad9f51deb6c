"""Issue 57: ``scripts/ship_adapter.py check`` re-answers a shipped adapter's first N held-out
questions in the batches its committed evaluation answered them in. llama.cpp's greedy answer can
depend on a question's batch neighbours, so the engine here is a stand-in whose answer is the
committed one only when the question's batch is the committed batch (what Eval-RAR's adapter
showed on 2026-11-29: 19 of 20 when the first 20 were answered in id order, 20 of 20 in the
evaluation's batches)."""

from __future__ import annotations

from pathlib import Path
from types import SimpleNamespace

import pytest

from tests.support.scripts import load_script

ROOT = Path(__file__).resolve().parents[2]
RECORD = ROOT / "results" / "learning-eval_rar.json"
LABEL = "SFT+RL step 10 (shipped adapter)"


def _tool():
    return load_script("ship_adapter")


@pytest.fixture
def batch_bound_engine(monkeypatch):
    """evaluate_heldout replaced: the committed answer for a question answered in its committed
    batch, another answer otherwise; every call's (first id, number of questions) kept."""
    import harness.rl.heldout_eval as he

    record = he.load_record(RECORD)
    ev = next(e for e in he.record_evals(record) if e.label == LABEL)
    committed = dict(zip(ev.sample_ids, ev.greedy, strict=True))
    order = [e.id for e in he.heldout_questions(record["split"])]
    batches = {
        tuple(order[s : min(s + 8, hi)])
        for lo, hi in (p["questions"] for p in ev.meta["parts"])
        for s in range(lo, hi, 8)
    }
    calls: list[tuple[str, int]] = []

    def fake(checkpoint, questions, *, batch_size=8, **kw):
        qs = list(questions)
        calls.append((qs[0].id, len(qs)))
        greedy = []
        for s in range(0, len(qs), batch_size):
            chunk = tuple(q.id for q in qs[s : s + batch_size])
            greedy += [committed[q] if chunk in batches else f"{committed[q]} (other batch)" for q in chunk]
        return SimpleNamespace(sample_ids=tuple(q.id for q in qs), greedy=tuple(greedy))

    monkeypatch.setattr(he, "evaluate_heldout", fake)
    return order, calls, committed


def test_check_answers_the_first_questions_in_their_committed_batches(batch_bound_engine, capsys):
    order, calls, _ = batch_bound_engine
    assert _tool().main(["check", "smollm2+eval_rar", "--label", LABEL, "--n", "20", "--no-progress"]) == 0
    assert calls == [(order[0], 24)]  # the first three batches of the first part, whole
    assert "20 of 20 greedy answers equal the committed ones" in capsys.readouterr().out


def test_check_lists_a_differing_answer_and_fails(batch_bound_engine, monkeypatch, capsys):
    import harness.rl.heldout_eval as he

    order, _, committed = batch_bound_engine
    real = he.evaluate_heldout

    def one_off(*a, **kw):
        ev = real(*a, **kw)
        return SimpleNamespace(sample_ids=ev.sample_ids, greedy=("changed",) + ev.greedy[1:])

    monkeypatch.setattr(he, "evaluate_heldout", one_off)
    assert _tool().main(["check", "smollm2+eval_rar", "--label", LABEL, "--n", "5", "--no-progress"]) == 1
    out = capsys.readouterr().out
    assert f"{order[0]}: committed {committed[order[0]]!r}, now 'changed'" in out
    assert "4 of 5 greedy answers equal" in out


@pytest.fixture
def fake_adapter(monkeypatch):
    """checkpoint_adapter replaced: a few bytes at the path (what export does with them is the test)."""
    import harness.llm.gguf_lora as gl

    def fake(base, checkpoint, path, *, max_rank=None, storage="f32"):
        Path(path).write_bytes(b"GGUF" + bytes(60))
        return Path(path)

    monkeypatch.setattr(gl, "checkpoint_adapter", fake)


def _checkpoint(tmp_path: Path, **info) -> Path:
    import json

    d = tmp_path / info["stage"]
    d.mkdir()
    (d / "harness_train.json").write_text(json.dumps({"method": "tiresrag_r1", **info}))
    return d


def test_export_keeps_a_warm_start_apart_from_the_shipped_policy(fake_adapter, tmp_path):
    """A run in progress keeps its warm start and its policy beside it (``--to``); the warm start is
    named as one (``<alias>-sft``, preset ``...-sft``, "SFT warm start") and is refused as the
    method's shipped policy."""
    import json

    from harness.errors import ConfigError

    tool = _tool()
    sft = _checkpoint(tmp_path, stage="sft", steps=50)
    rl = _checkpoint(tmp_path, stage="rl", steps=5)
    common = [
        "export",
        "--method",
        "tiresrag_r1",
        "--recipe",
        "cpu-learn-grpo",
        "--record",
        "r.json",
        "--rank",
        "32",
    ]
    with pytest.raises(ConfigError, match="a warm start .harness sft. is not the method's trained policy"):
        tool.main([*common, "--checkpoint", str(sft)])
    out = tmp_path / "in-progress"
    assert tool.main([*common, "--checkpoint", str(sft), "--to", str(out)]) == 0
    assert tool.main([*common, "--checkpoint", str(rl), "--to", str(out)]) == 0
    warm = json.loads((out / "smollm2-sft.adapter.json").read_text())
    policy = json.loads((out / "smollm2.adapter.json").read_text())
    assert (warm["name"], warm["gguf"]) == ("smollm2+tiresrag_r1-sft", "smollm2-sft.gguf")
    assert warm["trained_by"]["algorithm"].startswith("SFT warm start")
    assert (policy["name"], policy["gguf"]) == ("smollm2+tiresrag_r1", "smollm2.gguf")
    assert policy["trained_by"]["algorithm"].endswith("5 steps of the recipe's 50")


def test_export_names_the_recipe_the_checkpoint_was_trained_with(fake_adapter, tmp_path):
    """A run with ``--recipe-override`` (When to Search's 10 steps, stage 2 from step 4): the
    manifest's algorithm line is the checkpoint's own ``recipe.json``, not the named recipe's
    defaults; a checkpoint of another recipe is refused."""
    import json

    from harness.errors import ConfigError
    from harness.methods_registry import get_trainable

    tool = _tool()
    stages = '[{"start_step": 0, "reward": "stage1"}, {"start_step": 4, "reward": "stage2"}]'
    _, used = get_trainable("when_to_search", "cpu-learn-dapo", ["steps=10", f"reward_stages={stages}"])
    rl = _checkpoint(tmp_path, stage="rl", steps=10)
    (rl / "recipe.json").write_text(used.model_dump_json())
    common = [
        "export",
        "--method",
        "when_to_search",
        "--record",
        "r.json",
        "--rank",
        "44",
        "--to",
        str(tmp_path),
    ]
    assert tool.main([*common, "--recipe", "cpu-learn-dapo", "--checkpoint", str(rl)]) == 0
    algorithm = json.loads((tmp_path / "smollm2.adapter.json").read_text())["trained_by"]["algorithm"]
    assert "reward stage1 from step 0, stage2 from step 4" in algorithm
    assert algorithm.endswith("LoRA; 10 steps")
    with pytest.raises(ConfigError, match="trained with recipe 'cpu-learn-dapo', not --recipe cpu-smoke"):
        tool.main([*common, "--recipe", "cpu-smoke", "--checkpoint", str(rl)])
