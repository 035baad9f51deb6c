"""SuRe control flow: candidates, one summary and one validation per candidate, pairwise ranking of
every ordered pair, the best validation + ranking score wins; every LLM call counted."""

from __future__ import annotations

import re

import pytest

from baselines.sure import (
    CANDIDATES_PROMPT,
    RANKING_PROMPT,
    SuRe,
    format_passages,
    parse_candidates,
    parse_ranking,
    parse_validation,
    select,
)
from tests.baselines.helpers import FunctionBackend, context, example
from tests.support.scripted import RecordingRetriever

Q = "Where is the Louvre?"


def fake_model(candidates: str, supported: set[str], preferred: str | None):
    """Candidates for the candidate prompt; a summary naming its prediction; "True" when the
    prediction is in ``supported``; ranking names the passage of ``preferred`` (else no choice)."""

    def answer(prompt: str) -> str:
        if "provide two correct candidates" in prompt:
            return candidates
        if "act as a professional writer" in prompt:
            pred = re.search(r"Prediction: (.*)\nPassage:", prompt).group(1)
            return f"Summary supporting {pred}."
        if "Does the passage correctly support" in prompt:
            pred = re.search(r"Prediction: (.*)\n", prompt).group(1)
            return "True" if pred in supported else "False."
        if "Identify which passage" in prompt:
            p1 = re.search(r"Passage 1: Summary supporting (.*)\.\n", prompt).group(1)
            if preferred is None:
                return "I cannot tell"
            return "Passage 1" if p1 == preferred else "Passage 2"
        raise AssertionError(prompt)

    return answer


def run(candidates: str, supported: set[str], preferred: str | None, n: int = 1):
    be = FunctionBackend(fake_model(candidates, supported, preferred))
    ctx, ret = context(be)
    trajs = SuRe().solve([example(i, Q) for i in range(n)], ctx)
    return trajs, be, ret


def test_ranking_decides_when_both_validate():
    (t,), be, ret = run("(a) Paris, (b) Lyon", {"Paris", "Lyon"}, preferred="Lyon")
    # Paris: 1 + score[0][1] = 1 + 0; Lyon: 1 + score[1][0] = 1 + 1
    assert t.prediction == "Lyon" and t.extraction_status == "ok"
    assert t.meta["sure"]["candidates"] == ["Paris", "Lyon"]
    assert t.meta["sure"]["validation"] == [1.0, 1.0]
    assert t.meta["sure"]["ranking"] == [[0.0, 0.0], [1.0, 0.0]]
    assert t.meta["sure"]["scores"] == [1.0, 2.0] and t.meta["sure"]["chosen"] == 1
    # 1 retrieval; 1 candidate call + 2 summaries + 2 validations + 2 ordered pairs = 7 LLM calls
    assert ret.calls == [([Q], 3)]
    assert (t.n_retrievals, t.n_llm_calls) == (1, 7)
    assert [x.status for x in t.turns] == ["ok", "candidates"] + ["summary"] * 2 + ["validation"] * 2 + [
        "ranking"
    ] * 2
    assert [x.kind for x in t.turns[:3]] == ["retrieve", "generate", "llm_call"]
    assert t.prompt_tokens == sum(len(p) for c in be.calls for p in c)


def test_validation_decides_when_ranking_is_undecided():
    (t,), _, _ = run("(a) Lyon (b) Paris", {"Paris"}, preferred=None)
    assert t.meta["sure"]["scores"] == [0.5, 1.5]  # 0.5 for each unparseable ranking reply
    assert t.prediction == "Paris"


def test_tie_goes_to_the_first_candidate():
    (t,), _, _ = run("(a) Paris, (b) Lyon", {"Paris"}, preferred="Lyon")
    assert t.meta["sure"]["scores"] == [1.0, 1.0] and t.prediction == "Paris"


def test_every_candidate_is_scored_and_calls_are_batched_across_questions():
    trajs, be, _ = run("(a) Paris (b) Lyon (c) Nice", {"Nice"}, preferred="Nice", n=2)
    # one backend call per step, all questions together: candidates, summaries, validations, rankings
    assert [len(c) for c in be.calls] == [2, 6, 6, 12]
    for t in trajs:
        assert len(t.meta["sure"]["scores"]) == 3
        assert t.meta["sure"]["scores"] == [0.0, 0.0, 3.0] and t.prediction == "Nice"
        assert t.n_llm_calls == 1 + 3 + 3 + 6


def test_no_candidate_means_no_answer_and_no_further_calls():
    (t,), be, _ = run("I do not know", set(), preferred=None)
    assert t.prediction == "" and t.extraction_status == "no_answer"
    assert len(be.calls) == 1 and t.n_llm_calls == 1 and "sure" not in t.meta


def test_candidate_prompt_and_passages():
    (hits,) = RecordingRetriever().search([Q], 2)
    assert format_passages(hits) == (
        'Passage #1 Title: "Title 1"\nPassage #1 Text: Text about Where is the Louvre? number 1.\n\n'
        'Passage #2 Title: "Title 2"\nPassage #2 Text: Text about Where is the Louvre? number 2.\n\n'
    )
    text = CANDIDATES_PROMPT.format(N=2, reference=format_passages(hits), question=Q)
    assert text.startswith(
        "Below are 2 passages related to the question at the end. After reading the passages,"
    )
    assert text.endswith(f"number 2.\n\nQuestion: {Q}\nAnswer:")
    assert "provide a more informative answer" not in RANKING_PROMPT  # FlashRAG's lost spaces restored
    assert "provides a more informative" in RANKING_PROMPT and "relevant and informative" in RANKING_PROMPT


@pytest.mark.parametrize(
    "reply,cands",
    [
        ("(a) Paris, (b) New York City", ["Paris", "New York City"]),
        ("(a) 1,000 (b) two\nthousand", ["1000", "two"]),  # commas removed, first line only
        ("\n (a) x (b) , (c) y", ["x", "y"]),  # an empty candidate is dropped
        ("Paris or Lyon", []),
    ],
)
def test_parse_candidates(reply, cands):
    assert parse_candidates(reply) == cands


def test_parsers_and_selection():
    assert (parse_validation(" TRUE."), parse_validation("false"), parse_validation("")) == (1.0, 0.0, 0.0)
    assert (parse_ranking("Passage 1"), parse_ranking("passage 2."), parse_ranking("both")) == (1.0, 0.0, 0.5)
    assert select([0.0, 1.0], [[0.0, 1.0], [0.0, 0.0]]) == ([1.0, 1.0], 0)
    assert select([1.0], [[0.0]]) == ([1.0], 0)
