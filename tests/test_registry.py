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
