"""Recipes files (harness/rl/recipe_files.py): ``extends`` merges value and source separately, the
generic cpu-smoke overlay is what every method's cpu-smoke recipe is built on, and each mistake in
a file is one error line naming the file, the recipe and the key."""

from __future__ import annotations

from pathlib import Path
from types import SimpleNamespace

import pytest
import yaml

from harness.errors import ConfigError
from harness.method import TrainableMethod
from harness.methods_registry import METHODS, get_method
from harness.rl import recipe_files
from harness.rl.recipe_files import load_recipes, method_recipes, overlay_fields, recipes_path

# A complete root recipe (every field with a source), written as a file would.
ALGO = {
    "adv_estimator": "grpo",
    "group_size": 5,
    "norm_adv_by_std": True,
    "adv_std_unbiased": True,
    "adv_eps": 1.0e-6,
    "gamma": 1.0,
    "critic": None,
    "policy_loss": "clipped",
    "clip_low": 0.2,
    "clip_high": 0.2,
    "dual_clip_c": None,
    "loss_agg_mode": "token-mean",
    "loss_norm_length": None,
    "kl_placement": "loss",
    "kl_estimator": "k3",
    "kl_coef": 0.001,
    "entropy_coef": 0.0,
    "overlong": {
        "soft_penalty": False,
        "max_len": None,
        "cache_len": None,
        "penalty_factor": None,
        "filter_truncated": False,
    },
    "dynamic_sampling": {"enabled": False, "max_rounds": None, "filters": []},
    "train_batch_size": 8,
    "mini_batch_size": 4,
    "ppo_epochs": 1,
    "lr": 1.0e-6,
    "lr_schedule": "constant",
    "lr_warmup_steps": 0,
    "lr_warmup_ratio": None,
    "min_lr_ratio": 0.0,
    "adam_betas": [0.9, 0.999],
    "weight_decay": 0.01,
    "grad_clip": 1.0,
    "temperature": 1.0,
    "top_p": 1.0,
}
TOP = {
    "steps": 100,
    "bench": "mini-multihop",
    "selection": {},
    "max_new_tokens": 500,
    "max_turns": 4,
    "top_k": 3,
    "max_obs_tokens": 500,
    "micro_batch_size": 8,
    "reward_stages": [{"start_step": 0, "reward": "em"}],
    "aux_models": {},
    "lora": None,
    "dtype": "float32",
    "seed": 0,
    "save_every": 0,
}


def paper_entry() -> dict:
    entry: dict = {k: {"value": v, "source": f"paper: {k}"} for k, v in TOP.items()}
    entry["algo"] = {k: {"value": v, "source": f"paper: algo.{k}"} for k, v in ALGO.items()}
    return entry


def write(tmp_path: Path, recipes: dict, name: str = "recipes.yaml") -> Path:
    path = tmp_path / name
    path.write_text(yaml.safe_dump(recipes, sort_keys=False))
    return path


def test_extends_replaces_value_and_source_separately(tmp_path):
    path = write(
        tmp_path,
        {
            "paper": paper_entry(),
            "longer": {
                "extends": "paper",
                "about": "free text for the reader",
                "steps": {"value": 200, "source": "ours: twice as long"},
                "algo": {"lr": {"source": "paper Table 9: 1e-6"}},
            },
            "longer-k2": {"extends": "longer", "algo": {"kl_estimator": {"value": "k2", "source": "ours"}}},
        },
    )
    r = load_recipes(path, "toy")
    assert list(r) == ["paper", "longer", "longer-k2"]
    assert (r["paper"].steps, r["longer"].steps, r["longer-k2"].steps) == (100, 200, 200)
    assert r["longer"].sources["steps"] == "ours: twice as long"
    assert r["longer"].algo.lr == 1e-6 and r["longer"].sources["algo.lr"] == "paper Table 9: 1e-6"
    assert r["longer-k2"].algo.kl_estimator == "k2" and r["longer"].algo.kl_estimator == "k3"
    assert r["longer-k2"].sources["algo.lr"] == "paper Table 9: 1e-6"  # inherited through two levels
    assert r["longer-k2"].name == "longer-k2" and r["longer-k2"].method == "toy"
    # the parts a recipe leaves out carry their provenance (Recipe's own rule)
    assert r["paper"].sources["split"] == "none: no held-out split"


def test_the_overlay_applies_after_the_bases_and_before_the_entry(tmp_path):
    path = write(
        tmp_path,
        {
            "paper": paper_entry(),
            "cpu-smoke": {
                "extends": ["paper", "overlay:cpu-smoke"],
                "max_turns": {"value": 2, "source": "ours: 2 searches"},
            },
        },
    )
    smoke = load_recipes(path, "toy")["cpu-smoke"]
    overlay = overlay_fields("cpu-smoke")
    assert smoke.max_turns == 2 and overlay["max_turns"].value == 1
    assert (smoke.steps, smoke.algo.group_size, smoke.algo.train_batch_size, smoke.max_obs_tokens) == (
        3,
        4,
        2,
        128,
    )
    assert smoke.sources["steps"] == overlay["steps"].source
    assert (
        smoke.algo.kl_estimator == "k3" and smoke.sources["algo.kl_estimator"] == "paper: algo.kl_estimator"
    )


def _trainable() -> list[str]:
    return [n for n in METHODS.names() if isinstance(get_method(n), TrainableMethod)]


@pytest.mark.parametrize("method", _trainable())
def test_every_cpu_smoke_recipe_is_the_paper_recipe_under_the_overlay(method):
    """Each method's cpu-smoke is `paper` + the generic overlay + the few overrides its file lists:
    every overlay field the file does not override comes out as the overlay sets it."""
    m = get_method(method)
    raw = yaml.safe_load(recipes_path(m).read_text())["cpu-smoke"]
    assert raw["extends"] == ["paper", "overlay:cpu-smoke"]
    own = {k for k in raw if k not in ("extends", "about", "algo")} | {
        f"algo.{k}" for k in raw.get("algo", {})
    }
    smoke = m.recipes()["cpu-smoke"]
    data = smoke.model_dump(mode="json")
    checked = 0
    for key, field in overlay_fields("cpu-smoke").items():
        if key in own:
            continue
        got = data["algo"][key[5:]] if key.startswith("algo.") else data[key]
        if key == "selection":
            got = {k: v for k, v in got.items() if k in field.value}
        assert got == field.value, f"{method} cpu-smoke {key}"
        checked += 1
    assert checked >= 12


def test_recipes_path_is_found_through_the_class_hierarchy():
    # the Eval-RAR mode-B variant is a subclass in the same module: the same file, its own name
    a, b = get_method("eval_rar"), get_method("eval_rar_b")
    assert recipes_path(a) == recipes_path(b)
    assert b.recipes()["paper"].method == "eval_rar_b"


@pytest.mark.parametrize(
    "recipes,expected",
    [
        (
            {"paper": {**paper_entry(), "stepz": {"value": 1, "source": "x"}}},
            "recipe 'paper': unknown key 'stepz'",
        ),
        (
            {
                "paper": {
                    **paper_entry(),
                    "algo": {**paper_entry()["algo"], "lrr": {"value": 1, "source": "x"}},
                }
            },
            "recipe 'paper': unknown key algo.lrr",
        ),
        (
            {"paper": paper_entry(), "a": {"extends": "b"}, "b": {"extends": ["paper", "a"]}},
            "recipe 'a': cycle in extends: a -> b -> a",
        ),
        ({"paper": paper_entry(), "a": {"extends": "papr"}}, "recipe 'a': extends 'papr', which is neither"),
        (
            {"paper": {**paper_entry(), "steps": {"value": 3}}},
            "recipe 'paper': steps: a value needs a source",
        ),
        ({"paper": {**paper_entry(), "steps": 3}}, "recipe 'paper': steps: write {value: ..., source: ...}"),
        (
            {"paper": {**paper_entry(), "steps": {"value": "many", "source": "x"}}},
            "recipe 'paper': steps: Input should be a valid integer",
        ),
        (
            {
                "paper": {
                    **paper_entry(),
                    "algo": {**paper_entry()["algo"], "group_size": {"value": [5], "source": "x"}},
                }
            },
            "recipe 'paper': algo.group_size: Input should be a valid integer",
        ),
        (
            {"paper": {k: v for k, v in paper_entry().items() if k != "steps"}},
            "recipe 'paper': steps: Field required",
        ),
        ({"paper": paper_entry(), "a": {"extends": "paper", "lora": {"source": "ours"}}}, None),
        (
            {"a": {"seed": {"source": "ours"}, **{k: v for k, v in paper_entry().items() if k != "seed"}}},
            "recipe 'a': seed has a source but no value",
        ),
        (
            {"paper": paper_entry(), "a": {"extends": "overlay:tiny"}},
            "recipe 'a': extends 'overlay:tiny': no overlay 'tiny'",
        ),
        (
            {"paper": {**paper_entry(), "steps": {"value": 3, "source": ""}}},
            "steps: source must be a non-empty string",
        ),
        ({"paper": [1, 2]}, "recipe 'paper' must be a name mapped to its fields"),
    ],
)
def test_each_mistake_is_one_line_naming_file_recipe_and_key(tmp_path, recipes, expected):
    path = write(tmp_path, recipes)
    if expected is None:  # a source-only entry re-cites an inherited value: fine
        assert load_recipes(path, "toy")["a"].sources["lora"] == "ours"
        return
    with pytest.raises(ConfigError) as e:
        load_recipes(path, "toy")
    msg = str(e.value)
    assert expected in msg and "\n" not in msg
    assert str(path) in msg


def test_not_yaml_and_missing_file_name_the_file(tmp_path):
    bad = tmp_path / "recipes.yaml"
    bad.write_text("paper: {steps: [1,\n")
    with pytest.raises(ConfigError, match=r"recipes\.yaml: not valid YAML") as e:
        load_recipes(bad, "toy")
    assert "\n" not in str(e.value)
    with pytest.raises(ConfigError, match="no such recipes file"):
        load_recipes(tmp_path / "absent.yaml", "toy")


def test_an_edited_file_is_read_again(tmp_path):
    path = write(tmp_path, {"paper": paper_entry()})
    assert load_recipes(path, "toy")["paper"].steps == 100
    entry = paper_entry()
    entry["steps"] = {"value": 1234, "source": "paper: edited"}  # another size, so another cache key
    write(tmp_path, {"paper": entry})
    assert load_recipes(path, "toy")["paper"].steps == 1234


def test_a_reward_the_method_does_not_define_is_refused(tmp_path, monkeypatch):
    path = write(tmp_path, {"paper": paper_entry()})
    monkeypatch.setattr(recipe_files, "recipes_path", lambda method: path)
    toy = SimpleNamespace(name="toy", reward_names=lambda: ("f1",))
    with pytest.raises(
        ConfigError, match=r"recipe 'paper': reward_stages names reward 'em', which method 'toy'"
    ):
        method_recipes(toy)
    toy_em = SimpleNamespace(name="toy", reward_names=lambda: ("em",))
    assert method_recipes(toy_em)["paper"].reward_at(0) == "em"
