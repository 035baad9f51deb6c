"""The exact layers' pins split by owner (harness/gate/pins.py): a folder's items in its own file,
the engine's in the central one; where a new item goes, what an update rewrites, and that the
committed pins sit with their owners."""

from __future__ import annotations

from pathlib import Path

import pytest

from harness import gate
from harness.errors import ConfigError
from harness.gate.layers import LAYERS, Current, compute
from harness.gate.pins import Owners, assign, load_pins, write_pins

ROOT = Path(__file__).resolve().parents[2]


def owners(tmp: Path) -> Owners:
    """Two folders: ``methods.a`` (method ``a``, protocol ``pa``) and ``methods.new`` (method
    ``n``, protocol ``pn``); ``cot`` and ``mini`` are the engine's."""
    return Owners(
        methods={"a": "methods.a", "n": "methods.new"},
        protocols={"pa": "methods.a", "pn": "methods.new"},
        files={
            "methods.a": tmp / "a" / "regress-exact.json",
            "methods.new": tmp / "new" / "regress-exact.json",
        },
    )


def current(**extra: tuple[str, tuple]) -> Current:
    """Specs items with their scopes; prompts items ``<m>@<p>/x`` with texts."""
    specs = {
        "protocol mini": ((), ("mini",)),
        "protocol pa": ((), ("pa",)),
        "method cot @ mini": (("cot",), ("mini",)),
        "method a @ mini": (("a",), ("mini",)),
        "method cot @ pa": (("cot",), ("pa",)),
        **{k: v[1] for k, v in extra.items()},
    }
    prompts = {"a@mini/x": (("a",), ("mini",)), "cot@mini/x": (("cot",), ("mini",))}
    return Current(
        items={"specs": {k: f"h-{k}" for k in specs}, "prompts": {k: f"h-{k}" for k in prompts}},
        prompt_texts={k: f"text of {k}" for k in prompts},
        scopes={"specs": specs, "prompts": prompts},
    )


def test_items_go_to_their_owners_and_a_new_folder_gets_its_own(tmp_path):
    own = owners(tmp_path)
    central = tmp_path / "exact.json"
    written = write_pins(current(), central, "first", owners=own)
    assert written == [central, own.files["methods.a"]]
    pins = load_pins(central, own)
    assert set(pins.files[central].layers["specs"]) == {"protocol mini", "method cot @ mini"}
    assert set(pins.files[own.files["methods.a"]].layers["specs"]) == {
        "protocol pa",
        "method a @ mini",
        "method cot @ pa",
    }
    assert pins.texts[own.files["methods.a"]] == {"a@mini/x": "text of a@mini/x"}
    assert pins.texts[central] == {"cot@mini/x": "text of cot@mini/x"}

    # a new folder: its items, and the pairs it shares with folder a, go to its own file only
    new = current(
        **{
            "protocol pn": ("specs", ((), ("pn",))),
            "method n @ mini": ("specs", (("n",), ("mini",))),
            "method a @ pn": ("specs", (("a",), ("pn",))),
            "method n @ pa": ("specs", (("n",), ("pa",))),
            "method cot @ pn": ("specs", (("cot",), ("pn",))),
        }
    )
    assert write_pins(new, central, "add new", owners=own) == [own.files["methods.new"]]
    pins = load_pins(central, own)
    assert set(pins.files[own.files["methods.new"]].layers["specs"]) == {
        "protocol pn",
        "method n @ mini",
        "method a @ pn",
        "method n @ pa",
        "method cot @ pn",
    }
    assert pins.files[own.files["methods.new"]].reasons[-1].endswith(": add new")
    assert len(pins.files[central].reasons) == 1  # untouched
    # compared as one baseline: nothing moved
    assert not gate.first_moved(gate.compare(pins.merged, new, baseline_texts=pins.merged_texts))

    # a changed value is rewritten where it is pinned, nowhere else
    changed = current()
    changed.items["specs"]["method cot @ pa"] = "h-changed"
    assert write_pins(changed, central, "cot under pa", owners=own) == [
        own.files["methods.a"],
        own.files["methods.new"],  # its items are no longer computed: removed
    ]
    pins = load_pins(central, own)
    assert pins.files[own.files["methods.a"]].layers["specs"]["method cot @ pa"] == "h-changed"


def test_an_item_pinned_twice_and_an_update_without_reason_are_refused(tmp_path):
    own = owners(tmp_path)
    central = tmp_path / "exact.json"
    write_pins(current(), central, "first", owners=own)
    dup = gate.ExactBaseline(layers={"specs": {"method cot @ mini": "x"}})
    dup.save(own.files["methods.new"], {})
    with pytest.raises(
        ConfigError, match=r"'method cot @ mini' is also pinned in .*exact\.json; keep it in one"
    ):
        load_pins(central, own)
    with pytest.raises(ConfigError, match="--update needs --reason"):
        write_pins(current(), central, " ", owners=own)
    with pytest.raises(ConfigError, match="no exact-layer baseline"):
        load_pins(tmp_path / "missing.json", own)


def test_a_retriever_shared_with_an_engine_protocol_is_central(tmp_path):
    own = owners(tmp_path)
    assert own.candidates(((), ("mini", "pa"))) == []
    assert own.candidates(((), ("pa", "pn"))) == ["methods.a", "methods.new"]
    assert own.candidates((("n",), ("pa",))) == ["methods.new", "methods.a"]
    assert own.candidates((("cot",), ("mini",))) == []


def test_the_committed_pins_sit_with_their_owners():
    """Every committed item is in the central file when no folder owns it, else in a folder its
    scope names; and every folder that registers a method or protocol has its pin file."""
    central = ROOT / "results" / "regress" / "exact.json"
    own = Owners.discover()
    pins = load_pins(central, own)
    cur = compute(LAYERS)
    where = pins.where
    wrong = []
    for layer, items in cur.items.items():
        for k in items:
            folders = own.candidates(cur.scopes[layer][k])
            allowed = {own.files[f] for f in folders} if folders else {central}
            if where.get((layer, k)) not in allowed:
                wrong.append(
                    f"{layer} {k}: in {where.get((layer, k))}, belongs in {sorted(map(str, allowed))}"
                )
    assert not wrong, wrong[:5]
    assert {p for p in own.files.values() if p.is_file()} == set(own.files.values())
    assert assign(cur, pins, own) == {
        (layer, k): where[layer, k] for layer, items in cur.items.items() for k in items
    }
