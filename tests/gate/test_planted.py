"""Planted regressions against the gate's exact layers (issue 37, docs/regression-gate.md).

Each case plants one regression with monkeypatching (never by editing a source file), runs every
exact layer against the committed baseline (``results/regress/exact.json`` and the paper folders'
``regress-exact.json``), and asserts that the
gate fails, that the first layer to move is the expected one and that every earlier layer passed.
An untouched tree passes; so does a tree whose module was re-executed from a source with changed
docstrings and comments, while the same re-execution with one sentence dropped from a prompt fails
(so the re-execution really replaces the code the gate runs)."""

from __future__ import annotations

import dataclasses
import re
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from harness import gate
from harness.gate.layers import LAYERS, Recorded, cached_retrievers, compute
from harness.gate.pins import load_pins

ROOT = Path(__file__).resolve().parents[2]
BASELINE = ROOT / "results" / "regress" / "exact.json"


@pytest.fixture(scope="module")
def cache_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return tmp_path_factory.mktemp("rar-cache")


@pytest.fixture(scope="module")
def shared(cache_dir: Path) -> dict[str, Any]:
    """The baseline, the recorded outputs and one retriever set built once for the module."""
    mp = pytest.MonkeyPatch()
    mp.setenv("RAR_HARNESS_CACHE", str(cache_dir))
    pins = load_pins(BASELINE)
    try:
        yield {
            "baseline": pins.merged,
            "texts": pins.merged_texts,
            "recorded": Recorded.load(ROOT / "results" / "regress" / "recorded.json"),
            "retrievers": cached_retrievers(),
        }
    finally:
        mp.undo()


def run_gate(shared: dict[str, Any], retrievers: Any = None) -> list[gate.LayerVerdict]:
    current = compute(LAYERS, recorded=shared["recorded"], retriever_for=retrievers or shared["retrievers"])
    return gate.compare(shared["baseline"], current, baseline_texts=shared["texts"])


def replace_everywhere(monkeypatch: pytest.MonkeyPatch, old: object, new: object) -> int:
    """Bind ``new`` wherever a loaded module binds ``old`` (a function imported by name elsewhere
    is replaced there too, as an edit of its source would be); returns how many bindings."""
    n = 0
    for mod in list(sys.modules.values()):
        d = getattr(mod, "__dict__", None)
        if not isinstance(d, dict):
            continue
        for name, value in list(d.items()):
            if value is old:
                monkeypatch.setattr(mod, name, new)
                n += 1
    assert n, f"{old!r} is bound nowhere"
    return n


# -- the plants ------------------------------------------------------------------------------------
def titles_dropped(mp: pytest.MonkeyPatch, ctx: dict) -> None:
    """The renderer shows ``Doc {i}(Title: ) {text}`` (the experiment that passed the score gate)."""
    from harness.rollout.render import RENDERERS, first_line_and_rest

    old = RENDERERS.get("search_r1")

    def no_titles(hits):
        return "".join(
            f"Doc {i}(Title: ) {first_line_and_rest(h.contents)[1]}\n" for i, h in enumerate(hits, 1)
        )

    mp.setitem(RENDERERS._items, "search_r1", no_titles)
    replace_everywhere(mp, old, no_titles)


def protocol_top_k(mp: pytest.MonkeyPatch, ctx: dict) -> None:
    """``mini``'s top-k 3 -> 2."""
    from harness.eval.protocol import PROTOCOLS, mini

    mp.setitem(PROTOCOLS._items, "mini", lambda: mini().with_(top_k=2))


def engine_top_k(mp: pytest.MonkeyPatch, ctx: dict) -> None:
    """The tag engine asks the retriever for one passage fewer than the protocol's top-k (3 -> 2)."""
    from harness.rollout import engine

    old = engine.retrieve_step

    def fewer(ctx_, states, queries, *, top_k, **kw):
        return old(ctx_, states, queries, top_k=top_k - 1, **kw)

    replace_everywhere(mp, old, fewer)


def extractor_first(mp: pytest.MonkeyPatch, ctx: dict) -> None:
    """The answer extractor takes the first ``<answer>`` span instead of the last."""
    from harness.rollout import extract

    old = extract.extract_tagged

    def first(model_text, open_tag="<answer>", close_tag="</answer>"):
        spans = re.findall(re.escape(open_tag) + r"(.*?)" + re.escape(close_tag), model_text, flags=re.DOTALL)
        if not spans:
            return old(model_text, open_tag, close_tag)
        pred = spans[0].strip()
        if not pred:
            return extract.Extraction("", "empty_answer")
        return extract.Extraction(pred, "ok" if len(spans) == 1 else "multiple_answers")

    replace_everywhere(mp, old, first)


def squad_articles(mp: pytest.MonkeyPatch, ctx: dict) -> None:
    """SQuAD normalisation no longer removes articles."""
    from harness.metrics import normalize

    mp.setattr(normalize, "_ARTICLES", re.compile(r"(?!)"))


def template_sentence(mp: pytest.MonkeyPatch, ctx: dict) -> None:
    """naive_rag's system prompt loses one sentence."""
    import baselines.naive_rag as nr

    sentence = "Only give me the answer and do not output any other words."
    assert sentence in nr.SYSTEM
    mp.setattr(nr, "SYSTEM", nr.SYSTEM.replace(sentence + "\n", ""))


def stemming_off(mp: pytest.MonkeyPatch, ctx: dict) -> None:
    """bm25s's analyzer stops stemming (the spec still says porter); the index is rebuilt by it."""
    from harness.retrieval.bm25 import Analyzer

    init = Analyzer.__init__

    def no_stem(self, stemmer, stopwords):
        init(self, None, stopwords)
        self.stemmer_name = stemmer  # describes itself as before: only the behaviour changed

    mp.setattr(Analyzer, "__init__", no_stem)
    mp.setenv("RAR_HARNESS_CACHE", str(ctx["fresh_cache"]))
    ctx["retrievers"] = cached_retrievers()


def engine_obs_budget(mp: pytest.MonkeyPatch, ctx: dict) -> None:
    """Observations are cut at 100 tokens fewer than the protocol's ``max_obs_tokens``."""
    from harness.rollout import engine

    old = engine.truncate_tokens

    def tighter(ctx_, text, limit):
        return old(ctx_, text, None if limit is None else limit - 100)

    replace_everywhere(mp, old, tighter)


def protocol_obs_budget(mp: pytest.MonkeyPatch, ctx: dict) -> None:
    """``mini``'s observation budget 500 -> 400 tokens."""
    from harness.eval.protocol import PROTOCOLS, mini

    mp.setitem(PROTOCOLS._items, "mini", lambda: mini().with_(max_obs_tokens=400))


@dataclasses.dataclass(frozen=True)
class Plant:
    name: str
    plant: Callable[[pytest.MonkeyPatch, dict], None]
    layer: str  # the first layer that must move
    item: str  # a substring of the first moved item's key


PLANTS = (
    Plant("titles dropped from the renderer", titles_dropped, "prompts", "/call"),
    Plant("top-k 3 -> 2 in the protocol", protocol_top_k, "specs", "protocol mini"),
    Plant("top-k 3 -> 2 in the rollout engine", engine_top_k, "prompts", "@mini/"),
    Plant("answer extractor: first <answer>, not last", extractor_first, "extraction", "/synthetic/"),
    Plant("SQuAD normalisation keeps articles", squad_articles, "extraction", ""),
    Plant("a prompt template loses one sentence", template_sentence, "specs", "method naive_rag @"),
    Plant("retriever tokenizer: stemming off", stemming_off, "retrieval", "closed/bm25s"),
    Plant("observation budget -100 tokens in the engine", engine_obs_budget, "prompts", "@mini/"),
    Plant("observation budget 500 -> 400 in the protocol", protocol_obs_budget, "specs", "protocol mini"),
)


@pytest.mark.parametrize("p", PLANTS, ids=[p.name for p in PLANTS])
def test_planted_regression_fails_at_its_layer(p: Plant, shared, tmp_path, monkeypatch):
    ctx: dict[str, Any] = {"fresh_cache": tmp_path / "cache", "retrievers": shared["retrievers"]}
    p.plant(monkeypatch, ctx)
    verdicts = run_gate(shared, ctx["retrievers"])
    first = gate.first_moved(verdicts)
    assert first is not None, f"{p.name}: the gate passed\n{gate.report(verdicts)}"
    layer, item = first
    assert layer == p.layer, (
        f"{p.name}: first moved layer {layer}, expected {p.layer}\n{gate.report(verdicts)}"
    )
    assert item is not None and p.item in item.key, (p.name, item)
    earlier = LAYERS[: LAYERS.index(p.layer)]
    assert all(v.verdict == "ok" for v in verdicts if v.layer in earlier)


def test_untouched_tree_passes(shared):
    verdicts = run_gate(shared)
    assert [v.verdict for v in verdicts] == ["ok"] * len(LAYERS), gate.report(verdicts)
    assert all(v.n > 0 for v in verdicts)


def test_titles_dropped_shows_the_first_difference(shared, monkeypatch, tmp_path):
    """The prompt layer's detail is the text around the first difference, not only two hashes."""
    titles_dropped(monkeypatch, {})
    verdicts = run_gate(shared)
    prompts = next(v for v in verdicts if v.layer == "prompts")
    assert prompts.failed and "(Title: )" in prompts.moved[0].detail
    assert "first difference at line" in prompts.moved[0].detail
    assert "naive_rag@mini" in {m.key.split("/")[0] for m in prompts.moved}


def _reexec(monkeypatch: pytest.MonkeyPatch, module: Any, edit: Callable[[str], str]) -> None:
    """Re-execute ``module`` from its edited source and bind what changed into it (monkeypatch
    restores the old bindings after the test). Code that looks names up in the module (the
    registered class's methods) then runs the re-executed definitions."""
    src = Path(module.__file__).read_text()
    new = edit(src)
    assert new != src
    ns = dict(module.__dict__)
    exec(compile(new, module.__file__, "exec"), ns)  # noqa: S102 - the tree's own source, edited
    for name, value in ns.items():
        if module.__dict__.get(name) is not value:
            monkeypatch.setattr(module, name, value, raising=False)


def cosmetic(src: str) -> str:
    src = src.replace('"""Naive RAG:', '"""Naive retrieval-augmented generation:', 1)
    src = src.replace(
        '    """The chat prompt:', '    # a comment added\n    """The chat prompt, reworded:', 1
    )
    return src.replace(
        "\nclass NaiveRAG(Method):", "\n# cosmetic: a comment line\nclass NaiveRAG(Method):", 1
    )


def test_docstring_and_comment_change_passes(shared, monkeypatch):
    import baselines.naive_rag as nr

    _reexec(monkeypatch, nr, cosmetic)
    assert nr.rag_prompt.__doc__.startswith("The chat prompt, reworded")
    verdicts = run_gate(shared)
    assert gate.first_moved(verdicts) is None, gate.report(verdicts)


def test_the_same_reexecution_sees_a_dropped_sentence(shared, monkeypatch):
    """Control for the cosmetic test: a real edit through the same mechanism fails the gate."""
    import baselines.naive_rag as nr

    _reexec(
        monkeypatch,
        nr,
        lambda s: cosmetic(s).replace(
            'Only give me the answer and do not output any other "\n    "words.', '"\n    "', 1
        ),
    )
    verdicts = run_gate(shared)
    assert gate.first_moved(verdicts)[0] == "specs", gate.report(verdicts)


def test_cli_names_the_layer_and_item(shared, monkeypatch, capsys):
    from harness.cli import main

    monkeypatch.chdir(ROOT)
    titles_dropped(monkeypatch, {})
    assert main(["regress", "--layers", "specs,prompts"]) == 1
    out = capsys.readouterr()
    assert "regress: FAILED at layer prompts, item naive_rag@mini/" in out.err or (
        "regress: FAILED at layer prompts, item" in out.err
    ), out.err
    assert "retrieval   not run" in out.out and "specs       ok" in out.out


def test_update_needs_a_reason(monkeypatch, tmp_path, capsys):
    from harness.cli import main

    assert (
        main(["regress", "--layers", "exact", "--update", "--exact-against", str(tmp_path / "x.json")]) == 2
    )
    assert "--reason" in capsys.readouterr().err
    assert not (tmp_path / "x.json").exists()
