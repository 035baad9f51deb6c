"""List the functions longer than a limit, longest first (issue 46: no command handler over about
60 lines, no engine function over about 80 without a comment saying why).

A function's length is its ``def`` line to its last line, docstring and nested functions included
(``cmd_run.handle`` at 99 lines is what the issue counted). A function that is long on purpose
says why in a comment starting ``# long:`` on the line above its ``def`` (after any decorators'
first line) or on the first line of its body; the listing shows that reason, and ``--unexplained``
leaves such functions out (the exit status is then 1 when any is left, for CI).

Examples::

    python scripts/long_functions.py harness --max 80 --exclude harness/rl/trainer.py
    python scripts/long_functions.py harness/cli/cmd_*.py --max 60      # the command handlers
    python scripts/long_functions.py harness --max 80 --unexplained     # exit 1 if any lacks a reason
"""

from __future__ import annotations

import argparse
import ast
import sys
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

REASON = "# long:"


@dataclass(frozen=True)
class LongFunction:
    path: str
    line: int
    name: str  # qualified: Class.method, outer.inner
    lines: int
    reason: str  # the text after "# long:", "" when none is given


def _reason(source: list[str], node: ast.FunctionDef | ast.AsyncFunctionDef) -> str:
    """The ``# long:`` comment in the comment block right above the function (above its first
    decorator), or on the line before or at its body's first statement; the reason runs on over
    the comment lines that follow it in the block."""
    first = min([node.lineno, *(d.lineno for d in node.decorator_list)])
    block: list[str] = []
    i = first - 2  # the line above, 0-based
    while i >= 0 and source[i].lstrip().startswith("#"):
        block.insert(0, source[i].strip())
        i -= 1
    for j, line in enumerate(block):
        if line.startswith(REASON):
            return " ".join([line[len(REASON) :].strip(), *(x.lstrip("#").strip() for x in block[j + 1 :])])
    for i in (node.body[0].lineno - 2, node.body[0].lineno - 1):
        if 0 <= i < len(source) and REASON in source[i]:
            return source[i].split(REASON, 1)[1].strip()
    return ""


def _functions(
    tree: ast.AST, prefix: str = ""
) -> Iterator[tuple[str, ast.FunctionDef | ast.AsyncFunctionDef]]:
    for node in ast.iter_child_nodes(tree):
        if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef):
            yield prefix + node.name, node
            yield from _functions(node, f"{prefix}{node.name}.")
        elif isinstance(node, ast.ClassDef):
            yield from _functions(node, f"{prefix}{node.name}.")
        else:
            yield from _functions(node, prefix)


def long_functions(paths: list[Path], max_lines: int, exclude: set[Path] = frozenset()) -> list[LongFunction]:
    """Every function over ``max_lines`` in the ``.py`` files of ``paths`` (files or folders), longest
    first."""
    files: list[Path] = []
    for p in paths:
        if not p.exists():
            raise SystemExit(f"error: {p}: no such file or folder")
        files += sorted(p.rglob("*.py")) if p.is_dir() else [p]
    skip = {e.resolve() for e in exclude}
    out = []
    for f in files:
        if f.resolve() in skip:
            continue
        text = f.read_text(encoding="utf-8")
        source = text.splitlines()
        for name, node in _functions(ast.parse(text, filename=str(f))):
            n = (node.end_lineno or node.lineno) - node.lineno + 1
            if n > max_lines:
                out.append(LongFunction(str(f), node.lineno, name, n, _reason(source, node)))
    return sorted(out, key=lambda x: (-x.lines, x.path, x.line))


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(
        description=__doc__.split("\n\n")[0],
        epilog="examples:\n"
        "  python scripts/long_functions.py harness --max 80 --exclude harness/rl/trainer.py\n"
        "  python scripts/long_functions.py harness/cli/cmd_*.py --max 60\n"
        "  python scripts/long_functions.py harness --max 80 --unexplained",
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    ap.add_argument("paths", nargs="+", type=Path, help=".py files or folders (searched recursively)")
    ap.add_argument("--max", type=int, default=80, help="list functions longer than this (default 80)")
    ap.add_argument("--exclude", type=Path, action="append", default=[], help="a file to skip (repeatable)")
    ap.add_argument(
        "--unexplained",
        action="store_true",
        help=f"only functions without a '{REASON} <why>' comment; exit 1 when there is any",
    )
    args = ap.parse_args(argv)
    if args.max < 1:
        ap.error("--max must be >= 1")
    found = long_functions(args.paths, args.max, set(args.exclude))
    if args.unexplained:
        found = [f for f in found if not f.reason]
    for f in found:
        why = f"  ({REASON} {f.reason})" if f.reason else ""
        print(f"{f.lines:4d}  {f.path}:{f.line}  {f.name}{why}")
    sys.stdout.flush()
    print(f"{len(found)} function(s) over {args.max} lines", file=sys.stderr)
    return 1 if args.unexplained and found else 0


if __name__ == "__main__":
    sys.exit(main())
