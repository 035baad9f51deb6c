"""The papers' published numbers: every table row present (counted against the papers), unique
store keys, the printed averages consistent with the printed values and cross-checks between
tables (catches transcription slips), loadable into the store; and the reported.yaml format."""

from __future__ import annotations

import inspect
from collections import Counter, defaultdict
from pathlib import Path

import pytest

from harness.judge.prompts import get_prompt, prompt_hash
from harness.methods_registry import METHODS as REGISTRY
from harness.methods_registry import get_method
from harness.results.reported import read_reported
from harness.results.store import Store
from methods.arena import method as arena_module
from methods.when_to_search import method as when_to_search_module
from tests.methods.plugin_data import plugin_data

SEVEN = {"nq", "triviaqa", "popqa", "hotpotqa", "2wikimultihopqa", "musique", "bamboogle"}
MULTI = ("hotpotqa", "2wikimultihopqa", "musique", "bamboogle")
SINGLE = ("nq", "triviaqa", "popqa")


def _reported_yaml(name: str) -> Path:
    """The ``reported.yaml`` beside method ``name``'s module (:meth:`harness.method.Method.reported`)."""
    return Path(inspect.getfile(REGISTRY.get(name))).with_name("reported.yaml")


def _expected() -> tuple[dict[str, dict[str, int]], list[str]]:
    """Paper -> rows per table, from each paper folder's ``conformance.json`` (``reported_tables``:
    rows per table = printed rows x printed value columns, the arithmetic in its ``why``); the
    paper is the folder's method (not a variant) with a ``reported.yaml``. And the folders whose
    numbers and expectations do not pair up."""
    out: dict[str, dict[str, int]] = {}
    problems: list[str] = []
    for pd in plugin_data():
        section = pd.section("reported_tables")
        papers = [
            n
            for n in sorted(pd.methods)
            if n not in pd.manifest.plugin.variants and _reported_yaml(n).is_file()
        ]
        if papers and not section:
            problems.append(f"{pd.where}: no 'reported_tables' (rows per table) for {papers}'s reported.yaml")
        elif section and len(papers) != 1:
            problems.append(
                f"{pd.where}: 'reported_tables' needs one method with a reported.yaml, found {papers}"
            )
        elif section:
            out[papers[0]] = section["rows"]
    return out, problems


EXPECTED, UNPAIRED = _expected()
METHODS = {paper: get_method(paper) for paper in EXPECTED}
OPEN_QA = ["eval_rar", "r_search", "search_r1"]  # EM/F1 tables over the seven QA sets
JUDGED = ["arena", "tiresrag_r1", "when_to_search"]  # judge columns, counts, other datasets


def _rows(paper):
    return METHODS[paper].reported()


def test_every_paper_with_reported_numbers_has_expectations():
    assert not UNPAIRED, "; ".join(UNPAIRED)
    assert {"search_r1", "eval_rar", "r_search", "arena", "tiresrag_r1", "when_to_search"} <= set(EXPECTED)


@pytest.mark.parametrize("paper", sorted(EXPECTED))
def test_row_counts_per_table(paper):
    rows = _rows(paper)
    assert Counter(r.setting.split(":")[0] for r in rows) == EXPECTED[paper]
    assert {r.paper for r in rows} == {paper}


@pytest.mark.parametrize("paper", OPEN_QA)
def test_rows_are_well_formed_and_unique(paper):
    rows = _rows(paper)
    keys = Counter((r.method, r.model, r.dataset, r.metric, r.setting) for r in rows)
    assert max(keys.values()) == 1  # the store's primary key
    for r in rows:
        assert 0.0 <= r.value <= 1.0
        assert r.dataset in SEVEN | {"avg", "avg_multihop", "avg_singlehop"}
        # R-Search's F1 has no yes/no rule (QingFei1/R-Search@ecba08d src/eval/utils.py:62-78): f1_squad
        assert r.metric in ({"em", "f1_squad", "em_f1_squad_mean"} if paper == "r_search" else {"em", "f1"})
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
        if ("hotpotqa", "em") not in cells or ("avg_multihop", "em_f1_squad_mean") not in cells:
            continue
        mh = [cells[(d, m)].value for d in MULTI for m in ("em", "f1_squad")]
        sh = [cells[(d, m)].value for d in SINGLE for m in ("em", "f1_squad")]
        assert abs(sum(mh) / 8 - cells[("avg_multihop", "em_f1_squad_mean")].value) <= 0.001
        assert abs(sum(sh) / 6 - cells[("avg_singlehop", "em_f1_squad_mean")].value) <= 0.001
        overall = cells.get(("avg", "em_f1_squad_mean"))
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
    assert rows[("r_search", "Qwen2.5-7B-Instruct", "2wikimultihopqa", "f1_squad", "Table 2")].value == 0.777
    ppo = rows[("r_search", "Qwen2.5-3B-Instruct", "hotpotqa", "f1_squad", "Table 7: PPO")]
    assert ppo.value == 0.5242 and "52.4 in Table 4" in ppo.note


def test_reported_rows_load_into_the_store(tmp_path):
    store = Store(tmp_path / "r.duckdb")
    for paper, m in METHODS.items():
        store.replace_reported(paper, m.reported())
    n = store.query("SELECT paper, count(*) AS n FROM reported GROUP BY paper ORDER BY paper")
    assert dict(zip(n["paper"], n["n"], strict=True)) == {p: sum(v.values()) for p, v in EXPECTED.items()}


def _judge_metric(module, alias: str) -> str:
    """The metric name a judge column of the paper's ``reported.yaml`` stands for."""
    path = Path(module.__file__).with_name("reported.yaml")
    return read_reported(path, prompt_hash=prompt_hash).metrics[alias]


def _cells(paper, table):
    """(method, model, setting) -> {(dataset, metric): value} for one table."""
    out = defaultdict(dict)
    for r in _rows(paper):
        if r.setting.split(":")[0] == table:
            out[(r.method, r.model, r.setting)][(r.dataset, r.metric)] = r.value
    return out


@pytest.mark.parametrize("paper", JUDGED)
def test_judged_rows_are_well_formed_and_unique(paper):
    rows = _rows(paper)
    keys = Counter((r.method, r.model, r.dataset, r.metric, r.setting) for r in rows)
    assert max(keys.values()) == 1  # the store's primary key
    for r in rows:
        assert r.setting.split(":")[0] in r.source  # the table is cited
        if r.metric in ("em", "f1", "cover_em") or r.metric.startswith("judge@"):
            assert 0.0 <= r.value <= 1.0, r
        else:
            assert (
                r.metric in ("n_retrievals", "thinking_tokens", "n_correct", "n_incorrect") and r.value >= 0
            )


def test_judge_columns_are_the_judges_metric_names():
    # the same name harness.judge.core.Judge.metric_name gives the reproduced scores
    assert _judge_metric(arena_module, "LJ") == f"judge@gpt-4o-2024-11-20:{get_prompt('arena').prompt_hash}"
    assert (
        _judge_metric(when_to_search_module, "LasJ")
        == f"judge@Qwen3-235B-A22B-Instruct:{get_prompt('when_to_search').prompt_hash}"
    )
    judges = {r.metric for r in METHODS["tiresrag_r1"].reported() if r.metric.startswith("judge@")}
    assert judges == {f"judge@gpt-4o:{get_prompt('tiresrag_r1').prompt_hash}"}


def test_arena_original_rows_equal_table7_direct_rag():
    LJ = _judge_metric(arena_module, "LJ")
    t3, t7 = _cells("arena", "Table 3"), _cells("arena", "Table 7")
    for model in ("Qwen2.5-7B-Instruct", "Llama-3.1-8B-Instruct", "DeepSeek-R1-Distill-Qwen-7B", "Qwen3-8B"):
        assert t3[("direct_rag", model, "Table 3")] == t7[("direct_rag", model, "Table 7: direct RAG")]
    t5 = _cells("arena", "Table 5")
    for model in ("GPT-4o", "OpenAI-o1", "DeepSeek-R1"):
        direct_rag = t7[("direct_rag", model, "Table 7: direct RAG")]
        assert t5[("direct_rag", model, "Table 5")] == {
            k: v for k, v in direct_rag.items() if k[0] == "hotpotqa"
        }
    arena = t3[("arena", "Qwen2.5-7B-Instruct", "Table 3")]
    assert (
        arena[("hotpotqa", LJ)] == 0.812 and arena[("2wikimultihopqa", LJ)] == 0.786
    )  # 0.774 elsewhere, noted


def test_tiresrag_printed_claims():
    t3 = _cells("tiresrag_r1", "Table 3")

    def avg(method, model, metric):
        c = t3[(method, model, "Table 3")]
        return round(sum(v for (_d, m), v in c.items() if m == metric) / 4, 3)

    judge = next(m for (_d, m) in t3[("lets", "Qwen2.5-3B-Instruct", "Table 3")] if m.startswith("judge@"))
    # Table 3: Instruct average EM 39.3 vs LeTS 33.5, Judge 49.4 vs 45.2
    assert (avg("tiresrag_r1", "Qwen2.5-3B-Instruct", "em"), avg("lets", "Qwen2.5-3B-Instruct", "em")) == (
        0.393,
        0.335,
    )
    assert (
        avg("tiresrag_r1", "Qwen2.5-3B-Instruct", judge) == 0.494
        and avg("lets", "Qwen2.5-3B-Instruct", judge) == 0.452
    )
    # Table 5: the average column is the mean of the four sets (to the printed precision)
    for cells in _cells("tiresrag_r1", "Table 5").values():
        for metric, tol in (("thinking_tokens", 0.0501), ("n_retrievals", 0.0051)):
            four = [v for (d, m), v in cells.items() if m == metric and d != "avg_multihop"]
            assert abs(sum(four) / 4 - cells[("avg_multihop", metric)]) <= tol
    # Table 7's full model = Table 4's Instruct+GRPO, except the Bamboogle F1 (flagged)
    t7 = _cells("tiresrag_r1", "Table 7")[("tiresrag_r1", "Qwen2.5-3B-Instruct", "Table 7: full")]
    t4 = _cells("tiresrag_r1", "Table 4")[("tiresrag_r1", "Qwen2.5-3B-Instruct", "Table 4: GRPO")]
    assert {k for k in t7 if t7[k] != t4[k]} == {("bamboogle", "f1")}
    # Table 6 = Table 8's EM for the same rows
    t8 = _cells("tiresrag_r1", "Table 8")
    for (method, model, _s), cells in _cells("tiresrag_r1", "Table 6").items():
        for k, v in cells.items():
            assert t8[(method, model, "Table 8")][k] == v
    # Table 1: 500 questions per dataset; 261 / 239 and 93 / 407 correct / incorrect
    totals = Counter()
    for cells in _cells("tiresrag_r1", "Table 1").values():
        for k, v in cells.items():
            totals[k] += v
    assert totals == {
        ("2wikimultihopqa", "n_correct"): 261,
        ("2wikimultihopqa", "n_incorrect"): 239,
        ("musique", "n_correct"): 93,
        ("musique", "n_incorrect"): 407,
    }


def _avg7(cells, metric):
    vals = [v for (_d, m), v in cells.items() if m == metric]
    assert len(vals) == 7
    return sum(vals) / 7


def test_when_to_search_averages_match_the_spec():
    LASJ = _judge_metric(when_to_search_module, "LasJ")
    t3 = {(m, mo): c for (m, mo, _s), c in _cells("when_to_search", "Table 3").items()}
    # Table 3 averages computed by us: (avg F1, avg ACC, avg RC)
    for key, expect in {
        ("when_to_search", "Qwen2.5-7B-Instruct"): (0.504, 0.531, 1.07),
        ("when_to_search", "Qwen2.5-3B-Instruct"): (0.369, 0.340, 0.75),
        ("r1_searcher", "R1-Searcher-7B"): (0.503, 0.486, 2.03),
        ("corag", "CoRAG-8B"): (0.487, 0.563, 4.00),
        ("search_r1", "Search-R1-7B"): (0.461, 0.456, 1.45),
    }.items():
        got = (_avg7(t3[key], "f1"), _avg7(t3[key], LASJ), _avg7(t3[key], "n_retrievals"))
        assert got[:2] == pytest.approx(expect[:2], abs=0.0005), key  # printed to 3 decimals
        assert got[2] == pytest.approx(expect[2], abs=0.005), key  # RC to 2 decimals
    # Table 4 averages (LasJ, RC)
    t4 = {s: c for (_m, _mo, s), c in _cells("when_to_search", "Table 4").items()}
    for setting, (lasj, rc) in {
        "Table 4: staged (full)": (0.564, 1.14),
        "Table 4: w/o r_s": (0.540, 1.26),
        "Table 4: w/o stage one": (0.350, 0.35),
        "Table 4: w/o stage two": (0.546, 1.82),
        "Table 4: w/o r_a": (0.479, 2.06),
    }.items():
        assert _avg7(t4[setting], LASJ) == pytest.approx(lasj, abs=0.0015)
        assert _avg7(t4[setting], "n_retrievals") == pytest.approx(rc, abs=0.006)
    # Table 4's "Ours" = Table 1's Qwen3-4B stage two, except the Bamboogle RC (1.14 vs 1.44), flagged
    t1 = _cells("when_to_search", "Table 1")[("when_to_search", "Qwen3-4B", "Table 1: stage two")]
    ours = t4["Table 4: staged (full)"]
    assert {k for k in ours if ours[k] != t1[k]} == {("bamboogle", "n_retrievals")}


# --- the reported.yaml format: harness.results.reported.load_reported ---------------------------------

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
    from harness.results.reported import load_reported
    from harness.results.store import ReportedRow

    judge = f"judge@m1:{get_prompt('default').prompt_hash}"
    rows = load_reported(_write(tmp_path, GOOD), prompt_hash=prompt_hash)
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
        # what a paper states about a baseline's prompt carries its source
        ("      - method: base\n", "      - method: base\n        setting: {prompt_note: not given}\n",
         ":18: Table 7, row 2 ('base'), setting.prompt_note: Value error, prompt_note 'not given' must say"),
    ],
)  # fmt: skip
def test_malformed_yaml_is_refused_in_one_line_naming_the_file(tmp_path, old, new, expect):
    from harness.errors import DataError
    from harness.results.reported import load_reported

    assert GOOD.count(old) == 1
    path = _write(tmp_path, GOOD.replace(old, new))
    with pytest.raises(DataError) as e:
        load_reported(path, prompt_hash=prompt_hash)
    msg = str(e.value)
    assert msg.startswith(f"{path}:") and expect in msg and "\n" not in msg, msg


def test_a_missing_file_is_named(tmp_path):
    from harness.errors import DataError
    from harness.results.reported import load_reported

    with pytest.raises(DataError, match=r"nope\.yaml: cannot read the reported-numbers file"):
        load_reported(tmp_path / "nope.yaml", prompt_hash=prompt_hash)


@pytest.mark.parametrize("paper", sorted(EXPECTED))
def test_reported_is_the_yaml_beside_the_method(paper):
    """Each paper's numbers are its folder's data file, found beside its module at run time."""
    import inspect
    from pathlib import Path

    from harness.results.reported import read_reported

    path = Path(inspect.getfile(type(METHODS[paper]))).with_name("reported.yaml")
    parsed = read_reported(path, prompt_hash=prompt_hash)
    assert parsed.paper == paper
    assert METHODS[paper].reported() == parsed.rows()
    assert [t.table for t in parsed.tables] == sorted(EXPECTED[paper], key=lambda t: int(t.split()[1]))
