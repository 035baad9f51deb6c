"""The verl agent loop (``harness_tag_agent``) of an exported job rolls out as our engine does.

Both sides run the same scripted "model" (planned outputs per question, as SmolLM2 token ids): the
engine side through a backend with the in-process backends' stop handling, the verl side through
a fake of verl's server manager that returns raw ids the way vLLM / SGLang do (up to the token that
completes a stop string, the EOS, or the token budget). The loop is driven from the exported files
(parquet rows, job.json, agent_loop.yaml, the custom chat template) and must give the same
prompt ids, response ids, loss mask (token by token), response text, retriever calls and reward
as the method's own ``solve`` in training mode. This is the loop's core (``rollout_async``) without
verl; the loop under verl's own ``AgentLoopWorker`` is tests/verl/test_real_verl.py (tox -e verl).
"""

from __future__ import annotations

import asyncio
import copy
import importlib
import importlib.util
import json
from pathlib import Path
from typing import Any

import pyarrow.parquet as pq
import pytest
import yaml

from harness.errors import ConfigError
from harness.eval.protocol import mini
from harness.llm.base import hf_encode
from harness.llm.decoding import StopScanner, finish_sequence
from harness.methods_registry import get_method
from harness.rl.trainer import rollout_protocol
from harness.rollout.base import RunContext
from harness.types import Completion, QAExample
from harness.verl.agent_loop import LoopJob, ServerBackend, job_path, rollout_async
from harness.verl.contract import AGENT_CLASS, AGENT_NAME
from harness.verl.job import write_verl_job
from harness.verl.rows import row_example
from tests.methods.helpers import reward_ctx
from tests.support.scripted import RecordingRetriever
from tests.verl.test_export_verl import CASES, examples

LOOPED = ["eval_rar", "r_search", "search_r1", "tiresrag_r1", "when_to_search"]


@pytest.fixture(scope="module")
def tok(smollm2_dir: Path):
    from transformers import AutoTokenizer

    return AutoTokenizer.from_pretrained(smollm2_dir)


class ScriptedModel:
    """For a context (token ids), the next planned output of the longest script key found in its
    text, as token ids followed by the EOS id."""

    def __init__(self, tok: Any, script: dict[str, list[str]]):
        self.tok = tok
        self.script = copy.deepcopy(script)

    def stream(self, ids: list[int]) -> list[int]:
        text = self.tok.decode(ids)
        for key in sorted(self.script, key=len, reverse=True):
            if key in text:
                out = self.script[key].pop(0)
                return hf_encode(self.tok, out) + [self.tok.eos_token_id]
        raise AssertionError(f"no script for ...{text[-80:]!r}")


class EngineBackend:
    """The transformers backend's generation loop (StopScanner, then finish_sequence) over the
    scripted model: the in-harness side."""

    name = "scripted-tokens"

    def __init__(self, tok: Any, model: ScriptedModel):
        self.tok, self.model = tok, model

    def tokenize(self, text: str) -> list[int]:
        return hf_encode(self.tok, text)

    def detokenize(self, ids: list[int]) -> str:
        return self.tok.decode(list(ids), skip_special_tokens=False)

    def prompt_ids(self, text: str) -> list[int]:
        return hf_encode(self.tok, text, prompt=True)

    def count_tokens(self, text: str) -> int:
        return len(self.tokenize(text))

    def chat_prompt(self, messages: list[dict[str, str]], add_generation_prompt: bool = True) -> str:
        return self.tok.apply_chat_template(
            messages, tokenize=False, add_generation_prompt=add_generation_prompt
        )

    def generate_ids(self, prompt_ids, *, stop, max_new_tokens, sampling=None, include_stop=False):
        out = []
        for ids in prompt_ids:
            scanner = StopScanner(stop, self.detokenize)
            gen: list[int] = []
            eos_hit = False
            for t in self.model.stream(list(ids)):
                gen.append(t)
                if t == self.tok.eos_token_id:
                    eos_hit = True
                    break
                if scanner.update(gen) or len(gen) >= max_new_tokens:
                    break
            f = finish_sequence(
                gen,
                eos_hit=eos_hit,
                stops=stop,
                include_stop=include_stop,
                decode=self.detokenize,
                encode=self.tokenize,
            )
            out.append(
                Completion(
                    text=f.text,
                    prompt_tokens=len(ids),
                    completion_tokens=len(gen),
                    finish_reason=f.finish_reason,
                    stop=f.stop,
                    token_ids=f.token_ids,
                )
            )
        return out


class FakeServerManager:
    """The part of verl's server manager the loop calls: raw generated ids, as vLLM / SGLang return
    them for ``stop`` and ``max_new_tokens`` (the ids up to the token that completes a stop string,
    the EOS, or the budget; no cutting, no re-encoding). Records every request."""

    def __init__(self, tok: Any, model: ScriptedModel):
        self.tok, self.model = tok, model
        self.requests: list[tuple[list[int], dict[str, Any]]] = []

    async def generate(self, prompt_ids: list[int], sampling_params: dict[str, Any]) -> list[int]:
        await asyncio.sleep(0)  # other samples run meanwhile
        self.requests.append((list(prompt_ids), dict(sampling_params)))
        out: list[int] = []
        for t in self.model.stream(prompt_ids):
            out.append(t)
            if t == self.tok.eos_token_id or len(out) >= sampling_params["max_new_tokens"]:
                break
            if any(s in self.tok.decode(out) for s in sampling_params["stop"]):
                break
        return out


def small_recipe(name: str) -> Any:
    """The method's cpu-smoke recipe with room for the scripts' searches."""
    recipe = get_method(name).recipes()["cpu-smoke"]
    return recipe.model_copy(update={"max_turns": 3, "max_new_tokens": 64, "max_obs_tokens": 40})


def export(name: str, out: Path, model_dir: Path, url: str = "http://127.0.0.1:8000/retrieve") -> Any:
    recipe = small_recipe(name)
    write_verl_job(
        get_method(name),
        recipe,
        out,
        examples(),
        examples()[:1],
        retriever_url=url,
        n_gpus=4,
        model_path=str(model_dir),
    )
    return recipe


def verl_prompt_ids(tok: Any, out: Path, row: dict[str, Any]) -> list[int]:
    """The prompt ids of a row under the model's chat template, or the job's custom one if it has
    one (TIRESRAG-R1's pre-fill). verl 0.9's own (``ct_build_initial_tokens``) is what the loop
    uses under verl's AgentLoopWorker in tests/verl/test_real_verl.py."""
    tok = copy.deepcopy(tok)
    if (out / "verl_job.yaml").is_file():
        cfg = yaml.safe_load((out / "verl_job.yaml").read_text())
        tok.chat_template = cfg["actor_rollout_ref"]["model"]["custom_chat_template"]
    text = tok.apply_chat_template(row["prompt"], tokenize=False, add_generation_prompt=True)
    return hf_encode(tok, text, prompt=True)


def load_reward(path: Path) -> Any:
    spec = importlib.util.spec_from_file_location(f"reward_{path.parent.name}", path)
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


async def run_rows(job: LoopJob, rows, prompts, server, tok, retriever) -> list[Any]:
    """Every row's rollout concurrently, as verl's worker runs them."""
    return await asyncio.gather(
        *[
            rollout_async(
                job,
                row_example(row),
                prompt,
                generate=server.generate,
                tokenizer=tok,
                sampling_params={"temperature": 1.0, "top_p": 1.0, "top_k": -1, "repetition_penalty": 1.0},
                retriever=retriever,
            )
            for row, prompt in zip(rows, prompts, strict=True)
        ]
    )


@pytest.mark.parametrize("name", LOOPED)
def test_loop_rolls_out_as_the_engine(name, tmp_path: Path, smollm2_dir: Path, tok, monkeypatch):
    out = tmp_path / name
    recipe = export(name, out, smollm2_dir)
    method = get_method(name)
    case = CASES[name]

    # the in-harness side: the method's own solve, training mode, budgets of the recipe
    eng_retriever = RecordingRetriever()
    ctx = RunContext(
        backend=EngineBackend(tok, ScriptedModel(tok, case.script)),  # type: ignore[arg-type]
        protocol=rollout_protocol(mini(), recipe),
        retriever=eng_retriever,
        training=True,
    )
    exs = examples()
    trajs = method.solve(exs, ctx)

    # the verl side: the exported rows through the exported loop
    rows = pq.read_table(out / "data" / "train.parquet").to_pylist()
    assert {r["agent_name"] for r in rows} == {AGENT_NAME}
    job = LoopJob.from_file(out / "job.json")
    assert (job.method, job.recipe) == (name, recipe)
    prompts = [verl_prompt_ids(tok, out, r) for r in rows]
    server = FakeServerManager(tok, ScriptedModel(tok, case.script))
    verl_retriever = RecordingRetriever()
    got = asyncio.run(run_rows(job, rows, prompts, server, tok, verl_retriever))

    def queries(r: RecordingRetriever) -> list[tuple[str, int]]:  # the engine batches, verl runs per sample
        return sorted((q, k) for qs, k in r.calls for q in qs)

    assert queries(verl_retriever) == queries(eng_retriever)
    assert verl_retriever.n_queries >= 1 and {k for _, k in verl_retriever.calls} == {recipe.top_k}
    stops = {tuple(p["stop"]) for _, p in server.requests}
    assert len(stops) == 1 and "</search>" in next(iter(stops))
    assert all(p["temperature"] == 1.0 for _, p in server.requests)
    from harness.verl import reward as reward_module

    # the reward's helper models for this job, as reward_models would hold them (scripted here)
    key = (name, str((out / "job.json").resolve()))
    monkeypatch.setitem(reward_module._REWARD_MODELS, key, case.models())
    reward = load_reward(out / "reward.py")
    models = case.models()
    ours = method.rewards(trajs, name=recipe.reward_at(0), ctx=reward_ctx(0, recipe.steps, **models))
    n_env = 0
    for row, r, t, want in zip(rows, got, trajs, ours, strict=True):
        assert r.prompt_ids == t.prompt_ids
        assert r.response_ids == t.response_ids
        assert r.response_mask == t.loss_mask
        assert len(r.response_mask) == len(r.response_ids)
        n_env += r.response_mask.count(0)
        # the mask is 1 exactly on the model's own segments
        own = "".join(x.text for x in t.turns if x.kind == "generate")
        masked = [i for i, m in zip(r.response_ids, r.response_mask, strict=True) if m]
        assert tok.decode(masked, skip_special_tokens=True) == own
        assert (
            tok.decode(r.response_ids, skip_special_tokens=True) == t.response
        )  # what verl's reward decodes
        assert r.trajectory.prediction == t.prediction
        assert r.num_turns == 1 + len(t.turns)
        score = reward.compute_score(
            row["data_source"], t.response, row["reward_model"]["ground_truth"], row["extra_info"]
        )
        assert score["score"] == pytest.approx(want.total)
    assert n_env > 0  # observations (and corrections) were appended with mask 0


def test_invalid_actions_get_the_correction_message_with_mask_0(tmp_path: Path, smollm2_dir: Path, tok):
    from methods.search_r1.render import SEARCH_R1_INVALID_MESSAGE

    out = tmp_path / "job"
    export("search_r1", out, smollm2_dir)
    row = pq.read_table(out / "data" / "train.parquet").to_pylist()[2]  # "tallest mountain": no tags at all
    job = LoopJob.from_file(out / "job.json")
    server = FakeServerManager(tok, ScriptedModel(tok, {"tallest mountain": ["no tags at all"] * 6}))
    (r,) = asyncio.run(
        run_rows(job, [row], [verl_prompt_ids(tok, out, row)], server, tok, RecordingRetriever())
    )
    assert len(server.requests) == job.recipe.max_turns + 1  # action turns, then the final turn
    correction = hf_encode(tok, SEARCH_R1_INVALID_MESSAGE)
    eos = tok.eos_token_id
    seg = hf_encode(tok, "no tags at all") + [eos]
    want_ids = (seg + correction) * job.recipe.max_turns + seg
    want_mask = ([1] * len(seg) + [0] * len(correction)) * job.recipe.max_turns + [1] * len(seg)
    assert r.response_ids == want_ids
    assert r.response_mask == want_mask
    assert r.trajectory.extraction_status == "max_turns"


def test_stop_inside_a_token_is_cut_and_re_encoded(tok):
    # the server returns the token that completes "</search>" and whatever that token holds after it
    text = "<search>capital of France</search>"
    tail = [t for t in range(len(tok)) if tok.decode([t]).startswith(">") and len(tok.decode([t])) > 1][0]
    raw = hf_encode(tok, "<search>capital of France</search") + [tail]
    assert tok.decode(raw).startswith(text) and tok.decode(raw) != text
    backend = ServerBackend(lambda ids, params: raw, tok)
    (c,) = backend.generate_ids(
        [[1, 2]], stop=["</search>", "</answer>"], max_new_tokens=64, include_stop=True
    )
    assert (c.text, c.finish_reason, c.stop) == (text, "stop", "</search>")
    assert tok.decode(c.token_ids) == text and c.completion_tokens == len(raw)


def test_backend_passes_stops_and_budget_and_keeps_verl_prompt_ids(tok):
    seen = []

    def gen(ids, params):
        seen.append((ids, params))
        return hf_encode(tok, "done") + [tok.eos_token_id]

    backend = ServerBackend(gen, tok, sampling_params={"temperature": 0.7})
    ids = [tok.eos_token_id, *hf_encode(tok, "hello")]  # not what re-encoding its text gives
    text = backend.prompt_text(ids)
    assert backend.prompt_ids(text) == ids
    (c,) = backend.generate_ids([ids], stop=["</x>"], max_new_tokens=7, include_stop=True)
    assert seen == [(ids, {"temperature": 0.7, "stop": ["</x>"], "max_new_tokens": 7})]
    assert (c.text, c.finish_reason) == ("done", "eos") and c.token_ids[-1] == tok.eos_token_id


@pytest.mark.parametrize("name", LOOPED)
def test_exported_files_reference_the_loop(name, tmp_path: Path, smollm2_dir: Path):
    out = tmp_path / name
    export(name, out, smollm2_dir)
    (entry,) = yaml.safe_load((out / "agent_loop.yaml").read_text())
    assert entry["name"] == AGENT_NAME and entry["_target_"] == AGENT_CLASS
    # relative to the yaml's folder, as the loop resolves it: the export can move
    assert entry["job"] == "job.json"
    job = job_path(entry["job"], str(out / "agent_loop.yaml"))
    assert job == (out / "job.json").resolve()
    assert LoopJob.from_file(job).retriever_url == "http://127.0.0.1:8000/retrieve"
    script = (out / "run.sh").read_text()
    assert '"actor_rollout_ref.rollout.agent.agent_loop_config_path=${HERE}/agent_loop.yaml"' in script
    assert "tool_config_path" not in script and not (out / "search_tool_config.yaml").exists()
    rows = pq.read_table(out / "data" / "test.parquet").to_pylist()
    assert rows[0]["agent_name"] == AGENT_NAME
    job = json.loads((out / "job.json").read_text())
    assert not any("tool_agent" in x for x in job["limitations"])


def test_one_completion_method_stays_single_turn(tmp_path: Path, smollm2_dir: Path):
    out = tmp_path / "arena"
    method = get_method("arena")
    write_verl_job(
        method,
        method.recipes()["cpu-smoke"],
        out,
        examples(),
        examples(),
        retriever_url="http://x/retrieve",
        n_gpus=4,
        model_path=str(smollm2_dir),
    )
    assert not (out / "agent_loop.yaml").exists()
    assert "agent_loop_config_path" not in (out / "run.sh").read_text()
    assert {r["agent_name"] for r in pq.read_table(out / "data" / "train.parquet").to_pylist()} == {
        "single_turn_agent"
    }


def test_job_without_retriever_is_refused(tmp_path: Path):
    p = tmp_path / "job.json"
    p.write_text(json.dumps({"method": "arena", "recipe": {}, "retriever_url": None}))
    with pytest.raises(ConfigError, match="retriever_url"):
        LoopJob.from_file(p)


def test_module_imports_without_verl_and_the_class_needs_it():
    mod = importlib.import_module("harness.verl.agent_loop")
    if importlib.util.find_spec("verl") is None:
        mod.agent_loop_class.cache_clear()
        with pytest.raises(ConfigError, match=r"needs verl \(verl 0\.9\.1\), which is not installed"):
            mod.HarnessTagAgentLoop  # noqa: B018


def test_example_of_a_row_is_the_exported_question():
    e = examples()[0]
    row = {
        "data_source": "toy",
        "reward_model": {"ground_truth": {"target": ["Paris"]}},
        "extra_info": {"example": json.dumps(e.to_dict())},
    }
    assert row_example(row) == QAExample.from_dict(e.to_dict())


# The verl class itself runs under verl's own AgentLoopWorker in tests/verl/test_real_verl.py
# (tox -e verl): the stand-ins of verl's API (as at b178a3c) that were here are gone.


def test_response_budget_holds_every_turn_of_environment_text(tmp_path: Path, smollm2_dir: Path):
    from methods.search_r1.render import SEARCH_R1_INVALID_MESSAGE

    out = tmp_path / "job"
    recipe = export("search_r1", out, smollm2_dir).model_copy(update={"max_obs_tokens": 10})
    write_verl_job(
        get_method("search_r1"),
        recipe,
        out,
        examples(),
        examples(),
        retriever_url="http://x/retrieve",
        n_gpus=4,
        model_path=str(smollm2_dir),
    )
    script = (out / "run.sh").read_text()
    # 3 action turns + the final turn of 64 tokens; each action turn may add a correction message
    want = 64 * 4 + 3 * len(SEARCH_R1_INVALID_MESSAGE)
    assert f"data.max_response_length={want}" in script
