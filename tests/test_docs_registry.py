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


def check_readme(text: str, methods: list[str], recipes: set[str]) -> list[str]:
    names = readme_names(text)
    missing = [n for n in methods if n not in names]
    stale = sorted(names - set(methods) - recipes)
    return [f"README.md, Methods: name the method(s) {missing}"] * bool(missing) + [
        f"README.md, Methods: {stale} are not registered methods"
    ] * bool(stale)


def check_sources(text: str, folders: dict[str, tuple[str, ...]], methods: list[str]) -> list[str]:
    rows = [squash(r) for r in paper_rows(text)]
    known = {squash(n) for n in methods} | {a for names in folders.values() for a in names}
    missing = [p for p, names in folders.items() if not any(a in r for r in rows for a in names)]
    stale = [r for r in paper_rows(text) if not any(k in squash(r) for k in known)]
    return [f"docs/sources.md, Papers: add a row for methods/{missing}"] * bool(missing) + [
        f"docs/sources.md, Papers: rows {stale} name no registered method or paper"
    ] * bool(stale)


def test_readme_names_every_registered_method():
    recipes = {r for n in METHODS.names() if METHODS.get(n).trained for r in get_method(n).recipes()}
    problems = check_readme(section(ROOT / "README.md", "## Methods"), METHODS.names(), recipes)
    assert not problems, problems


def test_sources_list_every_paper_folder():
    problems = check_sources(section(ROOT / "docs" / "sources.md", "## Papers"), papers(), METHODS.names())
    assert not problems, problems


def test_the_checks_fail_on_a_missing_or_stale_entry():
    readme = "Baselines: `direct`, `cot`; papers: `search_r1` (recipes `paper`, `cpu-smoke`), `arena`."
    methods = ["arena", "cot", "direct", "search_r1"]
    assert check_readme(readme, methods, {"paper"}) == []
    assert check_readme(readme, [*methods, "toy_r1"], {"paper"}) == [
        "README.md, Methods: name the method(s) ['toy_r1']"
    ]
    assert check_readme(readme, methods[1:], {"paper"}) == [
        "README.md, Methods: ['arena'] are not registered methods"
    ]
    sources = (
        "| Paper | Identifier |\n|---|---|\n| Search-R1 (Jin et al.) | arXiv |\n| ARENA (Ren) | arXiv |\n"
    )
    folders = {"search_r1": ("searchr1",), "arena": ("arena",)}
    assert check_sources(sources, folders, methods) == []
    assert check_sources(sources, {**folders, "toy_r1": ("toyr1", "toy-r1")}, methods) == [
        "docs/sources.md, Papers: add a row for methods/['toy_r1']"
    ]
    assert check_sources(sources + "| Gone-RL (X et al.) | arXiv |\n", folders, methods) == [
        "docs/sources.md, Papers: rows ['Gone-RL (X et al.)'] name no registered method or paper"
    ]
