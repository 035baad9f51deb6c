"""verl export, for every trainable method of the registry: the exported reward gives the in-harness
reward on trajectories our engine produced (their response as our engine records it, and as verl
renders it, with ``<tool_response>`` turns), and the exported files parse and say what verl must run."""

from __future__ import annotations

import importlib.util
import json
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pyarrow.parquet as pq
import pytest
import yaml

from harness.errors import ConfigError
from harness.eval.protocol import preset
from harness.method import split_prefill
from harness.methods_registry import METHODS, get_method
from harness.protocol import Protocol
from harness.types import Evidence, QAExample, Trajectory
from harness.verl.job import write_verl_job
from harness.verl.reward import response_parts, trajectory_from_text, verl_compute_score
from methods.eval_rar.method import EvaluateAfterObservation
from tests.methods.helpers import PROTO, ScriptedEmbedder, ScriptedJudge, ScriptedReader, context, reward_ctx
from tests.methods.plugin_data import expected_file, plugin_data

TRAINABLE = sorted(n for n in METHODS.names() if METHODS.get(n).trained)
TOTAL_STEPS = 10  # TIRESRAG-R1's a_t needs the run's length; both sides get the same
N = 60  # scripted replies per prompt: enough for every reward call of a test

QUESTIONS = [
    ("capital of France", "Paris"),
    ("capital of Italy", "Rome"),
    ("tallest mountain", "Mount Everest"),
]
CONTEXT = [  # ARENA answers from each question's own paragraphs
    {"title": "Rome", "text": "Rome is Italy's capital city."},
    {"title": "Paris", "text": "Paris is France's capital city."},
    {"title": "Everest", "text": "Everest is the highest peak."},
]


def examples() -> list[QAExample]:
    out = []
    for i, (q, a) in enumerate(QUESTIONS):
        gold = CONTEXT[[1, 0, 2][i]]
        out.append(
            QAExample(
                id=str(i),
                dataset="toy",
                split="test",
                question=q,
                answers=(a,),
                supporting=(Evidence(title=gold["title"], text=gold["text"]),),
                meta={"context": CONTEXT},
            )
        )
    return out


@dataclass
class Case:
    """A scripted run of one method: the model's outputs per question, the reward, the auxiliary
    models, and the protocol of the run."""

    script: dict[str, list[str]]
    reward: str
    models: Callable[[], dict[str, Any]]
    protocol: Callable[[], Protocol] = lambda: PROTO


def _models(spec: dict[str, dict[str, Any]]) -> Callable[[], dict[str, Any]]:
    """The auxiliary models a case names, built fresh for each run: ``judge`` / ``reader`` answer
    each prompt holding a key with its reply (``N`` times), ``embedder`` looks vectors up."""
    kinds: dict[str, Callable[[dict[str, Any]], Any]] = {
        "judge": lambda d: ScriptedJudge({k: [v] * N for k, v in d.items()}),
        "reader": lambda d: ScriptedReader({k: [v] * N for k, v in d.items()}),
        "embedder": ScriptedEmbedder,
    }
    unknown = sorted(set(spec) - set(kinds))
    if unknown:
        raise ValueError(f"verl case models {unknown}: known {sorted(kinds)}")
    return lambda: {k: kinds[k](d) for k, d in spec.items()}


def _protocol(name: str | None) -> Callable[[], Protocol]:
    return (lambda: PROTO) if name is None else (lambda: preset(name))


def load_cases() -> dict[str, Case]:
    """Every plugin folder's ``verl_cases`` (its ``conformance.json``, tests/methods/plugin_data.py)."""
    out: dict[str, Case] = {}
    for pd in plugin_data():
        for name, c in pd.section("verl_cases").items():
            assert name in pd.methods, f"{pd.where}: verl case {name!r} is not a method of this plugin"
            out[name] = Case(
                c["script"], c["reward"], _models(c.get("models", {})), _protocol(c.get("protocol"))
            )
    return out


CASES: dict[str, Case] = load_cases()


def run_case(name: str) -> tuple[Any, list[QAExample], list[Trajectory], dict[str, Any]]:
    case = CASES[name]
    method = get_method(name)
    ctx, _backend, _retriever = context(case.script, protocol=case.protocol())
    exs = examples()
    return method, exs, method.solve(exs, ctx), case.models()


def extra_info(e: QAExample) -> dict[str, Any]:
    """The row's ``extra_info`` as the export writes it (the fields the reward reads)."""
    return {"id": e.id, "question": e.question, "example": json.dumps(e.to_dict())}


def verl_rendered(method: Any, t: Trajectory) -> str:
    """The response as verl's tool loop renders it under a ChatML template and decodes it without
    special tokens: each observation becomes a tool turn holding the SearchTool's JSON result."""
    if not method.uses_retrieval:
        return t.response
    d = method.rollout_config(PROTO).dialect
    out, pos = [], 0
    for turn in t.turns:
        if turn.kind != "retrieve":
            continue
        block = d.obs_prefix + turn.text + d.obs_suffix
        at = t.response.index(block, pos)
        tool = json.dumps({"result": turn.text})
        out += [t.response[pos:at], f"user\n<tool_response>\n{tool}\n</tool_response>\nassistant\n"]
        pos = at + len(block)
    return "".join(out) + t.response[pos:]


def test_every_trainable_method_has_a_case():
    missing = sorted(set(TRAINABLE) - set(CASES))
    assert not missing, (
        f"no verl export case for {missing}: add one to {expected_file('verl_cases', missing)}"
    )
    assert set(CASES) == set(TRAINABLE)


REWARDS = [(n, r) for n in TRAINABLE for r in get_method(n).reward_names()]


@pytest.mark.parametrize(("name", "reward"), REWARDS)
def test_exported_reward_equals_in_harness_reward(name, reward):
    method, exs, trajs, models = run_case(name)
    ours = method.rewards(trajs, name=reward, ctx=reward_ctx(0, TOTAL_STEPS, **models))
    assert any(r.total != 0 for r in ours)  # the scripts exercise a rewarded branch
    n_rendered = 0
    for e, t, r in zip(exs, trajs, ours, strict=True):
        for response in (t.response, verl_rendered(method, t)):
            n_rendered += response != t.response
            out = verl_compute_score(
                name,
                reward,
                e.dataset,
                response,
                {"target": list(e.answers)},
                extra_info(e),
                models,
                total_steps=TOTAL_STEPS,
            )
            assert out["score"] == pytest.approx(r.total), (name, response)
            assert out == pytest.approx({"score": r.total, **r.components}), (name, response)
    # every trajectory that searched was also scored as verl renders it
    assert n_rendered == sum(t.n_retrievals > 0 for t in trajs) >= int(method.uses_retrieval)


@pytest.mark.parametrize("name", [n for n in TRAINABLE if get_method(n).uses_retrieval])
def test_rebuilt_trajectory_is_what_the_engine_recorded(name):
    method, exs, trajs, _models = run_case(name)
    for e, t in zip(exs, trajs, strict=True):
        got = trajectory_from_text(name, verl_rendered(method, t), e)
        assert got.response == t.response
        assert got.prediction == t.prediction
        # back-to-back generations with nothing between them (Eval-RAR mode B's evaluate step) read
        # as one segment of model text; a correction message between generations separates them
        back_to_back = isinstance(
            getattr(method.rollout_config(PROTO), "policy", None), EvaluateAfterObservation
        )
        recorded: list[tuple[str, str]] = []
        for x in t.turns:
            if back_to_back and x.kind == "generate" and recorded and recorded[-1][0] == "generate":
                recorded[-1] = ("generate", recorded[-1][1] + x.text)
            elif x.kind in ("generate", "retrieve"):
                recorded.append((x.kind, x.text))
        assert [(x.kind, x.text) for x in got.turns] == recorded
        assert [x.query for x in got.turns if x.kind == "retrieve"] == [
            x.query for x in t.turns if x.kind == "retrieve"
        ]


@pytest.mark.parametrize("name", TRAINABLE)
def test_rollout_config_is_the_contract_the_export_reads(name):
    from harness.eval.protocol import mini
    from harness.rollout.base import RolloutConfig
    from harness.verl.contract import rollout_of

    method = get_method(name)
    config = rollout_of(method, mini())
    if method.uses_retrieval:
        assert isinstance(config, RolloutConfig) and config is not None
        assert config.correction_message in ("", config.dialect.invalid_message)
    else:
        assert config is None


def test_rollout_config_must_agree_with_uses_retrieval():
    from harness.eval.protocol import mini
    from harness.verl.contract import rollout_of

    arena, search = get_method("arena"), get_method("search_r1")
    retrieving_arena = type("RetrievingArena", (type(arena),), {"uses_retrieval": True})()
    with pytest.raises(ConfigError, match="retrieves but its rollout_config"):
        rollout_of(retrieving_arena, mini())
    silent = type("Silent", (type(search),), {"uses_retrieval": False})()
    with pytest.raises(ConfigError, match="does not retrieve"):
        rollout_of(silent, mini())


@pytest.mark.parametrize("name", TRAINABLE)
def test_advantage_hook_is_declared_by_the_methods_that_have_one(name):
    import torch

    from harness.verl.job import limitations

    method = get_method(name)
    recipe = method.recipes()["cpu-smoke"]
    noted = [x for x in limitations(method, recipe) if "advantage_adjust" in x]
    assert len(noted) == (method.advantage_hook is not None)
    if method.advantage_hook is None:  # the default hook: plain advantages for every reward
        for reward in method.reward_names():
            assert method.advantage_adjust([], torch.zeros(0, dtype=torch.long), name=reward) is None
    assert (method.advantage_hook is not None) == (name == "tiresrag_r1")


def test_one_completion_methods_replay_their_own_solve():
    # ARENA's reward reads the gold reference numbers its rollout records from the question
    method, exs, trajs, _ = run_case("arena")
    got = trajectory_from_text("arena", trajs[0].response, exs[0])
    assert got.meta["arena_gold_ids"] == trajs[0].meta["arena_gold_ids"] == [2]
    assert (got.prediction, got.extraction_status) == ("Paris", "ok")


def test_tool_turns_become_the_methods_observations():
    from methods.when_to_search.method import W2S_DIALECT, format_reward

    text = (
        "<think>?</think><search>q</search>user\n<tool_response>\n"
        + json.dumps({"result": "Doc 1 (Title: A) b"})
        + "\n</tool_response>\nassistant\n<reflect>ok</reflect><answer>b</answer>"
    )
    parts = response_parts(text, W2S_DIALECT)
    assert parts == [
        ("<think>?</think><search>q</search>", True, None),
        ("\n\n<information>Doc 1 (Title: A) b</information>\n\n", False, "Doc 1 (Title: A) b"),
        ("<reflect>ok</reflect><answer>b</answer>", True, None),
    ]
    rebuilt = "".join(p for p, _, _ in parts)
    assert format_reward(rebuilt) == 1.0  # T S I R A
    assert format_reward(text) == -1.0  # verl's rendering breaks the grammar as such


def test_verl_tool_response_blocks_are_not_model_text():
    # an answer inside a verl tool response must not be read as the model's answer
    text = "<search>x</search><tool_response><answer>Paris</answer></tool_response>"
    out = verl_compute_score("search_r1", "em", "nq", text, {"target": ["Paris"]}, {})
    assert out["score"] == 0.0


def _load_reward(path: Path) -> Any:
    spec = importlib.util.spec_from_file_location(f"exported_reward_{path.parent.name}", path)
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


@pytest.mark.parametrize("name", TRAINABLE)
def test_export_files_parse(name, tmp_path: Path, smollm2_dir: Path, monkeypatch):
    method = get_method(name)
    recipe = method.recipes()["cpu-smoke"]
    out = tmp_path / name
    files = write_verl_job(
        method,
        recipe,
        out,
        examples()[:2],
        examples()[2:],
        retriever_url="http://10.0.0.5:8000/retrieve",
        n_gpus=4,
        model_path=str(smollm2_dir),
    )
    assert all(f.is_file() for f in files)
    train = pq.read_table(out / "data" / "train.parquet").to_pylist()
    test = pq.read_table(out / "data" / "test.parquet").to_pylist()
    assert (len(train), len(test)) == (2, 1)
    row = train[0]
    messages, prefill = split_prefill(method.prompt_messages(examples()[0], training=True))
    assert row["prompt"] == messages and all(m["role"] != "assistant" for m in row["prompt"])
    assert row["reward_model"]["ground_truth"]["target"] == ["Paris"] and row["ability"] == "fact-reasoning"
    assert json.loads(row["extra_info"]["example"]) == examples()[0].to_dict()
    retrieves = method.uses_retrieval
    assert row["agent_name"] == ("harness_tag_agent" if retrieves else "single_turn_agent")
    script = (out / "run.sh").read_text()
    assert "ENTRY=verl.trainer.main_ppo" in script
    assert "reward.custom_reward_function.name=compute_score" in script  # verl >= 0.9's key
    assert f"actor_rollout_ref.rollout.n={recipe.algo.group_size}" in script
    assert ("actor_rollout_ref.rollout.multi_turn.enable=true" in script) == retrieves
    assert (out / "agent_loop.yaml").is_file() == retrieves
    if retrieves:  # the method's own dialect, through harness.verl.agent_loop (test_verl_agent_loop.py)
        (loop,) = yaml.safe_load((out / "agent_loop.yaml").read_text())
        assert loop["name"] == row["agent_name"] and loop["job"] == "job.json"  # beside the yaml
        assert json.loads((out / "job.json").read_text())["retriever_url"] == "http://10.0.0.5:8000/retrieve"
    assert (out / "verl_job.yaml").is_file() == bool(prefill)
    job = json.loads((out / "job.json").read_text())
    # verl's data.max_prompt_length (default 512) covers the longest exported prompt, measured with
    # the model's own tokenizer (a local dir here); a longer prompt is an error, never cut
    from transformers import AutoTokenizer

    tok = AutoTokenizer.from_pretrained(str(smollm2_dir))
    longest = max(
        len(
            tok(
                tok.apply_chat_template(r["prompt"], tokenize=False, add_generation_prompt=True) + prefill,
                add_special_tokens=False,
            )["input_ids"]
        )
        for r in train + test
    )
    budget = job["prompt_budget"]
    assert budget["exact"] and budget["longest_measured"] == longest
    assert budget["max_prompt_length"] >= longest and budget["max_prompt_length"] % 64 == 0
    assert (
        f"data.max_prompt_length={budget['max_prompt_length']}" in script
        and "data.truncation=error" in script
    )
    assert (
        job["method"] == name and job["recipe"]["aux_models"] == recipe.model_dump(mode="json")["aux_models"]
    )
    stages = [(s["reward"], s["until_step"]) for s in job["reward_stages"]]
    rewards = [
        line.split("reward_kwargs.reward=")[1].rstrip(" \\'")
        for line in script.splitlines()
        if "reward_kwargs.reward=" in line
    ]
    assert rewards == [r for r, _ in stages]
    assert script.count('python3 -m "$ENTRY"') == len(stages)
    from harness.verl import reward as reward_module

    models = CASES[name].models()  # the recipe's aux models are servers / the packaged model
    key = (name, str((out / "job.json").resolve()))
    monkeypatch.setitem(reward_module._REWARD_MODELS, key, models)
    mod = _load_reward(out / "reward.py")
    answer = row["reward_model"]["ground_truth"]["target"][0]
    got = mod.compute_score(
        row["data_source"],
        f"<answer>{answer}</answer>",
        row["reward_model"]["ground_truth"],
        row["extra_info"],
    )
    want = verl_compute_score(
        name,
        stages[0][0],
        row["data_source"],
        f"<answer>{answer}</answer>",
        row["reward_model"]["ground_truth"],
        row["extra_info"],
        models,
        total_steps=recipe.steps,
    )
    assert got == want


def test_multi_stage_recipe_runs_one_verl_invocation_per_stage(tmp_path: Path):
    method = get_method("when_to_search")
    recipe = method.recipes()["paper"]
    write_verl_job(
        method,
        recipe,
        tmp_path,
        examples(),
        examples(),
        retriever_url="http://x/retrieve",
        n_gpus=4,
        model_path="m",
    )
    script = (tmp_path / "run.sh").read_text()
    assert "trainer.total_training_steps=180" in script and "trainer.total_training_steps=500" in script
    assert script.index("reward_kwargs.reward=stage1") < script.index("reward_kwargs.reward=stage2")
    # stage 1 resumes a run of this folder if there is one; stage 2 resumes stage 1's last save,
    # which verl writes only with save_freq > 0 (the recipe saves every 30 steps)
    assert script.count("trainer.resume_mode=auto") == 1
    assert script.count("trainer.resume_mode=resume_path") == 1
    assert script.count('"trainer.resume_from_path=${CKPT_DIR}/global_step_180"') == 1
    assert script.index("global_step_180") > script.index("reward_kwargs.reward=stage2")
    assert script.count("trainer.save_freq=30") == 2
    assert script.count('"trainer.default_local_dir=${CKPT_DIR}"') == 2
    job = json.loads((tmp_path / "job.json").read_text())
    assert job["reward_stages"] == [
        {"reward": "stage1", "until_step": 180},
        {"reward": "stage2", "until_step": 500},
    ]
    assert any("dynamic_sampling" in x for x in job["limitations"])


def test_prefill_goes_into_the_chat_template(tmp_path: Path, smollm2_dir: Path):
    from transformers import AutoTokenizer

    from methods.tiresrag_r1.method import THINK_PREFILL, make_prompt

    method = get_method("tiresrag_r1")
    write_verl_job(
        method,
        method.recipes()["paper"],
        tmp_path,
        examples(),
        examples(),
        retriever_url="http://x/retrieve",
        n_gpus=4,
        model_path=str(smollm2_dir),
    )
    cfg = yaml.safe_load((tmp_path / "verl_job.yaml").read_text())
    assert cfg["defaults"] == ["ppo_trainer", "_self_"]
    tok = AutoTokenizer.from_pretrained(smollm2_dir)
    engine_prompt = tok.apply_chat_template(
        make_prompt("capital of France"), tokenize=False, add_generation_prompt=True
    )
    tok.chat_template = cfg["actor_rollout_ref"]["model"]["custom_chat_template"]
    row = pq.read_table(tmp_path / "data" / "train.parquet").to_pylist()[0]
    verl_prompt = tok.apply_chat_template(row["prompt"], tokenize=False, add_generation_prompt=True)
    assert verl_prompt == engine_prompt + THINK_PREFILL  # what TiresRAG.solve feeds the model
    tool_turn = tok.apply_chat_template(
        [{"role": "tool", "content": "docs"}], tokenize=False, add_generation_prompt=True
    )
    assert not tool_turn.endswith(THINK_PREFILL)  # the model continues its own turn after a tool turn
    script = (tmp_path / "run.sh").read_text()
    assert '--config-path="${HERE}" --config-name=verl_job' in script  # run.sh's own folder


def test_prefill_needs_the_models_chat_template(tmp_path: Path):
    method = get_method("tiresrag_r1")
    with pytest.raises(ConfigError, match="--chat-template"):
        write_verl_job(
            method,
            method.recipes()["paper"],
            tmp_path,
            examples(),
            examples(),
            retriever_url="http://x/retrieve",
            n_gpus=4,
            model_path="Qwen/Qwen2.5-3B-Instruct",
        )


def test_cli_export_files_parse(tmp_path: Path):
    from harness.cli import main

    out = tmp_path / "job"
    args = [
        "export-verl",
        "--method",
        "search_r1",
        "--recipe",
        "cpu-smoke",
        "--out",
        str(out),
        "--test-limit",
        "2",
    ]
    assert main(args) == 0
    test = pq.read_table(out / "data" / "test.parquet").to_pylist()
    assert len(test) == 6
    budget = json.loads((out / "job.json").read_text())["prompt_budget"]  # a hub id: estimated, with margin
    assert not budget["exact"] and budget["max_prompt_length"] >= 1.25 * budget["longest_measured"]
    row = test[0]
    assert row["prompt"][0]["role"] == "user" and "<search> query </search>" in row["prompt"][0]["content"]
    mod = _load_reward(out / "reward.py")
    got = mod.compute_score(
        row["data_source"],
        f"<answer>{row['reward_model']['ground_truth']['target'][0]}</answer>",
        row["reward_model"]["ground_truth"],
        row["extra_info"],
    )
    assert got["score"] == 1.0
