"""Per-run files (harness.results.outputs): ``harness export --run ID --samples --out DIR`` writes a
results JSON and a samples JSONL per dataset in lm-evaluation-harness's layout, and a short script
reading the samples back gets the scores ``harness export`` gives for that row."""

from __future__ import annotations

import csv
import json

import numpy as np
import pytest

from harness.cli import main
from harness.metrics.bootstrap import dataset_aggregate


def test_export_samples_read_back_into_the_exported_scores(fixture_db, tmp_path, capsys) -> None:
    run_id = fixture_db.run_ids["naive_rag"]
    out = tmp_path / "outputs"
    db = str(fixture_db.path)
    assert main(["export", "--run", run_id, "--samples", "--out", str(out), "--db", db]) == 0
    folder = out / "smollm2-135m-instruct"
    doc = json.loads((folder / f"results_{run_id}.json").read_text())
    assert doc["run_id"] == run_id and doc["method"] == "naive_rag" and doc["training"] == "none"
    assert (
        doc["protocol"]["id"] == fixture_db.protocol.protocol_id and "versions" in doc and "git_commit" in doc
    )
    files = {p.name for p in folder.glob("samples_*.jsonl")}
    assert (
        files == {f"samples_{d}_{run_id}.jsonl" for d in doc["results"]} == set(doc["samples_files"].values())
    )
    first = json.loads((folder / doc["samples_files"]["hotpotqa"]).read_text().splitlines()[0])
    for key in ("question", "golds", "prediction", "metrics", "turns", "retrieved_ids", "prompt_tokens"):
        assert key in first
    assert first["turns"] and {"kind", "text"} <= set(first["turns"][0])

    board = tmp_path / "board.csv"
    pid = fixture_db.protocol.protocol_id
    for metric in ("em", "f1"):
        assert (
            main(
                [
                    "export",
                    "--format",
                    "csv",
                    "--metric",
                    metric,
                    "--protocol",
                    pid,
                    "--db",
                    db,
                    "--out",
                    str(board),
                ]
            )
            == 0
        )
        row = next(r for r in csv.DictReader(board.open()) if r["method"] == "naive_rag")
        means = {}
        for d, per in doc["results"].items():
            got = {}
            for line in (folder / doc["samples_files"][d]).read_text().splitlines():
                s = json.loads(line)
                if metric in s["metrics"]:
                    got[s["sample_id"]] = s["metrics"][metric]
            v = np.array(list(got.values()))
            means[d] = float(v.mean())
            assert means[d] == pytest.approx(float(row[d]), rel=1e-12)  # the script's mean = export's
            agg = dataset_aggregate(v, binary=per[metric]["interval"].startswith("wilson"))
            assert (per[metric]["mean"], per[metric]["lo"], per[metric]["hi"]) == pytest.approx(
                (agg.mean, agg.lo, agg.hi)
            )
            if metric == "em":  # 0/1 for every row: the board's Wilson interval, the same
                assert (per[metric]["lo"], per[metric]["hi"]) == pytest.approx(
                    (float(row[f"{d}_lo"]), float(row[f"{d}_hi"]))
                )


def test_export_samples_errors_are_one_line(fixture_db, tmp_path, capsys) -> None:
    db = str(fixture_db.path)
    assert main(["export", "--run", "nope", "--samples", "--out", str(tmp_path / "o"), "--db", db]) == 2
    assert "no evaluation run 'nope'" in capsys.readouterr().err
    assert main(["export", "--samples", "--out", str(tmp_path / "o"), "--db", db]) == 2
    assert "--samples needs --run ID" in capsys.readouterr().err


@pytest.mark.slow
@pytest.mark.integration
def test_harness_run_output_path_reads_back_into_the_exported_scores(tmp_path, capsys) -> None:
    """``harness run --output-path`` (SmolLM2 on llama.cpp, two questions a dataset, ~30 s): the
    samples files a short script reads give the means ``harness export`` gives."""
    db, out = tmp_path / "r.duckdb", tmp_path / "out"
    argv = ["run", "--method", "direct", "--bench", "mini-multihop", "--limit", "2", "--threads", "1"]
    argv += [
        "--model",
        "smollm2-135m-instruct",
        "--db",
        str(db),
        "--output-path",
        str(out),
        "--yes",
        "--no-progress",
    ]
    assert main(argv) == 0
    (results,) = (out / "smollm2-135m-instruct").glob("results_*.json")
    doc = json.loads(results.read_text())
    board = tmp_path / "board.csv"
    for metric in ("em", "f1"):
        assert (
            main(["export", "--format", "csv", "--metric", metric, "--db", str(db), "--out", str(board)]) == 0
        )
        (row,) = list(csv.DictReader(board.open()))
        for d, name in doc["samples_files"].items():
            lines = [json.loads(x) for x in (results.parent / name).read_text().splitlines()]
            mean = float(np.mean([s["metrics"][metric] for s in lines if metric in s["metrics"]]))
            assert mean == pytest.approx(float(row[d]), rel=1e-12, abs=1e-12)
            assert doc["results"][d][metric]["mean"] == pytest.approx(mean)
    assert doc["git_commit"] is not None and doc["versions"]["python"] and doc["protocol"]["config"]["top_k"]
