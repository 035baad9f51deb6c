"""ARENA: the prompt, the references and their gold numbers, the gold-context protocol (no retriever
call, refused elsewhere), and every branch of the reward (arXiv 2505.13258 §3.3;
ren258/ARENA@53f9569 src/rewards.py) with exact values.

ARENA end to end through `harness run`: the packaged questions' own paragraphs reach the prompt,
`--method all` runs ARENA under arena-gold-context as its own run (own protocol id, own table),
and the protocol binding is enforced both ways. The model is a scripted backend (control flow
only) and the open-retrieval methods get a recording retriever, so no index or model is built.
"""

from __future__ import annotations

import itertools
import json
from pathlib import Path

import duckdb
import pytest

from harness.cli import main
from harness.data import example_context, load_bench
from harness.data.benches import Selection
from harness.errors import ConfigError
from harness.eval.protocol import preset
from harness.eval.runner import RunConfig, Runner, bound_protocols, check_protocol, own_protocol
from harness.methods_registry import METHODS, VARIANTS, get_method, resolve_methods
from harness.types import Evidence, Hit, QAExample, Trajectory, Turn
from methods.arena.method import (
    BONUS,
    PROMPT_CODE,
    PROTOCOL_NAME,
    Arena,
    ArenaContext,
    ClosedCorpusContexts,
    Reference,
    arena_f1,
    arena_norm,
    combine,
    dataset_context,
    eval_protocol,
    extract_answer,
    format_references,
    judge_reply_score,
    make_prompt,
    r_acc,
    r_format,
    r_rel,
    substitute_context,
    substitute_order,
)
from tests.methods.helpers import ScriptedJudge, context, reward_ctx
from tests.support.scripted import RecordingRetriever, ScriptedBackend

GOOD = "<relevance>[1, 3]</relevance>\n<analysis>Ref 1 says Paris; ref 3 agrees.</analysis>\n<answer>Paris</answer>"


def test_code_prompt_is_verbatim():
    first = PROMPT_CODE.split("\n", 1)[0]
    assert first.endswith("based on the references. ")  # one trailing space (code src/data_generator.py)
    assert "The user asks a question and give some references." in first
    msgs = make_prompt("Q?", [Reference("a", "T", "alpha"), Reference("b", "U", "beta")])
    assert msgs == [{"role": "user", "content": msgs[0]["content"]}]  # one user message, no system
    assert msgs[0]["content"].endswith(
        "<question>\nQ?\n</question>\n\n<references>\n1. alpha\n2. beta\n</references>\n"
    )
    assert "**User**:" in msgs[0]["content"]


def test_references_are_numbered_without_titles():
    refs = [Reference("a", "Title A", "alpha"), Reference("b", "Title B", "beta")]
    assert format_references(refs) == "1. alpha\n2. beta"
    assert format_references(refs[:1]) == "alpha"  # a single reference has no number (code)
    assert format_references(refs, include_titles=True) == "1. Title A: alpha\n2. Title B: beta"


def test_arena_normaliser_replaces_punctuation_by_space():
    assert arena_norm("U.S.") == "u s"  # SQuAD would give "us" (paper App. C.1)
    assert arena_norm("The_Beatles!") == "beatles"
    assert arena_norm("‘Paris’") == "paris"
    assert arena_norm("True") == "true"  # no True -> yes mapping in ARENA


@pytest.mark.parametrize(
    "text,score",
    [
        (GOOD, 1.0),
        ("<relevance>[1]</relevance><analysis>x</analysis><answer>y</answer>", 1.0),  # no whitespace needed
        (" " + GOOD, 0.0),  # leading whitespace
        (GOOD.replace("agrees.", "agrees <b>."), 0.0),  # '<' inside the analysis
        (GOOD + " extra", 0.0),  # same-line text after </answer>
        (GOOD + "\nextra line", 1.0),  # MULTILINE quirk: text after a newline is accepted
        ("<relevance>[1]</relevance><answer>y</answer>", 0.0),  # a section missing
        ("<analysis>x</analysis><relevance>[1]</relevance><answer>y</answer>", 0.0),  # wrong order
    ],
)
def test_format_reward_branches(text, score):
    assert r_format(text) == score


@pytest.mark.parametrize(
    "relevance,gold,score",
    [
        ("[1, 3]", [1, 3], 1.0),
        ("[3, 1, 1]", [1, 3], 1.0),  # sorted set
        ("[1]", [1, 3], 0.5),  # subset
        ("[1, 3, 7]", [1, 3], 0.5),  # superset
        ("[1, 7]", [1, 3], 0.5),  # partial overlap
        ("[2]", [1, 3], 0.0),  # disjoint
        ("1, 3", [1, 3], 0.0),  # not JSON
        ("3", [3], 0.0),  # not a list
        ('["1", "3"]', [1, 3], 0.0),  # strings never equal integer ids
        # upstream src/evaluate.py:82-94 compares sorted(set(json.loads(...))) with ==: numbers by value
        ("[1.0, 3.0]", [1, 3], 1.0),
        ("[true, 3]", [1, 3], 1.0),  # True == 1 in Python
        ("[1.5, 3]", [1, 3], 0.5),
        ('[1, "a"]', [1, 3], 0.0),  # unorderable: sorted() raises, upstream's except gives 0
        ("[[1], 3]", [1, 3], 0.0),  # unhashable: set() raises
        ("null", [1, 3], 0.0),
        ("[1]", [-1, 1], 0.5),  # an unmapped gold (-1) makes a full match impossible (code)
    ],
)
def test_relevance_reward_branches(relevance, gold, score):
    text = f"<relevance>{relevance}</relevance><analysis>a</analysis><answer>b</answer>"
    assert r_rel(text, gold) == score


def test_relevance_missing_is_zero():
    assert r_rel("<analysis>a</analysis><answer>b</answer>", [1]) == 0.0


def test_accuracy_is_arena_exact_match():
    assert r_acc("the U.S.", ["U S"]) == 1.0
    assert r_acc("Paris, France", ["Paris"]) == 0.0
    assert r_acc("", ["Paris"]) == 0.0
    assert arena_f1("Paris France", ["Paris"]) == pytest.approx(2 / 3)


def test_reachable_totals_and_bonus():
    # paper §3.3: R ∈ {0, .5, 1, 1.5, 2, 2.5, 13}; a raw sum of 3 always triggers the bonus
    totals = {
        combine(f, a, r).total for f, a, r in itertools.product((0.0, 1.0), (0.0, 1.0), (0.0, 0.5, 1.0))
    }
    assert totals == {0.0, 0.5, 1.0, 1.5, 2.0, 2.5, 13.0}
    assert combine(1.0, 1.0, 1.0).components["bonus"] == BONUS == 10.0
    assert combine(1.0, 1.0, 0.5).components["bonus"] == 0.0


def test_first_answer_is_the_prediction():
    assert extract_answer("<answer> Paris </answer><answer>Rome</answer>").prediction == "Paris"
    assert extract_answer("<answer> Paris </answer><answer>Rome</answer>").status == "multiple_answers"
    assert extract_answer("<answer>Paris").status == "unclosed_tag"
    assert extract_answer("nothing").status == "no_answer"


@pytest.mark.parametrize(
    "reply,score",
    [
        ("Yes.", 1.0),
        ("no", 0.0),
        ("The answer is correct: yes", 1.0),
        ("nope", 0.0),
        ("it is not", 0.0),
        ("maybe", 0.5),
    ],
)
def test_training_judge_parse(reply, score):
    assert judge_reply_score(reply) == score  # code: startswith yes/no, then contains yes/no, else 0.5


def _traj(text: str, gold_ids, answers=("Paris",)) -> Trajectory:
    return Trajectory(
        example_id="1",
        dataset="hotpotqa",
        question="Capital of France?",
        answers=list(answers),
        turns=[Turn(index=0, kind="generate", text=text)],
        response=text,
        meta={"arena_gold_ids": list(gold_ids)},
    )


def test_rewards_on_trajectories():
    m = Arena()
    full, partial, bad = m.rewards(
        [_traj(GOOD, [1, 3]), _traj(GOOD, [3]), _traj(" " + GOOD, [1, 3])], name="arena", ctx=reward_ctx()
    )
    assert full.total == 13.0 and full.components == {
        "format": 1.0,
        "accuracy": 1.0,
        "relevance": 1.0,
        "bonus": 10.0,
        "outcome": 1.0,
    }
    assert partial.total == 2.5  # format 1 + EM 1 + relevance 0.5
    assert bad.total == 2.0  # format 0 + EM 1 + relevance 1, no bonus
    f1 = m.rewards(
        [_traj(GOOD.replace(">Paris<", ">Paris France<"), [1, 3])], name="arena_f1", ctx=reward_ctx()
    )[0]
    assert f1.total == pytest.approx(1 + 2 / 3 + 1)
    with pytest.raises(ConfigError, match="arena_gold_ids"):
        m.rewards([Trajectory("1", "d", "q", ["a"], response=GOOD)], name="arena", ctx=reward_ctx())


def test_judge_accuracy_variant():
    said = "response:*************\n"  # the judged text follows this header (Table 8 layout)
    judge = ScriptedJudge({said + "Paris": ["Yes"], said + "Lyon": ["no"]}, fail_on=said + "Nice")
    texts = [
        GOOD,
        GOOD.replace("Paris<", "Lyon<"),
        GOOD.replace("Paris<", "Nice<"),
        GOOD.replace(">Paris<", "><"),
    ]
    out = Arena().rewards([_traj(t, [1, 3]) for t in texts], name="arena_judge", ctx=reward_ctx(judge=judge))
    assert [r.components["accuracy"] for r in out] == [1.0, 0.0, 0.0, 0.0]
    assert [r.components["judge_error"] for r in out] == [0.0, 0.0, 1.0, 0.0]
    assert len(judge.batches) == 1 and len(judge.batches[0]) == 3  # the empty answer is not sent (code)
    system, user = judge.batches[0][0]
    assert system["content"] == "You are an intelligent AI assistant." and "['Paris']" in user["content"]


def _example(i: int, dataset: str = "hotpotqa") -> QAExample:
    return QAExample(
        id=f"q{i}",
        dataset=dataset,
        split="dev",
        question=f"question {i}",
        answers=("Paris",),
        supporting=(Evidence("Gold A", "gold text a", "g1"), Evidence("Gold B", "gold text b", "g2")),
    )


class FakeRetriever:
    def __init__(self):
        self.calls = []

    def search(self, queries, k):
        self.calls.append((list(queries), k))
        return [
            [Hit("g1", '"Gold A"\ngold text a', 9.0)]
            + [Hit(f"d{j}", f'"D{j}"\ndistractor {j}', 1.0 / j) for j in range(1, k)]
            for _ in queries
        ]


def test_substitute_context_gold_plus_bm25():
    e = _example(7)
    hits = FakeRetriever().search([e.question], 12)[0]
    c = substitute_context(e, hits, 10)
    assert len(c.references) == 10 and c.source == "gold+bm25"
    assert (
        sum(r.passage_id in ("g1", "g2") for r in c.references) == 2
    )  # gold once each, never as a distractor
    assert [c.references[i - 1].passage_id for i in c.gold_ids] in (["g1", "g2"], ["g2", "g1"])
    assert c.references == substitute_context(e, hits, 10).references  # deterministic
    assert substitute_order("q7", 10) != substitute_order("q8", 10)  # order keyed by the id
    assert sorted(substitute_order("q7", 10)) == list(range(10))


def test_provider_counts_per_dataset_and_prefers_the_datasets_own_context():
    ret = FakeRetriever()
    provider = ClosedCorpusContexts(retriever=ret)
    own = QAExample(
        id="o",
        dataset="hotpotqa",
        split="dev",
        question="own",
        answers=("x",),
        supporting=(Evidence("Gold B", "gold   text b"),),
        meta={"context": [{"title": "Z", "text": "zzz"}, {"title": "Gold B", "text": "gold text b"}]},
    )
    hp, mu, ow = provider.contexts([_example(1), _example(2, "musique"), own], eval_protocol())
    assert (len(hp.references), len(mu.references)) == (10, 20)  # paper: 10 / 20 paragraphs
    assert ret.calls == [(["question 1", "question 2"], 22)]  # one batched ranking call
    assert (
        ow.source == "dataset"
        and ow.gold_ids == (2,)
        and [r.text for r in ow.references] == ["zzz", "gold text b"]
    )


def test_examples_without_gold_are_refused():
    e = QAExample(id="n", dataset="nq", split="test", question="q", answers=("a",))
    with pytest.raises(ConfigError, match="gold supporting paragraphs"):
        ClosedCorpusContexts(retriever=FakeRetriever()).contexts([e], eval_protocol())


class FixedContexts:
    def contexts(self, examples, protocol):
        refs = (Reference("p1", "A", "Paris is the capital."), Reference("p2", "B", "Rome is in Italy."))
        return [ArenaContext(refs, (1,), "gold+bm25") for _ in examples]


def test_solve_under_the_gold_context_protocol_never_retrieves():
    proto = preset(PROTOCOL_NAME)
    ctx, backend, retriever = context({"capital": [GOOD.replace("[1, 3]", "[1]")]}, protocol=proto)
    m = Arena(contexts=FixedContexts())
    (t,) = m.solve([_example(1)], ctx)
    assert retriever.calls == [] and t.n_retrievals == 0 and not Arena.uses_retrieval
    assert t.prediction == "Paris" and t.extraction_status == "ok"
    assert t.meta["arena_gold_ids"] == [1] and t.meta["arena_context"] == "gold+bm25"
    assert "1. Paris is the capital.\n2. Rome is in Italy." in backend.calls[0][0]
    r = m.reward(t, name="default", ctx=reward_ctx())
    assert r.total == 13.0


def test_other_protocols_are_refused_outside_training():
    ctx, _b, _r = context({"capital": [GOOD]})
    with pytest.raises(ConfigError, match=PROTOCOL_NAME):
        Arena(contexts=FixedContexts()).solve([_example(1)], ctx)
    with pytest.raises(ConfigError, match=PROTOCOL_NAME):  # before the runner records a run
        Arena().spec(preset("mini"))
    from harness.rl.trainer import rollout_protocol

    recipe = Arena().recipes()["cpu-smoke"]
    assert Arena().spec(rollout_protocol(preset("mini"), recipe)).params["max_new_tokens"] == 48  # training


def test_training_returns_token_ids_with_a_full_mask():
    ctx, _b, retriever = context({"capital": [GOOD]}, training=True)  # training under any protocol
    (t,) = Arena(contexts=FixedContexts()).solve([_example(1)], ctx)
    assert t.response_ids == [ord(c) for c in GOOD] and t.loss_mask == [1] * len(GOOD)
    assert t.prompt_ids is not None and retriever.calls == []


def test_protocol_is_separate_from_open_retrieval():
    p = eval_protocol()
    assert p.name == PROTOCOL_NAME and p.max_turns == 0
    assert (p.decoding.temperature, p.decoding.max_new_tokens) == (0.9, 1024)
    assert p.protocol_id not in {preset(n).protocol_id for n in ("mini", "r_search-eval", "eval_rar-eval")}


# -- each question's own paragraphs (the packaged contexts) -----------------------------------------


def _packaged(dataset: str, qid: str | None = None) -> QAExample:
    from harness.data import load_dataset

    exs = load_dataset(dataset)
    return exs[0] if qid is None else next(e for e in exs if e.id == qid)


def test_packaged_context_gives_the_papers_references_and_gold_numbers():
    hp = _packaged("hotpotqa")  # Scott Derrickson / Ed Wood: paragraphs 2 and 5 of the dev file's 10
    c = dataset_context(hp)
    assert c.source == "dataset" and len(c.references) == 10
    assert [r.passage_id for r in c.references] == [f"closed-{i:06d}" for i in range(1, 11)]
    assert c.gold_ids == (2, 5)
    assert [c.references[i - 1].title for i in c.gold_ids] == ["Scott Derrickson", "Ed Wood"]
    mu = _packaged("musique", "3hop1__654651_55349_651302")
    m = dataset_context(mu)
    assert len(m.references) == 20 and m.gold_ids == (2, 3, 12)  # MuSiQue's own order, gold not first


def test_repeated_paragraph_gold_number_is_its_first_occurrence():
    from harness.data import example_context, packaged

    cmap = packaged.context_map()["2wikimultihopqa"]
    for qid, ids in cmap.items():
        if len(set(ids)) == len(ids):
            continue
        e = _packaged("2wikimultihopqa", qid)
        c = dataset_context(e)
        assert len(c.references) == len(example_context(e)) == 10  # repeats kept, as the dataset has them
        assert list(c.gold_ids) == sorted({ids.index(pid) + 1 for pid in e.gold_passage_ids})


def test_gold_paragraph_missing_from_the_context_is_minus_one():
    e = QAExample(
        id="x",
        dataset="hotpotqa",
        split="dev",
        question="q",
        answers=("a",),
        supporting=(Evidence("A", "alpha"), Evidence("B", "beta")),
        meta={"context": ({"title": "A", "text": "alpha "}, {"title": "C", "text": "gamma"})},
    )
    assert dataset_context(e).gold_ids == (-1, 1)  # matched on title + whitespace-normalised text


def test_provider_serves_packaged_questions_their_own_context_without_retrieval():
    ret = FakeRetriever()
    hp, mu = _packaged("hotpotqa"), _packaged("musique", "3hop1__654651_55349_651302")
    a, b = ClosedCorpusContexts(retriever=ret).contexts([hp, mu], eval_protocol())
    assert ret.calls == [] and (a.source, b.source) == ("dataset", "dataset")
    assert a == dataset_context(hp) and b == dataset_context(mu)


def test_prompt_messages_use_the_examples_own_paragraphs():
    hp = _packaged("hotpotqa")
    msgs = Arena().prompt_messages(hp, training=True)
    assert msgs == make_prompt(hp.question, dataset_context(hp).references)
    assert msgs == Arena().prompt_messages(hp, training=False)
    assert msgs[0]["content"].count("\n10. ") == 1 and "\n11. " not in msgs[0]["content"]
    assert (
        Arena(template="paper")
        .prompt_messages(hp, training=True)[0]["content"]
        .startswith(
            "A conversation between User and Assistant. The user asks a question and gives some references."
        )
    )
    with pytest.raises(ConfigError, match=r"popqa question '4222362' has none"):  # never the substitute
        Arena().prompt_messages(_packaged("popqa"), training=True)


def test_cannot_answer_questions_without_paragraphs():
    m = Arena()
    assert m.cannot_answer(_packaged("hotpotqa")) is None
    assert m.cannot_answer(_example(1)) is None  # gold paragraphs: the labelled substitute
    nq = QAExample(id="n", dataset="nq", split="test", question="q", answers=("a",))
    assert "no gold supporting paragraphs" in m.cannot_answer(nq)
    assert Arena.own_protocols == (PROTOCOL_NAME,)


REPLY = "<relevance>[1]</relevance>\n<analysis>Ref 1.</analysis>\n<answer>yes</answer>"


@pytest.fixture
def scripted(monkeypatch: pytest.MonkeyPatch) -> ScriptedBackend:
    backend = ScriptedBackend({}, default=REPLY)
    monkeypatch.setattr(Runner, "backend", lambda self: backend)
    # and every method's own model (``--method all`` serves each shipped adapter preset through
    # ``backend_for``): without this the trained policies ran on the real packaged model here
    monkeypatch.setattr(Runner, "backend_for", lambda self, model: backend)
    monkeypatch.setattr(Runner, "retriever", lambda self, protocol=None: RecordingRetriever())
    return backend


def _runs(db: Path) -> list[tuple]:
    with duckdb.connect(str(db), read_only=True) as con:
        return con.execute(
            "SELECT method, protocol_name, protocol_id, n_expected, status FROM runs ORDER BY method"
        ).fetchall()


def _table_methods(text: str) -> set[str]:
    """The method column of the rich tables in ``text``."""
    cells = [line.split("│")[1].strip() for line in text.splitlines() if line.startswith("│")]
    return {c for c in cells if c and c != "method"}


def _first_examples():
    return [e for _, exs in load_bench("mini-multihop", Selection(mode="first", n=1)) for e in exs]


def test_run_all_runs_arena_under_its_own_protocol(scripted, tmp_path: Path, capsys) -> None:
    db = tmp_path / "r.duckdb"
    rc = main(
        [
            "run",
            "--method",
            "all",
            "--bench",
            "mini-multihop",
            "--limit",
            "1",
            "--db",
            str(db),
            "--no-progress",
        ]
    )
    assert rc == 0
    runs = {r[0]: r[1:] for r in _runs(db)}
    assert set(runs) == set(resolve_methods("all"))  # every registered method ran (variants only by name)
    assert set(METHODS.names()) - set(runs) == set(VARIANTS)
    mini_id = preset("mini").protocol_id
    arena_proto = own_protocol(Arena(), preset("mini").with_(selection=Selection(mode="first", n=1)))
    assert arena_proto.name == PROTOCOL_NAME and arena_proto.selection == Selection(mode="first", n=1)
    for name, (pname, pid, n, status) in runs.items():
        assert (n, status) == (3, "complete")
        if name == "arena":
            assert (pname, pid) == (PROTOCOL_NAME, arena_proto.protocol_id) and pid != mini_id
        else:
            assert pname == "mini"
    out = capsys.readouterr()
    # two tables: the open-retrieval one, and ARENA's titled with its protocol, never mixed
    titles = [line for line in out.out.splitlines() if "· protocol" in line]
    assert len(titles) == 2
    assert (
        "protocol mini" in titles[0] and f"protocol {PROTOCOL_NAME} ({arena_proto.protocol_id})" in titles[1]
    )
    first, second = out.out.split(titles[1])
    assert _table_methods(first) == set(resolve_methods("all")) - {"arena"}
    assert _table_methods(second) == {"arena"} and "subst." in second and "subst." not in first
    # the ARENA rows count its references: 1 question each from its own paragraphs, no substitute;
    # the Avg. row counts the method's three
    rows = [line.split("│")[1:-1] for line in second.splitlines() if line.startswith("│ arena")]
    assert [[c.strip() for c in r][-2:] for r in rows] == [["1", "0"]] * 3 + [["3", "0"]]
    assert {r[1].strip() for r in rows} == {"hotpotqa", "2wikimultihopqa", "musique", "Avg."}  # not cut

    # ARENA was served each question's own paragraphs, numbered in the dataset's order
    with duckdb.connect(str(db), read_only=True) as con:
        rows = con.execute(
            "SELECT s.sample_id, s.meta_json, s.n_retrievals FROM samples s JOIN runs r USING (run_id) "
            "WHERE r.method = 'arena' ORDER BY s.position"
        ).fetchall()
    examples = _first_examples()
    assert [r[0] for r in rows] == [e.id for e in examples]
    for (_, meta_json, n_ret), e in zip(rows, examples, strict=True):
        meta = json.loads(meta_json)
        c = dataset_context(e)
        assert meta["arena_context"] == "dataset" and n_ret == 0
        assert meta["arena_reference_ids"] == [p.passage_id for p in example_context(e)]
        assert meta["arena_gold_ids"] == list(c.gold_ids)
        assert meta["prompt"] == scripted.chat_prompt(make_prompt(e.question, c.references))


def test_run_all_leaves_out_questions_arena_cannot_answer(scripted, tmp_path: Path, capsys) -> None:
    db = tmp_path / "r.duckdb"
    rc = main(
        [
            "run",
            "--method",
            "direct,arena",
            "--bench",
            "multihop",
            "--limit",
            "1",
            "--db",
            str(db),
            "--no-progress",
        ]
    )
    assert rc == 2  # an explicit list refuses questions ARENA cannot answer, before any run
    assert "method 'arena' cannot answer 3 of the 4 selected questions" in capsys.readouterr().err
    assert not db.exists()  # refused before the results file is created, so no run either
    rc = main(
        ["run", "--method", "all", "--bench", "multihop", "--limit", "1", "--db", str(db), "--no-progress"]
    )
    assert rc == 0
    runs = {r[0]: r[1:] for r in _runs(db)}
    # HotpotQA's first dev question has its own paragraphs; 2Wiki's, MuSiQue's and Bamboogle's do not
    assert runs["arena"][2] == 1 and runs["direct"][2] == 4
    err = capsys.readouterr().err
    assert "method 'arena' cannot answer 3 of the 4 selected questions" in err and "left out" in err


def test_retrieval_methods_are_refused_under_arena_protocol(scripted, tmp_path: Path, capsys) -> None:
    arena = preset(PROTOCOL_NAME)
    assert bound_protocols() == {
        PROTOCOL_NAME: ("arena", "naive_rag_arena"),  # and naive RAG over its references
        # the baselines' released evaluations (docs/baselines.md)
        "flashrag": ("direct_flashrag", "ircot_flashrag", "naive_rag_flashrag"),
        "search_o1-released-singlehop": ("search_o1_released",),
        "search_o1-released-multihop": ("search_o1_released",),
    }
    for name in ("naive_rag", "search_r1", "direct"):
        with pytest.raises(
            ConfigError, match=f"own setting of method arena, naive_rag_arena; method '{name}' is not scored"
        ):
            check_protocol(get_method(name), arena)
    with pytest.raises(ConfigError, match=f"scored only under its own protocol {PROTOCOL_NAME}"):
        check_protocol(Arena(), preset("mini"))
    db = tmp_path / "r.duckdb"
    args = ["--bench", "mini-multihop", "--limit", "1", "--db", str(db), "--no-progress"]
    assert main(["run", "--method", "naive_rag", "--protocol", PROTOCOL_NAME, *args]) == 2
    assert "own setting of method arena" in capsys.readouterr().err
    # the Python API refuses it too, before a run is recorded
    runner = Runner(RunConfig(methods=["naive_rag"], bench="mini-multihop", protocol=arena, db=db))
    with pytest.raises(ConfigError, match="own setting"):
        runner.run([get_method("naive_rag")])
    # `all` under ARENA's protocol: only ARENA runs, the others are skipped with the reason
    assert main(["run", "--method", "all", "--protocol", PROTOCOL_NAME, *args]) == 0
    assert [r[0] for r in _runs(db)] == ["arena"]
    assert "skipping naive_rag: protocol 'arena-gold-context' is the own setting" in capsys.readouterr().err


def test_substitutes_are_counted_per_dataset(scripted, tmp_path: Path) -> None:
    from harness.results.summary import reference_sources
    from methods.arena.method import ClosedCorpusContexts

    arena = preset(PROTOCOL_NAME).with_(selection=Selection(mode="first", n=2))
    runner = Runner(RunConfig(methods=["arena"], bench="mini", protocol=arena, db=tmp_path / "r.duckdb"))
    ret = FakeRetriever()
    (run,) = runner.run([Arena(contexts=ClosedCorpusContexts(retriever=ret))])
    df = reference_sources(runner.store, [run.run_id])
    got = {r.dataset: (r.own_refs, r.substitute_refs) for r in df.itertuples()}
    # PopQA has no context of its own: its 2 questions get the labelled gold + BM25 substitute
    assert got == {"2wikimultihopqa": (2, 0), "hotpotqa": (2, 0), "musique": (2, 0), "popqa": (0, 2)}
    assert len(ret.calls) == 1 and len(ret.calls[0][0]) == 2  # only the PopQA questions were ranked
