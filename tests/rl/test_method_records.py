"""Issue 57: each method's committed learning record (``results/learning-<method>.json``,
``scripts/method_record.py``) covers the split's held-out ids in every evaluation, trained on no
held-out id in any stage, and its tables are what docs/training.md prints; each shipped adapter
points at a record of its own method that evaluates the shipped preset itself."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from harness.errors import ConfigError
from tests.support.scripts import load_script

ROOT = Path(__file__).resolve().parents[2]
RECORDS = sorted((ROOT / "results").glob("learning-*.json"))
METHOD_RECORDS = [p for p in RECORDS if "stages" in json.loads(p.read_text())]
MANIFESTS = sorted((ROOT / "methods").glob("*/trained/*.adapter.json"))


def _tool():
    return load_script("method_record")


@pytest.mark.parametrize("path", METHOD_RECORDS, ids=lambda p: p.name)
def test_a_method_record_covers_the_held_out_ids_and_trained_on_none_of_them(path):
    tool = _tool()
    record = json.loads(path.read_text())
    tool.check(record)
    from harness.rl.heldout_eval import heldout_questions

    held = {e.id for e in heldout_questions(record["split"])}
    assert len(held) >= 400
    for stage in record["stages"].values():
        assert stage["questions"] and not held & set(stage["questions"])
    assert record["stages"]["rl"]["steps_done"] == len(record["curves"]["rl"]["step"])


@pytest.mark.parametrize("path", METHOD_RECORDS, ids=lambda p: p.name)
def test_a_method_records_tables_are_in_the_training_page(path):
    """The page's block is the record's ``tables`` output (the block's command is checked
    byte for byte by test_training_tables; here: the block exists for every record)."""
    page = (ROOT / "docs" / "training.md").read_text()
    assert f"python scripts/method_record.py tables results/{path.name}" in page


def test_check_refuses_a_stage_that_drew_a_held_out_question():
    from harness.rl.heldout_eval import heldout_questions

    tool = _tool()
    held = heldout_questions("learning-multihop")[0].id
    record = {
        "method": "m",
        "split": "learning-multihop",
        "evaluations": [],
        "stages": {"sft": {"questions": ["not-held-out"]}, "rl": {"questions": ["x", held]}},
    }
    with pytest.raises(ConfigError, match=f"stage rl trained on 1 held-out question.*{held}"):
        tool.check(record)
    record["stages"]["rl"]["questions"] = ["x"]
    tool.check(record)


def test_rl_draws_stop_at_the_last_logged_step(tmp_path):
    tool = _tool()
    (tmp_path / "rl").mkdir()
    rows = [{"step": s, "round": r, "ids": [f"q{s}{r}"]} for s in range(3) for r in range(2)]
    (tmp_path / "rl" / "rl_questions.jsonl").write_text("".join(json.dumps(r) + "\n" for r in rows))
    assert [(d["step"], d["round"]) for d in tool._rl_draws(tmp_path, 2)] == [(0, 0), (0, 1), (1, 0), (1, 1)]


@pytest.mark.parametrize("path", MANIFESTS, ids=lambda p: p.parent.parent.name)
def test_a_shipped_adapter_has_its_methods_record_and_an_evaluation_of_itself(path):
    from harness.llm.adapters import load_manifest

    preset = load_manifest(path)  # checks the GGUF's size and sha256
    assert preset.size <= 10_000_000
    record = json.loads((ROOT / preset.record).read_text())
    assert record["method"] == preset.method == path.parent.parent.name
    assert record["recipe"] == preset.trained_by["recipe"]
    assert any(e["model"] == preset.name for e in record["evaluations"]), (
        f"{preset.record}: no evaluation of the shipped preset {preset.name}"
    )


@pytest.mark.parametrize("path", METHOD_RECORDS, ids=lambda p: p.name)
def test_the_by_dataset_table_splits_each_evaluation_by_the_splits_datasets(path):
    """Each row's cells hold the evaluation's own per-question values, grouped by the split's
    held-out ids: the counts add up to the evaluation's n and the n-weighted EM to its mean."""
    from harness.rl.heldout_eval import by_dataset_table, record_evals
    from harness.rl.split import load_split

    record = json.loads(path.read_text())
    groups = load_split(record["split"]).heldout
    evs = record_evals(record)
    table = by_dataset_table(evs, groups).splitlines()
    assert table[0] == "| evaluation | " + " | ".join(f"{d} EM / F1 (n)" for d in groups) + " |"
    for ev, line in zip(evs, table[2:], strict=True):
        cells = [c.strip() for c in line.strip("|").split("|")]
        assert cells[0] == ev.label
        ns = [int(c.rsplit("(", 1)[1].rstrip(")")) for c in cells[1:]]
        ems = [float(c.split(" / ")[0]) for c in cells[1:]]
        assert sum(ns) == ev.n
        assert sum(n * em for n, em in zip(ns, ems, strict=True)) / ev.n == pytest.approx(
            sum(ev.greedy_em) / ev.n, abs=0.0005 * len(ns)
        )
    stray = [groups[next(iter(groups))][0]]
    other = {d: [i for i in ids if i not in stray] for d, ids in groups.items()}
    with pytest.raises(ConfigError, match="is in none of the datasets"):
        by_dataset_table(evs[:1], other)


def test_build_stitches_a_resumed_rl_run_and_names_each_runs_steps_and_commit(tmp_path, monkeypatch):
    """RL died after step 3 with its checkpoint at step 2 and was resumed under a new run id: the
    record's curve is steps 1-2 of the first run and 3-4 of the second, ``segments`` says so with
    each run's commit; without ``--resumed-from`` the build is refused."""
    from harness.results.store import Store
    from harness.rl.heldout_eval import RECORD_SCHEMA, heldout_questions
    from tests.results.test_store import record
    from tests.rl.test_heldout_eval import _eval

    monkeypatch.chdir(tmp_path)
    out, db = Path("run"), Path("run.duckdb")
    (out / "sft" / "final").mkdir(parents=True)
    (out / "rl").mkdir()
    (out / "sft" / "final" / "harness_train.json").write_text(json.dumps({"questions": ["t1", "t2"]}))
    (out / "rl" / "train-run.json").write_text(json.dumps({"run_id": "train-2"}))
    # step 2 drawn twice (died, redone); step 4 drawn, not done
    draws = [(0, "t3"), (1, "t4"), (2, "t5"), (2, "t5"), (3, "t6"), (4, "t7")]
    (out / "rl" / "rl_questions.jsonl").write_text(
        "".join(json.dumps({"step": s, "round": 0, "ids": [q]}) + "\n" for s, q in draws)
    )
    store = Store(db)
    for run_id, commit, command in (
        ("sft-m-1", "a" * 40, "harness sft"),
        ("train-1", "b" * 40, "harness train"),
        ("train-2", "c" * 40, "harness train --resume"),
    ):
        store.create_run(
            record(run_id, kind="train", method="m", git_commit=commit, command=command, status="complete")
        )
    store.add_train_steps("sft-m-1", 0, {"loss": 1.0})
    for step in range(3):
        store.add_train_steps("train-1", step, {"reward": 0.1 * step})
    for step in range(2, 4):
        store.add_train_steps("train-2", step, {"reward": 1.0})
    del store
    ids = [q.id for q in heldout_questions("learning-multihop")]
    for label in ("A", "B"):
        ev = _eval(label, [1, 0] * (len(ids) // 2), ids=ids).to_dict()
        rec = {"schema": RECORD_SCHEMA, "commit": "d" * 40, "split": "learning-multihop", "evaluations": [ev]}
        Path(f"{label}.json").write_text(json.dumps(rec))
    tool = _tool()
    argv = ["build", "--method", "m", "--recipe", "r", "--out-dir", str(out), "--db", str(db)]
    argv += ["--evals", "A.json", "B.json", "--pair", "A,B", "--record", "rec.json"]
    import harness.results.lifecycle as lifecycle

    # built from an exported copy (no git), as the learning runs are: the record names HARNESS_COMMIT
    monkeypatch.setattr(lifecycle, "_GIT_COMMIT", "")
    monkeypatch.setenv("HARNESS_COMMIT", "3de3417")
    assert tool.main([*argv, "--resumed-from", "train-1"]) == 0
    got = json.loads(Path("rec.json").read_text())
    assert got["commit"] == "3de3417"
    rl = got["stages"]["rl"]
    assert got["curves"]["rl"] == {"step": [1, 2, 3, 4], "reward": [0.0, 0.1, 1.0, 1.0]}
    assert rl["run_id"] == "train-2" and rl["steps_done"] == 4
    assert rl["segments"] == [
        {"run_id": "train-1", "steps": [1, 2], "commit": "b" * 40, "command": "harness train"},
        {"run_id": "train-2", "steps": [3, 4], "commit": "c" * 40, "command": "harness train --resume"},
    ]
    assert rl["questions"] == ["t3", "t4", "t5", "t6"]
    assert got["stages"]["sft"]["questions"] == ["t1", "t2"]
    with pytest.raises(
        ConfigError, match="RL run train-2 starts at step 3: .* give that run's id with --resumed-from"
    ):
        tool.main(argv)  # the last run alone would be a curve of steps 3-4 and the draws of 1-2


WARM_STARTS = sorted((ROOT / "results" / "warm-starts").glob("*/*.adapter.json"))


@pytest.mark.parametrize("path", WARM_STARTS, ids=lambda p: p.parent.name)
def test_a_kept_warm_start_is_the_adapter_its_record_evaluated(path):
    """A warm start kept beside its record (results/warm-starts) matches its manifest's size and sha256,
    is its method's, and is the adapter of its record's warm-start evaluation (by file name)."""
    from harness.llm.adapters import load_manifest, verified_gguf

    warm = load_manifest(path)
    verified_gguf(warm)
    assert warm.method == path.parent.name and warm.trained_by["algorithm"].startswith("SFT warm start")
    record = json.loads((ROOT / warm.record).read_text())
    assert record["method"] == warm.method
    evs = [e for e in record["evaluations"] if e["label"] == "SFT (warm start)"]
    assert [e["meta"]["adapters"] for e in evs] == [[warm.gguf.name]]


@pytest.mark.parametrize("path", METHOD_RECORDS, ids=lambda p: p.name)
def test_the_summary_row_is_the_shipped_policy_against_its_warm_start_question_by_question(path):
    """The summary's row, recomputed from the record's per-question rows by hand: each greedy EM,
    the paired EM difference and the questions gained and lost (aligned by id); the page's summary
    block lists every method record."""
    rel = f"results/{path.name}"
    record = json.loads(path.read_text())
    row = [c.strip() for c in _tool().summary([rel]).splitlines()[2].strip("|").split("|")]
    by = {e["label"]: {r["id"]: float(r["em"]) for r in e["rows"]} for e in record["evaluations"]}
    pol = next(e for e in record["evaluations"] if e["model"] == f"smollm2+{record['method']}")
    warm, new = by["SFT (warm start)"], by[pol["label"]]
    assert set(warm) == set(new)
    assert row[0] == f"`{record['method']}`" and row[2].startswith(f"{len(new)} ")
    assert row[3] == f"{sum(warm.values()) / len(warm):.3f} → {sum(new.values()) / len(new):.3f}"
    diff = sum(new[q] - warm[q] for q in new) / len(new)
    assert row[4].startswith(f"{diff:+.3f} [")
    assert row[5] == f"{sum(new[q] > warm[q] for q in new)} / {sum(new[q] < warm[q] for q in new)}"
    page = (ROOT / "docs" / "training.md").read_text()
    block = next(line for line in page.splitlines() if line.startswith("<!-- summary tables:"))
    assert rel in block.split()


def test_the_summary_refuses_a_record_whose_policy_is_not_shipped(tmp_path):
    tool = _tool()
    record = json.loads((ROOT / "results" / "learning-r_search.json").read_text())
    for e in record["evaluations"]:
        e["model"] = e["model"].replace("smollm2+r_search", "runs/r_search/rl/step-10")
    (tmp_path / "r.json").write_text(json.dumps(record))
    with pytest.raises(ConfigError, match=r"0 evaluations of a shipped r_search adapter"):
        tool.summary([str(tmp_path / "r.json")])


def test_a_stage_command_from_another_exported_copy_keeps_no_machine_path():
    """``build`` runs from one exported copy; a stage that ran from another logged that copy's
    ``harness/__main__.py``: its checkout becomes ``.`` as the building copy's does, and the runs
    folder ``$RUNS``."""
    tool = _tool()
    roots = [("/m/runs", "$RUNS"), ("/m/src/src-5900dc1", ".")]
    other = "/m/src/src-8dbb1ac/harness/__main__.py sft --method arena --out /m/runs/arena/sft"
    assert (
        tool._portable_command(other, roots)
        == "./harness/__main__.py sft --method arena --out $RUNS/arena/sft"
    )
    own = "/m/src/src-5900dc1/harness/__main__.py train --model /m/runs/arena/sft/final"
    assert tool._portable_command(own, roots) == "./harness/__main__.py train --model $RUNS/arena/sft/final"
    assert tool._portable_command("harness sft --out /m/runs/x", roots) == "harness sft --out $RUNS/x"
    assert tool._portable_command(None, roots) is None
