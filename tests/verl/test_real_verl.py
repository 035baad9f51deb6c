"""The exported verl job against the **real** verl package (``tox -e verl``; skipped where verl is
not installed): verl's own config composition and ``validate_config`` (``run.sh --dry-run``), verl's
own reward loading and reward manager, and verl's own ``AgentLoopWorker.generate_sequences`` on the
exported ``train.parquet``. Only the LLM server client is ours (:class:`ModelClient`: the packaged
SmolLM2 on our transformers backend, greedy, real tokens); the loop's output is checked token by
token against our engine's rollout of the same questions (the method's own ``solve`` in training
mode on the same backend and retriever).
"""

from __future__ import annotations

import asyncio
import os
import subprocess
import sys
import threading
from pathlib import Path
from typing import Any

import pytest

from tests.support.verl import import_verl_or_skip  # noqa: E402

import_verl_or_skip()

from harness.cli import main  # noqa: E402
from harness.verl.versions import SUPPORTED, installed_verl  # noqa: E402

pytestmark = pytest.mark.verl

ROOT = Path(__file__).resolve().parents[2]
ACCEPTANCE = ["export-verl", "--method", "search_r1", "--recipe", "cpu-smoke"]


def stage_overrides(run_sh: Path, *options: str) -> list[list[str]]:
    """The arguments of each ``python3 -m "$ENTRY"`` invocation of an exported run.sh, as bash
    expands them (its folder, ``--data-dir``, ``--ckpt-dir``, ``--model``): run.sh runs with
    ``python3`` a shell function that prints its arguments."""
    probe = 'python3() { shift 2; printf "%s\\0" "$@"; printf "\\n\\0"; }; export -f python3; bash "$@"'
    run = subprocess.run(
        ["bash", "-c", probe, "probe", str(run_sh), *options], capture_output=True, text=True, timeout=60
    )
    assert run.returncode == 0, run.stderr
    stages = [[a for a in chunk.split("\0") if a] for chunk in run.stdout.split("\n\0") if chunk.strip("\0")]
    assert stages, f"{run_sh}: no launch found"
    return stages


def compose(overrides: list[str], config_dir: Path | None = None) -> Any:
    """verl's config with these overrides, composed by Hydra as ``main_ppo`` does: its
    ``ppo_trainer``, or the job's ``verl_job.yaml`` (``--config-path`` / ``--config-name`` in run.sh,
    which extends ``ppo_trainer``)."""
    from hydra import compose as hydra_compose
    from hydra import initialize_config_dir, initialize_config_module

    overrides = [o for o in overrides if not o.startswith("--config")]
    if config_dir is not None:
        with initialize_config_dir(str(config_dir), version_base=None):
            return hydra_compose("verl_job", overrides=overrides)
    with initialize_config_module("verl.trainer.config", version_base=None):
        return hydra_compose("ppo_trainer", overrides=overrides)


def run_dry(job: Path, *extra: str) -> subprocess.CompletedProcess:
    env = {
        **os.environ,
        "PATH": f"{Path(sys.executable).parent}{os.pathsep}{os.environ.get('PATH', '')}",
        "PYTHONPATH": os.pathsep.join([str(ROOT), *filter(None, [os.environ.get("PYTHONPATH")])]),
    }
    return subprocess.run(
        ["bash", str(job / "run.sh"), "--dry-run", *extra],
        capture_output=True,
        text=True,
        timeout=300,
        cwd=job,
        env=env,
    )


def test_the_installed_verl_is_a_supported_version():
    assert installed_verl() in SUPPORTED


@pytest.fixture(scope="module")
def acceptance_job(tmp_path_factory) -> Path:
    """The acceptance command as a user types it (default --model: verl loads nothing in a dry run)."""
    out = tmp_path_factory.mktemp("accept") / "J"
    assert main([*ACCEPTANCE, "--out", str(out)]) == 0
    return out


@pytest.mark.integration
def test_run_sh_dry_run_passes_verls_own_validation(acceptance_job: Path):
    run = run_dry(acceptance_job)
    assert run.returncode == 0, run.stdout[-3000:] + run.stderr[-3000:]
    out = run.stdout
    assert "[validate_config] All configuration checks passed successfully!" in out  # verl's own line
    assert f"dry run: verl {installed_verl()} composed the config and validate_config passed" in out
    assert f"dry run: reward: {acceptance_job / 'reward.py'}:compute_score (kwargs {{'reward': 'em'}})" in out
    assert "dry run: agent loop: harness_tag_agent -> harness.verl.agent_loop.HarnessTagAgentLoop" in out
    # the dry run is verl's validation, not ours: without the micro-batch sizes verl refuses the job
    bad = run_dry(acceptance_job, "actor_rollout_ref.actor.ppo_micro_batch_size_per_gpu=null")
    assert bad.returncode != 0
    assert "Please set at least one of 'actor.ppo_micro_batch_size'" in bad.stdout + bad.stderr


def test_every_trainable_recipe_composes_and_passes_validate_config(tmp_path: Path, smollm2_dir: Path):
    from verl.trainer.ppo.utils import need_critic, need_reference_policy
    from verl.utils.config import validate_config

    from harness.errors import ConfigError
    from harness.methods_registry import METHODS, get_method
    from harness.verl.job import write_verl_job
    from tests.verl.test_export_verl import examples

    checked, refused = [], []
    for name in sorted(n for n in METHODS.names() if METHODS.get(n).trained):
        method = get_method(name)
        for recipe_name, recipe in method.recipes().items():
            out = tmp_path / name / recipe_name

            def export(n_gpus: int, method=method, recipe=recipe, out=out) -> None:
                write_verl_job(
                    *(method, recipe, out, examples(), examples()),
                    retriever_url="http://127.0.0.1:8000/retrieve",
                    n_gpus=n_gpus,
                    model_path=str(smollm2_dir),
                )

            try:
                export(8)
            except ConfigError as e:  # a batch that 8 GPUs cannot split: the GPU count it names
                assert "verl's validate_config" in str(e)
                export(int(str(e).rsplit("--n-gpus ", 1)[1]))
                refused.append((name, recipe_name))
            for stage in stage_overrides(out / "run.sh"):
                cfg = compose(stage, config_dir=out if (out / "verl_job.yaml").is_file() else None)
                validate_config(cfg, need_reference_policy(cfg), need_critic(cfg))
            checked.append((name, recipe_name))
    assert len(checked) >= 10, checked
    assert ("tiresrag_r1", "paper") in refused  # 108 x 5 = 540 trajectories: not over 8 GPUs


# -- the reward, through verl's own loader and reward manager ------------------------------------------
FORMS = {
    "string": "Paris",
    "list": ["Paris"],
    "aliases": ["City of Light", "Paris"],
    "target": {"target": ["Paris"]},
    "target-string": {"target": "Paris"},
}


@pytest.fixture(scope="module")
def job(tmp_path_factory, smollm2_dir: Path) -> Path:
    """The acceptance export with the packaged model as --model (the agent loop loads its tokenizer)."""
    out = tmp_path_factory.mktemp("job") / "J"
    assert main([*ACCEPTANCE, "--model", str(smollm2_dir), "--out", str(out)]) == 0
    return out


@pytest.fixture(scope="module")
def config(job: Path) -> Any:
    (stage,) = stage_overrides(job / "run.sh")
    return compose([*stage, "actor_rollout_ref.rollout.n=2"])


@pytest.mark.parametrize("form", list(FORMS))
def test_verls_loader_finds_the_reward_for_every_ground_truth_form(config, form):
    import numpy as np
    from verl.trainer.ppo.reward import get_custom_reward_fn

    fn = get_custom_reward_fn(config)
    assert fn is not None  # verl 0.9 reads reward.custom_reward_function.*
    gt = FORMS[form]
    if form == "target":  # as read back from parquet
        gt = {"target": np.array(gt["target"], dtype=object)}
    for extra_info in (None, {}, {"split": "train", "index": 0}):

        def score(answer: str, extra_info=extra_info) -> float:
            solution = f"<think>hm</think>\n<answer>{answer}</answer>"
            return fn(data_source="nq", solution_str=solution, ground_truth=gt, extra_info=extra_info)[
                "score"
            ]

        assert (score("Paris"), score("P"), score("Berlin")) == (1.0, 0.0, 0.0)


def reward_batch(tok: Any, row: dict[str, Any], response: str) -> Any:
    """One row with a response, as verl's reward manager receives it (a DataProto item)."""
    import numpy as np
    import torch
    from verl.protocol import DataProto

    ids = tok(response, add_special_tokens=False)["input_ids"]
    prompt = [tok.eos_token_id] * 3
    return DataProto.from_dict(
        tensors={
            "prompts": torch.tensor([prompt]),
            "responses": torch.tensor([ids]),
            "attention_mask": torch.ones(1, len(prompt) + len(ids), dtype=torch.long),
        },
        non_tensors={
            k: np.array([row[k]], dtype=object) for k in ("data_source", "reward_model", "extra_info")
        },
    )


def test_verls_reward_manager_scores_the_exported_rows_as_the_harness(job: Path, config):
    import pyarrow.parquet as pq
    from transformers import AutoTokenizer
    from verl.trainer.ppo.reward import load_reward_manager

    from harness.methods_registry import get_method
    from harness.verl.reward import trajectory_from_text
    from harness.verl.rows import row_example
    from tests.methods.helpers import reward_ctx

    tok = AutoTokenizer.from_pretrained(config.actor_rollout_ref.model.path)
    method = get_method("search_r1")
    rows = [
        *pq.read_table(job / "data" / "train.parquet").to_pylist(),
        *pq.read_table(job / "data" / "test.parquet").to_pylist(),
    ]

    async def score_all():
        manager = load_reward_manager(config, tok)  # it keeps the running event loop
        out = []
        for row in rows:
            gold = row_example(row).answers[0]
            for text in (f"<think>x</think>\n<answer>{gold}</answer>", "<answer>not it</answer>"):
                r = await manager.run_single(reward_batch(tok, row, text))
                out.append((row, text, r["reward_score"]))
        return out

    scored = asyncio.run(score_all())
    assert len(scored) == 2 * len(rows) >= 2 * 24
    for row, text, got in scored:
        ex = row_example(row)
        want = method.reward(
            trajectory_from_text("search_r1", text, ex), name="em", ctx=reward_ctx(0, 3)
        ).total
        assert got == want
    assert [s for _, _, s in scored[::2]] == [1.0] * len(rows)
    assert [s for _, _, s in scored[1::2]] == [0.0] * len(rows)


# -- verl's AgentLoopWorker over the exported rows -----------------------------------------------------
class ModelClient:
    """Our LLM server client for verl's ``AgentLoopWorker``: ``generate(request_id, *, prompt_ids,
    sampling_params)`` -> verl's ``TokenOutput``, from the packaged model on our transformers backend
    (greedy: the worker runs in validation mode, temperature 0). Returns the generated ids up to
    and including the stop string, as vLLM / SGLang do. Counts the requests in flight."""

    def __init__(self, backend: Any):
        self.backend = backend
        self.lock = threading.Lock()  # one generation at a time on the model
        self.in_flight = 0
        self.max_in_flight = 0
        self.requests: list[tuple[str, dict[str, Any]]] = []
        self._cache: dict[tuple, list[int]] = {}  # greedy: the same context gives the same ids

    async def generate(
        self, request_id: str, *, prompt_ids: list[int], sampling_params: dict[str, Any], **kw
    ):
        from verl.workers.rollout.replica import TokenOutput

        from harness.types import SamplingParams

        assert sampling_params["temperature"] == 0, sampling_params
        self.requests.append((request_id, dict(sampling_params)))
        self.in_flight += 1
        self.max_in_flight = max(self.max_in_flight, self.in_flight)
        key = (tuple(prompt_ids), tuple(sampling_params["stop"]), sampling_params["max_new_tokens"])

        def run() -> list[int]:
            with self.lock:
                if key not in self._cache:
                    (c,) = self.backend.generate_ids(
                        [list(prompt_ids)],
                        stop=list(sampling_params["stop"]),
                        max_new_tokens=sampling_params["max_new_tokens"],
                        sampling=SamplingParams(),
                        include_stop=True,
                    )
                    self._cache[key] = list(c.token_ids)
                return self._cache[key]

        try:
            await asyncio.sleep(0)  # let the other samples in
            return TokenOutput(token_ids=await asyncio.to_thread(run))
        finally:
            self.in_flight -= 1


@pytest.fixture(scope="module")
def backend(smollm2_dir: Path) -> Any:
    from harness.llm.base import BackendSpec
    from harness.llm.transformers_backend import TransformersBackend

    return TransformersBackend(BackendSpec(kind="transformers", model=str(smollm2_dir), max_batch_size=1))


@pytest.fixture(scope="module")
def retriever() -> Any:
    from harness.retrieval.factory import default_retriever

    return default_retriever()


def test_verls_agent_loop_worker_runs_the_exported_loop_as_our_engine(
    job: Path, config, backend, retriever, monkeypatch
):
    import json

    import torch
    from verl.experimental.agent_loop.agent_loop import AgentLoopWorker
    from verl.protocol import DataProto
    from verl.trainer.ppo.reward import load_reward_manager
    from verl.utils.dataset.rl_dataset import RLHFDataset, collate_fn

    from harness.eval.protocol import mini
    from harness.methods_registry import get_method
    from harness.rl.recipe import Recipe
    from harness.rl.trainer import rollout_protocol
    from harness.rollout.base import RunContext
    from harness.verl import agent_loop as loop_module
    from harness.verl.rows import row_example

    raw = json.loads((job / "job.json").read_text())
    # the loop's retrieval client for job.json's URL is the packaged BM25 retriever, in process
    monkeypatch.setitem(loop_module._CLIENTS, raw["retriever_url"], retriever)
    client = ModelClient(backend)
    worker = AgentLoopWorker(config, llm_client=client)  # verl's own worker (tokenizer, agent-loop yaml)
    dataset = RLHFDataset(
        data_files=[str(job / "data" / "train.parquet")], tokenizer=worker.tokenizer, config=config.data
    )
    rows = [dataset[i] for i in range(8)]
    batch = DataProto.from_single_dict(collate_fn(rows)).repeat(
        config.actor_rollout_ref.rollout.n, interleave=True
    )
    batch.meta_info["validate"] = True  # verl's greedy val_kwargs
    out = asyncio.run(worker.generate_sequences(batch))
    assert len(out) == 16 and client.max_in_flight >= 2  # 8 rows x 2 samples, run concurrently
    assert len({rid for rid, _ in client.requests}) == 16  # one sticky request id per trajectory

    # our engine: the method's own solve in training mode, same model, retriever and budgets
    recipe = Recipe.model_validate(raw["recipe"])
    examples = [row_example(r) for r in rows]
    ctx = RunContext(
        backend=backend, protocol=rollout_protocol(mini(), recipe), retriever=retriever, training=True
    )
    trajs = get_method("search_r1").solve(examples, ctx)

    P = out.batch["prompts"].shape[1]
    n_obs = n_model = 0
    for i in range(16):
        t = trajs[i // 2]
        attn = out.batch["attention_mask"][i]
        prompt = out.batch["prompts"][i][attn[:P].bool()].tolist()
        valid = attn[P:].bool()
        response = out.batch["responses"][i][valid].tolist()
        mask = out.batch["response_mask"][i][valid].tolist()
        assert prompt == t.prompt_ids
        assert response == t.response_ids
        assert mask == t.loss_mask  # token by token
        assert bool(out.non_tensor_batch["harness_truncated"][i]) is False
        assert out.non_tensor_batch["__num_turns__"][i] == 1 + len(t.turns)
        assert torch.equal(
            out.batch["response_mask"][i][~valid], torch.zeros_like(out.batch["response_mask"][i][~valid])
        )
        n_model += sum(mask)
        n_obs += len(mask) - sum(mask)
    assert n_model > 0 and n_obs > 0  # model tokens at 1, observations / corrections at 0

    # the rewards of these rollouts through verl's own reward manager equal the in-harness rewards
    async def scores():
        manager = load_reward_manager(config, worker.tokenizer)  # it keeps the running event loop
        return [(await manager.run_single(out[i : i + 1]))["reward_score"] for i in range(16)]

    from tests.methods.helpers import reward_ctx

    want = get_method("search_r1").rewards(trajs, name="em", ctx=reward_ctx(0, recipe.steps))
    assert asyncio.run(scores()) == [w.total for w in want for _ in range(2)]


class ScriptInOrder:
    """A scripted "model" that searches: for a context holding a script key (a question), the first
    planned output that does not yet appear, in order, in the context (so two samples of one row
    give the same trajectory), as token ids followed by EOS."""

    def __init__(self, tok: Any, script: dict[str, list[str]]):
        self.tok, self.script = tok, script

    def stream(self, ids: list[int]) -> list[int]:
        from harness.llm.base import hf_encode

        text = self.tok.decode(ids)
        key = max((k for k in self.script if k in text), key=len)
        pos = text.index(key)
        for out in self.script[key]:
            found = text.find(out, pos)
            if found < 0:
                return hf_encode(self.tok, out) + [self.tok.eos_token_id]
            pos = found + len(out)
        raise AssertionError(f"script of {key!r} exhausted")


def test_verls_agent_loop_worker_puts_observations_at_mask_0_as_our_engine(tmp_path: Path, smollm2_dir: Path):
    """The same worker on scripted outputs that search (the packaged model does not, greedily, on
    the first rows): the observation blocks and the correction message are 0 in verl's response
    mask, token by token as in our engine's trajectory."""
    from transformers import AutoTokenizer
    from verl.experimental.agent_loop.agent_loop import AgentLoopWorker
    from verl.protocol import DataProto
    from verl.utils.dataset.rl_dataset import RLHFDataset, collate_fn
    from verl.workers.rollout.replica import TokenOutput

    from harness.eval.protocol import mini
    from harness.methods_registry import get_method
    from harness.rl.trainer import rollout_protocol
    from harness.rollout.base import RunContext
    from harness.verl import agent_loop as loop_module
    from harness.verl.job import write_verl_job
    from tests.support.scripted import RecordingRetriever
    from tests.verl.test_export_verl import CASES, examples
    from tests.verl.test_verl_agent_loop import EngineBackend, FakeServerManager

    tok = AutoTokenizer.from_pretrained(smollm2_dir)
    method = get_method("search_r1")
    recipe = method.recipes()["cpu-smoke"]
    out = tmp_path / "J"
    url = "http://127.0.0.1:9/retrieve"
    write_verl_job(
        *(method, recipe, out, examples(), examples()[:1]),
        retriever_url=url,
        n_gpus=4,
        model_path=str(smollm2_dir),
    )
    (stage,) = stage_overrides(out / "run.sh")
    config = compose([*stage, "actor_rollout_ref.rollout.n=2"])
    script = CASES["search_r1"].script
    server = FakeServerManager(tok, ScriptInOrder(tok, script))

    class ScriptedClient:  # verl's LLMServerClient.generate over the scripted server
        async def generate(self, request_id, *, prompt_ids, sampling_params, **kw):
            return TokenOutput(token_ids=await server.generate(list(prompt_ids), sampling_params))

    verl_retriever = RecordingRetriever()
    loop_module._CLIENTS[url] = verl_retriever
    try:
        worker = AgentLoopWorker(config, llm_client=ScriptedClient())
        dataset = RLHFDataset(
            data_files=[str(out / "data" / "train.parquet")], tokenizer=worker.tokenizer, config=config.data
        )
        rows = [dataset[i] for i in range(len(dataset))]
        batch = DataProto.from_single_dict(collate_fn(rows)).repeat(2, interleave=True)
        got = asyncio.run(worker.generate_sequences(batch))
    finally:
        loop_module._CLIENTS.pop(url, None)

    ctx = RunContext(
        backend=EngineBackend(tok, ScriptInOrder(tok, script)),  # type: ignore[arg-type]
        protocol=rollout_protocol(mini(), recipe),
        retriever=RecordingRetriever(),
        training=True,
    )
    trajs = method.solve(examples(), ctx)
    P = got.batch["prompts"].shape[1]
    kinds = set()
    for i in range(len(got)):
        t = trajs[i // 2]
        valid = got.batch["attention_mask"][i][P:].bool()
        assert got.batch["responses"][i][valid].tolist() == t.response_ids
        assert got.batch["response_mask"][i][valid].tolist() == t.loss_mask
        kinds |= {x.kind for x in t.turns}
    assert {"retrieve", "generate"} <= kinds  # an observation at mask 0, from the retriever
    assert verl_retriever.n_queries == 2  # France, searched by both of its samples


# -- the rollout server, the stages, a moved export ----------------------------------------------------
def test_the_rollout_server_settings_serve_the_agent_loops_stop_strings(acceptance_job: Path):
    from harness.errors import ConfigError
    from harness.verl.dry_run import check_rollout

    (stage,) = stage_overrides(acceptance_job / "run.sh")
    exported = compose(stage)
    assert (
        exported.actor_rollout_ref.rollout.name,
        exported.actor_rollout_ref.rollout.skip_tokenizer_init,
    ) == (
        "vllm",
        False,
    )
    assert check_rollout(exported).startswith("rollout: vllm with its tokenizer loaded")
    # verl's default skip_tokenizer_init=True reaches SGLang, which then cannot match stop strings
    sglang = [*stage, "actor_rollout_ref.rollout.name=sglang"]
    assert check_rollout(compose(sglang)).startswith("rollout: sglang with its tokenizer loaded")
    with pytest.raises(ConfigError, match="no tokenizer to match the stop strings"):
        check_rollout(compose([*sglang, "actor_rollout_ref.rollout.skip_tokenizer_init=true"]))
    # verl's vLLM server loads the tokenizer whatever the setting says
    check_rollout(compose([*stage, "actor_rollout_ref.rollout.skip_tokenizer_init=true"]))
    with pytest.raises(ConfigError, match="checked for vllm, sglang only"):
        check_rollout(compose([*stage, "actor_rollout_ref.rollout.name=trtllm"]))


def test_a_two_stage_export_resumes_stage_2_from_stage_1s_last_save(tmp_path: Path, smollm2_dir: Path):
    import json

    from harness.errors import ConfigError
    from harness.methods_registry import get_method
    from harness.verl.dry_run import check_stage
    from harness.verl.job import write_verl_job
    from tests.verl.test_export_verl import examples

    method = get_method("when_to_search")
    out = tmp_path / "J"
    write_verl_job(
        *(method, method.recipes()["paper"], out, examples(), examples()),
        retriever_url="http://127.0.0.1:9/retrieve",
        n_gpus=8,
        model_path=str(smollm2_dir),
    )
    job = json.loads((out / "job.json").read_text())
    one, two = stage_overrides(out / "run.sh", "--ckpt-dir", str(tmp_path / "ckpt"))
    c1, c2 = compose(one), compose(two)
    assert (c1.trainer.total_training_steps, c2.trainer.total_training_steps) == (180, 500)
    assert c1.trainer.save_freq == c2.trainer.save_freq == 30  # verl saves at a stage's last step only if > 0
    assert c1.trainer.default_local_dir == c2.trainer.default_local_dir == str(tmp_path / "ckpt")
    assert c1.trainer.resume_mode == "auto"
    assert (c2.trainer.resume_mode, c2.trainer.resume_from_path) == (
        "resume_path",
        str(tmp_path / "ckpt" / "global_step_180"),
    )
    assert check_stage(c2, job) == [
        f"stage 2/2: saves {tmp_path / 'ckpt' / 'global_step_500'} at its last step (trainer.save_freq=30)",
        f"stage 2/2: resumes from {tmp_path / 'ckpt' / 'global_step_180'}, stage 1's last checkpoint",
    ]
    # what the export wrote before: no save (verl's default save_freq -1), stage 2 on resume_mode=auto
    with pytest.raises(ConfigError, match="saves no checkpoint"):
        check_stage(compose([*one, "trainer.save_freq=-1"]), job)
    with pytest.raises(ConfigError, match="not from .*global_step_180"):
        check_stage(compose([*two, "trainer.resume_mode=auto"]), job)
    with pytest.raises(ConfigError, match="not from .*global_step_180"):
        check_stage(compose([*two, f"trainer.resume_from_path={tmp_path}/other/global_step_180"]), job)


@pytest.mark.integration
def test_a_moved_export_passes_its_dry_run(tmp_path: Path):
    """Exported in one place, copied elsewhere as a folder, its data in a third place (--data-dir):
    the dry run of both stages passes and every path it checks is in the new places."""
    import shutil

    first, moved, data = tmp_path / "laptop" / "J", tmp_path / "cluster" / "J", tmp_path / "shared" / "data"
    args = ["export-verl", "--method", "when_to_search", "--recipe", "cpu-smoke", "--n-gpus", "1"]
    assert main([*args, "--model", "smollm2-135m-instruct", "--out", str(first)]) == 0
    moved.parent.mkdir()
    shutil.move(first, moved)
    data.parent.mkdir()
    shutil.move(moved / "data", data)
    shutil.rmtree(tmp_path / "laptop")
    missing = run_dry(moved)
    assert missing.returncode == 2
    assert missing.stderr.strip().splitlines()[-1] == (
        f"run.sh --dry-run: data.train_files: {moved / 'data' / 'train.parquet'} is missing; pass run.sh "
        "--data-dir DIR (the folder of the parquet files)"
    )
    run = run_dry(moved, "--data-dir", str(data))
    assert run.returncode == 0, run.stdout[-3000:] + run.stderr[-3000:]
    lines = [x for x in run.stdout.splitlines() if x.startswith("dry run: ")]
    assert f"dry run: reward: {moved / 'reward.py'}:compute_score (kwargs {{'reward': 'stage2'}})" in lines
    assert f"dry run: agent loop job: {moved / 'job.json'}" in lines
    ckpt = moved / "checkpoints"
    assert f"dry run: stage 2/2: resumes from {ckpt / 'global_step_2'}, stage 1's last checkpoint" in lines
    assert not any("laptop" in x for x in lines)
