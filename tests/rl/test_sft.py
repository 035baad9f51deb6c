"""The supervised warm-up: demonstrations are rolled out through the method's own engine (ids and
loss mask exactly an RL rollout's), trained with the RL forward; the packaged split keeps held-out
questions out of training; the held-out report's answer statistics."""

from __future__ import annotations

from pathlib import Path

import pytest
import torch

from harness.errors import ConfigError
from harness.protocol import CorpusRef, Protocol
from harness.rl.recipe import SftConfig
from harness.types import Hit, QAExample

PROTO = Protocol(name="t", corpus=CorpusRef(id="none", content_hash="0" * 64, n_passages=0), max_turns=1)
TURNS = (
    "<think> go </think>\n<search> {question} </search>",
    "<think> ok </think>\n<answer> {answer} </answer>",
)


def _cfg(**kw) -> SftConfig:
    base = dict(
        turns=TURNS,
        answer_in_observation=True,
        n_questions=None,
        epochs=1,
        batch_size=2,
        micro_batch_size=1,
        lr=1e-2,
        lr_warmup_steps=0,
        weight_decay=0.0,
        adam_betas=(0.9, 0.999),
        grad_clip=1.0,
    )
    return SftConfig(**{**base, **kw})


class OneDocRetriever:
    """The query's own paragraph: 'Paris' for the capital question, nothing useful otherwise."""

    def search(self, queries: list[str], k: int) -> list[list[Hit]]:
        text = {"capital of France?": "Paris is the capital of France."}
        return [
            [Hit(doc_id="d", contents=f'"Doc"\n{text.get(q, "Unrelated words.")}', score=1.0)]
            for q in queries
        ]


def _examples() -> list[QAExample]:
    return [
        QAExample(
            id="1", dataset="t", split="t", question="capital of France?", answers=("Paris City", "paris")
        ),
        QAExample(id="2", dataset="t", split="t", question="Who wrote Ulysses?", answers=("Joyce",)),
    ]


def test_demonstrations_have_the_engines_ids_and_mask(tiny_dir: Path):
    from transformers import AutoModelForCausalLM, AutoTokenizer

    from harness.llm.transformers_backend import TransformersBackend
    from harness.rl.sft import build_demonstrations
    from methods.search_r1.method import SearchR1

    tok = AutoTokenizer.from_pretrained(str(tiny_dir))
    backend = TransformersBackend.from_model(AutoModelForCausalLM.from_pretrained(str(tiny_dir)), tok)
    method = SearchR1()
    demos = build_demonstrations(
        method, _examples(), backend=backend, protocol=PROTO, retriever=OneDocRetriever(), cfg=_cfg()
    )
    # the Ulysses question's retrieval does not hold "Joyce": dropped
    assert (demos.asked, demos.kept) == (2, 1)
    (t,) = demos.trajectories
    assert t.prediction == "paris"  # the gold string found in the observation, as the answer
    prompt = backend.chat_prompt(method.prompt_messages(_examples()[0], training=True))
    assert t.prompt_ids == backend.prompt_ids(prompt)
    turn1 = TURNS[0].format(question="capital of France?")
    turn2 = TURNS[1].format(answer="paris")
    obs = '\n\n<information>Doc 1(Title: "Doc") Paris is the capital of France.</information>\n\n'
    pieces = [(turn1, 1), (obs, 0), (turn2, 1)]
    assert t.response == turn1 + obs + turn2
    assert t.response_ids == [i for text, _ in pieces for i in backend.tokenize(text)]
    assert t.loss_mask == [m for text, m in pieces for _ in backend.tokenize(text)]


def test_sft_lowers_the_nll_of_the_model_tokens(tiny_dir: Path):
    from transformers import AutoModelForCausalLM, AutoTokenizer

    from harness.llm.transformers_backend import TransformersBackend
    from harness.rl.sft import build_demonstrations, train_sft
    from methods.search_r1.method import SearchR1

    torch.manual_seed(0)
    tok = AutoTokenizer.from_pretrained(str(tiny_dir))
    model = AutoModelForCausalLM.from_pretrained(str(tiny_dir))
    backend = TransformersBackend.from_model(model, tok)
    cfg = _cfg(answer_in_observation=False, epochs=8, batch_size=2)
    demos = build_demonstrations(
        SearchR1(), _examples(), backend=backend, protocol=PROTO, retriever=OneDocRetriever(), cfg=cfg
    )
    assert demos.kept == 2  # both answered; the Ulysses one with its first gold answer
    hist = train_sft(model, demos.trajectories, cfg, pad_id=tok.pad_token_id or 0, seed=0, log=lambda s: None)
    assert len(hist) == 8
    assert hist[-1]["sft/loss"] < 0.5 * hist[0]["sft/loss"], [h["sft/loss"] for h in hist]
    # the token count is the mask's: observation tokens are not trained on
    assert hist[0]["sft/tokens"] == sum(sum(t.loss_mask) for t in demos.trajectories)


def test_the_learning_split_is_what_run_sample_draws_and_training_never_sees_it():
    from harness.data.benches import Selection, get_bench, load_bench
    from harness.methods_registry import get_trainable
    from harness.rl.split import check_split, load_split, refuse_heldout, split_examples
    from harness.rl.trainer import training_examples

    split = load_split("learning")
    check_split(split)  # the stored ids are what the build script makes from the packaged data
    sel = split.heldout_selection
    ((_, drawn),) = load_bench(get_bench(split.bench), Selection(mode="random", n=sel.n, seed=sel.seed))
    assert tuple(e.id for e in drawn) == split.heldout["popqa"]  # = harness run --sample n --seed s
    assert split.eval_args() == ["--bench", "mini-singlehop", "--sample", str(sel.n), "--seed", str(sel.seed)]
    _, recipe = get_trainable("search_r1", "cpu-sft-rl")
    train = training_examples(recipe)
    assert len(train) == 1000 - sel.n and not {e.id for e in train} & set(split.heldout["popqa"])
    with pytest.raises(ConfigError, match="held out"):
        refuse_heldout("learning", split_examples("learning", "heldout")[:1])


def test_answer_stats_flag_a_collapsed_policy():
    from harness.rl.heldout import answer_stats

    collapsed = answer_stats(["and", "And", "and.", "and", None])
    assert collapsed.top_answer == "and" and collapsed.top_share == 0.8 and collapsed.answered == 0.8
    # entropy of {and: 4/5, none: 1/5}
    assert collapsed.entropy_bits == pytest.approx(
        -(0.8 * torch.log2(torch.tensor(0.8)) + 0.2 * torch.log2(torch.tensor(0.2))).item()
    )
    varied = answer_stats(["Paris", "Joyce", "1914", "Joyce"])
    assert (varied.top_answer, varied.top_share, varied.entropy_bits) == ("joyce", 0.5, 1.5)


def test_harness_sft_runs_end_to_end(tiny_dir: Path, tmp_path: Path):
    """`harness sft` parses and calls harness.rl.sft.run_sft: demonstrations on disk, a checkpoint,
    and a complete train run with its step metrics in the database."""
    from harness.cli import main
    from harness.results.store import Store

    out, db = tmp_path / "out", tmp_path / "r.duckdb"
    overrides = ["sft.n_questions=2", "sft.epochs=1", "sft.answer_in_observation=false", "lora=null"]
    argv = ["sft", "--method", "search_r1", "--recipe", "cpu-sft-rl", "--model", str(tiny_dir)]
    assert main([*argv, "--recipe-override", *overrides, "--out", str(out), "--db", str(db)]) == 0
    demos = (out / "demonstrations.jsonl").read_text().splitlines()
    assert len(demos) == 2 and all("<search>" in line for line in demos)
    assert (out / "final").is_dir()
    runs = Store(db).query("SELECT run_id, kind, status FROM runs")
    assert list(runs["kind"]) == ["train"] and list(runs["status"]) == ["complete"]
    assert runs["run_id"][0].startswith("sft-search_r1")
    steps = Store(db).query("SELECT count(*) AS n FROM train_steps")
    assert int(steps["n"][0]) >= 1


def _tiny_demos(tiny_dir: Path, cfg: SftConfig):
    from transformers import AutoModelForCausalLM, AutoTokenizer

    from harness.llm.transformers_backend import TransformersBackend
    from harness.rl.sft import build_demonstrations
    from methods.search_r1.method import SearchR1

    torch.manual_seed(0)
    tok = AutoTokenizer.from_pretrained(str(tiny_dir))
    model = AutoModelForCausalLM.from_pretrained(str(tiny_dir))
    backend = TransformersBackend.from_model(model, tok)
    demos = build_demonstrations(
        SearchR1(), _examples(), backend=backend, protocol=PROTO, retriever=OneDocRetriever(), cfg=cfg
    )
    return model, tok, demos.trajectories


def test_dev_loss_is_the_training_loss_of_the_same_demonstrations(tiny_dir: Path):
    """Before any update, the dev NLL of the demonstrations is the first step's training loss over
    the same demonstrations (one batch of both); its entropy is a real per-token mean (> 0)."""
    from harness.rl.sft import dev_metrics, train_sft

    cfg = _cfg(answer_in_observation=False, epochs=1, batch_size=2)
    model, tok, demos = _tiny_demos(tiny_dir, cfg)
    pad = tok.pad_token_id or 0
    dm = dev_metrics(model, demos, pad_id=pad, micro_batch_size=1)
    hist = train_sft(model, demos, cfg, pad_id=pad, seed=0, log=lambda s: None)
    assert dm["sft/dev_loss"] == pytest.approx(hist[0]["sft/loss"], rel=1e-4)
    assert dm["sft/dev_tokens"] == sum(sum(t.loss_mask) for t in demos)
    assert 0 < dm["sft/dev_entropy"] < 20


def test_early_stop_keeps_the_weights_of_the_lowest_dev_loss(tiny_dir: Path, monkeypatch):
    """Dev losses 1.0 (before), 0.8 (step 1), 0.9, 0.95: with patience 2 training stops at step 3
    and the weights are those after step 1."""
    import harness.rl.sft as sft

    cfg = _cfg(
        answer_in_observation=False, epochs=10, batch_size=1, dev_questions=1, eval_every=1, patience=2
    )
    model, tok, demos = _tiny_demos(tiny_dir, cfg)
    losses = iter([1.0, 0.8, 0.9, 0.95])
    monkeypatch.setattr(
        sft,
        "dev_metrics",
        lambda *a, **k: {"sft/dev_loss": next(losses), "sft/dev_entropy": 1.0, "sft/dev_tokens": 1.0},
    )
    params = [p for p in model.parameters() if p.requires_grad]
    after: dict[int, list[torch.Tensor]] = {}

    def on_step(step, m):
        if "sft/best_step" not in m:
            after[step + 1] = [p.detach().clone() for p in params]

    hist = sft.train_sft(
        model,
        demos,
        cfg,
        pad_id=tok.pad_token_id or 0,
        seed=0,
        log=lambda s: None,
        on_step=on_step,
        dev=demos[:1],
    )
    assert len(hist) == 3 and hist[-1]["sft/best_step"] == 1.0
    assert [h["sft/dev_loss"] for h in hist] == [0.8, 0.9, 0.95]
    assert all(torch.equal(p, w) for p, w in zip(params, after[1], strict=True))
    assert not all(torch.equal(p, w) for p, w in zip(params, after[2], strict=True))


def test_early_stop_config_is_all_or_nothing():
    with pytest.raises(ValueError, match="all > 0"):
        _cfg(dev_questions=8, eval_every=0, patience=2)
    with pytest.raises(ValueError, match="leaves no training question"):
        _cfg(n_questions=8, dev_questions=8, eval_every=1, patience=1)


def test_harness_sft_carves_its_dev_slice_from_its_own_questions(tiny_dir: Path, tmp_path: Path):
    """With early stopping the last dev_questions of the warm-up's questions are not trained on
    (not in demonstrations.jsonl) but are listed in harness_train.json, so RL never draws them."""
    import json

    from harness.cli import main
    from harness.results.store import Store

    out, db = tmp_path / "out", tmp_path / "r.duckdb"
    overrides = [
        "sft.n_questions=3",
        "sft.dev_questions=1",
        "sft.eval_every=1",
        "sft.patience=1",
        "sft.answer_in_observation=false",
        "lora=null",
    ]
    argv = ["sft", "--method", "search_r1", "--recipe", "cpu-sft-rl", "--model", str(tiny_dir)]
    assert main([*argv, "--recipe-override", *overrides, "--out", str(out), "--db", str(db)]) == 0
    trained = [json.loads(x)["id"] for x in (out / "demonstrations.jsonl").read_text().splitlines()]
    listed = json.loads((out / "final" / "harness_train.json").read_text())["questions"]
    assert len(trained) == 2 and len(listed) == 3 and set(trained) < set(listed)
    dev_loss = Store(db).query("SELECT value FROM train_steps WHERE metric = 'sft/dev_loss'")
    assert len(dev_loss) >= 1
