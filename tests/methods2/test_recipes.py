"""Recipes of ARENA, TIRESRAG-R1 and When-to-Search: the papers' judges are the GPU defaults, and
the cpu-smoke variants are small and use the packaged model as judge."""

from __future__ import annotations

import pytest

from harness.data.benches import get_bench
from harness.methods_registry import get_method
from harness.protocol import PROTOCOLS, preset

NAMES = ("arena", "tiresrag_r1", "when_to_search")
_NOT_SOURCED = {"name", "method", "algo", "sources"}


# every field's provenance: tests/methods/test_recipes.py checks all trainable methods


@pytest.mark.parametrize("method", NAMES)
def test_cpu_smoke_is_small_and_runnable_here(method):
    r = get_method(method).recipes()["cpu-smoke"]
    assert get_bench(r.bench).name == "mini-multihop"
    assert r.steps <= 3 and r.algo.train_batch_size == 2 and 2 <= r.algo.group_size <= 4
    assert r.max_new_tokens <= 64 and r.max_turns <= 2 and r.max_obs_tokens <= 500
    for spec in r.aux_models.values():
        assert spec.kind == "transformers" and spec.model == "default"  # the packaged model, no server


def test_the_papers_judges_are_the_gpu_defaults():
    judges = {
        "tiresrag_r1": ("paper", "Qwen/Qwen3-8B"),
        "when_to_search": ("paper", "Qwen/Qwen3-235B-A22B-Instruct-2507"),
        "arena": ("paper-judge-reward", "gpt-4o-2024-11-20"),
    }
    for method, (recipe, model) in judges.items():
        spec = get_method(method).recipes()[recipe].aux_models["judge"]
        assert (spec.kind, spec.model, spec.base_urls) == ("openai", model, ("http://127.0.0.1:8000/v1",))
        assert "placeholder" in get_method(method).recipes()[recipe].sources["aux_models"]


def test_arena_kl_stabilisation():
    recipes = get_method("arena").recipes()
    a = recipes["paper"].algo
    assert (a.kl_placement, a.kl_estimator, a.kl_coef, a.group_size, a.temperature) == (
        "loss",
        "k2",
        0.04,
        7,
        0.9,
    )
    assert recipes["paper-k3"].algo.kl_estimator == "k3"  # "w/o KL stabilization"


def test_tiresrag_recipe_switch_and_ablations():
    r = get_method("tiresrag_r1").recipes()
    assert [r[k].reward_at(0) for k in ("paper", "paper-formulas", "paper-code")] == [
        "recommended",
        "paper",
        "code",
    ]
    assert not r["paper-no-filter"].algo.dynamic_sampling.enabled and r["paper"].algo.dynamic_sampling.enabled
    assert r["naive-grpo"].reward_at(0) == "f1_only" and r["naive-grpo"].aux_models == {}
    assert r["paper"].algo.kl_placement == "none" and r["paper"].steps == 152


def test_paper_protocols_are_registered():
    assert {"arena-gold-context", "tiresrag_r1-eval", "when_to_search-eval"} <= set(PROTOCOLS.names())
    ids = {
        preset(n).protocol_id
        for n in ("mini", "arena-gold-context", "tiresrag_r1-eval", "when_to_search-eval")
    }
    assert len(ids) == 4
