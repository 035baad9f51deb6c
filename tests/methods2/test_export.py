"""verl export of When-to-Search: the exported reward (rebuilt from the decoded response) equals the
in-harness reward on the same trajectories, the executed queries included."""

from __future__ import annotations

import pytest

from harness.methods_registry import get_method
from harness.verl.reward import verl_compute_score
from tests.methods2.helpers import ScriptedEmbedder, ScriptedJudge, context, example, reward_ctx

SCRIPT = {
    "capital of France": [
        "<think>?</think><search>France capital</search>",
        "<reflect>ok</reflect><answer>Paris</answer>",
    ],
    "capital of Italy": ["<think>known</think><reflect>Rome</reflect><answer>Milan</answer>"],
    "tallest mountain": [
        "<think>?</think><search>tallest mountain</search>",
        "<reflect>more</reflect><search>Everest height</search>",
        "<reflect>ok</reflect><answer>Everest</answer>",
    ],
}
QUESTIONS = [
    ("capital of France", "Paris"),
    ("capital of Italy", "Rome"),
    ("tallest mountain", "Mount Everest"),
]


@pytest.mark.parametrize("reward", ["stage1", "stage2"])
def test_exported_reward_equals_in_harness_reward(reward):
    method = get_method("when_to_search")
    ctx, _backend, _ret = context(SCRIPT)
    examples = [example(i, q, a) for i, (q, a) in enumerate(QUESTIONS)]
    trajs = method.solve(examples, ctx)
    judged = {
        "Prediction: paris\n": ["YES"] * 2,
        "Prediction: milan\n": ["NO"] * 2,
        "Prediction: everest\n": ["YES"] * 2,
    }
    models = {
        "judge": ScriptedJudge(judged),
        "embedder": ScriptedEmbedder({"tallest mountain": [1.0, 0.0], "Everest height": [0.6, 0.8]}),
    }
    ours = method.rewards(trajs, name=reward, ctx=reward_ctx(**models))
    for e, t, r in zip(examples, trajs, ours, strict=True):
        out = verl_compute_score(
            "when_to_search",
            reward,
            e.dataset,
            t.response,
            {"target": list(e.answers)},
            {"question": e.question},
            models,
        )
        assert out["score"] == pytest.approx(r.total), t.response
        assert out["rc"] == r.components["rc"]
    assert ours[2].components["search"] == pytest.approx(-0.6)  # two queries, cosine 0.6
