"""Reported vs reproduced worth opening (issue 36): one row per paper row with every dataset of the
paper, ours with its 95% interval and n, the paper's averages as the paper's (never beside ours in
one cell), an average over the datasets both sides have, a difference only for like with like,
a page that opens on a paper we ran, no table that hides rows or clips a column, and
``harness export --view reported --paper NAME`` with its caption above each table.

Over a COPY of the committed showcase database (``results/showcase-2026-11-24.duckdb``) and over
small hand-made rows."""

from __future__ import annotations

import importlib.util
import math
import shutil
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

from harness.errors import ConfigError
from harness.methods_registry import METHODS as REGISTRY
from harness.methods_registry import get_method
from leaderboards import views
from leaderboards.export import build_view, paper_latex, paper_markdown, write
from leaderboards.queries import open_results
from leaderboards.views.common import macro_aggregate

SHOWCASE = Path(__file__).resolve().parents[2] / "results" / "showcase-2026-11-24.duckdb"
OURS = "qwen2.5-coder-1.5b-instruct"


@pytest.fixture(scope="module")
def showcase(tmp_path_factory) -> Path:
    if not SHOWCASE.exists():
        pytest.skip(f"{SHOWCASE} is not in this checkout")
    copy = tmp_path_factory.mktemp("showcase") / "showcase.duckdb"
    shutil.copy(SHOWCASE, copy)  # never open the committed file
    return copy


@pytest.fixture(scope="module")
def search_r1(showcase):
    return build_view(open_results(showcase), "reported", paper="Search-R1")


def test_showcase_rows_are_never_split(search_r1):
    (t2,) = [p for p in views.reported_pivots(search_r1.frame) if p.setting == "Table 2" and p.metric == "em"]
    keys = list(zip(t2.frame["method"], t2.frame["model"], t2.frame["ours"], strict=True))
    assert len(keys) == len(set(keys)) == len(set(zip(t2.frame["method"], t2.frame["model"], strict=True)))
    row = t2.frame.set_index(["method", "model"]).loc[("direct", "Qwen2.5-3B-Instruct")]
    # the paper's NQ / TriviaQA / Bamboogle and our four datasets in ONE row
    assert (row["ours"], row["nq"], row["triviaqa"], row["bamboogle"]) == (OURS, "10.6", "28.8", "2.4")
    assert row["hotpotqa"] == "14.9 / 10.0 [1.8, 40.4] n=10 / —"  # ours with its Wilson interval and n
    assert row["avg"] == "13.4"  # the paper's 7-set average alone, never with our 4-set one
    assert row["avg_shared"] == "13.0 / 7.5 [2.3, 20.5] n=40 / —"  # (10.8+14.9+24.4+2.0)/4 = 13.0
    assert row["differs"] == (  # why no difference: every field that is not the same
        "not comparable: corpus, retriever, prompt, model "
        f"(prompt not given (Search-R1, arXiv 2503.09516v5 §4.2); model Qwen2.5-3B-Instruct vs {OURS})"
    )
    assert t2.shared == "PopQA, HotpotQA, 2Wiki, MuSiQue"
    assert "corpus wiki18 vs closed" in t2.protocol_differs


def test_our_number_is_shown_once_per_method_and_model(search_r1):
    """Search-R1's Table 2 prints ircot for the 7B and the 3B model; our ircot number sits under the
    first (the paper's order) and the second says "ours as above"."""
    (t2,) = [p for p in views.reported_pivots(search_r1.frame) if p.setting == "Table 2" and p.metric == "em"]
    html = views.pivot_html(t2)
    assert (
        html.count('<span class="ours">80.0 <span class="ci">[49.0, 94.3]</span></span>') == 1
    )  # ircot PopQA
    rows = html.split("<tr>")[2:]
    ircot = [r for r in rows if r.startswith('<td class="name">ircot</td>')]
    assert len(ircot) == 2 and "ours as above" in ircot[1] and "ours as above" not in ircot[0]


def test_shared_average_is_the_leaderboards_average_over_the_same_sets(showcase, search_r1):
    """Our side of the shared average = the leaderboard's stratified Agresti-Coull ``avg all`` over
    the same four sets (the showcase ran four)."""
    store = open_results(showcase)
    board = views.leaderboard_from_db(store, views.choose_protocol(store, None), "em")
    assert board.members("avg_all") == ("popqa", "hotpotqa", "2wikimultihopqa", "musique")
    cell = board.cells[("direct", OURS, "avg_all")]
    t = search_r1.frame
    row = t[(t["dataset"] == views.SHARED_AVG) & (t["method"] == "direct") & (t["setting"] == "Table 2")]
    row = row[(row["metric"] == "em") & (row["model"] == "Qwen2.5-3B-Instruct")].iloc[0]
    assert (row["measured"], row["measured_lo"], row["measured_hi"], row["n"]) == pytest.approx(
        (cell.mean, cell.lo, cell.hi, cell.n)
    )
    assert row["reported"] == pytest.approx(np.mean([0.108, 0.149, 0.244, 0.020]))
    assert row["coverage"] == "popqa, hotpotqa, 2wikimultihopqa, musique" and math.isnan(row["diff"])


def test_the_page_opens_on_a_paper_we_ran(showcase):
    store = open_results(showcase)
    from leaderboards.reported_sync import reported_frame

    rep = reported_frame(store)
    boards = views.reported_boards(store, views.choose_protocol(store, None), rep)
    assert sorted(set(rep["paper"]))[0] == "arena"  # the old default: a paper whose method never ran
    assert views.default_paper(views.build_reported(rep, boards)) == "search_r1"
    assert views.default_paper(views.build_reported(rep, {})) == "arena"  # no runs: the first


PROTOCOL = {"corpus": {"id": "c"}, "retriever": {"kind": "bm25s"}, "top_k": 3}
"""Ours ran under this; the rows of paper "p" below record the same setting (:func:`_like`)."""


def _like(model: str = "M") -> dict:
    """``build_reported``'s protocol and recorded settings under which paper p's row matches ours
    on every field but (possibly) the model."""
    rec = {"corpus": "c", "retriever": "bm25s", "top_k": 3, "prompt": "naive_rag", "source": "test"}
    return {"protocol": PROTOCOL, "recorded": {("p", "T1", "naive_rag", model): rec}}


def _rows(model: str = "M") -> pd.DataFrame:
    base = {
        "paper": "p",
        "setting": "T1",
        "method": "naive_rag",
        "model": model,
        "metric": "em",
        "source": "P, T1",
    }
    vals = {"hotpotqa": 0.40, "musique": 0.20, "nq": 0.30, "avg": 0.31}
    return pd.DataFrame([{**base, "dataset": d, "value": v, "note": ""} for d, v in vals.items()])


def _board(values: dict[str, list[float]]) -> dict[str, views.Leaderboard]:
    rows = [
        {
            "protocol_id": "x",
            "method": "naive_rag",
            "model": "M",
            "dataset": d,
            "metric": "em",
            "value": v,
            "label": "",
            "run_id": "r",
            "sample_id": f"{d}-{i}",
        }  # fmt: skip
        for d, vs in values.items()
        for i, v in enumerate(vs)
    ]
    return {
        "em": views.build_leaderboard(pd.DataFrame(rows), protocol_id="x", protocol_name="x", metric="em")
    }


def test_shared_average_difference_only_like_with_like():
    values = {"hotpotqa": [1.0, 0.0, 1.0, 1.0], "musique": [0.0, 0.0, 1.0, 0.0]}
    boards = _board(values)
    samples = {"em": {("naive_rag", "M", d): np.array(v) for d, v in values.items()}}
    t = views.build_reported(_rows("M"), boards, samples=samples, **_like("M"))
    shared = t[t["dataset"] == views.SHARED_AVG].iloc[0]
    want = macro_aggregate([np.array(v) for v in values.values()], binary=True)
    assert (shared["measured"], shared["measured_lo"], shared["measured_hi"]) == pytest.approx(
        (want.mean, want.lo, want.hi)
    )
    assert shared["reported"] == pytest.approx(0.30) and shared["diff"] == pytest.approx(0.5 - 0.30)
    # without samples a 0/1 metric's interval is rebuilt exactly from each dataset's k of n
    bare = views.build_reported(_rows("M"), boards, **_like("M")).set_index("dataset").loc[views.SHARED_AVG]
    assert (bare["measured_lo"], bare["measured_hi"]) == pytest.approx((want.lo, want.hi))
    (p,) = views.reported_pivots(t)
    assert p.frame.iloc[0]["avg"] == "31.0"  # the paper's own average: the paper's number alone
    assert p.frame.iloc[0]["avg_shared"].endswith(" / +20.0 (inconclusive)")
    assert p.frame.iloc[0]["nq"] == "30.0" and len(p.frame) == 1  # NQ (not run) in the same row
    # another model: no difference anywhere, the reason in differs
    other = views.reported_pivots(
        views.build_reported(_rows("Other-7B"), boards, samples=samples, **_like("Other-7B"))
    )[0]
    assert other.n_compared == 0
    assert other.frame.iloc[0]["differs"] == "not comparable: model (model Other-7B vs M)"
    assert other.frame.iloc[0]["avg_shared"].endswith(" / —")


def test_pivot_html_keeps_every_row_and_wraps():
    values = {"hotpotqa": [1.0, 0.0, 1.0, 1.0], "musique": [0.0, 0.0, 1.0, 0.0]}
    (p,) = views.reported_pivots(views.build_reported(_rows("M"), _board(values), **_like("M")))
    html = views.pivot_html(p)
    assert html.count("<tr>") == 1 + len(p.frame)
    assert (
        '<td><span class="paper">40.0</span><br><span class="ours">75.0 <span class="ci">[30.1, 95.4]</span></span><br>'
        in html
    )
    assert "<th>Avg. (paper)</th><th>Avg. (shared sets)</th><th>differs</th>" in html


def test_paper_option_and_near_misses(showcase, capsys):
    from harness.cli import main

    base = ["export", "--format", "markdown", "--view", "reported", "--db", str(showcase)]
    assert main([*base, "--paper", "search_r1"]) == 0
    text = capsys.readouterr().out
    assert text.startswith("**Reported vs reproduced · search_r1 · ours under protocol mini")
    assert "arena ·" not in text and "search_r1 · Table 2 · EM (in %)" in text
    assert main([*base, "--paper", "search_r2"]) == 2
    err = capsys.readouterr().err.strip()
    assert err.count("\n") == 0 and "did you mean search_r1 or r_search?" in err
    # every paper with published numbers, from the registry (the shipped six at least)
    trained = [get_method(n) for n in REGISTRY.names() if REGISTRY.get(n).trained]
    papers = sorted({r.paper for m in trained for r in m.reported()})
    assert {"arena", "eval_rar", "r_search", "search_r1", "tiresrag_r1", "when_to_search"} <= set(papers)
    assert err.endswith(f"papers: {', '.join(papers)}")
    with pytest.raises(ConfigError, match="no such paper"):
        views.resolve_paper(["search_r1"], "nope")


def test_reported_captions_sit_above_their_tables(search_r1):
    md = write(search_r1, "markdown", None)
    summary, *tables = search_r1.tables
    assert md.index(summary.caption) < md.index(tables[0].caption)  # the cross-paper summary first
    assert summary.header[0] == "Paper" and summary.label == "tab:reported-summary"
    first = paper_markdown(tables[0])
    assert first.startswith(tables[0].caption + "\n\n| Method |")
    assert md.index(tables[1].caption) < md.index(paper_markdown(tables[1]).split("\n\n", 1)[1])
    tex = paper_latex(tables[0])
    assert (
        tex.index(r"\caption{")
        < tex.index(r"\label{tab:reported-search-r1-table-2-em}")
        < tex.index(r"\begin{tabular}")
    )


pytest.importorskip("streamlit", reason="the leaderboard app needs the ui extra (streamlit)")


def test_app_opens_on_a_paper_with_runs_over_the_showcase(showcase, monkeypatch):
    from streamlit.testing.v1 import AppTest

    import leaderboards

    monkeypatch.setenv(leaderboards.DB_ENV, str(showcase))
    at = AppTest.from_file(str(Path(leaderboards.__file__).parent / "app.py"), default_timeout=120)
    at.run()
    at.switch_page("app_pages/reported.py").run()
    assert not at.exception, [e.value for e in at.exception]
    assert at.selectbox(key="paper").value == "search_r1"
    html = "".join(m.value for m in at.markdown)
    assert (
        '<span class="ours">10.0 <span class="ci">[1.8, 40.4]</span></span><br><span class="meta">n=10 · Δ —</span>'
        in html
    )
    assert len(at.dataframe) == 1  # only the long table in the expander; pivots never scroll inside
    at.selectbox(key="paper").set_value("arena").run()
    # the page opens on the first table with a number of ours: tables without one are left out
    first = next(m.value for m in at.markdown if '<table class="rar-reported">' in m.value)
    assert '<span class="ours">' in first
    at.toggle(key="rep_ours").set_value(False).run()  # every table the paper prints
    n_all = len(at.subheader)
    at.selectbox(key="rep_metric").set_value("f1").run()  # ARENA: 30 tables, 10 of them F1
    assert at.subheader[0].value == "Across the papers"  # the cross-paper summary opens the page
    assert not at.exception and n_all == 1 + 30
    tables = at.subheader[1:]
    assert len(tables) == 10 and all("· F1 (in %)" in s.value for s in tables)


BROWSER = importlib.util.find_spec("playwright") is not None and shutil.which("chromium") is not None


@pytest.mark.integration
@pytest.mark.skipif(not BROWSER, reason="needs playwright and chromium (apt-get install -y chromium)")
def test_reported_page_in_chromium_at_1600x1000(showcase, tmp_path):
    """No clipped column, no table scrolling inside, every row on the page."""
    from tests.leaderboard.browser import chromium_page, leaderboard_server, wait_for_app

    with leaderboard_server(showcase, tmp_path / "server.log") as url, chromium_page(1600, 1000) as page:
        page.goto(f"{url}/reported?rep_ours=0")  # every table, not only those with a number of ours
        wait_for_app(page, "Reported vs reproduced")
        page.wait_for_selector("table.rar-reported:not(.rar-summary)", timeout=60_000)
        page.wait_for_timeout(500)
        geometry = page.evaluate(
            """() => [...document.querySelectorAll('table.rar-reported:not(.rar-summary)')].map(t => {
                const main = document.querySelector('[data-testid="stMain"]').getBoundingClientRect();
                const box = t.getBoundingClientRect();
                let scrolls = false;
                for (let e = t.parentElement; e; e = e.parentElement) {
                    if (e.scrollWidth > e.clientWidth + 1 && getComputedStyle(e).overflowX !== 'visible'
                        && e.tagName !== 'HTML' && e.tagName !== 'BODY') { scrolls = true; }
                }
                return {rows: t.querySelectorAll('tbody tr').length, right: box.right,
                        mainRight: main.right, wide: t.scrollWidth > t.clientWidth + 1, scrolls};
            })"""
        )
        page.screenshot(path=str(tmp_path / "reported.png"), full_page=True)
        assert page.locator('[data-testid="stException"]').count() == 0
    em = [
        p
        for p in views.reported_pivots(
            build_view(open_results(showcase), "reported", paper="search_r1").frame
        )
    ]
    assert [g["rows"] for g in geometry] == [len(p.frame) for p in em]  # every row of every table
    for g in geometry:
        assert not g["wide"] and not g["scrolls"] and g["right"] <= g["mainRight"], g
