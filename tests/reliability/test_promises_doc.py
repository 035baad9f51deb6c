"""docs/promises.md: each promise names its test, and every test it names exists (issue 45).

A promise is a top-level bullet of the page. It must name at least one test, as a path
(``tests/.../test_x.py``, optionally ``::test_name``), a file of tests/reliability/ or
tests/<area>/ (``test_x.py::test_name``), or a test function (``test_name``); each named file must
exist and each named function must be defined in it (a bare function name: in some test file)."""

from __future__ import annotations

import re
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
PAGE = ROOT / "docs" / "promises.md"
REF = re.compile(r"`((?:tests/[\w/]+/)?test_\w+\.py)(?:::(test_\w+))?|`(test_\w+)`")


def promises() -> list[str]:
    """The top-level bullets of the page, each as one string (a blank line or a heading ends one)."""
    out: list[str] = []
    open_ = False
    for line in PAGE.read_text().splitlines():
        if line.startswith("- "):
            out.append(line)
            open_ = True
        elif open_ and line.startswith("  ") and line.strip():
            out[-1] += " " + line.strip()
        else:
            open_ = False
    return out


def _find(name: str) -> list[Path]:
    if "/" in name:
        return [ROOT / name] if (ROOT / name).is_file() else []
    return sorted((ROOT / "tests").rglob(name))


def test_every_promise_names_a_test_that_exists():
    found = promises()
    assert len(found) >= 30
    all_tests = "\n".join(p.read_text() for p in (ROOT / "tests").rglob("test_*.py"))
    for promise in found:
        refs = REF.findall(promise)
        assert refs, f"this promise names no test: {promise[:200]}"
        for path, func, bare in refs:
            if bare:
                assert f"def {bare}(" in all_tests, f"{bare} (named in: {promise[:120]}) is no test"
                continue
            files = _find(path)
            assert files, f"{path} (named in: {promise[:120]}) does not exist"
            if func:
                assert any(f"def {func}(" in f.read_text() for f in files), f"{path}::{func} is not defined"
