"""Direct tests of ``harness.registry.Registry``: registration by value, decorator and lazy target,
the one-line errors, and when a lazy target is imported."""

from __future__ import annotations

import sys
import textwrap

import pytest

from harness.errors import ConfigError
from harness.registry import Registry


@pytest.fixture
def plugin_module(tmp_path, monkeypatch):
    """A module ``reg_plugin_<test>`` on sys.path that counts its imports in ``IMPORTS``."""
    name = f"reg_plugin_{abs(hash(str(tmp_path))) % 10**8}"
    (tmp_path / f"{name}.py").write_text(
        textwrap.dedent(
            """
            import builtins
            builtins._reg_imports = getattr(builtins, "_reg_imports", 0) + 1
            class Thing:
                pass
            VALUE = 42
            """
        )
    )
    monkeypatch.syspath_prepend(str(tmp_path))
    import builtins

    monkeypatch.setattr(builtins, "_reg_imports", 0, raising=False)
    yield name
    sys.modules.pop(name, None)


def test_register_by_value_and_by_decorator_return_the_object():
    reg: Registry[object] = Registry("widget")
    obj = object()
    assert reg.register("a", obj) is obj

    @reg.register("b")
    class B:
        pass

    assert reg.get("a") is obj and reg.get("b") is B
    assert "a" in reg and "zzz" not in reg


def test_names_are_sorted_over_eager_and_lazy_entries():
    reg: Registry[object] = Registry("widget")
    reg.register("zeta", 1)
    reg.register_lazy("alpha", "json:dumps")
    reg.register("mid", 2)
    assert reg.names() == ["alpha", "mid", "zeta"]
    assert list(reg) == ["alpha", "mid", "zeta"]


@pytest.mark.parametrize("first_lazy", [False, True])
@pytest.mark.parametrize("second_lazy", [False, True])
def test_a_name_registered_twice_is_an_error(first_lazy, second_lazy):
    reg: Registry[object] = Registry("method")

    def add():
        return reg.register_lazy("x", "json:dumps") if first_lazy else reg.register("x", 1)

    add()
    with pytest.raises(ConfigError) as e:
        reg.register_lazy("x", "json:loads") if second_lazy else reg.register("x", 2)
    assert str(e.value) == "method 'x' is registered twice"
    assert reg.names() == ["x"]


def test_an_unknown_name_lists_the_known_ones():
    reg: Registry[object] = Registry("bench")
    with pytest.raises(ConfigError) as e:
        reg.get("nope")
    assert str(e.value) == "unknown bench 'nope'; known: (none)"
    reg.register("b", 1)
    reg.register_lazy("a", "json:dumps")
    with pytest.raises(ConfigError) as e:
        reg.get("nope")
    assert str(e.value) == "unknown bench 'nope'; known: a, b"


def test_a_lazy_target_is_imported_on_first_get_only(plugin_module):
    import builtins

    reg: Registry[object] = Registry("method")
    reg.register_lazy("thing", f"{plugin_module}:Thing")
    reg.register_lazy("value", f"{plugin_module}:VALUE")
    assert builtins._reg_imports == 0 and plugin_module not in sys.modules
    assert reg.names() == ["thing", "value"] and "thing" in reg
    assert builtins._reg_imports == 0  # listing and membership import nothing

    thing = reg.get("thing")
    assert thing is sys.modules[plugin_module].Thing
    assert reg.get("thing") is thing and reg.get("value") == 42
    assert builtins._reg_imports == 1
    assert reg.names() == ["thing", "value"]


def test_a_lazy_target_without_its_attribute_is_a_one_line_error_and_stays_registered(plugin_module):
    reg: Registry[object] = Registry("method")
    reg.register_lazy("ghost", f"{plugin_module}:Missing")
    with pytest.raises(ConfigError) as e:
        reg.get("ghost")
    assert str(e.value) == (
        f"method 'ghost' is registered as '{plugin_module}:Missing', but {plugin_module} has no 'Missing'"
    )
    assert reg.names() == ["ghost"]  # the same error again next time, not "unknown"
    with pytest.raises(ConfigError, match="has no 'Missing'"):
        reg.get("ghost")


def test_a_lazy_target_whose_module_is_missing_stays_registered():
    reg: Registry[object] = Registry("method")
    reg.register_lazy("x", "no_such_module_for_registry_test:X")
    with pytest.raises(ModuleNotFoundError, match="no_such_module_for_registry_test"):
        reg.get("x")
    assert reg.names() == ["x"]


# -- the discover hook -------------------------------------------------------------------------------
@pytest.mark.parametrize(
    "lookup",
    [
        lambda r: r.get("found"),
        lambda r: r.names(),
        lambda r: "found" in r,
        lambda r: list(r),
    ],
    ids=["get", "names", "in", "iter"],
)
def test_discover_runs_once_on_the_first_lookup(lookup):
    calls = []

    def discover(reg):
        calls.append(reg.names())  # a lookup inside the hook sees what is registered so far
        reg.register("found", 1)

    reg: Registry[object] = Registry("method", discover=discover)
    reg.register("early", 0)  # registering is no lookup
    assert calls == []
    lookup(reg)
    assert calls == [["early"]]
    assert reg.names() == ["early", "found"] and reg.get("found") == 1 and "found" in reg
    assert calls == [["early"]]


def test_a_failing_discover_hook_leaves_nothing_and_fails_again_next_time():
    attempts = []

    def discover(reg):
        attempts.append(1)
        reg.register("half", 1)
        if len(attempts) < 3:
            raise ConfigError("methods/x/__init__.py: PLUGIN is missing")

    reg: Registry[object] = Registry("method", discover=discover)
    reg.register("before", 0)
    for _ in range(2):
        # the same error each time; had "half" stayed, the retry would fail "registered twice"
        with pytest.raises(ConfigError, match="PLUGIN is missing"):
            reg.names()
    assert reg.names() == ["before", "half"] and len(attempts) == 3
    assert reg.names() == ["before", "half"] and len(attempts) == 3


def test_unknown_names_after_discovery_list_what_it_found():
    reg: Registry[object] = Registry("bench", discover=lambda r: r.register_lazy("mini", "json:dumps"))
    with pytest.raises(ConfigError) as e:
        reg.get("nope")
    assert str(e.value) == "unknown bench 'nope'; known: mini"


# -- many threads, first lookup in a fresh process ----------------------------------------------------
def registries() -> list[tuple[str, str]]:
    """Every module-level ``NAME = Registry(...)`` / ``NAME: Registry[...] = Registry(...)`` in
    ``harness/``, as (module, attribute): a registry added later is covered without editing this."""
    import ast
    from pathlib import Path

    import harness

    root = Path(harness.__file__).parent
    out = []
    for path in sorted(root.rglob("*.py")):
        for node in ast.parse(path.read_text()).body:
            target = value = None
            if isinstance(node, ast.Assign) and len(node.targets) == 1:
                target, value = node.targets[0], node.value
            elif isinstance(node, ast.AnnAssign):
                target, value = node.target, node.value
            if (
                isinstance(target, ast.Name)
                and isinstance(value, ast.Call)
                and isinstance(value.func, ast.Name)
                and value.func.id == "Registry"
            ):
                module = ".".join(path.relative_to(root.parent).with_suffix("").parts)
                out.append((module, target.id))
    return out


THREADED_LOOKUPS = """
import importlib, json, sys, threading
targets = json.loads(sys.argv[1])
regs = [getattr(importlib.import_module(m), a) for m, a in targets]
N = 16
barrier = threading.Barrier(N)
seen = [[] for _ in range(N)]

def worker(i):
    for (m, a), reg in zip(targets, regs):
        barrier.wait()  # all 16 make their first lookup of this registry at once
        try:
            kind = ("names", "in", "iter", "get")[i % 4]
            if kind == "names":
                names = reg.names()
            elif kind == "in":
                names = sorted(n for n in reg.names() if n in reg)
            elif kind == "iter":
                names = list(reg)
            else:
                names = sorted(n for n in reg.names() if reg.get(n) is not None)
            got = {n: id(reg.get(n)) for n in names}
            seen[i].append([a, kind, names, got])
        except Exception as e:
            seen[i].append([a, kind, f"{type(e).__name__}: {e}", None])

threads = [threading.Thread(target=worker, args=(i,)) for i in range(N)]
for t in threads:
    t.start()
for t in threads:
    t.join()
print(json.dumps(seen))
"""


@pytest.mark.integration
def test_every_registry_lookup_from_16_threads_sees_every_plugin_in_a_fresh_process():
    # verl calls rewards and agent loops from many threads; the first lookup in a worker process
    # must not see a registry whose discovery another thread has begun but not finished
    import json
    import subprocess
    from pathlib import Path

    targets = registries()
    assert ("harness.methods_registry", "METHODS") in targets and len(targets) >= 10
    root = Path(__file__).resolve().parents[1]
    run = subprocess.run(
        [sys.executable, "-c", THREADED_LOOKUPS, json.dumps(targets)],
        capture_output=True,
        text=True,
        timeout=300,
        cwd=root,
    )
    assert run.returncode == 0, run.stderr[-2000:]
    seen = json.loads(run.stdout)
    errors = [(a, kind, r) for thread in seen for a, kind, r, _ in thread if isinstance(r, str)]
    assert errors == []
    for k, (_, attr) in enumerate(targets):
        names = {json.dumps(thread[k][2]) for thread in seen}
        objects = {json.dumps(thread[k][3], sort_keys=True) for thread in seen}
        assert len(names) == 1 and len(objects) == 1, attr  # one answer, the same objects
        assert json.loads(names.pop()), f"{attr} is empty"


def test_a_lookup_from_another_thread_waits_for_discovery_to_finish():
    import threading

    started, release = threading.Event(), threading.Event()

    def discover(reg):
        reg.register("first", 1)
        started.set()
        assert release.wait(30)
        reg.register("last", 2)

    reg: Registry[object] = Registry("method", discover=discover)
    seen = {}
    a = threading.Thread(target=lambda: seen.setdefault("a", reg.names()))
    a.start()
    assert started.wait(30)
    b = threading.Thread(target=lambda: seen.setdefault("b", reg.get("last")))
    b.start()
    b.join(0.3)
    assert b.is_alive() and "b" not in seen  # not "unknown method 'last'": it waits
    release.set()
    a.join(30)
    b.join(30)
    assert seen == {"a": ["first", "last"], "b": 2}
