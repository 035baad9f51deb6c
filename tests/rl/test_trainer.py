"""The trainer learns: on a toy task with the tiny random model, reward rises; and the pieces
it is made of (log-probs at the response positions, masking) are exact."""

from __future__ import annotations

from pathlib import Path

import pytest
import torch

from harness.errors import ConfigError
from harness.method import RewardBreakdown
from harness.protocol import CorpusRef, Protocol
from harness.rl.config import preset
from harness.rl.recipe import Recipe
from harness.rl.sequences import sequence_logprobs
from harness.rl.trainer import Trainer
from harness.types import QAExample
from tests.support.numeric import assert_close_rel
from tests.support.toy import SingleTurnToy

PROTO = Protocol(name="toy", corpus=CorpusRef(id="none", content_hash="0" * 64, n_passages=0))


WORDS = ["<pad>", "<s>", "</s>", "<unk>", "Tell", "me", "about", "topic", "."] + [str(i) for i in range(16)]
WORDS += [f"w{i}" for i in range(40)]
TARGET = {WORDS.index(f"w{i}") for i in range(8)}  # 8 of the 64 words: about 1/8 of random output


@pytest.fixture(scope="module")
def toy_model_dir(tmp_path_factory) -> Path:
    """A tiny random Llama over a 64-word vocabulary (word-level tokenizer built here)."""
    from tokenizers import Tokenizer, decoders, models, pre_tokenizers
    from transformers import PreTrainedTokenizerFast

    from tests.support.tiny_model import save_tiny_llama

    out = tmp_path_factory.mktemp("toy-words")
    tok = Tokenizer(models.WordLevel({w: i for i, w in enumerate(WORDS)}, unk_token="<unk>"))
    tok.pre_tokenizer = pre_tokenizers.WhitespaceSplit()
    tok.decoder = decoders.WordPiece(prefix="##")
    PreTrainedTokenizerFast(
        tokenizer_object=tok, bos_token="<s>", eos_token="</s>", pad_token="<pad>", unk_token="<unk>"
    ).save_pretrained(out)
    return save_tiny_llama(
        out,
        vocab_size=len(WORDS),
        hidden_size=32,
        intermediate_size=64,
        max_position_embeddings=512,
        pad_token_id=0,
        generation_config=False,
    )


class FavouriteWords(SingleTurnToy):
    """Toy task: reward = share of generated words among 8 target words (about 1/8 at the start)."""

    name = "toy-words"

    def prompt(self, example):
        return f"Tell me about topic {example.id} ."

    def score(self, trajectory):
        ids = [i for i, m in zip(trajectory.response_ids, trajectory.loss_mask, strict=True) if m]
        share = sum(1 for i in ids if i in TARGET) / max(len(ids), 1)
        return RewardBreakdown(total=share, components={"target_share": share})


def toy_recipe(steps: int) -> Recipe:
    algo = preset("grpo").replace(
        group_size=4,
        train_batch_size=4,
        mini_batch_size=4,
        lr=2e-2,
        kl_placement="none",
        kl_coef=0.0,
        loss_agg_mode="token-mean",
    )
    return Recipe(
        name="toy",
        method="toy-words",
        algo=algo,
        steps=steps,
        bench="none",
        max_new_tokens=8,
        max_turns=0,
        top_k=1,
        max_obs_tokens=8,
        micro_batch_size=8,
        seed=0,
    )


def examples(n: int) -> list[QAExample]:
    return [
        QAExample(id=str(i), dataset="toy", split="t", question=f"topic {i}", answers=("x",))
        for i in range(n)
    ]


def toy_trainer(method, recipe: Recipe, model_dir: Path, tmp_path: Path, n_examples: int) -> Trainer:
    """The trainer every toy-task test builds: the toy model, no retriever, ``n_examples`` questions,
    output under ``tmp_path/out``, no log lines."""
    return Trainer(
        method,
        recipe,
        model=str(model_dir),
        out_dir=tmp_path / "out",
        protocol=PROTO,
        retriever=None,
        examples=examples(n_examples),
        log=lambda s: None,
    )


def test_reward_rises_on_toy_task(toy_model_dir: Path, tmp_path: Path):
    steps = 20
    tr = toy_trainer(FavouriteWords(), toy_recipe(steps), toy_model_dir, tmp_path, 16)
    res = tr.train()
    rewards = [s.metrics["reward/total_mean"] for s in res.steps]
    first, last = sum(rewards[:3]) / 3, sum(rewards[-3:]) / 3
    assert last > first + 0.3, rewards
    assert (tmp_path / "out" / "final" / "config.json").exists()


def test_ppo_with_a_critic_learns_the_toy_task(toy_model_dir: Path, tmp_path: Path):
    """PPO (GAE, gamma = lam = 1, a value head on a copy of the backbone, clipped value loss) with
    one step of critic warm-up: the first step trains the critic only, then reward rises as GRPO's
    does, and the critic learns the returns (its loss falls)."""
    from harness.rl.config import preset

    steps = 20
    base = preset("ppo")
    algo = base.replace(
        group_size=4,
        train_batch_size=4,
        mini_batch_size=4,
        lr=2e-2,
        kl_placement="none",
        kl_coef=0.0,
        entropy_coef=0.0,
        critic={**base.critic.model_dump(), "lr": 1e-2, "warmup_steps": 1},
    )
    recipe = toy_recipe(steps).model_copy(update={"algo": algo})
    res = toy_trainer(FavouriteWords(), recipe, toy_model_dir, tmp_path, 16).train()
    m = [s.metrics for s in res.steps]
    assert [x["actor_updated"] for x in m[:3]] == [0.0, 1.0, 1.0]
    assert "loss" in m[1] and m[0]["loss"] == 0.0  # no policy loss during the critic warm-up
    rewards = [x["reward/total_mean"] for x in m]
    first, last = sum(rewards[:3]) / 3, sum(rewards[-3:]) / 3
    assert last > first + 0.3, rewards
    vf = [x["critic/vf_loss"] for x in m]
    assert sum(vf[-3:]) / 3 < sum(vf[:3]) / 3, vf
    assert (tmp_path / "out" / "final" / "config.json").exists()


def test_sequence_logprobs_match_full_forward(tiny_dir: Path):
    from transformers import AutoModelForCausalLM

    model = AutoModelForCausalLM.from_pretrained(str(tiny_dir))
    prompts, responses = [[1, 5, 9], [1, 7]], [[11, 12], [13, 14, 15]]
    logp, _ = sequence_logprobs(model, prompts, responses, pad_id=2, temperature=1.0, with_entropy=False)
    for b in range(2):
        ids = torch.tensor([prompts[b] + responses[b]])
        full = torch.log_softmax(model(ids).logits[0].float(), -1)
        for j, tok in enumerate(responses[b]):
            pos = len(prompts[b]) + j - 1
            assert logp[b, j].item() == pytest.approx(full[pos, tok].item(), rel=1e-5, abs=1e-6)


def test_sequence_logprobs_keep_computes_only_the_kept_positions_and_matches_the_full_forward(tiny_dir: Path):
    from transformers import AutoModelForCausalLM

    model = AutoModelForCausalLM.from_pretrained(str(tiny_dir))
    prompts, responses = [[1, 5, 9], [1, 7]], [[11, 12, 16, 17], [13, 14, 15]]
    keep = torch.tensor([[1.0, 0.0, 0.0, 1.0], [0.0, 0.0, 1.0, 0.0]])  # columns 0, 2 and 3 are wanted
    # the two forwards have different shapes, so float32 reductions split differently (by thread
    # count and by kernel: AVX2 vs AVX-512): values are compared relative to their magnitude
    _check_keep(model, prompts, responses, keep)


def _check_keep(model, prompts, responses, keep) -> None:
    full, _ = sequence_logprobs(model, prompts, responses, pad_id=2, temperature=0.7, with_entropy=False)
    part, _ = sequence_logprobs(
        model, prompts, responses, pad_id=2, temperature=0.7, with_entropy=False, keep=keep
    )
    assert part.shape == full.shape
    for b, j in [(0, 0), (0, 3), (1, 2)]:  # a kept position: the full forward's log-prob
        assert part[b, j].item() == pytest.approx(full[b, j].item(), rel=1e-5, abs=1e-6)
    # a position its row does not keep goes through no LM head: 0, though the full forward's is not
    for b, j in [(0, 1), (0, 2), (1, 0), (1, 1)]:
        assert part[b, j].item() == 0.0 and full[b, j].abs() > 0
    # the supervised loss and its gradient are the full forward's
    loss_full = -(full * keep).sum()
    loss_full.backward()
    g_full = [p.grad.clone() for p in model.parameters() if p.grad is not None]
    model.zero_grad()
    part, _ = sequence_logprobs(
        model, prompts, responses, pad_id=2, temperature=0.7, with_entropy=False, keep=keep
    )
    (-(part * keep).sum()).backward()
    g_part = [p.grad for p in model.parameters() if p.grad is not None]
    # backpropagated through a 49,152-way softmax at temperature 0.7, the two forwards' rounding
    # reaches up to 1.9e-5 of a gradient's largest element (model.norm.weight; AVX2 and AVX-512,
    # 1 and 2 threads, AMD EPYC); a wrong kept position moves it by O(1)
    for i, (a, b) in enumerate(zip(g_full, g_part, strict=True)):
        assert_close_rel(b, a, rel=1e-4, what=f"gradient {i}")
    # entropy on the kept columns is the full computation's, 0 where the mask is 0
    kw = dict(pad_id=2, temperature=0.7, with_entropy=True, mask=keep)
    with torch.no_grad():
        _, ent_full = sequence_logprobs(model, prompts, responses, **kw)
        _, ent_part = sequence_logprobs(model, prompts, responses, keep=keep, **kw)
    assert_close_rel(ent_part, ent_full, what="entropy")
    assert ent_part[0, 0] > 0 and ent_part[0, 2] == 0


class OddTopicsOnly(FavouriteWords):
    """Reward 0 on even topics (an all-equal group, which dynamic sampling drops), the target
    share on odd ones."""

    def score(self, trajectory):
        if int(trajectory.example_id) % 2 == 0:
            return RewardBreakdown(total=0.0, components={"target_share": 0.0})
        return super().score(trajectory)


def test_dynamic_sampling_trains_on_kept_groups_and_logs_everything_sampled(
    toy_model_dir: Path, tmp_path: Path
):
    from harness.rl.config import DynamicSamplingConfig, GroupFilterConfig

    ds = DynamicSamplingConfig(
        enabled=True,
        max_rounds=3,
        filters=(GroupFilterConfig(kind="zero_variance", metric="total", lower=None, upper=None),),
    )
    recipe = toy_recipe(4)
    recipe = recipe.model_copy(
        update={"algo": recipe.algo.replace(train_batch_size=1, mini_batch_size=1, dynamic_sampling=ds)}
    )
    seen: list[str] = []
    method = OddTopicsOnly()
    solve = method.solve

    def recording_solve(exs, ctx):
        seen.extend(e.id for e in exs[:: recipe.algo.group_size])
        return solve(exs, ctx)

    method.solve = recording_solve  # type: ignore[method-assign]
    res = toy_trainer(method, recipe, toy_model_dir, tmp_path, 6).train()
    assert len(res.steps) == 4  # a step that kept nothing is still logged
    rounds = [int(s.metrics["ds_rounds"]) for s in res.steps]
    assert sum(rounds) == len(seen)  # one question per round
    for s in res.steps:
        m = s.metrics
        n_generated = int(m["ds_rounds"])
        n_dropped = round(m["ds_dropped_frac"] * n_generated)
        kept = n_generated - n_dropped
        assert kept in (0, 1)
        if kept:  # trained on the odd topic only; the even ones count in sampled/* as zeros
            assert m["reward/total_mean"] > 0
            assert m["sampled/reward/total_mean"] == pytest.approx(
                m["reward/total_mean"] * kept / n_generated
            )
            assert "loss" in m
        else:
            assert "loss" not in m and m["sampled/reward/total_mean"] == 0.0
    # the questions asked for, in order: rounds stop at the first odd topic
    pos = 0
    for r in rounds:
        chunk = seen[pos : pos + r]
        pos += r
        assert all(int(i) % 2 == 0 for i in chunk[:-1])
        assert r == 3 or int(chunk[-1]) % 2 == 1


def test_entropy_is_a_graph_node_only_when_it_is_in_the_loss(tiny_dir: Path):
    from transformers import AutoModelForCausalLM

    model = AutoModelForCausalLM.from_pretrained(str(tiny_dir))
    mask = torch.ones(1, 2)
    for grad in (True, False):
        logp, ent = sequence_logprobs(
            model,
            [[1, 5, 9]],
            [[11, 12]],
            pad_id=2,
            temperature=1.0,
            with_entropy=True,
            mask=mask,
            entropy_grad=grad,
        )
        assert logp.requires_grad and ent is not None and ent.requires_grad is grad
    # the same values either way, and at T != 1 the logits are scaled before both
    _, e1 = sequence_logprobs(
        model, [[1, 5, 9]], [[11, 12]], pad_id=2, temperature=0.7, with_entropy=True, mask=mask
    )
    _, e2 = sequence_logprobs(
        model,
        [[1, 5, 9]],
        [[11, 12]],
        pad_id=2,
        temperature=0.7,
        with_entropy=True,
        mask=mask,
        entropy_grad=False,
    )
    assert torch.allclose(e1.detach(), e2)


def test_the_trainer_uses_the_policy_loss_the_recipe_names(toy_model_dir: Path, tmp_path: Path):
    """Policy losses are looked up by name like advantage estimators: a loss registered under a new
    name and named in the recipe is the one the update calls."""
    from harness.rl.losses import POLICY_LOSSES, clipped_policy_loss

    calls: list[int] = []

    def counting(log_prob, old, adv, mask, algo, units):
        calls.append(int(mask.sum()))
        return clipped_policy_loss(log_prob, old, adv, mask, algo, units)

    POLICY_LOSSES.register("test-counting", counting)
    try:
        recipe = toy_recipe(1)
        recipe = recipe.model_copy(update={"algo": recipe.algo.replace(policy_loss="test-counting")})
        toy_trainer(FavouriteWords(), recipe, toy_model_dir, tmp_path, 4).train()
    finally:
        POLICY_LOSSES._items.pop("test-counting")
    assert calls and all(n > 0 for n in calls)
    with pytest.raises(ConfigError, match="unknown policy_loss 'nope'"):
        recipe.algo.replace(policy_loss="nope")


class NoSignal(FavouriteWords):
    """The toy task with a reward of 0 for everything (as the smoke recipe's untrained policy gets)."""

    def score(self, trajectory):
        return RewardBreakdown(total=0.0, components={"target_share": 0.0})


def test_a_step_without_learning_signal_says_so_and_the_final_line_runs_as_printed(
    toy_model_dir: Path, tmp_path: Path
):
    """Issue 61: a smoke run's log read "trained on 2/2 groups" with reward 0.000 and std 0 at every
    step; the line now says there was nothing to learn. And the evaluation command printed with the
    final checkpoint lacked --method, which `harness run --model` asks for: it now parses."""
    import shlex

    from harness.cli import build_parser
    from harness.rl.trainer import no_learning_signal

    lines: list[str] = []
    for method, silent in ((NoSignal(), True), (FavouriteWords(), False)):
        lines.clear()
        tr = toy_trainer(method, toy_recipe(1), toy_model_dir, tmp_path / str(silent), 4)
        tr.log = lines.append
        tr.train()
        step = next(x for x in lines if x.startswith("step 1/1"))
        said = step.endswith(
            "; no learning signal: every group's rollouts got the same reward, so every group-normalised "
            "advantage is 0"
        )
        assert said == silent, step
    assert no_learning_signal({"zero_variance_groups": 1.0}, critic=False)
    assert not no_learning_signal({"zero_variance_groups": 1.0}, critic=True)  # the critic's baseline
    assert not no_learning_signal({"zero_variance_groups": 0.5}, critic=False)
    final = next(x for x in lines if x.startswith("final checkpoint: "))
    command = final.split("(evaluate it with: ", 1)[1].rstrip(")")
    assert (
        command == f"harness run --method toy-words --model {tmp_path / 'False' / 'out' / 'final'} --limit 1"
    )
    args = build_parser().parse_args(shlex.split(command)[1:])
    assert (args.method, args.model, args.limit) == (
        ["toy-words"],
        str(tmp_path / "False" / "out" / "final"),
        1,
    )
