"""``harness export``: the app's views in files, round-tripped."""

from __future__ import annotations

import pandas as pd
import pytest

from harness.cli import main
from leaderboards import views
from leaderboards.export import build_view, to_markdown
from leaderboards.queries import open_results


def _board(fixture_db, metric="em"):
    return views.leaderboard_from_db(open_results(fixture_db.path), fixture_db.protocol.protocol_id, metric)


def test_csv_round_trip(fixture_db, tmp_path):
    out = tmp_path / "lb.csv"
    pid = fixture_db.protocol.protocol_id
    assert (
        main(
            ["export", "--format", "csv", "--protocol", pid, "--db", str(fixture_db.path), "--out", str(out)]
        )
        == 0
    )
    back = pd.read_csv(out, keep_default_na=False, na_values=[""])
    expected = _board(fixture_db).display_frame(ci="bounds")
    assert list(back.columns) == list(expected.columns)
    assert list(back["method"]) == ["search_r1", "naive_rag", "direct", "direct"]
    for col in expected.columns:
        if expected[col].dtype.kind == "f":
            assert back[col].to_numpy() == pytest.approx(expected[col].to_numpy(), abs=1e-12, nan_ok=True), (
                col
            )
    assert back.set_index("method").loc["naive_rag", "avg_all"] == 0.5


def test_parquet_round_trip_is_exact(fixture_db, tmp_path):
    out = tmp_path / "lb.parquet"
    pid = fixture_db.protocol.protocol_id
    args = [
        "export",
        "--format",
        "parquet",
        "--metric",
        "f1",
        "--protocol",
        pid,
        "--db",
        str(fixture_db.path),
    ]
    assert main([*args, "--out", str(out)]) == 0
    pd.testing.assert_frame_equal(pd.read_parquet(out), _board(fixture_db, "f1").display_frame(ci="bounds"))


def test_markdown_to_stdout(fixture_db, capsys):
    pid = fixture_db.protocol.protocol_id
    assert main(["export", "--format", "markdown", "--protocol", pid, "--db", str(fixture_db.path)]) == 0
    text = capsys.readouterr().out
    assert text.startswith(f"**Leaderboard · EM · protocol mini ({pid})**")
    assert "| method | label | model | avg all | avg all 95% lo | avg all 95% hi | avg single-hop |" in text
    assert "| search_r1 | untrained policy | smollm2-135m-instruct | 0.7500 |" in text
    assert "| direct |  | qwen-test |  |  |  | 0.2500 |" in text  # no avg all without every dataset


def test_cost_and_reported_views(fixture_db, tmp_path):
    store = open_results(fixture_db.path)
    pid = fixture_db.protocol.protocol_id
    cost = build_view(store, "cost", protocol=pid, metric="em")
    assert cost.frame.set_index("method").loc["search_r1", "tokens"] == 535
    assert len(cost.frame) == 4
    rep = build_view(store, "reported", protocol=pid)
    assert rep.frame.set_index(["method", "dataset"]).loc[("naive_rag", "hotpotqa"), "measured"] == 0.5
    out = tmp_path / "rep.md"
    assert (
        main(
            [
                "export",
                "--format",
                "markdown",
                "--view",
                "reported",
                "--protocol",
                pid,
                "--db",
                str(fixture_db.path),
                "--out",
                str(out),
            ]
        )
        == 0
    )
    assert "| paper | table | method | model (paper) |" in out.read_text()


def test_export_refuses_to_mix_protocols(fixture_db, capsys):
    assert main(["export", "--format", "markdown", "--db", str(fixture_db.path)]) == 2
    err = capsys.readouterr().err
    assert "holds runs of 2 protocols, which are never mixed" in err
    assert fixture_db.other_protocol.protocol_id in err


def test_export_errors(fixture_db, tmp_path, capsys):
    pid = fixture_db.protocol.protocol_id
    assert main(["export", "--format", "csv", "--protocol", pid, "--db", str(fixture_db.path)]) == 2
    assert "--format csv writes a file: give --out PATH" in capsys.readouterr().err
    assert (
        main(
            [
                "export",
                "--format",
                "csv",
                "--protocol",
                pid,
                "--metric",
                "nope",
                "--db",
                str(fixture_db.path),
                "--out",
                str(tmp_path / "x"),
            ]
        )
        == 2
    )
    assert "no values of metric 'nope'" in capsys.readouterr().err
    assert (
        main(
            ["export", "--format", "csv", "--db", str(tmp_path / "none.duckdb"), "--out", str(tmp_path / "x")]
        )
        == 2
    )
    assert "no results database here" in capsys.readouterr().err


def test_markdown_escapes_cells():
    df = pd.DataFrame({"a": ["x|y"], "b": [float("nan")], "c": [0.5]})
    assert to_markdown(df) == "| a | b | c |\n|---|---|---|\n| x\\|y |  | 0.5000 |\n"
