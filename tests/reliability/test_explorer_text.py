"""Issue 33, item 7 (trajectory explorer): model text is rendered as text, whatever it contains. A
backtick in a prediction used to end its code span, so the rest rendered as Markdown (an image
link to any URL). Rendering is checked with markdown-it-py (CommonMark, as Streamlit's
react-markdown parses code spans)."""

from __future__ import annotations

import html
import shutil

import duckdb
import pytest
from markdown_it import MarkdownIt

from leaderboards.views import inline_code

HOSTILE = [
    "Paris` ![x](http://127.0.0.1:9/leak.png) `",
    "``double`` and `single`",
    "`starts and ends`",
    "**bold** <img src=x> [link](http://x) $x^2$",
    "line one\nline two",
    " spaced ",
    "plain",
]


@pytest.mark.parametrize("text", HOSTILE)
def test_inline_code_renders_exactly_the_text(text):
    got = MarkdownIt("commonmark").render(f"**answer:** {inline_code(text)}").strip()
    shown = text.replace("\n", " ")
    assert got == f"<p><strong>answer:</strong> <code>{html.escape(shown, quote=False)}</code></p>"


def test_the_explorer_shows_a_hostile_prediction_as_text(tmp_path, monkeypatch):
    pytest.importorskip("streamlit", reason="the leaderboard app needs the ui extra (streamlit)")
    from streamlit.testing.v1 import AppTest

    import leaderboards
    from tests.leaderboard import fixtures

    db = tmp_path / "results.duckdb"
    fx = fixtures.build(tmp_path / "fixture.duckdb")
    shutil.copy(fx.path, db)
    hostile = HOSTILE[0]
    with duckdb.connect(str(db)) as con:
        con.execute(
            "UPDATE samples SET prediction = ? WHERE sample_id = 'hotpotqa-1' AND run_id IN "
            "(SELECT run_id FROM runs WHERE method = 'direct')",
            [hostile],
        )
    monkeypatch.setenv(leaderboards.DB_ENV, str(db))
    at = AppTest.from_file(str(fixtures_app()), default_timeout=60)
    at.query_params.update({"protocol": fx.protocol.protocol_id})
    at.run()
    at.switch_page("app_pages/trajectories.py")
    at.query_params.update(
        {"traj_a": "direct · smollm2-135m-instruct", "traj_dataset": "hotpotqa", "q": "hotpotqa-1"}
    )
    at.run()
    assert not at.exception, [e.value for e in at.exception]
    [line] = [m.value for m in at.markdown if m.value.startswith(("**✓", "**✗", "**◐", "**·"))]
    rendered = MarkdownIt("commonmark").render(line)
    assert "<img" not in rendered
    assert f"<code>{html.escape(hostile, quote=False)}</code>" in rendered


def fixtures_app():
    from pathlib import Path

    import leaderboards

    return Path(leaderboards.__file__).resolve().parent / "app.py"
