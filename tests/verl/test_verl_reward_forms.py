"""The gold answers of a verl row's ``reward_model.ground_truth`` in every form in use. The exported
``reward.py`` scoring each form through verl's own loader (``get_custom_reward_fn``) is tested
against the real package in ``tests/verl/test_real_verl.py`` (``tox -e verl``)."""

from __future__ import annotations

import numpy as np
import pytest

from harness.verl.rows import gold_answers


def test_gold_answers_of_each_form():
    assert gold_answers("Paris") == ("Paris",)
    assert gold_answers(["City of Light", "Paris"]) == ("City of Light", "Paris")
    assert gold_answers({"target": "Paris"}) == ("Paris",)
    assert gold_answers({"target": np.array(["a", "b"], dtype=object)}) == ("a", "b")
    assert gold_answers(("a",)) == ("a",)
    for bad, message in [
        ({"answer": "x"}, "dict without 'target'"),
        ([], "has no answer"),
        (3, "is not a string, a list"),
    ]:
        with pytest.raises(ValueError, match=message):
            gold_answers(bad)
