"""ARENA end to end through `harness run`: the packaged questions' own paragraphs reach the prompt,
`--method all` runs ARENA under arena-gold-context as its own run (own protocol id, own table),
and the protocol binding is enforced both ways. The model is a scripted backend (control flow
only) and the open-retrieval methods get a recording retriever, so no index or model is built."""

from __future__ import annotations

import json
from pathlib import Path

import duckdb
import pytest

from harness.cli import main
from harness.data import example_context, load_bench
from harness.data.benches import Selection
from harness.errors import ConfigError
from harness.methods_registry import METHODS, VARIANTS, get_method, resolve_methods
from harness.protocol import preset
from harness.runner import RunConfig, Runner, bound_protocols, check_protocol, own_protocol
from methods.arena.method import PROTOCOL_NAME, Arena, dataset_context, make_prompt
from tests.support.scripted import RecordingRetriever, ScriptedBackend

REPLY = "<relevance>[1]</relevance>\n<analysis>Ref 1.</analysis>\n<answer>yes</answer>"


@pytest.fixture
def scripted(monkeypatch: pytest.MonkeyPatch) -> ScriptedBackend:
    backend = ScriptedBackend({}, default=REPLY)
    monkeypatch.setattr(Runner, "backend", lambda self: backend)
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
    # the ARENA row counts its references: 1 question each from its own paragraphs, no substitute
    rows = [line.split("│")[1:-1] for line in second.splitlines() if line.startswith("│ arena")]
    assert [[c.strip() for c in r][-2:] for r in rows] == [["1", "0"]] * 3
    assert {r[1].strip() for r in rows} == {"hotpotqa", "2wikimultihopqa", "musique"}  # not cut

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
    assert bound_protocols() == {PROTOCOL_NAME: ("arena",)}
    for name in ("naive_rag", "search_r1", "direct"):
        with pytest.raises(ConfigError, match=f"own setting of method arena; method '{name}' is not scored"):
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
    from harness.runner import reference_sources
    from methods.arena.method import ClosedCorpusContexts
    from tests.methods2.test_arena import FakeRetriever

    arena = preset(PROTOCOL_NAME).with_(selection=Selection(mode="first", n=2))
    runner = Runner(RunConfig(methods=["arena"], bench="mini", protocol=arena, db=tmp_path / "r.duckdb"))
    ret = FakeRetriever()
    (run,) = runner.run([Arena(contexts=ClosedCorpusContexts(retriever=ret))])
    df = reference_sources(runner.store, [run.run_id])
    got = {r.dataset: (r.own_refs, r.substitute_refs) for r in df.itertuples()}
    # PopQA has no context of its own: its 2 questions get the labelled gold + BM25 substitute
    assert got == {"2wikimultihopqa": (2, 0), "hotpotqa": (2, 0), "musique": (2, 0), "popqa": (0, 2)}
    assert len(ret.calls) == 1 and len(ret.calls[0][0]) == 2  # only the PopQA questions were ranked
