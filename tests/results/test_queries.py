"""Read queries (``harness.results.queries``): values reach DuckDB only as parameters, never spliced into
SQL text, and ids that would break spliced SQL read back exactly."""

from __future__ import annotations

import ast
import re
from pathlib import Path

import pytest

from harness.results import queries
from harness.results.store import RunRecord, ScoredSample, Store
from harness.types import Trajectory, Turn

ROOT = Path(__file__).resolve().parents[2]
SQL_WORD = re.compile(r"\b(SELECT|INSERT|UPDATE|DELETE|WHERE)\b")
# names that may be spliced: the store's own table names and insert verb, never a value
SPLICE_OK = {"table", "verb"}


def spliced_sql(source: str) -> list[int]:
    """Lines of ``source`` that build SQL text from values: an f-string with SQL words and a
    spliced expression other than :data:`SPLICE_OK`, ``.format`` on SQL text or on a ``*_SQL``
    constant, or ``%`` on SQL text."""
    out = []
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, ast.JoinedStr):
            text = "".join(v.value for v in node.values if isinstance(v, ast.Constant))
            spliced = [v.value for v in node.values if isinstance(v, ast.FormattedValue)]
            if SQL_WORD.search(text) and any(
                not (isinstance(e, ast.Name) and e.id in SPLICE_OK) for e in spliced
            ):
                out.append(node.lineno)
        elif (
            isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute) and node.func.attr == "format"
        ):
            base = node.func.value
            if (
                isinstance(base, ast.Constant) and isinstance(base.value, str) and SQL_WORD.search(base.value)
            ) or (isinstance(base, ast.Name) and base.id.endswith("_SQL")):
                out.append(node.lineno)
        elif isinstance(node, ast.BinOp) and isinstance(node.op, ast.Mod):
            left = node.left
            if isinstance(left, ast.Constant) and isinstance(left.value, str) and SQL_WORD.search(left.value):
                out.append(node.lineno)
    return out


def test_the_check_finds_spliced_sql():
    assert spliced_sql('ids = ", ".join(ids)\nq = SUMMARY_SQL.format(ids=ids)') == [2]
    assert spliced_sql("q = f\"SELECT * FROM runs WHERE run_id = '{run_id}'\"") == [1]
    assert spliced_sql('q = f"""WITH latest AS ({LATEST.format(where=w)}) SELECT 1"""') == [1]
    assert spliced_sql("q = \"SELECT * FROM runs WHERE run_id = '%s'\" % rid") == [1]
    assert spliced_sql('q = f"DELETE FROM {table} WHERE run_id = ?"') == []
    assert spliced_sql('msg = f"no run {run_id}"') == []


def test_no_module_splices_values_into_sql():
    found = [
        f"{path.relative_to(ROOT)}:{line}"
        for top in ("harness", "leaderboards")
        for path in sorted((ROOT / top).rglob("*.py"))
        for line in spliced_sql(path.read_text())
    ]
    assert found == []


# -- ids that spliced SQL would break ----------------------------------------------------------------
ODD_IDS = ["it's", "x'); DROP TABLE runs; --"]


@pytest.fixture
def store(tmp_path) -> Store:
    s = Store(tmp_path / "q.duckdb", lock_timeout=5.0)
    for i, run_id in enumerate(ODD_IDS):
        s.create_run(
            RunRecord(
                run_id=run_id,
                kind="eval",
                method=f"m{i}",
                model="smollm2-135m-instruct",
                backend="transformers",
                protocol_id="p",
                protocol_name="mini",
                protocol_json="{}",
                method_spec_hash="h",
                method_spec_json="{}",
                bench="b",
                status="complete",
            )
        )
        t = Trajectory(
            example_id="q0",
            dataset="nq",
            question="q?",
            answers=["a"],
            turns=[
                Turn(
                    index=0, kind="generate", text="a", prompt_tokens=8, prefill_tokens=3, completion_tokens=2
                )
            ],
            prediction="a",
            extraction_status="ok",
            meta={"src": "dataset" if i == 0 else "gold+bm25"},
        )
        s.add_samples(run_id, [ScoredSample(trajectory=t, metrics={"em": 1.0 - i, "f1": 0.5}, position=0)])
    return s


def test_run_summaries_read_odd_run_ids(store):
    df = queries.run_metrics(store, ODD_IDS)
    assert [(r.method, r.dataset, r.n, r.errors, r.em, r.f1, r.answered) for r in df.itertuples()] == [
        ("m0", "nq", 1, 0, 1.0, 0.5, 1.0),
        ("m1", "nq", 1, 0, 0.0, 0.5, 1.0),
    ]
    pre = queries.prefill_summary(store, ODD_IDS[1:])
    assert [(r.method, r.prompt_tokens, r.prefill_tokens) for r in pre.itertuples()] == [("m1", 8, 3)]
    refs = queries.reference_sources(store, ODD_IDS, "src")
    assert [(r.method, r.own_refs, r.substitute_refs) for r in refs.itertuples()] == [
        ("m0", 1, 0),
        ("m1", 0, 1),
    ]
    assert int(store.query("SELECT count(*) FROM runs").iloc[0, 0]) == 2


def test_judge_and_cost_reads_take_odd_run_ids(store):
    rows = queries.judgeable_samples(store, [ODD_IDS[1]])
    assert [r[:4] for r in rows] == [(ODD_IDS[1], "m1", "nq", "q0")]
    m = queries.metric_values(store, ODD_IDS, ["em"])
    assert sorted(zip(m["run_id"], m["value"], strict=True)) == [(ODD_IDS[0], 1.0), (ODD_IDS[1], 0.0)]
    assert queries.newest_eval_run(store, "m1", "b") == ODD_IDS[1]
    assert queries.newest_eval_run(store, "m1", "other") is None
    costs = queries.cost_rows(store, ODD_IDS)
    assert list(costs["method"]) == ["m0", "m1"] and list(costs["n"]) == [1, 1]


def test_empty_run_id_lists_read_nothing(store):
    assert queries.run_metrics(store, []).empty
    assert queries.prefill_summary(store, []).empty
    assert queries.judgeable_samples(store, []) == []


def test_latest_values_filters_metrics_as_parameters(store):
    every = queries.latest_values(store, "p")
    assert sorted(set(every["metric"])) == ["em", "f1"]
    em = queries.latest_values(store, "p", metrics=["em"])
    assert list(em["metric"]) == ["em", "em"] and list(em["run_id"]) == ODD_IDS
    assert queries.latest_values(store, "p", metrics=[]).empty
    assert queries.latest_values(store, "other").empty
