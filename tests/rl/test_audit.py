"""The audit of what would make RL ineffective (issue 43), one test per point, each able to fail on
the defect it names:

1. the LoRA parameters are exactly what the optimizer holds, and a step changes them (the base
   weights stay frozen);
2. the advantage is ``(R - mean_g) / (std_g + eps)`` group by group inside a real training step,
   and an update raises the log-probability of a group's best rollout relative to its worst (sign);
3. the "old" log-probs of the clipped ratio are **recomputed by the learner** at the start of the
   step, from the rollout token ids (as verl's ``actor.compute_log_prob``), never taken from the
   engine that generated: with one update per step the ratio is exactly 1, with two the fixed
   log-probs equal a fresh learner forward;
4. the dynamic-sampling filter of every Search-R1 recipe reads a metric the trainer produces for
   that recipe's reward, keeps a group with a spread and drops an all-equal one;
5. the reward of every Search-R1 recipe is computed on the method's own extractor (the last
   ``<answer>`` of the model's own text, the prediction evaluation scores), never on the prompt or
   the observations;
6. the learning rate of each step is the one the recipe's schedule gives (Search-R1's recipes: a
   constant rate after the warm-up the recipe names).
"""

from __future__ import annotations

import pytest
import torch

from harness.rl import trainer as trainer_mod
from harness.rl.config import DynamicSamplingConfig, GroupFilterConfig
from harness.rl.dapo import GroupRewards
from harness.rl.recipe import LoraConfig
from harness.rl.sequences import sequence_logprobs
from harness.rl.trainer import Trainer, _lr_lambda
from harness.rollout.base import RunContext
from harness.types import QAExample, SamplingParams
from tests.rl import test_trainer as toy
from tests.support.scripted import ScriptedBackend

FavouriteWords, toy_recipe, toy_trainer = toy.FavouriteWords, toy.toy_recipe, toy.toy_trainer
toy_model_dir = toy.toy_model_dir  # the fixture: a tiny random Llama over a word vocabulary


def assert_close_rel(got, want, *, rel: float, floor: float) -> None:
    """|got - want| <= rel * max(|want|, floor), elementwise: a tolerance relative to the magnitude
    (``floor`` keeps values near 0 from demanding exact equality)."""
    got, want = torch.as_tensor(got, dtype=torch.float64), torch.as_tensor(want, dtype=torch.float64)
    tol = rel * torch.clamp(want.abs(), min=floor)
    bad = (got - want).abs() > tol
    assert not bool(bad.any()), (
        f"{int(bad.sum())} values differ beyond rel {rel}: {got[bad][:5]} vs {want[bad][:5]}"
    )


def _capture(monkeypatch, obj, name: str, sink: list):
    """Wrap ``obj.name`` so each call's (args, kwargs, result) lands in ``sink``."""
    orig = getattr(obj, name)

    def wrapped(*args, **kwargs):
        out = orig(*args, **kwargs)
        sink.append((args, kwargs, out))
        return out

    monkeypatch.setattr(obj, name, wrapped)


# -- 1. LoRA parameters in the optimizer and changing -----------------------------------------------


def test_lora_parameters_are_the_optimizer_and_a_step_changes_them(toy_model_dir, tmp_path, monkeypatch):
    recipe = toy_recipe(1).model_copy(
        update={
            "lora": LoraConfig(rank=4, alpha=8.0, dropout=0.0, target_modules=("q_proj", "v_proj", "up_proj"))
        }
    )
    loaded: dict[str, torch.nn.Parameter] = {}
    start: dict[str, torch.Tensor] = {}
    orig = trainer_mod.load_policy

    def load(*args, **kwargs):
        out = orig(*args, **kwargs)
        loaded.update(dict(out[0].named_parameters()))
        start.update({n: p.detach().clone() for n, p in loaded.items()})
        return out

    monkeypatch.setattr(trainer_mod, "load_policy", load)
    opts: list = []
    _capture(monkeypatch, trainer_mod, "make_adamw", opts)
    toy_trainer(FavouriteWords(), recipe, toy_model_dir, tmp_path, 8).train()
    lora = {n for n in loaded if "lora_" in n}
    assert lora and all(loaded[n].requires_grad for n in lora)
    assert not any(p.requires_grad for n, p in loaded.items() if n not in lora)  # the base is frozen
    in_opt = {id(p) for group in opts[0][2].param_groups for p in group["params"]}
    assert in_opt == {id(loaded[n]) for n in lora}
    # one step moved every LoRA matrix (lora_B starts at 0 in PEFT; save_final merges the adapters
    # into the base afterwards, so only the adapter tensors are compared)
    assert all(not torch.equal(loaded[n].detach(), start[n]) for n in lora), "a LoRA tensor did not move"


# -- 2. advantages group by group, and their sign in the update --------------------------------------


def test_grpo_advantages_are_normalised_group_by_group_inside_a_step(toy_model_dir, tmp_path, monkeypatch):
    recipe = toy_recipe(2)
    calls: list = []
    _capture(monkeypatch, trainer_mod, "compute_advantages", calls)
    toy_trainer(FavouriteWords(), recipe, toy_model_dir, tmp_path, 8).train()
    a = recipe.algo
    assert a.adv_estimator == "grpo" and a.norm_adv_by_std
    spread = 0
    for (_name, batch, _params, _adjust), _kw, adv in calls:
        for g in batch.group.unique():
            rows = (batch.group == g).nonzero().flatten()
            r = batch.scores[rows].double()
            std = r.std(unbiased=a.adv_std_unbiased)
            want = (r - r.mean()) / (std + a.adv_eps)
            m = batch.response_mask[rows].bool()
            for i, row in enumerate(rows):
                got = adv[row][m[i]].double()
                assert torch.all(got == got[0])  # one value per trajectory, on its model tokens
                assert_close_rel(float(got[0]), float(want[i]), rel=1e-5, floor=1e-6)
                assert (float(got[0]) > 0) == (float(r[i]) > float(r.mean()))  # better than the mean: > 0
            spread += int(std > 0)
    assert spread > 0  # the check saw groups with a spread, not only all-zero advantages


def test_an_update_raises_the_best_rollout_against_the_worst_in_every_group(
    toy_model_dir, tmp_path, monkeypatch
):
    """The advantage's sign reaches the gradient: after the step's update, each group's
    highest-reward rollout gained log-probability relative to its lowest-reward one."""
    recipe = toy_recipe(1)
    recipe = recipe.model_copy(update={"algo": recipe.algo.replace(lr=5e-3)})
    seen: list[tuple[list[float], float]] = []
    orig = Trainer._update

    def wrapped(self, learner, groups, step):
        policy, pad_id = learner.policy, learner.pad_id
        trajs = [t for g in groups for t in g.trajectories]
        prompts = [list(t.prompt_ids) for t in trajs]
        responses = [list(t.response_ids) for t in trajs]

        def seq_logp() -> torch.Tensor:
            with torch.no_grad():
                lp, _ = sequence_logprobs(
                    policy, prompts, responses, pad_id=pad_id, temperature=1.0, with_entropy=False
                )
            mask = trainer_mod.loss_masks(trajs, device="cpu")[:, : lp.shape[1]]
            return (lp * mask).sum(1)

        before = seq_logp()
        out = orig(self, learner, groups, step)
        delta = seq_logp() - before
        k = 0
        for g in groups:
            n = len(g.trajectories)
            r = g.group_rewards["total"]
            if float(r.max()) > float(r.min()):
                seen.append(
                    (
                        delta[k : k + n].tolist(),
                        float(delta[k + int(r.argmax())] - delta[k + int(r.argmin())]),
                    )
                )
            k += n
        return out

    monkeypatch.setattr(Trainer, "_update", wrapped)
    toy_trainer(FavouriteWords(), recipe, toy_model_dir, tmp_path, 4).train()
    assert seen, "no group had a spread of rewards"
    assert all(gap > 0 for _, gap in seen), seen


# -- 3. old log-probs: recomputed by the learner ------------------------------------------------------


def test_one_update_per_step_trains_on_policy_with_ratio_exactly_one(toy_model_dir, tmp_path):
    res = toy_trainer(FavouriteWords(), toy_recipe(2), toy_model_dir, tmp_path, 8).train()
    for s in res.steps:
        assert s.metrics["ratio_min"] == 1.0 and s.metrics["ratio_max"] == 1.0
        assert s.metrics["clip_frac"] == 0.0


def test_old_logprobs_of_several_updates_are_the_learners_own_forward(toy_model_dir, tmp_path, monkeypatch):
    """With two updates a step, the old log-probs every update's ratio reads (the separate pass for
    the second mini-batch, the first one's own loss forward for the first) equal a fresh forward of
    the policy as it was before the step's first update."""
    recipe = toy_recipe(1)
    recipe = recipe.model_copy(update={"algo": recipe.algo.replace(mini_batch_size=2)})  # 2 updates
    assert recipe.algo.updates_per_step == 2
    fresh: list[tuple[torch.Tensor, torch.Tensor]] = []
    seen: list[torch.Tensor] = []
    orig_update, orig_loss = Trainer._update, Trainer._micro_loss

    def update(self, learner, groups, step):
        trajs = [t for g in groups for t in g.trajectories]
        with torch.no_grad():
            lp, _ = sequence_logprobs(
                learner.policy,
                [t.prompt_ids for t in trajs],
                [t.response_ids for t in trajs],
                pad_id=learner.pad_id,
                temperature=1.0,
                with_entropy=False,
            )
        fresh.append((lp, trainer_mod.loss_masks(trajs, device=lp.device)))
        return orig_update(self, learner, groups, step)

    def micro_loss(self, policy, b, rows, pad_id, adv, old_logp, *rest):
        seen.append(old_logp)  # filled in place: complete once the step's update is over
        return orig_loss(self, policy, b, rows, pad_id, adv, old_logp, *rest)

    monkeypatch.setattr(Trainer, "_update", update)
    monkeypatch.setattr(Trainer, "_micro_loss", micro_loss)
    res = toy_trainer(FavouriteWords(), recipe, toy_model_dir, tmp_path, 4).train()
    assert len(fresh) == 1 and seen and all(o is seen[0] for o in seen)
    lp, mask = fresh[0]
    m = mask[:, : lp.shape[1]].bool()
    assert int(m.sum()) > 0
    assert_close_rel(seen[0][:, : lp.shape[1]][m], lp[m], rel=1e-4, floor=1e-4)
    # the second update sees the first one's change: the ratio moved off 1
    assert res.steps[0].metrics["ratio_max"] > 1.0 or res.steps[0].metrics["ratio_min"] < 1.0


def test_the_first_mini_batch_takes_its_old_logprobs_from_its_loss_forward_exactly(
    toy_model_dir, tmp_path, monkeypatch
):
    """Skipping the separate old-log-prob pass over the first mini-batch changes nothing beyond float
    rounding (a forward with gradients and one without may round differently: on SmolLM2 the ratio
    range moved in the 6th digit): the same step with every old log-prob from the separate pass (as
    before) ends with the same weights and metrics, and the separate pass ran over half the rows."""
    recipe = toy_recipe(1)
    recipe = recipe.model_copy(update={"algo": recipe.algo.replace(mini_batch_size=2)})  # 2 updates
    rows_old: dict[str, list[int]] = {}
    orig_chunk, orig_load = Trainer._old_chunk, Trainer._load_policy
    start: dict[str, torch.Tensor] = {}

    def run(label: str, skip: bool):
        rows_old[label] = []

        def chunk(self, policy, b, c, pad_id):
            rows_old[label].extend(c)
            return orig_chunk(self, policy, b, c, pad_id)

        state: dict[str, torch.Tensor] = {}

        def save_final(self, policy, tok):
            state.update({n: p.detach().clone() for n, p in policy.named_parameters()})

        def load(self):
            out = orig_load(self)
            start.update({n: p.detach().clone() for n, p in out[0].named_parameters()})
            return out

        monkeypatch.setattr(Trainer, "_load_policy", load)

        monkeypatch.setattr(Trainer, "_old_chunk", chunk)
        monkeypatch.setattr(Trainer, "_save_final", save_final)
        if not skip:
            monkeypatch.setattr(Trainer, "_on_policy_rows", lambda self, minis: [])
        torch.manual_seed(0)
        res = toy_trainer(FavouriteWords(), recipe, toy_model_dir, tmp_path / label, 4).train()
        monkeypatch.undo()
        return res.steps[0].metrics, state

    m_skip, s_skip = run("skip", True)
    m_full, s_full = run("full", False)
    assert sorted(rows_old["full"]) == list(range(16))  # 4 questions x groups of 4
    assert sorted(rows_old["skip"]) == list(range(8, 16))  # the second mini-batch only
    for k in ("loss", "ratio_min", "ratio_max", "entropy", "grad_norm"):
        assert_close_rel(m_skip[k], m_full[k], rel=1e-5, floor=1e-3)
    assert m_skip["clip_frac"] == m_full["clip_frac"]
    assert set(s_skip) == set(s_full)
    moved = 0
    for k in s_full:
        assert_close_rel(s_skip[k], s_full[k], rel=1e-5, floor=1e-3)
        moved += int(not torch.equal(s_full[k], start[k]))
    assert moved > 0  # the step did update the weights being compared


# -- 4. dynamic sampling keeps the groups with a spread ------------------------------------------------


def _search_r1():
    from methods.search_r1.method import SearchR1

    return SearchR1()


@pytest.mark.parametrize("name", ["cpu-learn", "cpu-sft-rl", "cpu-sft-grpo"])
def test_each_recipes_group_filter_reads_a_metric_the_trainer_makes(name):
    m = _search_r1()
    recipe = m.recipes()[name]
    ds = recipe.algo.dynamic_sampling
    assert ds.enabled
    flt = ds.build_filter()
    # the metric names the trainer builds for this reward: total, outcome and the reward's components
    from harness.method import RewardContext
    from harness.types import Trajectory, Turn

    def traj(answer: str) -> Trajectory:
        return Trajectory(
            example_id="1",
            dataset="t",
            question="q",
            answers=["Paris"],
            turns=[Turn(index=0, kind="generate", text=f"<answer> {answer} </answer>")],
        )

    for stage in recipe.reward_stages:
        rewards = m.rewards(
            [traj("Paris"), traj("Lyon")],
            name=stage.reward,
            ctx=RewardContext(step=0, models={}, total_steps=1),
        )
        names = {"total", "outcome", *(k for r in rewards for k in r.components)}
        for f in ds.filters:
            assert f.metric in names, (name, f.metric, names)

        groups = [
            GroupRewards({n: torch.tensor(v, dtype=torch.float32) for n in names})
            for v in ([1.0, 0.0, 0.0, 0.0], [0.0] * 4, [1.0] * 4)
        ]
        assert flt(groups) == [True, False, False]


def test_dynamic_sampling_in_a_step_keeps_groups_when_rewards_spread(toy_model_dir, tmp_path):
    recipe = toy_recipe(2)
    ds = DynamicSamplingConfig(
        enabled=True,
        max_rounds=2,
        filters=(GroupFilterConfig(kind="zero_variance", metric="outcome", lower=None, upper=None),),
    )
    recipe = recipe.model_copy(update={"algo": recipe.algo.replace(dynamic_sampling=ds)})
    res = toy_trainer(FavouriteWords(), recipe, toy_model_dir, tmp_path, 8).train()
    for s in res.steps:
        assert s.metrics["ds_dropped_frac"] < 1.0
        assert s.metrics["policy_tokens"] > 0  # an update happened


# -- 5. the reward is the method's own extractor --------------------------------------------------------


@pytest.mark.parametrize("name", ["cpu-sft-rl", "cpu-sft-grpo"])
def test_the_recipes_reward_reads_the_last_answer_of_the_models_own_text(name):
    """Rolled out through the method's own engine (a scripted policy), each trajectory's reward
    EM equals the EM of the prediction evaluation extracts; the gold inside the observation or the
    prompt earns nothing."""
    from harness.method import RewardContext
    from harness.metrics.answer import exact_match
    from harness.protocol import CorpusRef, Protocol
    from harness.types import Hit

    m = _search_r1()
    recipe = m.recipes()[name]

    class GoldRetriever:
        def search(self, queries, k):
            return [
                [Hit(doc_id=f"d{r}", contents='"Paris"\nParis is the capital.', score=1.0) for r in range(k)]
                for _ in queries
            ]

    q = "What is the capital of France?"
    cases = {
        "right": ["<search> capital </search>", "<answer> Paris </answer>"],
        "right_without_search": ["<answer> Paris </answer>"],
        "gold Paris only in the prompt": ["<answer> Lyon </answer>"],
        "gold_only_in_observation": ["<search> capital </search>", "<answer> Lyon </answer>"],
        "no_answer": ["<search> capital </search>", "I do not know."],
    }
    proto = Protocol(name="t", corpus=CorpusRef(id="none", content_hash="0" * 64, n_passages=0)).with_(
        top_k=2, max_turns=2, max_obs_tokens=200
    )
    rctx = RewardContext(step=0, models={}, total_steps=1)
    for case, script in cases.items():
        be = ScriptedBackend({f"{q} {case}": list(script)}, default="I do not know.")
        ctx = RunContext(backend=be, protocol=proto, retriever=GoldRetriever(), training=False)
        ex = QAExample(id=case, dataset="t", split="t", question=f"{q} {case}", answers=("Paris",))
        ctx.sampling = SamplingParams()
        (t,) = m.solve([ex], ctx)
        (r,) = m.rewards([t], name=recipe.reward_at(0), ctx=rctx)
        em = exact_match(t.prediction, ex.answers) if t.prediction else 0.0
        got = r.components.get("em", r.components.get("outcome"))
        assert got == em, (case, t.prediction, r)
        assert got == (1.0 if case.startswith("right") else 0.0), (case, t.prediction, r)


# -- 6. the learning-rate schedule --------------------------------------------------------------------


@pytest.mark.parametrize("name", ["paper", "cpu-sft-rl", "cpu-sft-grpo"])
def test_the_lr_schedule_is_the_recipes(name):
    recipe = _search_r1().recipes()[name]
    a = recipe.algo
    total = recipe.steps * a.updates_per_step
    f = _lr_lambda(recipe, total)
    warm = a.lr_warmup_steps if a.lr_warmup_steps is not None else round(a.lr_warmup_ratio * total)
    assert a.lr_schedule == "constant"
    for n in range(total):
        want = (n + 1) / warm if n < warm else 1.0
        assert f(n) == pytest.approx(want, rel=1e-12)
    if name == "paper":  # Search-R1: lr_warmup_steps_ratio 0.285 of 500 steps x 8 updates
        assert warm == round(0.285 * 500 * 8)


def test_the_logged_lr_of_each_step_is_the_schedules(toy_model_dir, tmp_path):
    recipe = toy_recipe(3)
    recipe = recipe.model_copy(update={"algo": recipe.algo.replace(lr_warmup_steps=3, lr_warmup_ratio=None)})
    res = toy_trainer(FavouriteWords(), recipe, toy_model_dir, tmp_path, 12).train()
    lr = recipe.algo.lr
    # the scheduler steps after each update: step k logs the rate the next update will use
    assert [s.metrics["lr"] for s in res.steps] == pytest.approx([lr * 2 / 3, lr, lr], rel=1e-12)


# -- RL questions disjoint from the warm-up's ------------------------------------------------------


def test_rl_questions_are_disjoint_from_the_warm_ups_by_construction(tmp_path):
    """``harness sft`` and ``harness train`` of one recipe split the training questions once: the
    warm-up's ``sft.n_questions`` and RL's rest; the starting checkpoint's own record excludes its
    questions too. Before issue 43 RL's first 40 draws were exactly the warm-up's first 40."""
    import json
    import random

    from harness.rl.split import stage_questions
    from harness.rl.trainer import rl_examples, training_examples

    recipe = _search_r1().recipes()["cpu-sft-grpo"]
    train = training_examples(recipe)
    st = stage_questions(train, seed=recipe.seed, sft_n=recipe.sft.n_questions)
    sft_ids = {e.id for e in st.sft}
    assert len(sft_ids) == recipe.sft.n_questions == 160
    rl = rl_examples(recipe, train, "default")
    rl_ids = {e.id for e in rl}
    assert not sft_ids & rl_ids and len(sft_ids | rl_ids) == len(train)
    # the trainer's draw order (its own seeded shuffle of RL's list): no warm-up question anywhere
    order = list(range(len(rl)))
    random.Random(recipe.seed).shuffle(order)
    assert not {rl[i].id for i in order[:40]} & sft_ids
    # the old construction (both stages shuffling the whole list with one seed) would overlap fully
    old = list(train)
    random.Random(recipe.seed).shuffle(old)
    assert {e.id for e in old[:40]} <= sft_ids
    # a checkpoint that records its questions keeps them out even under another recipe
    ckpt = tmp_path / "sft-final"
    ckpt.mkdir()
    some = [e.id for e in rl[:5]]
    (ckpt / "harness_train.json").write_text(json.dumps({"stage": "sft", "questions": some}))
    assert not {e.id for e in rl_examples(recipe, train, str(ckpt))} & set(some)


def test_the_rl_record_names_every_question_each_step_drew(toy_model_dir, tmp_path):
    import json

    tr = toy_trainer(FavouriteWords(), toy_recipe(3), toy_model_dir, tmp_path, 12)
    tr.train()
    lines = [json.loads(x) for x in (tmp_path / "out" / "rl_questions.jsonl").read_text().splitlines()]
    assert [(x["step"], x["round"]) for x in lines] == [(0, 0), (1, 0), (2, 0)]
    drawn = [i for x in lines for i in x["ids"]]
    assert len(drawn) == 3 * toy_recipe(3).algo.train_batch_size
    final = json.loads((tmp_path / "out" / "final" / "harness_train.json").read_text())
    assert final["questions"] == list(dict.fromkeys(drawn))


# -- the larger held-out set ---------------------------------------------------------------------------


def test_the_400_question_held_out_set_extends_the_recorded_one_and_holds_out_nothing_trained_on():
    import importlib.util
    from pathlib import Path

    from harness.rl.split import check_split, load_split

    spec = importlib.util.spec_from_file_location(
        "build_learning_split", Path(__file__).parents[2] / "scripts" / "build_learning_split.py"
    )
    assert spec is not None and spec.loader is not None
    build = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(build)
    base, big = load_split("learning"), load_split("learning-400")
    check_split(big)  # the stored ids are what the rule makes from the packaged data today
    held, old_held = set(big.heldout["popqa"]), set(base.heldout["popqa"])
    assert len(held) == 400 and old_held <= held
    assert set(big.train["popqa"]) | held == set(base.train["popqa"]) | old_held
    assert not set(big.train["popqa"]) & held
    # the recorded warm-up's 160 questions (and so the recorded RL steps' 40) stay train
    sft = build.recorded_sft_questions()["popqa"]
    assert len(sft) == 160 and sft <= set(big.train["popqa"])
    with pytest.raises(Exception, match="no --sample draw"):
        big.eval_args()
