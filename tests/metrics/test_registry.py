"""The metric registry: names, versions, families, describe rows and score_answer."""

from __future__ import annotations

import pytest

from harness.errors import ConfigError
from harness.metrics import (
    DEFAULT_METRICS,
    cover_em,
    cover_em_tokens,
    describe_metrics,
    exact_match,
    f1,
    f1_squad,
    get_metric,
    metric_versions,
    score_answer,
)
from harness.metrics.registry import parse_metric_list, resolve_metrics

ALL = {
    "em",
    "f1",
    "f1_squad",
    "cover_em",
    "cover_em_tokens",
    "retrieval_recall@k",
    "evidence_recall",
    "answer_recall@k",
}
# registered, but scored only under a protocol that names it (R-Search's "Acc")
PAPER_ONLY = {"acc_substring_lower"}


def test_registered_names_and_versions() -> None:
    versions = metric_versions()
    assert set(versions) == ALL
    assert all(v == "1" for v in versions.values())
    assert metric_versions(["em", "retrieval_recall@3"]) == {"em": "1", "retrieval_recall@3": "1"}
    # a paper-only metric is registered and resolvable, but not in the default protocol set
    assert metric_versions(["acc_substring_lower"]) == {"acc_substring_lower": "1"}
    assert not PAPER_ONLY & set(versions)


def test_describe_rows() -> None:
    rows = describe_metrics()
    assert [r[0] for r in rows] == sorted(ALL | PAPER_ONLY)
    by_name = {r[0]: r for r in rows}
    assert by_name["cover_em"][1:3] == ("1", "answer")
    assert "party" in by_name["cover_em"][3]
    assert "R1-Searcher" in by_name["cover_em_tokens"][4]
    assert by_name["answer_recall@k"][2] == "retrieval"
    assert all(len(r) == 5 and all(isinstance(x, str) and x for x in r) for r in rows)


def test_no_metric_is_a_substring_test_called_em() -> None:
    assert get_metric("em").fn("Paris, France", ["Paris"]) == 0.0
    assert get_metric("cover_em").fn("Paris, France", ["Paris"]) == 1.0


def test_families_bind_k() -> None:
    m = get_metric("retrieval_recall@2")
    assert m.name == "retrieval_recall@2" and m.kind == "retrieval"
    assert m.fn(["x", "g1", "g2"], ["g1", "g2"]) == 0.5
    assert get_metric("retrieval_recall@3").fn(["x", "g1", "g2"], ["g1", "g2"]) == 1.0
    assert get_metric("answer_recall@1").fn(["Paris is big", "London"], ["london"]) == 0.0
    assert get_metric("answer_recall@2").fn(["Paris is big", "London"], ["london"]) == 1.0


@pytest.mark.parametrize(
    ("name", "message"),
    [
        ("exact", "unknown metric 'exact'; known: acc_substring_lower, answer_recall@k, cover_em"),
        ("em@3", "unknown metric 'em@3'"),
        ("retrieval_recall@k", "needs a cut-off: write e.g. retrieval_recall@5"),
        ("retrieval_recall@0", "k must be at least 1"),
    ],
)
def test_unknown_names_fail_loudly(name: str, message: str) -> None:
    with pytest.raises(ConfigError, match=message.replace("(", r"\(")):
        get_metric(name)


def test_resolve_and_parse() -> None:
    assert [m.name for m in resolve_metrics(["f1", "em"])] == ["f1", "em"]
    assert parse_metric_list(" em, f1 ,,cover_em") == ("em", "f1", "cover_em")
    with pytest.raises(ConfigError, match="requested twice"):
        resolve_metrics(["em", "em"])
    with pytest.raises(ConfigError, match="no metrics requested"):
        parse_metric_list(" , ")
    with pytest.raises(ConfigError, match="unknown metric 'bleu'"):
        parse_metric_list("em,bleu")


def test_score_answer_matches_the_functions() -> None:
    pred, golds = "the cat sat on the mat", ["cat on mat", "a cat"]
    assert DEFAULT_METRICS == ("em", "f1", "cover_em", "cover_em_tokens")
    assert score_answer(pred, golds) == {
        "em": 0.0,
        "f1": pytest.approx(6 / 7, abs=1e-15),
        "cover_em": 1.0,
        "cover_em_tokens": 1.0,
    }
    names = ["f1_squad", "em", "f1", "cover_em", "cover_em_tokens"]
    got = score_answer("no", ["no way"], names)
    assert list(got) == names
    assert got == {
        "f1_squad": f1_squad("no", ["no way"]),
        "em": exact_match("no", ["no way"]),
        "f1": f1("no", ["no way"]),
        "cover_em": cover_em("no", ["no way"]),
        "cover_em_tokens": cover_em_tokens("no", ["no way"]),
    }
    assert got["f1_squad"] == pytest.approx(2 / 3, abs=1e-15) and got["f1"] == 0.0


def test_score_answer_rejects_retrieval_metrics_and_empty_golds() -> None:
    with pytest.raises(ConfigError, match="is a retrieval metric"):
        score_answer("x", ["x"], ["em", "evidence_recall"])
    with pytest.raises(ValueError, match="golds is empty"):
        score_answer("x", [])
