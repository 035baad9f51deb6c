"""The docs agree with the registry, and a paper documents itself inside its own folder.

- Every paper folder (``methods/<paper>/``) has a ``README.md`` whose header says which paper it
  is (``- Paper:``), the upstream code read (``- Upstream code:`` a repository at a full commit, or
  "no code release") and exactly the methods the folder registers (``- Methods:``); each of those
  methods' ``source`` names that repository; where docs/sources.md lists the repository, the
  commits agree; a "(N rows)" count equals the folder's ``reported_tables``. So adding a paper
  touches its own folder only, and what it says about itself is checked.
- The README's "Methods" section names every baseline (the one place baselines are described) and
  no method that is not registered; docs/sources.md's "Papers" table has no row for a paper or
  method that is not registered (a renamed or removed one). Those overviews are hand-written
  prose; the paper folders' READMEs are where completeness is enforced.
"""

from __future__ import annotations

import re
from pathlib import Path

from harness.methods_registry import METHODS, get_method
from harness.plugins import manifests
from tests.methods.plugin_data import plugin_data

ROOT = Path(__file__).resolve().parents[1]
COMMIT = re.compile(r"^`([\w.-]+/[\w.-]+)` at `([0-9a-f]{40})`")


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


def table_rows(text: str) -> list[list[str]]:
    """The cells of each row of the markdown table(s) in ``text`` (header and rule excluded)."""
    rows = [line for line in text.splitlines() if line.startswith("| ")]
    return [[c.strip() for c in r.split("|")[1:-1]] for r in rows[1:]]


def paper_rows(text: str) -> list[str]:
    """The first cell of each row of the table (header and rule excluded)."""
    return [r[0] for r in table_rows(text)]


def upstream_commits(text: str) -> dict[str, str]:
    """Repository -> full commit, from docs/sources.md's "Upstream code" table."""
    out = {}
    for cells in table_rows(text):
        repo = re.match(r"`([\w.-]+/[\w.-]+)`", cells[0])
        commit = re.match(r"`([0-9a-f]{40})`", cells[1]) if len(cells) > 1 else None
        if repo and commit:
            out[repo.group(1)] = commit.group(1)
    return out


def papers() -> dict[str, tuple[str, ...]]:
    """Paper folder -> the names it goes by (folder, methods, aliases), squashed."""
    return {
        m.package.split(".")[-1]: tuple(
            squash(n) for n in (m.package.split(".")[-1], *m.plugin.methods, *m.plugin.aliases)
        )
        for m in manifests()
        if m.package.startswith("methods.")
    }


def baseline_methods() -> list[str]:
    """The registered methods that no paper folder registers (``baselines/`` and any other plugin)."""
    in_papers = {n for m in manifests() if m.package.startswith("methods.") for n in m.plugin.methods}
    return [n for n in METHODS.names() if n not in in_papers]


def header(text: str) -> dict[str, str]:
    """The ``- Key: value`` lines of the README's header (before its first ``## `` heading)."""
    head = text.split("\n## ", 1)[0]
    return dict(re.findall(r"^- ([A-Z][\w ]*?): (.+)$", head, flags=re.M))


def check_paper_readme(
    where: str,
    text: str,
    names: tuple[str, ...],
    methods: dict[str, str],
    known_commits: dict[str, str],
    rows: int | None,
) -> list[str]:
    """Problems with one paper folder's README.md. ``names``: the folder's squashed names;
    ``methods``: method -> its ``source``; ``known_commits``: docs/sources.md's repository ->
    commit; ``rows``: the rows its ``reported_tables`` counts (None without one)."""
    title = text.splitlines()[0] if text else ""
    problems = []
    if not title.startswith("# ") or not any(n in squash(title) for n in names):
        problems.append(f"{where}: line 1 must be '# <the paper's name>', got {title!r}")
    fields = header(text)
    if not fields.get("Paper", "").strip():
        problems.append(f"{where}: add '- Paper: <authors>, \"<title>\", <identifier>' to the header")
    code = fields.get("Upstream code", "")
    match = COMMIT.match(code)
    if match:
        repo, commit = match.groups()
        unnamed = sorted(m for m, source in methods.items() if repo not in source)
        if unnamed:
            problems.append(f"{where}: the source of {unnamed} must name {repo}")
        if repo in known_commits and known_commits[repo] != commit:
            problems.append(f"{where}: {repo} at {commit}, docs/sources.md says {known_commits[repo]}")
    elif not code.startswith("no code release"):
        problems.append(
            f"{where}: add '- Upstream code: `owner/repo` at `<40-hex commit>`' or '- Upstream code: no code release'"
        )
    listed = set(re.findall(r"`([a-z][a-z0-9_]*)`", fields.get("Methods", "")))
    if listed != set(methods):
        problems.append(f"{where}: '- Methods:' must name exactly {sorted(methods)}, got {sorted(listed)}")
    for claimed in re.findall(r"\((\d[\d,]*) rows\)", text):
        if rows is None or int(claimed.replace(",", "")) != rows:
            problems.append(
                f"{where}: says {claimed} rows, its conformance.json reported_tables count {rows}"
            )
    return problems


def check_readme(text: str, required: list[str], registered: list[str], recipes: set[str]) -> list[str]:
    names = readme_names(text)
    missing = [n for n in required if n not in names]
    stale = sorted(names - set(registered) - recipes)
    return [f"README.md, Methods: name the method(s) {missing}"] * bool(missing) + [
        f"README.md, Methods: {stale} are not registered methods"
    ] * bool(stale)


def check_sources(text: str, folders: dict[str, tuple[str, ...]], methods: list[str]) -> list[str]:
    known = {squash(n) for n in methods} | {a for names in folders.values() for a in names}
    stale = [r for r in paper_rows(text) if not any(k in squash(r) for k in known)]
    return [f"docs/sources.md, Papers: rows {stale} name no registered method or paper"] * bool(stale)


def test_every_paper_folder_documents_itself():
    known = upstream_commits(section(ROOT / "docs" / "sources.md", "## Upstream code, at the commit read"))
    names = papers()
    problems: list[str] = []
    for pd in plugin_data():
        if not pd.manifest.package.startswith("methods."):
            continue
        folder = pd.manifest.package.split(".")[-1]
        readme = pd.path.with_name("README.md")
        where = str(readme.relative_to(ROOT))
        if not readme.is_file():
            problems.append(f"{where}: missing; every paper folder describes itself (docs/extending.md)")
            continue
        section_rows = pd.section("reported_tables").get("rows")
        problems += check_paper_readme(
            where,
            readme.read_text(encoding="utf-8"),
            names[folder],
            {m: get_method(m).source for m in pd.methods},
            known,
            sum(section_rows.values()) if section_rows else None,
        )
    assert len(names) >= 6 and not problems, problems


def test_readme_names_every_baseline_and_only_registered_methods():
    recipes = {r for n in METHODS.names() if METHODS.get(n).trained for r in get_method(n).recipes()}
    problems = check_readme(
        section(ROOT / "README.md", "## Methods"), baseline_methods(), METHODS.names(), recipes
    )
    assert not problems, problems


def test_sources_name_only_registered_papers():
    problems = check_sources(section(ROOT / "docs" / "sources.md", "## Papers"), papers(), METHODS.names())
    assert not problems, problems


GOOD = """# Toy-R1

- Paper: Doe et al., "Toy-R1: Searching With Toys", arXiv 2601.00001
- Upstream code: `doe/Toy-R1` at `0123456789abcdef0123456789abcdef01234567`
- Methods: `toy_r1`, `toy_r1_b`

Holds `method.py`; `reported.yaml` (12 rows).

## More
- Note: not a header field
"""
SOURCES = {"toy_r1": "Doe et al. 2026 (doe/Toy-R1)", "toy_r1_b": "Doe et al. 2026 (doe/Toy-R1@0123456)"}


def test_the_checks_fail_on_a_missing_wrong_or_stale_entry():
    def check(text=GOOD, names=("toyr1",), sources=SOURCES, known=None, rows=12):
        return check_paper_readme("R.md", text, names, sources, known or {}, rows)

    assert check() == []
    assert check(known={"doe/Toy-R1": "0123456" + "0" * 33}) == [
        "R.md: doe/Toy-R1 at 0123456789abcdef0123456789abcdef01234567, docs/sources.md says "
        "0123456000000000000000000000000000000000"
    ]
    assert check(rows=11) == ["R.md: says 12 rows, its conformance.json reported_tables count 11"]
    assert check(rows=None) == ["R.md: says 12 rows, its conformance.json reported_tables count None"]
    assert check(names=("other",)) == ["R.md: line 1 must be '# <the paper's name>', got '# Toy-R1'"]
    assert check(sources={**SOURCES, "toy_r1_c": "Doe"}) == [
        "R.md: the source of ['toy_r1_c'] must name doe/Toy-R1",
        "R.md: '- Methods:' must name exactly ['toy_r1', 'toy_r1_b', 'toy_r1_c'], got ['toy_r1', 'toy_r1_b']",
    ]
    no_paper = GOOD.replace('- Paper: Doe et al., "Toy-R1: Searching With Toys", arXiv 2601.00001\n', "")
    assert check(no_paper) == ["R.md: add '- Paper: <authors>, \"<title>\", <identifier>' to the header"]
    short = GOOD.replace("0123456789abcdef0123456789abcdef01234567", "0123456")
    assert check(short) == [
        "R.md: add '- Upstream code: `owner/repo` at `<40-hex commit>`' or '- Upstream code: no code release'"
    ]
    released = GOOD.replace("`doe/Toy-R1` at `0123456789abcdef0123456789abcdef01234567`", "no code release")
    assert check(released, sources={"toy_r1": "x", "toy_r1_b": "y"}) == []
    assert check("") == [
        "R.md: line 1 must be '# <the paper's name>', got ''",
        "R.md: add '- Paper: <authors>, \"<title>\", <identifier>' to the header",
        "R.md: add '- Upstream code: `owner/repo` at `<40-hex commit>`' or '- Upstream code: no code release'",
        "R.md: '- Methods:' must name exactly ['toy_r1', 'toy_r1_b'], got []",
    ]

    readme = "Baselines: `direct`, `cot`; papers: `search_r1` (recipes `paper`, `cpu-smoke`), `arena`."
    methods = ["arena", "cot", "direct", "search_r1"]
    assert check_readme(readme, ["cot", "direct"], methods, {"paper"}) == []
    assert check_readme(readme, ["cot", "direct", "sure"], [*methods, "sure"], {"paper"}) == [
        "README.md, Methods: name the method(s) ['sure']"
    ]
    assert check_readme(readme, ["cot", "direct"], methods[1:], {"paper"}) == [
        "README.md, Methods: ['arena'] are not registered methods"
    ]
    sources = (
        "| Paper | Identifier |\n|---|---|\n| Search-R1 (Jin et al.) | arXiv |\n| ARENA (Ren) | arXiv |\n"
    )
    folders = {"search_r1": ("searchr1",), "arena": ("arena",)}
    assert check_sources(sources, folders, methods) == []
    assert check_sources(sources + "| Gone-RL (X et al.) | arXiv |\n", folders, methods) == [
        "docs/sources.md, Papers: rows ['Gone-RL (X et al.)'] name no registered method or paper"
    ]
    table = "| Repository | Commit |\n|---|---|\n| `doe/Toy-R1` | `" + "a" * 40 + "` (aaaaaaa) |\n"
    assert upstream_commits(table) == {"doe/Toy-R1": "a" * 40}
