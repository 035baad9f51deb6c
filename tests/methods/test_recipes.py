"""Recipes: every field of every trainable method's recipes has a provenance and its rewards
resolve; the cpu-smoke variants of the first three paper methods are small."""

from __future__ import annotations

import pytest

from harness.data.benches import get_bench
from harness.method import TrainableMethod
from harness.methods_registry import METHODS, get_method
from harness.protocol import PROTOCOLS, preset
from harness.rl.config import AlgoConfig
from harness.rl.recipe import Recipe

NAMES = ("search_r1", "eval_rar", "r_search")
_NOT_SOURCED = {"name", "method", "algo", "sources"}


def _recipes():
    trainable = [n for n in METHODS.names() if isinstance(get_method(n), TrainableMethod)]
    return [(n, k, r) for n in trainable for k, r in get_method(n).recipes().items()]


@pytest.mark.parametrize("method,key,recipe", _recipes(), ids=lambda x: x if isinstance(x, str) else "")
def test_every_field_has_a_source(method, key, recipe: Recipe):
    expected = {f"algo.{f}" for f in AlgoConfig.model_fields} | (set(Recipe.model_fields) - _NOT_SOURCED)
    missing = expected - set(recipe.sources)
    assert not missing, f"{method}/{key}: no source for {sorted(missing)}"
    assert not set(recipe.sources) - expected, "sources name fields that do not exist"
    assert all(v.strip() for v in recipe.sources.values())
    assert recipe.name == key and recipe.method == method
    m = get_method(method)
    for stage in recipe.reward_stages:
        assert stage.reward in m.reward_names()


@pytest.mark.parametrize("method", NAMES)
def test_cpu_smoke_is_small_and_runnable_here(method):
    r = get_method(method).recipes()["cpu-smoke"]
    assert get_bench(r.bench).name == "mini-multihop"
    assert r.steps <= 3 and r.algo.train_batch_size == 2 and 2 <= r.algo.group_size <= 4
    assert r.max_new_tokens <= 64 and r.max_turns <= 2 and r.max_obs_tokens <= 128
    for spec in r.aux_models.values():
        assert spec.kind == "transformers" and spec.model == "default"  # the packaged model, no server


def test_paper_protocols_are_registered():
    assert {"eval_rar-eval", "r_search-eval"} <= set(PROTOCOLS.names())
    assert preset("r_search-eval").protocol_id != preset("mini").protocol_id
