"""The folder tree is the architecture: the engine in ``harness/``, one folder per paper under
``methods/``, the baselines under ``baselines/``. Two rules are checked on the source:

(a) **No module in ``harness/`` names a paper in code.** The papers are the plugin folders under
    ``methods/`` (``harness.plugins.manifests()``), so a new paper is covered without editing this
    test. A paper is named by its folder, its registered method names and the manifest's
    ``aliases`` (``searchr1``, ``TiresRAG``, ...). "Code" is every identifier and every string
    literal without whitespace (names, registry keys, import targets, ``"module:attr"``); prose
    is free: comments, docstrings and strings with spaces (help texts, ``source=`` citations),
    because the code must cite the papers it follows.

    Matching is by words: a token is split into lower-case words at ``_``, ``-``, ``.``, digits
    and camel case (``SEARCH_R1_DIALECT`` -> search, r, 1, dialect), and a paper name matches when
    its words occur in a row (so ``research`` does not match ``search``).

    Not papers in this sense: the baselines (``baselines/``: IRCoT, Search-o1, ...), whose names
    the engine uses only for data formats (``ircot``, the layout of IRCoT's released question
    files, is a loader format like ``hotpotqa``); and R1-Searcher, which has no method here: its
    500-question evaluation subsets (``r1searcher`` bench, ``r1searcher500`` subset), its answer
    normaliser (``normalize_answer_r1searcher``, a named metric that ARENA and TIRESRAG-R1 both
    score with) and its judge prompt (``r1_searcher``) are data, a metric and a judge of the field
    that several papers share, like SQuAD's ``normalize_answer``.

(b) **The layers, and no import cycle.** ``harness/`` is built in layers (:data:`LAYERS`, bottom to
    top; ``docs/architecture.md`` says what each holds and why the order is this one), checked the
    way import-linter's *layers* contract checks them: a module may import a module of its own
    layer or of a layer below, never one above, and independent siblings of a layer
    (:data:`INDEPENDENT`: ``llm`` and ``retrieval``) not each other. Every import statement
    counts: module level, inside functions and methods, and under ``if TYPE_CHECKING:`` (a type-only import is still an
    arrow a reader follows, and a function-level one only defers the import to call time).
    ``leaderboards/`` is the top layer. The failure lists every edge that breaks the order as
    ``file:line imports module (layer X above layer Y)``. Over every module of ``harness``,
    ``methods`` and ``baselines`` those same edges form no cycle; and ``harness`` never imports
    ``methods`` or ``baselines`` (``harness.plugins`` finds them by name at run time). A package's
    ``__init__`` running before its submodule is Python's doing, not an import statement, and is
    not an edge.

(b') **The plugin API.** A module under ``methods/`` or ``baselines/`` imports from the engine
    only ``harness.api`` (an explicit ``__all__``), and a manifest (a plugin's ``__init__.py``)
    also ``harness.plugins``; every import statement counts, as in (b).

(c) **A paper folder does not import another paper's folder** (at any level): what papers share
    lives in ``harness/`` under a generic name, or is looked up by its registered name
    (``RENDERERS.get("search_r1")``, bench ``"searchr1-train"``).
"""

from __future__ import annotations

import ast
import functools
import io
import re
import tokenize
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass
from pathlib import Path

from harness.plugins import manifests

ROOT = Path(__file__).resolve().parents[1]
PACKAGES = ("harness", "methods", "baselines")
PLUGIN_PACKAGES = ("methods", "baselines")

_WORD = re.compile(r"[A-Z]+(?![a-z])|[A-Z]?[a-z]+|\d+")


def words(text: str) -> tuple[str, ...]:
    """``"SEARCH_R1_DIALECT"`` -> ``("search", "r", "1", "dialect")``; ``"TiresRAG"`` -> ``("tires", "rag")``."""
    return tuple(w.lower() for w in _WORD.findall(text))


def paper_names() -> dict[str, set[tuple[str, ...]]]:
    """Paper folder -> the word sequences that name it (folder, method names, aliases)."""
    out: dict[str, set[tuple[str, ...]]] = {}
    for m in manifests():
        root, _, folder = m.package.partition(".")
        if root != "methods" or not folder:
            continue
        spellings = {folder, *m.plugin.methods, *m.plugin.aliases}
        out[folder] = {words(s) for s in spellings if words(s)}
    return out


def _contains(haystack: tuple[str, ...], needle: tuple[str, ...]) -> bool:
    n = len(needle)
    return any(haystack[i : i + n] == needle for i in range(len(haystack) - n + 1))


def _docstring_lines(tree: ast.AST) -> set[int]:
    lines: set[int] = set()
    for node in ast.walk(tree):
        if isinstance(node, (ast.Module, ast.ClassDef, ast.FunctionDef, ast.AsyncFunctionDef)):
            first = node.body[0] if node.body else None
            if (
                isinstance(first, ast.Expr)
                and isinstance(first.value, ast.Constant)
                and isinstance(first.value.value, str)
            ):
                lines.update(range(first.lineno, (first.end_lineno or first.lineno) + 1))
    return lines


def _code_tokens(source: str) -> Iterator[tuple[int, str]]:
    """(line, text) of every identifier and every string literal without whitespace that is not
    a docstring."""
    docs = _docstring_lines(ast.parse(source))
    for tok in tokenize.generate_tokens(io.StringIO(source).readline):
        if tok.start[0] in docs:
            continue
        if tok.type == tokenize.NAME:
            yield tok.start[0], tok.string
        elif tok.type == tokenize.STRING:
            body = re.sub(r"^[A-Za-z]*('''|\"\"\"|'|\")|('''|\"\"\"|'|\")$", "", tok.string)
            if body and not re.search(r"\s", body):
                yield tok.start[0], tok.string


@dataclass(frozen=True)
class Hit:
    path: str
    line: int
    token: str
    paper: str

    def __str__(self) -> str:
        return f"{self.path}:{self.line}: {self.token} names the paper {self.paper!r}"


def paper_hits(source: str, path: str, papers: dict[str, set[tuple[str, ...]]]) -> list[Hit]:
    firsts = {s[0] for spellings in papers.values() for s in spellings}
    hits = []
    for line, token in _code_tokens(source):
        tw = words(token)
        if firsts.isdisjoint(tw):  # no paper name starts in this token
            continue
        for paper, spellings in papers.items():
            if any(_contains(tw, s) for s in spellings):
                hits.append(Hit(path, line, token, paper))
                break
    return hits


def _py_files(package: str) -> Iterable[Path]:
    return sorted((ROOT / package).rglob("*.py"))


# -- (a) ------------------------------------------------------------------------------------------
def test_the_papers_are_found_from_their_folders():
    folders = sorted(p.parent.name for p in (ROOT / "methods").glob("*/__init__.py"))
    assert sorted(paper_names()) == folders
    assert len(folders) >= 6


def test_no_module_in_harness_names_a_paper():
    papers = paper_names()
    hits = [
        h
        for f in _py_files("harness")
        for h in paper_hits(f.read_text(encoding="utf-8"), str(f.relative_to(ROOT)), papers)
    ]
    assert not hits, "paper names in harness/ (move the code into methods/<paper>/):\n" + "\n".join(
        map(str, hits)
    )


SNIPPET = '''\
"""A module docstring may cite Search-R1 (arXiv 2503.09516) and search_r1 freely."""
from methods.search_r1.render import render as r  # a comment may say ARENA
RENDERERS.get("r_search")
KEY = "arena_context"
HELP = "as in When-to-Search and TIRESRAG-R1"
class TiresRAGJudge:
    """eval_rar in a docstring is fine"""
def f(x):
    return x.searchr1_bench, x.when_to_search
research_r1 = "eval-rar"
'''


def test_the_check_catches_each_way_of_naming_a_paper():
    hits = paper_hits(SNIPPET, "snippet.py", paper_names())
    assert [(h.line, h.token, h.paper) for h in hits] == [
        (2, "search_r1", "search_r1"),
        (3, '"r_search"', "r_search"),
        (4, '"arena_context"', "arena"),
        (6, "TiresRAGJudge", "tiresrag_r1"),
        (9, "searchr1_bench", "search_r1"),
        (9, "when_to_search", "when_to_search"),
        (10, '"eval-rar"', "eval_rar"),
    ]
    assert str(hits[0]) == "snippet.py:2: search_r1 names the paper 'search_r1'"


def test_words_split_at_separators_digits_and_camel_case():
    assert words("SEARCH_R1_DIALECT") == ("search", "r", "1", "dialect")
    assert words("SearchR1") == words("search-r1") == words("search_r1") == ("search", "r", "1")
    assert words("RSearch") == ("r", "search")
    assert words("searchr1-train") == ("searchr", "1", "train")
    assert not _contains(words("research_r1"), words("search_r1"))


# -- (b) ------------------------------------------------------------------------------------------
def _module_name(path: Path, root: Path) -> str:
    parts = list(path.relative_to(root).with_suffix("").parts)
    if parts[-1] == "__init__":
        parts.pop()
    return ".".join(parts)


def _is_type_checking(test: ast.expr) -> bool:
    return (isinstance(test, ast.Name) and test.id == "TYPE_CHECKING") or (
        isinstance(test, ast.Attribute) and test.attr == "TYPE_CHECKING"
    )


ImportWalker = Callable[[list[ast.stmt]], Iterator[ast.Import | ast.ImportFrom]]


def _module_level_imports(body: list[ast.stmt]) -> Iterator[ast.Import | ast.ImportFrom]:
    """Import statements run when the module is imported: not in functions, not under TYPE_CHECKING."""
    for node in body:
        if isinstance(node, (ast.Import, ast.ImportFrom)):
            yield node
        elif isinstance(node, ast.If):
            if not _is_type_checking(node.test):
                yield from _module_level_imports(node.body)
            yield from _module_level_imports(node.orelse)
        elif isinstance(node, ast.Try):
            for block in (node.body, node.orelse, node.finalbody, *(h.body for h in node.handlers)):
                yield from _module_level_imports(block)
        elif isinstance(node, (ast.With, ast.ClassDef)):
            yield from _module_level_imports(node.body)


def _all_imports(body: list[ast.stmt]) -> Iterator[ast.Import | ast.ImportFrom]:
    """Every import statement, in functions too, except those under ``if TYPE_CHECKING:``."""
    for node in body:
        if isinstance(node, ast.If) and _is_type_checking(node.test):
            yield from _all_imports(node.orelse)
            continue
        if isinstance(node, (ast.Import, ast.ImportFrom)):
            yield node
        for field in ("body", "orelse", "finalbody", "handlers"):
            for child in getattr(node, field, []) or []:
                yield from _all_imports([child] if isinstance(child, ast.stmt) else child.body)


def _targets(node: ast.Import | ast.ImportFrom, module: str, is_pkg: bool, known: set[str]) -> set[str]:
    if isinstance(node, ast.Import):
        names = [a.name for a in node.names]
    else:
        base = node.module or ""
        if node.level:
            parent = module.split(".") if is_pkg else module.split(".")[:-1]
            parent = parent[: len(parent) - (node.level - 1)]
            base = ".".join([*parent, base] if base else parent)
        names = [f"{base}.{a.name}" if f"{base}.{a.name}" in known else base for a in node.names]
    out = set()
    for name in names:
        while name and name not in known:  # `import a.b.c` of a non-module attribute: its module
            name = name.rpartition(".")[0]
        if name:
            out.add(name)
    return out


@functools.cache
def _graph() -> dict[str, dict[str, int]]:
    return import_graph(_files())


def import_graph(
    files: Iterable[Path], root: Path = ROOT, *, imports: ImportWalker | None = None
) -> dict[str, dict[str, int]]:
    """module -> {imported module of ours: line of its first import}, over the import statements
    ``imports`` finds in a module's body (default: module-level only, :func:`_module_level_imports`)."""
    walk = imports or _module_level_imports
    files = list(files)
    known = {_module_name(f, root) for f in files}
    graph: dict[str, dict[str, int]] = {}
    for f in files:
        mod = _module_name(f, root)
        edges: dict[str, int] = {}
        for node in walk(ast.parse(f.read_text(encoding="utf-8")).body):
            for t in _targets(node, mod, f.name == "__init__.py", known):
                if t != mod:
                    edges[t] = min(edges.get(t, node.lineno), node.lineno)
        graph[mod] = edges
    return graph


def cycles(graph: dict[str, dict[str, int]]) -> list[list[str]]:
    """The strongly connected components with more than one module (Tarjan), each sorted."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on: set[str] = set()
    out: list[list[str]] = []

    def visit(v: str) -> None:
        index[v] = low[v] = len(index)
        stack.append(v)
        on.add(v)
        for w in graph.get(v, {}):
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in on:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            comp = []
            while True:
                w = stack.pop()
                on.discard(w)
                comp.append(w)
                if w == v:
                    break
            if len(comp) > 1:
                out.append(sorted(comp))

    for v in sorted(graph):
        if v not in index:
            visit(v)
    return out


def _files() -> list[Path]:
    return [f for p in PACKAGES for f in _py_files(p)]


def _where(mod: str) -> str:
    path = ROOT / (mod.replace(".", "/") + ".py")
    return str(path.relative_to(ROOT)) if path.exists() else f"{mod.replace('.', '/')}/__init__.py"


def _every_import(body: list[ast.stmt]) -> Iterator[ast.Import | ast.ImportFrom]:
    """Every import statement: module level, in functions and methods, under TYPE_CHECKING."""
    for node in ast.walk(ast.Module(body=body, type_ignores=[])):
        if isinstance(node, (ast.Import, ast.ImportFrom)):
            yield node


def every_edge_graph(files: Iterable[Path], root: Path = ROOT) -> dict[str, dict[str, int]]:
    """:func:`import_graph` with every import statement counted (:func:`_every_import`)."""
    return import_graph(files, root, imports=_every_import)


# The layers of the engine, bottom to top: each entry names the top-level modules and packages
# under harness/ in it ("" is harness/__init__.py). A module may import its own layer and the
# layers below. Why this order: docs/architecture.md ("Layers"). A new top-level module or package
# of harness/ goes into one of them (and into that table).
LAYERS: tuple[tuple[str, tuple[str, ...]], ...] = (
    ("L0 foundations", ("", "errors", "secrets", "types", "choices", "registry", "device", "serving")),
    ("L1 data and metrics", ("metrics", "data", "plugins")),
    ("L2 models and retrieval", ("llm", "retrieval")),
    ("L3 protocol value", ("protocol",)),
    ("L4 methods and rollout", ("rollout", "method", "methods_registry")),
    ("L5 results", ("results",)),
    ("L6 judge", ("judge",)),
    ("L7a evaluation", ("eval",)),
    ("L7b training", ("rl",)),
    ("L7c verl export", ("verl",)),
    ("L7d regression gate", ("gate",)),
    ("L8 plugin API", ("api",)),
    ("L9 commands", ("cli", "__main__")),
    ("top leaderboards", ()),  # the leaderboards package
)
LAYERED_PACKAGES = ("harness", "leaderboards")
# Siblings of one layer that import each other in neither direction (import-linter's ``|``): the
# model side and the retrieval side share only what is below them (the HTTP kit in serving.py).
INDEPENDENT: tuple[frozenset[str], ...] = (frozenset({"llm", "retrieval"}),)


def layer_of(module: str) -> int | None:
    """The index in :data:`LAYERS` of a module of harness or leaderboards; None for one no layer
    names (a new top-level module: the test asks for it to be placed)."""
    root, _, rest = module.partition(".")
    if root == "leaderboards":
        return len(LAYERS) - 1
    head = rest.partition(".")[0]
    for i, (_, members) in enumerate(LAYERS):
        if head in members:
            return i
    return None


def layer_violations(graph: dict[str, dict[str, int]], where=None) -> list[str]:
    """Every edge of ``graph`` from a module to one in a higher layer, as ``file:line imports
    module (layer X above layer Y)``, and every module of the graph in no layer."""
    where = where or _where
    out = []
    for mod, edges in sorted(graph.items()):
        lm = layer_of(mod)
        if lm is None:
            out.append(f"{where(mod)}: {mod} is in no layer; add it to LAYERS and docs/architecture.md")
            continue
        for target, line in sorted(edges.items(), key=lambda e: e[1]):
            lt = layer_of(target)
            if lt is not None and lt > lm:
                out.append(f"{where(mod)}:{line} imports {target} ({LAYERS[lt][0]} above {LAYERS[lm][0]})")
            pair = {_head(mod), _head(target)}
            if lt == lm and len(pair) == 2 and any(pair <= group for group in INDEPENDENT):
                out.append(
                    f"{where(mod)}:{line} imports {target} ({' and '.join(sorted(pair))} are independent)"
                )
    return out


def _head(module: str) -> str:
    return module.split(".")[1] if module.startswith("harness.") else module


def _layered_files() -> list[Path]:
    return [f for p in LAYERED_PACKAGES for f in _py_files(p)]


def test_every_import_follows_the_layers():
    """No edge runs back up, type-only and function-level imports included."""
    bad = layer_violations(every_edge_graph(_layered_files()))
    assert not bad, f"{len(bad)} import(s) against the layer order (docs/architecture.md):\n" + "\n".join(bad)


def test_every_layer_member_exists():
    """A name in LAYERS that no longer exists is a stale entry."""
    stale = [
        name
        for _, members in LAYERS
        for name in members
        if name and not (ROOT / "harness" / f"{name}.py").exists() and not (ROOT / "harness" / name).is_dir()
    ]
    assert not stale, f"LAYERS names modules harness/ does not have: {stale}"


def test_no_import_cycle_counting_every_import():
    """No cycle over harness, methods and baselines, with every import statement an edge
    (function-level and type-only included)."""
    graph = every_edge_graph(_files())
    found = cycles(graph)
    assert not found, "\n".join(
        "cycle: "
        + "; ".join(f"{_where(a)}:{ln} imports {b}" for a in c for b, ln in graph[a].items() if b in c)
        for c in found
    )


def test_the_layer_check_finds_upward_imports_at_every_level(tmp_path):
    """A planted upward import is found whether it is at module level, in a function or under
    TYPE_CHECKING; a downward or same-layer one is not."""
    pkg = tmp_path / "harness"
    (pkg / "eval").mkdir(parents=True)
    (pkg / "__init__.py").write_text("")
    (pkg / "eval" / "__init__.py").write_text("")
    (pkg / "eval" / "runner.py").write_text("from harness.types import QAExample\n")
    (pkg / "secrets.py").write_text("from harness import errors\n")
    (pkg / "errors.py").write_text("def f():\n    from harness.eval import runner\n")
    (pkg / "types.py").write_text(
        "from typing import TYPE_CHECKING\nif TYPE_CHECKING:\n    from harness.protocol import P\n"
    )
    (pkg / "protocol.py").write_text("import harness.eval.runner\n")
    (pkg / "novel.py").write_text("")
    (pkg / "llm").mkdir()
    (pkg / "llm" / "front.py").write_text(
        "from harness.retrieval.server import limits\nfrom harness import types\n"
    )
    (pkg / "retrieval").mkdir()
    (pkg / "retrieval" / "server.py").write_text("")
    graph = every_edge_graph(sorted(pkg.rglob("*.py")), root=tmp_path)
    assert layer_violations(graph, where=lambda m: m) == [
        "harness.errors:2 imports harness.eval.runner (L7a evaluation above L0 foundations)",
        "harness.llm.front:1 imports harness.retrieval.server (llm and retrieval are independent)",
        "harness.novel: harness.novel is in no layer; add it to LAYERS and docs/architecture.md",
        "harness.protocol:1 imports harness.eval.runner (L7a evaluation above L3 protocol value)",
        "harness.types:3 imports harness.protocol (L3 protocol value above L0 foundations)",
    ]
    assert cycles(graph) == [["harness.eval.runner", "harness.protocol", "harness.types"]]


# -- (b') the plugin API ----------------------------------------------------------------------------
API_MODULE = "harness.api"
MANIFEST_MODULES = ("harness.plugins",)


def api_violations(root: Path = ROOT) -> list[str]:
    """``path:line imports module`` for every import of an engine module other than
    ``harness.api`` (and ``harness.plugins`` in a manifest) under ``methods/`` and ``baselines/``."""
    bad = []
    for package in PLUGIN_PACKAGES:
        for f in sorted((root / package).rglob("*.py")):
            allowed = {API_MODULE, *(MANIFEST_MODULES if f.name == "__init__.py" else ())}
            for node in _every_import(ast.parse(f.read_text(encoding="utf-8")).body):
                if isinstance(node, ast.Import):
                    names = [a.name for a in node.names]
                elif node.level:
                    continue
                elif node.module == "harness":
                    names = [f"harness.{a.name}" for a in node.names]
                else:
                    names = [node.module or ""]
                bad += [
                    f"{f.relative_to(root)}:{node.lineno} imports {n}"
                    for n in names
                    if n.partition(".")[0] == "harness" and n not in allowed
                ]
    return bad


def test_plugins_import_the_engine_only_through_harness_api():
    bad = api_violations()
    assert not bad, (
        "methods/ and baselines/ import the engine through harness.api (add the name to its __all__):\n"
        + "\n".join(bad)
    )


def test_the_api_names_what_it_exports():
    import harness.api as api

    assert len(api.__all__) == len(set(api.__all__))
    missing = [n for n in api.__all__ if not hasattr(api, n)]
    assert not missing, f"harness.api.__all__ names what the module does not have: {missing}"


def test_the_api_check_catches_each_way_of_reaching_past_it(tmp_path):
    paper = tmp_path / "methods" / "paper"
    paper.mkdir(parents=True)
    (tmp_path / "baselines").mkdir()
    (paper / "__init__.py").write_text("from harness.plugins import Plugin\nfrom harness.api import Method\n")
    (paper / "method.py").write_text(
        "from typing import TYPE_CHECKING\nfrom harness.api import Protocol\nfrom . import helpers\n"
        "from harness.plugins import Plugin\nimport harness.types\n"
        "if TYPE_CHECKING:\n    from harness.eval.runner import Runner\n"
        "def f():\n    from harness import method\n"
    )
    (tmp_path / "baselines" / "b.py").write_text("from harness.rollout.engine import run_tag_rollouts\n")
    assert api_violations(tmp_path) == [
        "methods/paper/method.py:4 imports harness.plugins",
        "methods/paper/method.py:5 imports harness.types",
        "methods/paper/method.py:7 imports harness.eval.runner",
        "methods/paper/method.py:9 imports harness.method",
        "baselines/b.py:1 imports harness.rollout.engine",
    ]


def test_harness_does_not_import_methods_or_baselines_at_module_level():
    graph = _graph()
    bad = [
        f"{_where(mod)}:{ln} imports {target}"
        for mod, edges in graph.items()
        if mod.split(".")[0] == "harness"
        for target, ln in edges.items()
        if target.split(".")[0] in PLUGIN_PACKAGES
    ]
    assert not bad, "harness/ must find plugins through harness.plugins, not import them:\n" + "\n".join(bad)


def test_the_cycle_check_finds_a_cycle_and_ignores_function_level_and_type_checking_imports(tmp_path):
    pkg = tmp_path / "harness"
    pkg.mkdir()
    (pkg / "__init__.py").write_text("")
    (pkg / "a.py").write_text("from harness import b\n")
    (pkg / "b.py").write_text("import harness.c as c\n")
    (pkg / "c.py").write_text("from . import a\n")
    (pkg / "d.py").write_text(
        "from typing import TYPE_CHECKING\nif TYPE_CHECKING:\n    from harness import e\n"
        "def f():\n    from harness import e\n"
    )
    (pkg / "e.py").write_text("from harness.d import f\n")
    graph = import_graph(sorted(pkg.glob("*.py")), root=tmp_path)
    assert graph["harness.a"] == {"harness.b": 1}
    assert graph["harness.b"] == {"harness.c": 1}
    assert graph["harness.c"] == {"harness.a": 1}
    assert graph["harness.d"] == {}
    assert graph["harness.e"] == {"harness.d": 1}
    assert cycles(graph) == [["harness.a", "harness.b", "harness.c"]]


def test_no_paper_folder_imports_another_paper_folder():
    bad = []
    for f in _py_files("methods"):
        parts = f.relative_to(ROOT).parts
        if len(parts) < 3:
            continue
        own = parts[1]
        for node in ast.walk(ast.parse(f.read_text(encoding="utf-8"))):
            names = (
                [a.name for a in node.names]
                if isinstance(node, ast.Import)
                else [node.module or ""]
                if isinstance(node, ast.ImportFrom) and node.level == 0
                else []
            )
            for name in names:
                root, _, rest = name.partition(".")
                other = rest.partition(".")[0]
                if root == "methods" and other and other != own:
                    bad.append(f"{f.relative_to(ROOT)}:{node.lineno} imports {name}")
    assert not bad, "a paper uses another's piece by registered name or from harness/:\n" + "\n".join(bad)


# -- (d) ------------------------------------------------------------------------------------------
SHARED_OPTIONS = (
    "--db",
    "--data-dir",
    "--protocol",
    "--model",
    "--corpus",
    "--device",
    "--max-body-bytes",
    "--read-timeout",
    "--max-connections",
)
OPTIONS_MODULE = "harness/cli/options.py"
# (file, function) pairs allowed to add a shared option themselves, with the reason; keep it short
OPTION_EXCEPTIONS: dict[str, set[tuple[str, str]]] = {}  # (file, function) allowed a second definition
# modules outside harness/cli/ that may import argparse, with the reason: none
ARGPARSE_EXCEPTIONS: set[str] = set()


def option_definitions(root: Path = ROOT) -> dict[str, set[tuple[str, str]]]:
    """Shared option -> the (file, function) pairs under ``root/harness`` whose ``add_argument``
    call adds it (any positional argument, so ``add_argument("-d", "--db")`` counts)."""
    out: dict[str, set[tuple[str, str]]] = {flag: set() for flag in SHARED_OPTIONS}

    def visit(node: ast.AST, path: str, func: str) -> None:
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
            func = node.name
        call = isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute)
        if call and node.func.attr == "add_argument":
            for arg in node.args:
                if isinstance(arg, ast.Constant) and arg.value in out:
                    out[arg.value].add((path, func))
        for child in ast.iter_child_nodes(node):
            visit(child, path, func)

    for f in sorted((root / "harness").rglob("*.py")):
        visit(ast.parse(f.read_text(encoding="utf-8")), str(f.relative_to(root)), "<module>")
    return out


def argparse_importers(root: Path = ROOT) -> list[str]:
    """``path:line`` of every import of argparse (in functions too) in ``root/harness`` outside
    ``harness/cli/``."""
    bad = []
    for f in sorted((root / "harness").rglob("*.py")):
        path = str(f.relative_to(root))
        if f.is_relative_to(root / "harness" / "cli"):
            continue
        for node in ast.walk(ast.parse(f.read_text(encoding="utf-8"))):
            names = (
                [a.name for a in node.names]
                if isinstance(node, ast.Import)
                else [node.module or ""]
                if isinstance(node, ast.ImportFrom)
                else []
            )
            if any(n.partition(".")[0] == "argparse" for n in names):
                bad.append(f"{path}:{node.lineno}")
    return bad


def test_each_shared_option_is_added_by_one_function_in_harness_cli():
    """Each shared option (``--db``, ``--data-dir``, ``--protocol``, ``--model``, ``--corpus``,
    ``--device``, the servers' connection limits) is defined once, by a helper in
    harness/cli/options.py; every command calls the helper."""
    defs = option_definitions()
    for flag in SHARED_OPTIONS:
        found = defs[flag] - OPTION_EXCEPTIONS.get(flag, set())
        assert len(found) == 1 and next(iter(found))[0] == OPTIONS_MODULE, (
            f"{flag} is added by {sorted(found)}; add it with the helper in {OPTIONS_MODULE}"
        )
        stale = OPTION_EXCEPTIONS.get(flag, set()) - defs[flag]
        assert not stale, f"{flag}: the exception {sorted(stale)} no longer adds it; drop it from the list"


def test_option_parsing_stays_in_harness_cli():
    """The domain packages take typed values; the argparse glue lives in harness/cli/."""
    bad = [where for where in argparse_importers() if where.partition(":")[0] not in ARGPARSE_EXCEPTIONS]
    assert not bad, "argparse outside harness/cli/ (move the option glue into harness/cli/):\n" + "\n".join(
        bad
    )


def test_the_option_checks_catch_a_second_definition_and_an_argparse_import(tmp_path):
    cli, domain = tmp_path / "harness" / "cli", tmp_path / "harness" / "retrieval"
    cli.mkdir(parents=True)
    domain.mkdir()
    (cli / "options.py").write_text('def add_db_arg(p):\n    p.add_argument("--db")\n')
    (cli / "cmd_x.py").write_text('import argparse\ndef add_parser(p):\n    p.add_argument("-d", "--db")\n')
    (domain / "opts.py").write_text("def f():\n    from argparse import ArgumentParser\n")
    defs = option_definitions(tmp_path)
    assert defs["--db"] == {("harness/cli/options.py", "add_db_arg"), ("harness/cli/cmd_x.py", "add_parser")}
    assert defs["--model"] == set()
    assert argparse_importers(tmp_path) == ["harness/retrieval/opts.py:2"]


def test_nothing_in_harness_imports_the_leaderboard_app():
    """The dependency runs one way (leaderboards -> harness), in functions too: the app's commands
    reach the CLI through the ``rar_harness.commands`` entry points (harness.cli.COMMANDS_GROUP)."""
    bad = []
    for f in _py_files("harness"):
        for node in _all_imports(ast.parse(f.read_text(encoding="utf-8")).body):
            names = [a.name for a in node.names] if isinstance(node, ast.Import) else [node.module or ""]
            bad += [
                f"{f.relative_to(ROOT)}:{node.lineno} imports {n}"
                for n in names
                if n.split(".")[0] == "leaderboards"
            ]
    assert not bad, "\n".join(bad)


def test_the_leaderboard_commands_are_found_through_their_entry_points():
    from harness.cli import commands

    found = commands()
    assert {"export", "leaderboard", "run", "train"} <= set(found)
    assert found["export"].__module__ == "leaderboards.cmd_export"
