"""The exported ``reward.py`` as verl's custom-reward loader calls it, for every ``ground_truth`` form.

Upstream facts, pinned at ``verl-project/verl@1dda039b9c6311889a9c9a26040677e1254814f9``:

- ``verl/trainer/ppo/reward.py`` (``get_custom_reward_fn``): the function is
  ``load_extern_object(module_path=path, object_name=name)`` and is called through
  ``_call_with_kwargs``: keyword arguments, with ``reward_kwargs`` merged over them;
- ``verl/experimental/reward_loop/reward_manager/naive.py``: those keywords are
  ``data_source``, ``solution_str``, ``ground_truth`` (the row's ``reward_model.ground_truth``, as
  the dataset holds it) and ``extra_info``;
- ``verl/utils/reward_score/search_r1_like_qa_em.py`` reads ``ground_truth["target"]`` (the
  Search-R1 form); other datasets carry a plain string or a list of answers.
"""

from __future__ import annotations

import importlib.util
from pathlib import Path

import numpy as np
import pytest

from harness.verl.job import REWARD_PY
from harness.verl.rows import gold_answers

FORMS = {
    "string": "Paris",
    "list": ["Paris"],
    "aliases": ["City of Light", "Paris"],
    "target": {"target": ["Paris"]},
    "target-from-parquet": {"target": np.array(["Paris"], dtype=object)},
    "target-string": {"target": "Paris"},
}


def verl_custom_reward_fn(path: Path, reward_kwargs: dict):
    """What verl's get_custom_reward_fn returns: the loaded object, called with kwargs merged."""
    spec = importlib.util.spec_from_file_location("custom_module", path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    raw_fn = module.compute_score
    module._MODELS = {}  # what aux_models_from_job gives a recipe without auxiliary models

    def wrapped(*args, **kwargs):
        return raw_fn(*args, **{**kwargs, **reward_kwargs})

    return wrapped


@pytest.fixture(scope="module")
def compute_score(tmp_path_factory):
    path = tmp_path_factory.mktemp("job") / "reward.py"
    path.write_text(REWARD_PY.format(method="search_r1", reward="em", total_steps=10))
    return verl_custom_reward_fn(path, {"reward": "em"})


@pytest.mark.parametrize("form", list(FORMS))
@pytest.mark.parametrize("extra_info", [None, {}, {"split": "train", "index": 0}])
def test_every_ground_truth_form_scores_the_same(compute_score, form, extra_info):
    def score(answer: str) -> float:
        return compute_score(
            data_source="nq",
            solution_str=f"<think>hm</think>\n<answer>{answer}</answer>",
            ground_truth=FORMS[form],
            extra_info=extra_info,
        )["score"]

    assert score("Paris") == 1.0
    assert score("P") == 0.0  # a plain string is one answer, not its characters
    assert score("Berlin") == 0.0


def test_gold_answers_of_each_form():
    assert gold_answers("Paris") == ("Paris",)
    assert gold_answers({"target": np.array(["a", "b"], dtype=object)}) == ("a", "b")
    assert gold_answers(("a",)) == ("a",)
    for bad, message in [
        ({"answer": "x"}, "dict without 'target'"),
        ([], "has no answer"),
        (3, "is not a string, a list"),
    ]:
        with pytest.raises(ValueError, match=message):
            gold_answers(bad)
