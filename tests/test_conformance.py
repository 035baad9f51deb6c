"""Conformance of every registered method, in the spirit of lm-eval's task tests: whatever a
plugin folder registers (``methods/<paper>/``, ``baselines/``) is checked here without a line of
its own, so a new method is covered the moment it is registered.

- **spec hash stable**: the method's ``MethodSpec`` hash under every protocol it runs under equals
  the pinned value in ``tests/methods/spec_hashes.json``. The hash is stored with every run and keys
  the leaderboard, resume and the regression gate: a change to it is a change of the method, made
  on purpose. A new method, or a deliberate change: ``UPDATE_SPEC_HASHES=1 pytest
  tests/test_conformance.py`` rewrites the file (review the diff).
- **prompts render**: a trainable method's prompt messages for a packaged question, in training
  and evaluation form, are chat messages that carry the question.
- **rewards resolve**: ``"default"`` is the first reward name; an unknown name is refused.
- **recipes valid**: ``paper`` and ``cpu-smoke`` exist, and every reward a recipe's stages name
  resolves on the method.
- **export parity**: ``tests/export/test_export_verl.py`` compares the verl-side reward with ours
  for every reward of every trainable method; here we only check that it has a case for each.
"""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest

from harness.errors import ConfigError
from harness.eval.protocol import PROTOCOLS, preset
from harness.method import TrainableMethod
from harness.methods_registry import METHODS, get_method

PINNED = Path(__file__).parent / "methods" / "spec_hashes.json"
NAMES = METHODS.names()
TRAINABLE = [n for n in NAMES if METHODS.get(n).trained]


def protocols_of(name: str) -> list[str]:
    """The named protocols ``name`` runs under: its own, else every shared one."""
    own = get_method(name).own_protocols
    if own:
        return [p for p in PROTOCOLS.names() if p in own]
    bound = {p for n in NAMES for p in get_method(n).own_protocols}
    return [p for p in PROTOCOLS.names() if p not in bound]


def current_hashes() -> dict[str, dict[str, str]]:
    return {n: {p: get_method(n).spec(preset(p)).spec_hash for p in protocols_of(n)} for n in NAMES}


def test_spec_hashes_are_pinned():
    now = current_hashes()
    if os.environ.get("UPDATE_SPEC_HASHES") == "1":
        PINNED.write_text(json.dumps(now, indent=1, sort_keys=True) + "\n")
    pinned = json.loads(PINNED.read_text())
    assert set(now) == set(pinned), (
        f"methods registered {sorted(now)} vs pinned {sorted(pinned)}: pin a new method with "
        "UPDATE_SPEC_HASHES=1 pytest tests/test_conformance.py"
    )
    changed = [
        f"{n} under {p}: {pinned[n].get(p)} -> {h}"
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
    from tests.export.test_export_verl import CASES

    assert set(CASES) == set(TRAINABLE)


def test_every_method_declares_who_it_is():
    for n in NAMES:
        cls = METHODS.get(n)
        assert cls.description.strip() and cls.source.strip(), n


def test_default_solve_needs_a_rollout_loop():
    """TrainableMethod.solve runs rollout_config's loop; a method without one must write solve."""
    from harness.method import MethodSpec, RunContext

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
