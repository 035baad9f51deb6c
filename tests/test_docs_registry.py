"""The README's method list and docs/sources.md's paper table agree with the registry: every
registered method is named in the README's "Methods" section and every paper folder has a row in
the sources' "Papers" table; neither names a method or paper that is not registered (a renamed or
removed one). The prose stays hand-written; this test keeps it current."""

from __future__ import annotations

import re
from pathlib import Path

from harness.methods_registry import METHODS, get_method
from harness.plugins import manifests

ROOT = Path(__file__).resolve().parents[1]


def section(path: Path, heading: str) -> str:
    """The text under ``heading`` (a markdown heading line) up to the next heading of its level."""
    text = path.read_text(encoding="utf-8")
    level = heading.split(" ")[0]
    start = text.index(heading + "\n") + len(heading) + 1
    nxt = re.search(rf"^{level} ", text[start:], flags=re.M)
    return text[start : start + nxt.start()] if nxt else text[start:]


def squash(s: str) -> str:
    """Lower case without separators: 'TIRESRAG-R1', 'tiresrag_r1', 'When to Search' compare."""
    return re.sub(r"[\s_\-]", "", s.lower())


def readme_names(text: str) -> set[str]:
    return set(re.findall(r"`([a-z][a-z0-9_]*)`", text))


def paper_rows(text: str) -> list[str]:
    """The first cell of each row of the table (header and rule excluded)."""
    rows = [line for line in text.splitlines() if line.startswith("| ")]
    return [r.split("|")[1].strip() for r in rows[1:]]


def papers() -> dict[str, tuple[str, ...]]:
    """Paper folder -> the names it goes by (folder, methods, aliases), squashed."""
    return {
        m.package.split(".")[-1]: tuple(
            squash(n) for n in (m.package.split(".")[-1], *m.plugin.methods, *m.plugin.aliases)
        )
        for m in manifests()
        if m.package.startswith("methods.")
    }


def check_readme(text: str) -> list[str]:
    names = readme_names(text)
    recipes = {r for n in METHODS.names() if METHODS.get(n).trained for r in get_method(n).recipes()}
    missing = [n for n in METHODS.names() if n not in names]
    stale = sorted(names - set(METHODS.names()) - recipes)
    return [f"README.md, Methods: name the method(s) {missing}"] * bool(missing) + [
        f"README.md, Methods: {stale} are not registered methods"
    ] * bool(stale)


def check_sources(text: str) -> list[str]:
    rows = [squash(r) for r in paper_rows(text)]
    known = {squash(n) for n in METHODS.names()} | {a for names in papers().values() for a in names}
    missing = [p for p, names in papers().items() if not any(a in r for r in rows for a in names)]
    stale = [r for r in paper_rows(text) if not any(k in squash(r) for k in known)]
    return [f"docs/sources.md, Papers: add a row for methods/{missing}"] * bool(missing) + [
        f"docs/sources.md, Papers: rows {stale} name no registered method or paper"
    ] * bool(stale)


def test_readme_names_every_registered_method():
    assert not check_readme(section(ROOT / "README.md", "## Methods"))


def test_sources_list_every_paper_folder():
    assert not check_sources(section(ROOT / "docs" / "sources.md", "## Papers"))


def test_the_checks_fail_on_a_missing_or_stale_entry():
    readme = section(ROOT / "README.md", "## Methods")
    assert check_readme(readme.replace("`when_to_search`", "when_to_search")) == [
        "README.md, Methods: name the method(s) ['when_to_search']"
    ]
    assert check_readme(readme + " `gone_method`") == [
        "README.md, Methods: ['gone_method'] are not registered methods"
    ]
    sources = section(ROOT / "docs" / "sources.md", "## Papers")
    row = next(line for line in sources.splitlines() if line.startswith("| ARENA"))
    assert check_sources(sources.replace(row + "\n", "")) == [
        "docs/sources.md, Papers: add a row for methods/['arena']"
    ]
    assert check_sources(sources + "| Gone-RL (X et al.) | arXiv 0000.00000 |\n") == [
        "docs/sources.md, Papers: rows ['Gone-RL (X et al.)'] name no registered method or paper"
    ]
