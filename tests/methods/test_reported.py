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
