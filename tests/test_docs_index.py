"""The front door stays short and the docs stay findable: the README is under 250 lines with the
two commands of a fresh machine first, and docs/README.md links every page of docs/ (and only
pages that exist)."""

from __future__ import annotations

import re
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
DOCS = ROOT / "docs"


def test_the_readme_is_short_and_starts_with_the_two_commands():
    text = (ROOT / "README.md").read_text(encoding="utf-8")
    assert len(text.splitlines()) < 250
    first_block = text.split("```bash\n", 1)[1].split("```", 1)[0].splitlines()
    assert [line.split("#")[0].strip() for line in first_block] == [
        "pip install tox && tox -e py",
        "pip install tox && tox -e run",
    ]
    assert text.index("```bash") < text.index("\n## ")  # before any section


def test_docs_index_links_every_page_and_only_pages_that_exist():
    index = (DOCS / "README.md").read_text(encoding="utf-8")
    linked = set(re.findall(r"\]\(([\w.-]+\.md)\)", index))
    pages = {p.name for p in DOCS.glob("*.md")} - {"README.md"}
    assert sorted(pages - linked) == [], "docs/README.md: add a line for each"
    assert sorted(linked - pages) == [], "docs/README.md links pages that do not exist"


def test_the_readme_and_docs_link_only_files_that_exist():
    broken = []
    for page in [ROOT / "README.md", *DOCS.glob("*.md")]:
        for target in re.findall(r"\]\(([^)#\s]+)(?:#[^)]*)?\)", page.read_text(encoding="utf-8")):
            if "://" not in target and not (page.parent / target).exists():
                broken.append(f"{page.relative_to(ROOT)}: {target}")
    assert broken == []
