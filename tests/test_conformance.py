"""Conformance of every registered method, in the spirit of lm-eval's task tests: whatever a
plugin folder registers (``methods/<paper>/``, ``baselines/``) is checked here without a line of
its own, so a new method is covered the moment it is registered.

- **spec hash stable**: the method's ``MethodSpec`` hash under every protocol it runs under equals
  the value pinned in a plugin folder's ``conformance.json`` (the method's plugin or the protocol's,
  ``tests/methods/plugin_data.py``). The hash is stored with every run and keys the leaderboard,
  resume and the regression gate: a change to it is a change of the method, made on purpose. A new
  method, or a deliberate change: ``UPDATE_SPEC_HASHES=1 pytest tests/test_conformance.py``
  rewrites the files (review the diff).
- **prompts render**: a trainable method's prompt messages for a packaged question, in training
  and evaluation form, are chat messages that carry the question.
- **rewards resolve**: ``"default"`` is the first reward name; an unknown name is refused.
- **recipes valid**: ``paper`` and ``cpu-smoke`` exist, and every reward a recipe's stages name
  resolves on the method.
- **export parity**: ``tests/verl/test_export_verl.py`` compares the verl-side reward with ours
  for every reward of every trainable method, from the ``verl_cases`` of its folder's
  ``conformance.json``; here we only check that there is a case for each.
"""

from __future__ import annotations

import os

import pytest

from harness.errors import ConfigError
from harness.eval.protocol import preset
from harness.gate.layers import protocols_of  # the regress gate's specs layer pins the same pairs
from harness.method import TrainableMethod
from harness.methods_registry import METHODS, get_method
from tests.methods import plugin_data as pdata

NAMES = METHODS.names()
TRAINABLE = [n for n in NAMES if METHODS.get(n).trained]


def current_hashes() -> dict[str, dict[str, str]]:
    return {n: {p: get_method(n).spec(preset(p)).spec_hash for p in protocols_of(n)} for n in NAMES}


Pair = tuple[str, str]


def pinned_hashes() -> tuple[dict[Pair, tuple[str, pdata.PluginData]], list[str]]:
    """(method, protocol) -> (pinned hash, the plugin pinning it), over every plugin folder, and
    the pins that break the layout (pinned twice, or by a plugin registering neither)."""
    pins: dict[Pair, tuple[str, pdata.PluginData]] = {}
    bad: list[str] = []
    for pd in pdata.plugin_data():
        for n, per in pd.section("spec_hashes").items():
            for p, h in per.items():
                if (n, p) in pins:
                    bad.append(f"{n} under {p} pinned twice ({pins[n, p][1].where}, {pd.where}): keep one")
                elif n not in pd.methods and p not in pd.protocols:
                    bad.append(f"{pd.where} pins {n} under {p}, and registers neither: move the pin")
                pins.setdefault((n, p), (h, pd))
    return pins, bad


def repin(now: dict[str, dict[str, str]]) -> None:
    """UPDATE_SPEC_HASHES=1: a changed hash re-pinned where it is, a gone pair dropped, a new pair
    pinned by the plugin of the two (method's, protocol's) that pins nothing yet, else the method's."""
    pins, _ = pinned_hashes()
    sections = {pd.where: (pd, {}) for pd in pdata.plugin_data()}
    for (n, p), (_h, pd) in pins.items():
        if p in now.get(n, {}):
            sections[pd.where][1].setdefault(n, {})[p] = now[n][p]
    for n, per in now.items():
        for p, h in per.items():
            if (n, p) in pins:
                continue
            owner = pdata.of_method(n)
            proto = pdata.of_protocol(p)
            if owner.section("spec_hashes") and proto is not None and not proto.section("spec_hashes"):
                owner = proto
            sections[owner.where][1].setdefault(n, {})[p] = h
    for pd, section in sections.values():
        ordered = {n: dict(sorted(section[n].items())) for n in sorted(section)}
        if ordered != pd.section("spec_hashes"):
            pd.write_section("spec_hashes", ordered)
    pdata.reload()


def test_spec_hashes_are_pinned():
    now = current_hashes()
    if os.environ.get("UPDATE_SPEC_HASHES") == "1":
        repin(now)
    pins, bad = pinned_hashes()
    assert not bad, "spec hash pins: " + "; ".join(bad)
    pinned: dict[str, dict[str, str]] = {}
    for (n, p), (h, _pd) in pins.items():
        pinned.setdefault(n, {})[p] = h
    assert set(now) == set(pinned), (
        f"methods registered {sorted(now)} vs pinned {sorted(pinned)}: pin a new method in "
        f"{pdata.expected_file('spec_hashes', sorted(set(now) - set(pinned)))} with "
        "UPDATE_SPEC_HASHES=1 pytest tests/test_conformance.py"
    )
    unpinned = [f"{n} under {p}" for n in now for p in now[n] if p not in pinned[n]]
    stale = [f"{n} under {p} ({pins[n, p][1].where})" for n in pinned for p in pinned[n] if p not in now[n]]
    assert not unpinned and not stale, (
        f"not pinned: {unpinned}; pinned but not run: {stale}: "
        "UPDATE_SPEC_HASHES=1 pytest tests/test_conformance.py (review the diff)"
    )
    changed = [
        f"{n} under {p}: {pinned[n].get(p)} -> {h} ({pins[n, p][1].where})"
        for n in now
        for p, h in now[n].items()
        if pinned[n].get(p) != h
    ]
    assert not changed, "method specs changed (a deliberate change? re-pin and say why): " + "; ".join(
        changed
    )


def test_a_changed_prompt_changes_the_hash():
    """The pin can fail: the hash covers the prompt text."""
    spec = get_method("direct").spec(preset("mini"))
    edited = spec.model_copy(update={"prompts": {k: v + " " for k, v in spec.prompts.items()}})
    assert spec.prompts and edited.spec_hash != spec.spec_hash


@pytest.fixture(scope="module")
def question():
    from harness.data.benches import load_bench

    (_, examples), *_ = load_bench("mini-multihop")
    return examples[0]


@pytest.mark.parametrize("name", TRAINABLE)
def test_prompt_messages_render(name, question):
    method = get_method(name)
    assert isinstance(method, TrainableMethod)
    for training in (False, True):
        messages = method.prompt_messages(question, training=training)
        assert messages and all(set(m) == {"role", "content"} for m in messages), (name, training)
        assert all(m["role"] in {"system", "user", "assistant"} for m in messages)
        # the question reaches the model (Search-R1-style preprocessing may add a '?')
        assert any(question.question.strip().rstrip("?") in m["content"] for m in messages), (name, training)


@pytest.mark.parametrize("name", TRAINABLE)
def test_rewards_resolve(name):
    method = get_method(name)
    names = method.reward_names()
    assert names and len(set(names)) == len(names)
    assert method.resolve_reward("default") == names[0]
    for n in names:
        assert method.resolve_reward(n) == n
    with pytest.raises(ConfigError, match=f"method {name!r} has no reward 'no-such-reward'"):
        method.resolve_reward("no-such-reward")


@pytest.mark.parametrize("name", TRAINABLE)
def test_recipes_are_valid(name):
    method = get_method(name)
    recipes = method.recipes()
    assert {"paper", "cpu-smoke"} <= set(recipes), sorted(recipes)
    for recipe_name, recipe in recipes.items():
        for stage in recipe.reward_stages:
            assert method.resolve_reward(stage.reward) in method.reward_names(), (recipe_name, stage)


def test_export_parity_covers_every_trainable_method():
    from tests.verl.test_export_verl import CASES

    missing = sorted(set(TRAINABLE) - set(CASES))
    assert not missing, (
        f"no verl export case for {missing}: add one to {pdata.expected_file('verl_cases', missing)}"
    )
    assert set(CASES) == set(TRAINABLE)


def test_every_method_declares_who_it_is():
    for n in NAMES:
        cls = METHODS.get(n)
        assert cls.description.strip() and cls.source.strip(), n


def test_default_solve_needs_a_rollout_loop():
    """TrainableMethod.solve runs rollout_config's loop; a method without one must write solve."""
    from harness.method import MethodSpec
    from harness.rollout.base import RunContext

    class NoLoop(TrainableMethod):
        name = "no_loop"
        description = source = "test"

        def spec(self, protocol):
            return MethodSpec(name=self.name)

        def rollout_config(self, protocol):
            return None

    ctx = RunContext(backend=None, protocol=preset("mini"))  # type: ignore[arg-type]
    with pytest.raises(ConfigError, match="'no_loop' has no rollout loop .* implement solve"):
        NoLoop().solve([], ctx)
