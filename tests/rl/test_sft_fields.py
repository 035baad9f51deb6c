"""Warm-up turns in a method's own format: ``{evidence}`` is the retrieved sentence that holds the
answer (tags stripped), and ARENA's ``{relevance}`` (TrainableMethod.demonstration_fields) makes its
cpu-learn-grpo demonstration earn ARENA's full reward (format, EM, relevance and the bonus)."""

from __future__ import annotations

from harness.rl.sft import evidence_sentence


def test_evidence_is_the_sentence_holding_the_answer_without_tags():
    text = (
        "<observation>Doc 1 (Title: X) Paris is big. It is the capital of France!\nDoc 2 foo.</observation>"
    )
    assert evidence_sentence(text, "france") == "It is the capital of France!"
    assert evidence_sentence("no match here", "Rome") == "no match here"


def test_arena_demonstration_earns_the_full_reward():
    from harness.data.benches import Selection, get_bench, load_bench
    from harness.methods_registry import get_method
    from harness.rl.recipe_files import method_recipes
    from methods.arena.method import dataset_context, extract_section, r_acc, r_format, r_rel

    arena = get_method("arena")
    turns = method_recipes(arena)["cpu-learn-grpo"].sft.turns
    (_entry, examples), *_ = load_bench(get_bench("mini-multihop"), Selection(mode="first", n=3))
    for e in examples:
        fields = arena.demonstration_fields(e, None)
        gold = dataset_context(e).gold_ids
        assert fields == {"relevance": "[" + ", ".join(map(str, gold)) + "]"}
        text = turns[0].format(**fields, question=e.question, answer=e.answers[0], evidence="")
        assert r_format(text) == 1.0
        assert r_rel(text, gold) == 1.0
        assert r_acc(extract_section("answer", text) or "", e.answers) == 1.0
