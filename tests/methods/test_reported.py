"""The papers' published numbers: every table row present (counted against the papers), the printed
averages consistent with the printed values (catches transcription slips), and loadable into the store."""

from __future__ import annotations

from collections import Counter, defaultdict

import pytest

from harness.store import Store
from methods.eval_rar.method import EvalRAR
from methods.r_search.method import RSearch
from methods.search_r1.method import SearchR1

SEVEN = {"nq", "triviaqa", "popqa", "hotpotqa", "2wikimultihopqa", "musique", "bamboogle"}
MULTI = ("hotpotqa", "2wikimultihopqa", "musique", "bamboogle")
SINGLE = ("nq", "triviaqa", "popqa")

# rows per table = printed rows x printed value columns
EXPECTED = {
    # arXiv 2503.09516 v5: Table 2 11 methods x {7B, 3B} x (7 sets + avg); Table 3 GRPO 3B-base, 3B-instruct,
    # 7B-base (8 each) + 7B-instruct avg; Table 4 7B-base w/o mask (8) + 3B-base avg; Tables 5, 7, 8 averages
    "search_r1": {
        "Table 2": 22 * 8,
        "Table 3": 3 * 8 + 1,
        "Table 4": 8 + 1,
        "Table 5": 2,
        "Table 7": 3,
        "Table 8": 3,
    },
    # Eval-RAR: Table 1 14 rows x 8, Table 2 4 rows x 8
    "eval_rar": {"Table 1": 14 * 8, "Table 2": 4 * 8},
    # R-Search: Table 2 9 methods x {3B, 7B} x 17; Table 6 4 x 14; Table 7 4 x 16
    "r_search": {"Table 2": 18 * 17, "Table 6": 4 * 14, "Table 7": 4 * 16},
}
METHODS = {"search_r1": SearchR1(), "eval_rar": EvalRAR(), "r_search": RSearch()}


def _rows(paper):
    return METHODS[paper].reported()


@pytest.mark.parametrize("paper", sorted(EXPECTED))
def test_row_counts_per_table(paper):
    rows = _rows(paper)
    assert Counter(r.setting.split(":")[0] for r in rows) == EXPECTED[paper]
    assert {r.paper for r in rows} == {paper}


@pytest.mark.parametrize("paper", sorted(EXPECTED))
def test_rows_are_well_formed_and_unique(paper):
    rows = _rows(paper)
    keys = Counter((r.method, r.model, r.dataset, r.metric, r.setting) for r in rows)
    assert max(keys.values()) == 1  # the store's primary key
    for r in rows:
        assert 0.0 <= r.value <= 1.0
        assert r.dataset in SEVEN | {"avg", "avg_multihop", "avg_singlehop"}
        assert r.metric in {"em", "f1", "em_f1_mean"}
        assert r.source and r.model.startswith("Qwen2.5-")
        assert r.setting.split(":")[0] in r.source  # the table is cited


def _by_row(rows):
    out = defaultdict(dict)
    for r in rows:
        out[(r.method, r.model, r.setting)][(r.dataset, r.metric)] = r
    return out


@pytest.mark.parametrize("paper", ["search_r1", "eval_rar"])
def test_em_averages_match_the_seven_values(paper):
    checked, flagged = 0, []
    for cells in _by_row(_rows(paper)).values():
        if len(cells) != 8:
            continue
        mean = sum(cells[(d, "em")].value for d in SEVEN) / 7
        avg = cells[("avg", "em")]
        if "inconsistent" in avg.note:
            flagged.append((avg.method, avg.model, round(mean, 3), avg.value))
        else:
            assert abs(mean - avg.value) <= 0.001, avg
        checked += 1
    assert checked == {"search_r1": 22 + 3 + 1, "eval_rar": 18}[paper]
    # the one printed average that disagrees with its row is flagged, not silently kept
    assert flagged == {"search_r1": [("ircot", "Qwen2.5-7B-Instruct", 0.226, 0.239)], "eval_rar": []}[paper]


def test_r_search_block_averages_match_except_the_erratum():
    checked = 0
    errata = 0
    for cells in _by_row(_rows("r_search")).values():
        if ("hotpotqa", "em") not in cells or ("avg_multihop", "em_f1_mean") not in cells:
            continue
        mh = [cells[(d, m)].value for d in MULTI for m in ("em", "f1")]
        sh = [cells[(d, m)].value for d in SINGLE for m in ("em", "f1")]
        assert abs(sum(mh) / 8 - cells[("avg_multihop", "em_f1_mean")].value) <= 0.001
        assert abs(sum(sh) / 6 - cells[("avg_singlehop", "em_f1_mean")].value) <= 0.001
        overall = cells.get(("avg", "em_f1_mean"))
        if overall is None:
            continue
        if "erratum" in overall.note:
            errata += 1
            assert abs((sum(mh) + sum(sh)) / 14 - 0.405) <= 0.001 and overall.value == 0.38
        else:
            assert abs((sum(mh) + sum(sh)) / 14 - overall.value) <= 0.001
        checked += 1
    assert (checked, errata) == (18, 1)


def test_percent_tables_are_scaled_exactly():
    rows = {(r.method, r.model, r.dataset, r.metric, r.setting): r for r in _rows("r_search")}
    assert rows[("r_search", "Qwen2.5-7B-Instruct", "2wikimultihopqa", "f1", "Table 2")].value == 0.777
    ppo = rows[("r_search", "Qwen2.5-3B-Instruct", "hotpotqa", "f1", "Table 7: PPO")]
    assert ppo.value == 0.5242 and "52.4 in Table 4" in ppo.note


def test_reported_rows_load_into_the_store(tmp_path):
    store = Store(tmp_path / "r.duckdb")
    for paper, m in METHODS.items():
        store.replace_reported(paper, m.reported())
    n = store.query("SELECT paper, count(*) AS n FROM reported GROUP BY paper ORDER BY paper")
    assert dict(zip(n["paper"], n["n"], strict=True)) == {p: sum(v.values()) for p, v in EXPECTED.items()}


# --- the reported.yaml format: harness.reported.load_reported ---------------------------------

GOOD = """\
paper: toy
judges:
  J: {model: m1, prompt: default}
tables:
  - table: Table 7
    source: Toy (2025), Table 7
    scale: 0.01
    columns: [hotpotqa/em, hotpotqa/f1, hotpotqa/J]
    rows:
      - label: Toy (PPO)
        method: toy
        model: Qwen2.5-3B
        variant: PPO
        note: trained by us
        values: [42.0, 52.42, null]
        cell_notes: {hotpotqa/f1: printed 52.4 in Table 4}
      - method: base
        model: Qwen2.5-3B
        values: [10, 20.5, 33.3]
"""


def _write(tmp_path, text, name="reported.yaml"):
    p = tmp_path / name
    p.write_text(text, encoding="utf-8")
    return p


def test_yaml_rows_scale_round_and_join_notes(tmp_path):
    from harness.judge.prompts import get_prompt
    from harness.reported import load_reported
    from harness.store import ReportedRow

    judge = f"judge@m1:{get_prompt('default').prompt_hash}"
    rows = load_reported(_write(tmp_path, GOOD))
    src = "Toy (2025), Table 7"
    assert rows == [
        ReportedRow("toy", "toy", "Qwen2.5-3B", "hotpotqa", "em", 0.42, src, "Table 7: PPO",
                    "paper label: Toy (PPO); trained by us"),
        ReportedRow("toy", "toy", "Qwen2.5-3B", "hotpotqa", "f1", 0.5242, src, "Table 7: PPO",
                    "paper label: Toy (PPO); trained by us; printed 52.4 in Table 4"),
        ReportedRow("toy", "base", "Qwen2.5-3B", "hotpotqa", "em", 0.1, src, "Table 7", ""),
        ReportedRow("toy", "base", "Qwen2.5-3B", "hotpotqa", "f1", 0.205, src, "Table 7", ""),
        ReportedRow("toy", "base", "Qwen2.5-3B", "hotpotqa", judge, 0.333, src, "Table 7", ""),
    ]  # fmt: skip
    assert all(type(r.value) is float for r in rows)


@pytest.mark.parametrize(
    ("old", "new", "expect"),
    [
        # a row with a value too few: the file, the line of the row, the table and the row
        ("values: [42.0, 52.42, null]", "values: [42.0, 52.42]",
         ":10: toy Table 7: row 'Toy (PPO)' has 2 values for 3 columns"),
        # a note for a cell the table does not have
        ("{hotpotqa/f1: printed", "{musique/f1: printed",
         ":10: toy Table 7: row 'Toy (PPO)' has cell notes for unknown cells ['musique/f1']"),
        ("{hotpotqa/f1: printed", "{hotpotqa/LJ: printed",
         ":16: Table 7, row 1 ('Toy (PPO)'), cell_notes.hotpotqa/LJ: 'hotpotqa/LJ' is not 'dataset/metric'"),
        ("hotpotqa/J]", "hotpotqa/Judge]", ":8: Table 7, columns.2: 'hotpotqa/Judge' is not 'dataset/metric'"),
        ("values: [10, 20.5, 33.3]", "values: [10, '20.5', 33.3]",
         ":19: Table 7, row 2 ('base'), values.1: Input should be a valid number"),
        ("values: [10, 20.5, 33.3]", "values: [10, .nan, 33.3]",
         ":19: Table 7, row 2 ('base'), values.1: Input should be a finite number"),
        ("        note: trained by us\n", "        notes: trained by us\n",
         ":14: Table 7, row 1 ('Toy (PPO)'), notes: Extra inputs are not permitted"),
        ("        note: trained by us\n", "        note: trained by us\n        note: again\n",
         ":15: not valid YAML: duplicate key 'note'"),
        ("    source: Toy (2025), Table 7\n", "", ":5: Table 7, source: Field required"),
        ("prompt: default}", "prompt: no_such_prompt}", ":3: judges.J: unknown judge prompt 'no_such_prompt'"),
        ("columns: [hotpotqa/em,", "columns: [hotpotqa em,", ":8: Table 7, columns.0: 'hotpotqa em' is not"),
    ],
)  # fmt: skip
def test_malformed_yaml_is_refused_in_one_line_naming_the_file(tmp_path, old, new, expect):
    from harness.errors import DataError
    from harness.reported import load_reported

    assert GOOD.count(old) == 1
    path = _write(tmp_path, GOOD.replace(old, new))
    with pytest.raises(DataError) as e:
        load_reported(path)
    msg = str(e.value)
    assert msg.startswith(f"{path}:") and expect in msg and "\n" not in msg, msg


def test_a_missing_file_is_named(tmp_path):
    from harness.errors import DataError
    from harness.reported import load_reported

    with pytest.raises(DataError, match=r"nope\.yaml: cannot read the reported-numbers file"):
        load_reported(tmp_path / "nope.yaml")


@pytest.mark.parametrize("paper", sorted(EXPECTED))
def test_reported_is_the_yaml_beside_the_method(paper):
    """Each paper's numbers are its folder's data file, found beside its module at run time."""
    import inspect
    from pathlib import Path

    from harness.reported import read_reported

    path = Path(inspect.getfile(type(METHODS[paper]))).with_name("reported.yaml")
    parsed = read_reported(path)
    assert parsed.paper == paper
    assert METHODS[paper].reported() == parsed.rows()
    assert [t.table for t in parsed.tables] == sorted(EXPECTED[paper], key=lambda t: int(t.split()[1]))
