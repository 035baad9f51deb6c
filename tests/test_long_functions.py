"""``scripts/long_functions.py`` (issue 46): the functions over a line limit, longest first, with the
reason a ``# long:`` comment gives; ``--unexplained`` lists only those without one and exits 1."""

from __future__ import annotations

import importlib.util
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]

SOURCE = """\
def short():
    return 1


# long: the reason,
# on two lines
def explained():
{body}


class C:
    def method(self):
{body8}

        def inner():
            return 2
"""


def _script(monkeypatch):
    spec = importlib.util.spec_from_file_location("long_functions", ROOT / "scripts" / "long_functions.py")
    assert spec is not None and spec.loader is not None
    mod = importlib.util.module_from_spec(spec)
    monkeypatch.setitem(sys.modules, spec.name, mod)  # its dataclass looks its module up
    spec.loader.exec_module(mod)
    return mod


def test_lists_long_functions_longest_first_with_their_reason(tmp_path: Path, capsys, monkeypatch):
    f = tmp_path / "m.py"
    f.write_text(SOURCE.format(body="    x = 0\n" * 5, body8="        x = 0\n" * 7), encoding="utf-8")
    mod = _script(monkeypatch)
    found = mod.long_functions([tmp_path], 4)
    # explained: def + 5 lines; C.method: def + 7 + 2 blank + 2 (inner included); short, inner: short
    assert [(x.name, x.lines, x.line) for x in found] == [("C.method", 12, 17), ("explained", 6, 7)]
    assert [x.reason for x in found] == ["", "the reason, on two lines"]
    assert mod.main([str(tmp_path), "--max", "4"]) == 0
    assert mod.main([str(tmp_path), "--max", "4", "--unexplained"]) == 1
    out = capsys.readouterr().out.splitlines()
    assert out[-1].split() == ["12", f"{f}:17", "C.method"]  # the --unexplained listing: one function
    assert mod.main([str(tmp_path), "--max", "12", "--unexplained"]) == 0
