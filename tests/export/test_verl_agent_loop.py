"""The verl agent loop (``harness_tag_agent``) of an exported job rolls out as our engine does.

Both sides run the same scripted "model" (planned outputs per question, as SmolLM2 token ids): the
engine side through a backend with the in-process backends' stop handling, the verl side through
a fake of verl's server manager that returns raw ids the way vLLM / SGLang do (up to the token that
completes a stop string, the EOS, or the token budget). The loop is driven from the exported files
(parquet rows, job.json, agent_loop.yaml, the custom chat template) and must give the same
prompt ids, response ids, loss mask (token by token), response text, retriever calls and reward
as the method's own ``solve`` in training mode.
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
from harness.method import RunContext
from harness.methods_registry import get_method
from harness.rl.trainer import rollout_protocol
from harness.types import Completion, QAExample
from harness.verl.agent_loop import LoopJob, ServerBackend, rollout_async
from harness.verl.contract import AGENT_CLASS, AGENT_NAME
from harness.verl.job import write_verl_job
from harness.verl.rows import row_example
from tests.export.test_export_verl import CASES, examples
from tests.methods.helpers import reward_ctx
from tests.support.scripted import RecordingRetriever

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
        n_gpus=8,
        model_path=str(model_dir),
    )
    return recipe


def verl_prompt_ids(tok: Any, out: Path, row: dict[str, Any]) -> list[int]:
    """What verl's ``apply_chat_template`` gives for a row: the job's custom chat template if it
    has one (TIRESRAG-R1's pre-fill), else the model's."""
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
def test_loop_rolls_out_as_the_engine(name, tmp_path: Path, smollm2_dir: Path, tok):
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
    reward = load_reward(out / "reward.py")
    reward._MODELS = case.models()
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
    assert Path(entry["job"]) == (out / "job.json").resolve()
    assert LoopJob.from_file(entry["job"]).retriever_url == "http://127.0.0.1:8000/retrieve"
    script = (out / "run.sh").read_text()
    assert (
        f"actor_rollout_ref.rollout.agent.agent_loop_config_path={(out / 'agent_loop.yaml').resolve()}"
        in script
    )
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
        n_gpus=8,
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
        with pytest.raises(ModuleNotFoundError, match="verl"):
            mod.HarnessTagAgentLoop  # noqa: B018


def test_agent_loop_class_registers_with_verl():
    pytest.importorskip("verl")
    from verl.experimental.agent_loop.agent_loop import AgentLoopBase, _agent_loop_registry

    from harness.verl.agent_loop import HarnessTagAgentLoop  # type: ignore[attr-defined]

    assert issubclass(HarnessTagAgentLoop, AgentLoopBase)
    assert _agent_loop_registry[AGENT_NAME] == {"_target_": AGENT_CLASS}


def test_example_of_a_row_is_the_exported_question():
    e = examples()[0]
    row = {
        "data_source": "toy",
        "reward_model": {"ground_truth": {"target": ["Paris"]}},
        "extra_info": {"example": json.dumps(e.to_dict())},
    }
    assert row_example(row) == QAExample.from_dict(e.to_dict())


# -- the verl class, against a stand-in of the verl API it uses and a live `harness serve-retriever` ----


def stub_verl(monkeypatch: pytest.MonkeyPatch) -> Any:
    """Install stand-ins for the verl names the class imports (signatures as at verl HEAD b178a3c:
    ``AgentLoopBase.__init__(trainer_config, server_manager, tokenizer, processor, dataset_cls,
    dataset_config, **kwargs)``, ``apply_chat_template(messages)``, ``register(name)``,
    ``AgentLoopOutput`` fields, ``copy_to_local``). Returns the stand-in agent_loop module."""
    import sys
    import types

    from pydantic import BaseModel

    from harness.verl import agent_loop as verl_agent_loop

    mods = {n: types.ModuleType(n) for n in ("verl", "verl.experimental", "verl.experimental.agent_loop")}
    al = types.ModuleType("verl.experimental.agent_loop.agent_loop")
    registry: dict[str, dict[str, str]] = {}

    class AgentLoopBase:
        def __init__(
            self, trainer_config, server_manager, tokenizer, processor, dataset_cls, dataset_config, **kw
        ):
            self.config = trainer_config.config
            self.server_manager, self.tokenizer = server_manager, tokenizer

        async def apply_chat_template(self, messages, tools=None, images=None, videos=None):
            text = self.tokenizer.apply_chat_template(messages, tokenize=False, add_generation_prompt=True)
            return hf_encode(self.tokenizer, text, prompt=True)

    class AgentLoopOutput(BaseModel):
        prompt_ids: list[int]
        response_ids: list[int]
        response_mask: list[int]
        response_logprobs: list[float] | None = None
        num_turns: int = 0
        metrics: dict[str, float]
        extra_fields: dict[str, Any] = {}

    def register(name):
        def deco(cls):
            registry[name] = {"_target_": f"{cls.__module__}.{cls.__qualname__}"}
            return cls

        return deco

    al.AgentLoopBase, al.AgentLoopOutput, al.register, al._agent_loop_registry = (
        AgentLoopBase,
        AgentLoopOutput,
        register,
        registry,
    )
    fs = types.ModuleType("verl.utils.fs")
    fs.copy_to_local = lambda path: path
    mods.update({al.__name__: al, "verl.utils": types.ModuleType("verl.utils"), fs.__name__: fs})
    for name, mod in mods.items():
        monkeypatch.setitem(sys.modules, name, mod)
    verl_agent_loop.agent_loop_class.cache_clear()
    verl_agent_loop._model_eos_ids.cache_clear()
    return al


class VerlServerManager:
    """verl's ``AsyncLLMServerManager.generate(request_id, *, prompt_ids, sampling_params)`` ->
    an object with ``token_ids``, over the fake server."""

    def __init__(self, server: FakeServerManager):
        self.server = server
        self.request_ids: set[str] = set()

    async def generate(self, request_id, *, prompt_ids, sampling_params, image_data=None, video_data=None):
        from types import SimpleNamespace

        self.request_ids.add(request_id)
        return SimpleNamespace(token_ids=await self.server.generate(prompt_ids, sampling_params))


@pytest.mark.integration
def test_verl_class_with_a_live_retriever(tmp_path: Path, smollm2_dir: Path, tok, monkeypatch):
    from types import SimpleNamespace

    from harness.retrieval.bm25 import Bm25sRetriever
    from harness.retrieval.corpus import open_corpus
    from harness.verl import agent_loop as verl_agent_loop
    from tests.retrieval.helpers import TINY, write_jsonl
    from tests.retrieval.test_server import Served

    monkeypatch.setenv("RAR_HARNESS_CACHE", str(tmp_path / "cache"))
    al = stub_verl(monkeypatch)
    corpus = open_corpus(write_jsonl(tmp_path / "tiny.jsonl", TINY))
    served = Served(Bm25sRetriever(corpus))
    try:
        out = tmp_path / "job"
        recipe = export("search_r1", out, smollm2_dir, url=served.url + "/retrieve")
        script = CASES["search_r1"].script
        (entry,) = yaml.safe_load((out / "agent_loop.yaml").read_text())
        cls = verl_agent_loop.HarnessTagAgentLoop  # what Hydra's _target_ resolves to
        assert al._agent_loop_registry[AGENT_NAME] == {"_target_": entry["_target_"]}
        config = SimpleNamespace(
            actor_rollout_ref=SimpleNamespace(
                rollout=SimpleNamespace(response_length=4096), model=SimpleNamespace(path=str(smollm2_dir))
            )
        )
        manager = VerlServerManager(FakeServerManager(tok, ScriptedModel(tok, script)))

        async def run_all(rows):  # verl's worker: one loop object per sample, run concurrently
            loops = [
                cls(
                    trainer_config=SimpleNamespace(config=config),
                    server_manager=manager,
                    tokenizer=tok,
                    processor=None,
                    dataset_cls=None,
                    dataset_config=None,
                    **{k: v for k, v in entry.items() if k != "_target_"},
                )
                for _ in rows
            ]
            params = {
                "temperature": 1.0,
                "top_p": 1.0,
                "top_k": -1,
                "repetition_penalty": 1.0,
                "logprobs": False,
            }
            return await asyncio.gather(
                *[
                    loop.run(
                        params,
                        raw_prompt=row["prompt"],
                        **{k: v for k, v in row.items() if k != "agent_name"},
                    )
                    for loop, row in zip(loops, rows, strict=True)
                ]
            )

        rows = pq.read_table(out / "data" / "train.parquet").to_pylist()
        got = asyncio.run(run_all(rows))

        local = Bm25sRetriever(corpus)
        ctx = RunContext(
            backend=EngineBackend(tok, ScriptedModel(tok, script)),  # type: ignore[arg-type]
            protocol=rollout_protocol(mini(), recipe),
            retriever=local,
            training=True,
        )
        trajs = get_method("search_r1").solve(examples(), ctx)
    finally:
        served.stop()
        client = verl_agent_loop._CLIENTS.pop(served.url + "/retrieve", None)
        if client is not None:
            client.close()
    assert len(manager.request_ids) == len(rows)  # one sticky request id per trajectory
    assert all("logprobs" not in p for _, p in manager.server.requests)
    for o, t in zip(got, trajs, strict=True):
        assert (o.prompt_ids, o.response_ids, o.response_mask) == (t.prompt_ids, t.response_ids, t.loss_mask)
        assert o.num_turns == 1 + len(t.turns) and o.extra_fields == {
            "harness_truncated": False,
            "harness_unaligned": 0,
        }
    france = trajs[0]
    (obs,) = [x for x in france.turns if x.kind == "retrieve"]
    assert obs.doc_ids[:2] == ["d5", "d1"] and obs.text.startswith('Doc 1(Title: "France") France is')
    assert obs.status == "obs_truncated" and len(hf_encode(tok, obs.text)) == recipe.max_obs_tokens
    assert tok.decode(got[0].response_ids, skip_special_tokens=True) == france.response


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
        n_gpus=8,
        model_path=str(smollm2_dir),
    )
    script = (out / "run.sh").read_text()
    # 3 action turns + the final turn of 64 tokens; each action turn may add a correction message
    want = 64 * 4 + 3 * len(SEARCH_R1_INVALID_MESSAGE)
    assert f"data.max_response_length={want}" in script
