"""harness.plugins: the manifests of the paper folders and the baselines, what they declare, and
discovery (found by folder, registered lazily, without importing the plugin modules)."""

from __future__ import annotations

import json
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from harness.data.benches import BENCHES, Bench, get_bench
from harness.errors import ConfigError
from harness.eval.protocol import PROTOCOLS, preset
from harness.judge.prompts import JUDGE_PROMPTS, JudgePrompt, get_prompt
from harness.method import Method
from harness.methods_registry import METHODS, VARIANTS
from harness.plugins import Manifest, Plugin, discover, manifests, register
from harness.protocol import Protocol
from harness.registry import Registry
from harness.rollout.render import RENDERERS

ROOT = Path(__file__).resolve().parents[1]


def test_every_folder_under_methods_and_the_baselines_package_have_a_manifest():
    packages = [m.package for m in manifests()]
    folders = sorted(f"methods.{p.parent.name}" for p in (ROOT / "methods").glob("*/__init__.py"))
    assert packages == [*folders, "baselines"]


ENGINE_BENCHES = (  # harness/data/benches.py's own
    "2wikimultihopqa", "2wikimultihopqa-train", "all", "bamboogle", "hotpotqa", "mini", "mini-multihop",
    "mini-singlehop", "multihop", "musique", "nq", "popqa", "r1searcher", "singlehop", "triviaqa",
)  # fmt: skip
PAPER_VARIANTS = {
    v: b for m in manifests() if m.package.startswith("methods.") for v, b in m.plugin.variants.items()
}


def test_the_registries_hold_what_the_manifests_declare():
    declared = {kind: {} for kind in ("methods", "protocols", "benches", "judge_prompts", "renderers")}
    for m in manifests():
        for kind, targets in declared.items():
            targets.update(m.targets(kind))
    assert set(declared["methods"]) <= set(METHODS.names())
    assert set(declared["protocols"]) == set(PROTOCOLS.names()) - {"mini"}
    # the papers' own (a new paper adds to them, in its folder only) beside the engine's
    assert {"searchr1-train", "arena-train", "r1searcher-train"} <= set(declared["benches"])
    assert set(declared["benches"]) <= set(BENCHES.names())
    assert set(BENCHES.names()) - set(declared["benches"]) == set(ENGINE_BENCHES)
    assert set(declared["judge_prompts"]) == set(JUDGE_PROMPTS.names()) - {"default", "r1_searcher"}
    assert {"search_r1", "r_search"} <= set(declared["renderers"])
    assert set(RENDERERS.names()) == set(declared["renderers"]) | {"numbered"}
    assert {v: b for v, b in VARIANTS.items() if v in PAPER_VARIANTS} == PAPER_VARIANTS
    assert PAPER_VARIANTS["eval_rar_b"] == "eval_rar"
    assert {v: b for v, b in VARIANTS.items() if v not in PAPER_VARIANTS} == {
        # baselines/__init__.py: the released-evaluation variants (docs/baselines.md)
        "search_o1_released": "search_o1",
        "direct_flashrag": "direct",
        "naive_rag_flashrag": "naive_rag",
        "ircot_flashrag": "ircot",
        "search_r1_rag": "naive_rag",
        "naive_rag_arena": "naive_rag",  # naive RAG over ARENA's references (its paired baseline)
    }


def test_every_declared_target_is_what_its_kind_needs():
    for m in manifests():
        for name in m.plugin.methods:
            cls = METHODS.get(name)
            assert issubclass(cls, Method) and cls.name == name, (m.path, name)
        for name in m.plugin.protocols:
            p = preset(name)
            assert isinstance(p, Protocol) and p.name == name
        for name in m.plugin.benches:
            b = get_bench(name)
            assert isinstance(b, Bench) and b.name == name
        for name in m.plugin.judge_prompts:
            p = get_prompt(name)
            assert isinstance(p, JudgePrompt) and p.id == name
        for name in m.plugin.renderers:
            assert callable(RENDERERS.get(name))


def test_relative_targets_are_made_absolute():
    m = Manifest(
        "methods.toy",
        "methods/toy/__init__.py",
        Plugin(methods={"toy": ".method:Toy", "other": "pkg.mod:Other"}),
    )
    assert m.targets("methods") == {"toy": "methods.toy.method:Toy", "other": "pkg.mod:Other"}


@pytest.mark.parametrize(
    ("kwargs", "message"),
    [
        (
            {"methods": {"toy": "method.Toy"}},
            "plugin methods 'toy': target 'method.Toy' is not 'module:attr'",
        ),
        (
            {"renderers": {"toy": ".render:"}},
            "plugin renderers 'toy': target '.render:' is not 'module:attr'",
        ),
        ({"variants": {"toy_b": "toy"}}, "plugin variant 'toy_b' (of 'toy') is not among its methods"),
    ],
)
def test_a_malformed_manifest_is_a_one_line_error(kwargs, message):
    with pytest.raises(ConfigError) as e:
        Plugin(**kwargs)
    assert str(e.value).startswith(message) and "\n" not in str(e.value)


@pytest.fixture
def plugin_root(tmp_path, monkeypatch):
    """A plugin root package ``toyplugins`` on sys.path; write its folders with ``add``."""
    root = tmp_path / "toyplugins"
    root.mkdir()
    (root / "__init__.py").write_text("")
    monkeypatch.syspath_prepend(str(tmp_path))
    for name in [m for m in sys.modules if m.split(".")[0] == "toyplugins"]:
        monkeypatch.delitem(sys.modules, name)

    def add(folder: str, init: str) -> Path:
        d = root / folder
        d.mkdir()
        (d / "__init__.py").write_text(textwrap.dedent(init))
        return d

    yield add
    for name in [m for m in sys.modules if m.split(".")[0] == "toyplugins"]:
        del sys.modules[name]


def test_discovery_reads_each_folder_and_registers_lazily(plugin_root):
    d = plugin_root(
        "toy",
        """\
        from harness.plugins import Plugin
        PLUGIN = Plugin(methods={"toy": ".method:Toy"})
        """,
    )
    (d / "method.py").write_text("Toy = 'the toy method'\n")
    found = discover(("toyplugins",))
    assert [(m.package, m.targets("methods")) for m in found] == [
        ("toyplugins.toy", {"toy": "toyplugins.toy.method:Toy"})
    ]
    reg: Registry[str] = Registry("method", discover=register("methods", source=lambda: found))
    assert "toyplugins.toy.method" not in sys.modules
    assert reg.names() == ["toy"] and "toyplugins.toy.method" not in sys.modules
    assert reg.get("toy") == "the toy method"


def test_a_folder_without_a_manifest_is_an_error_naming_its_file(plugin_root):
    d = plugin_root("bare", '"""no manifest"""\n')
    with pytest.raises(ConfigError) as e:
        discover(("toyplugins",))
    assert str(e.value).startswith(f"{d / '__init__.py'}: a plugin package must define PLUGIN = ")


def test_a_name_two_plugins_declare_is_an_error_naming_the_second_manifest(plugin_root):
    init = """\
        from harness.plugins import Plugin
        PLUGIN = Plugin(benches={"train": ".benches:TRAIN"})
        """
    plugin_root("a", init)
    b = plugin_root("b", init)
    found = discover(("toyplugins",))
    reg: Registry[object] = Registry("bench", discover=register("benches", source=lambda: found))
    with pytest.raises(ConfigError) as e:
        reg.names()
    assert str(e.value) == f"{b / '__init__.py'}: bench 'train' is registered twice"


def test_a_variant_of_a_method_no_plugin_registers_is_an_error(plugin_root):
    d = plugin_root(
        "toy",
        """\
        from harness.plugins import Plugin
        PLUGIN = Plugin(methods={"toy_b": ".method:ToyB"}, variants={"toy_b": "toy"})
        """,
    )
    with pytest.raises(ConfigError) as e:
        discover(("toyplugins",))
    assert str(e.value) == f"{d / '__init__.py'}: variant 'toy_b' varies 'toy', which no plugin registers"


def _plugin_modules_after(code: str) -> dict:
    probe = code + textwrap.dedent(
        """
        mods = sorted(m for m in sys.modules if m.split(".")[0] in ("methods", "baselines"))
        print(json.dumps({"modules": mods, "torch": "torch" in sys.modules}))
        """
    )
    out = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True, check=True, cwd=ROOT)
    return json.loads(out.stdout.strip().splitlines()[-1])


@pytest.mark.integration
def test_listing_names_imports_no_plugin_module():
    """Discovery reads the manifests only: listing every registry's names imports no method,
    protocol, bench, judge or renderer module of a plugin, and not torch."""
    got = _plugin_modules_after(
        textwrap.dedent(
            """\
            import json, sys
            from harness.data.benches import BENCHES
            from harness.judge.prompts import JUDGE_PROMPTS
            from harness.methods_registry import METHODS
            from harness.eval.protocol import PROTOCOLS
            from harness.rollout.render import RENDERERS
            assert sum(len(r.names()) for r in (METHODS, PROTOCOLS, BENCHES, JUDGE_PROMPTS, RENDERERS)) > 30
            """
        )
    )
    folders = sorted(f"methods.{p.parent.name}" for p in (ROOT / "methods").glob("*/__init__.py"))
    assert got == {"modules": sorted(["baselines", "methods", *folders]), "torch": False}


@pytest.mark.integration
def test_describing_the_protocols_imports_no_method_module():
    """``harness list protocols`` builds every protocol from the papers' light ``protocol.py``
    modules, never from their method modules (which import torch)."""
    got = _plugin_modules_after(
        "import json, sys\nfrom harness.eval.protocol import describe_protocols\ndescribe_protocols()\n"
    )
    with_protocols = sorted(m.package for m in manifests() if m.plugin.protocols)
    folders = sorted(f"methods.{p.parent.name}" for p in (ROOT / "methods").glob("*/__init__.py"))
    expected = ["baselines", "methods", *folders, *(f"{p}.protocol" for p in with_protocols)]
    assert got == {"modules": sorted(expected), "torch": False}


@pytest.mark.integration
def test_loading_every_method_imports_no_torch():
    """Issue 61: a base install (`pip install -e .`, no torch) ran `harness run --method direct`
    into a 39-line traceback: checking the protocols loads every method module, and TIRESRAG-R1's
    imported torch at the top. A method module imports torch only where it trains."""
    got = _plugin_modules_after(
        textwrap.dedent(
            """\
            import json, sys
            from harness.methods_registry import get_method, resolve_methods
            for name in resolve_methods("all"):
                get_method(name)
            """
        )
    )
    assert got["torch"] is False
