"""Judge prompts: the papers' texts render exactly; hashes are pinned (a changed prompt must be a
deliberate new version); the template engine leaves braces alone and never re-substitutes."""

from __future__ import annotations

import pytest

from harness.errors import ConfigError
from harness.judge.prompts import JUDGE_PROMPTS, JudgePrompt, _substitute, get_prompt
from tests.methods.plugin_data import plugin_data

ENGINE_PINNED = {"default": "b5fb6b85", "r1_searcher": "3e0535e8"}  # harness/judge/prompts.py's own


def pinned() -> dict[str, str]:
    """The engine's prompts' hashes and each plugin's, from its folder's ``conformance.json``
    (``judge_prompt_hashes``, only for prompts its manifest registers)."""
    out = dict(ENGINE_PINNED)
    for pd in plugin_data():
        mine = pd.section("judge_prompt_hashes")
        foreign = sorted(set(mine) - set(pd.manifest.plugin.judge_prompts))
        assert not foreign, f"{pd.where} pins judge prompts it does not register: {foreign}"
        out.update(mine)
    return out


PINNED = pinned()


def test_hashes_are_pinned():
    now = {n: JUDGE_PROMPTS.get(n).prompt_hash for n in JUDGE_PROMPTS.names()}
    unpinned = sorted(set(now) - set(PINNED))
    assert not unpinned, (
        f"judge prompts {unpinned} have no pinned hash: add them to their folder's conformance.json "
        f"(section 'judge_prompt_hashes'), values {[now[n] for n in unpinned]}"
    )
    assert now == PINNED


def test_logit_variant_is_another_metric():
    p = get_prompt("when_to_search+logit")
    assert (p.scoring, p.name) == ("logit", "when_to_search+logit")
    assert p.prompt_hash != PINNED["when_to_search"]
    with pytest.raises(ConfigError, match="no label words"):
        get_prompt("tiresrag_r1_thinking+logit")
    with pytest.raises(ConfigError, match="only variant"):
        get_prompt("default+fast")
    with pytest.raises(ConfigError, match="unknown judge prompt 'nope'"):
        get_prompt("nope")


def test_when_to_search_renders_verbatim():
    msgs = get_prompt("when_to_search").messages("q?", ["The Beatles", "Beatles, The"], "the Beatles!")
    assert msgs == [
        {
            "role": "user",
            "content": (
                "You are an evaluation assistant. Your task is to determine whether the given prediction "
                "semantically matches any of the reference answers. This is a flexible match: even if the "
                "wording is different, if the meaning is the same, consider it a match.\n"
                "Prediction: beatles\n"
                "Reference Answers: beatles; beatles\n"
                "Please answer with a single word:\n"
                "- YES \u2192 if the prediction expresses the same meaning as any of the reference answers.\n"
                "- NO \u2192 otherwise.\n"
                "Only respond with YES or NO."
            ),
        }
    ]


def test_r1_searcher_and_tiresrag_render_verbatim():
    (msg,) = get_prompt("r1_searcher").messages("Is it?", ["True"], "yes")
    assert msg["content"] == (
        "Given a Question and its Golden Answer, verify whether the Predicted Answer is correct.\n"
        "The prediction is correct if it fully aligns with the meaning and key information of the Golden Answer.\n"
        "Respond with True if the prediction is correct and False otherwise.\n\n"
        "Question: Is it?\nGolden Answer: yes\nPredicted Answer: yes\n    "
    )
    (msg,) = get_prompt("r1_searcher").messages("Q", ["a", "b"], "p")
    assert "Golden Answer: ['a', 'b']\n" in msg["content"]
    (msg,) = get_prompt("tiresrag_r1").messages("Q", ["a", "b"], "p")
    assert msg["content"].endswith("otherwise.\n\nQuestion: Q\nGolden Answer: a / b\nPredicted Answer: p")


def test_arena_renders_its_code_layout():
    sys_msg, user = get_prompt("arena").messages("ignored", ["Paris", "City of Light"], "Paris")
    assert sys_msg == {"role": "system", "content": "You are an intelligent AI assistant."}
    blocks = user["content"].split("\n\n\n\n")
    assert blocks[0].endswith("the correct answer list is:*************\n['Paris', 'City of Light']")
    assert blocks[1] == "*************Here is the model's response:*************\nParis"
    assert blocks[2].endswith('You only need to answer "yes" or "no".*************')


def test_default_prompt_shows_every_gold_and_keeps_json_braces():
    _, user = get_prompt("default").messages("Who?", ["John F. Kennedy", "JFK"], "{golds} Kennedy")
    text = user["content"]
    assert 'Gold answers (matching any one of them is enough): ["John F. Kennedy", "JFK"]' in text
    assert "Predicted answer: {golds} Kennedy\n" in text  # a value is never substituted again
    assert text.endswith('{"rationale": "<one short sentence>", "judgement": "correct" or "incorrect"}')


def test_trajectory_judges_strip_answers_and_split_information():
    resp = "<think>a</think><search>q</search><information>doc 1</information>so<answer>X</answer>"
    _, user = get_prompt("tiresrag_r1_sufficiency").messages("Q", ["X"], resp)
    assert user["content"] == (
        "### QUESTION\nQ\n### ANSWER\nX\n### REFERENCES\n"
        "<think>a</think><search>q</search><information>doc 1</information>so"
    )
    _, user = get_prompt("tiresrag_r1_thinking").messages("Q", ["X"], resp)
    assert user["content"] == (
        "INPUT:\n### CONTEXT\ndoc 1\n### QUESTION\nQ\n### MODEL THINKING PROCESS\n"
        "<think>a</think><search>q</search>\nso"
    )


def test_a_template_missing_a_field_is_refused():
    with pytest.raises(ConfigError, match=r"lacks the placeholder\(s\) \['prediction'\]"):
        _substitute("Q: {question}", {"question": "q", "prediction": "p"})
    assert isinstance(JUDGE_PROMPTS.get("default"), JudgePrompt)


def test_judge_prompt_help_lists_the_registry(monkeypatch):
    """``--judge-prompt``'s help is the registry's list, so a paper's prompt (its manifest's
    ``judge_prompts``) is listed without an edit to the CLI."""
    import harness.judge.prompts as prompts
    from harness.cli import build_parser
    from harness.registry import Registry

    def judge_help() -> str:
        sub = next(a for a in build_parser()._actions if a.dest == "command")
        action = next(a for a in sub.choices["judge"]._actions if a.dest == "judge_prompt")
        return action.help

    text = judge_help()
    assert all(n in text for n in prompts.JUDGE_PROMPTS.names()), text
    toy = Registry("judge prompt")
    toy.register_lazy("toy_paper_judge", "methods.toy_paper.judge:TOY")
    toy.register_lazy("default", "harness.judge.prompts:DEFAULT")
    monkeypatch.setattr(prompts, "JUDGE_PROMPTS", toy)
    assert judge_help().startswith("judge prompt: default, toy_paper_judge; '<id>+logit'")
