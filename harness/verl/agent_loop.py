"""A verl agent loop that rolls out a method in its own tag dialect, with **our** rollout engine.

verl's multi-turn ``tool_agent`` calls tools on ``<tool_call>`` JSON (hermes format) and renders
tool responses through the chat template; the methods we export ask the model for
``<search>q</search>`` and read documents between their own observation tags, so under
``tool_agent`` no retrieval would happen. ``harness export-verl`` therefore registers this loop
(``harness_tag_agent``, :data:`harness.verl.contract.AGENT_NAME`) through verl's
``agent_loop_config_path`` yaml::

    - name: harness_tag_agent
      _target_: harness.verl.agent_loop.HarnessTagAgentLoop
      job: job.json   # relative to this yaml's folder

For one sample the loop runs the method's own multi-turn rollout
(:meth:`harness.rollout.base.RolloutConfig.run` of its ``rollout_config``: the tag engine or the
segment loop) in training (token) mode, under the recipe's budgets (top-k, turns, observation and
generation tokens, as the harness trainer's :func:`harness.rl.trainer.rollout_protocol`), against

- :class:`ServerBackend`: the engine's token-space backend calls answered by verl's server
  manager: each turn sends the exact context token ids with the dialect's stop strings and the
  turn's ``max_new_tokens``; the raw ids that come back are cut at the first stop string and
  re-aligned by :func:`harness.llm.decoding.finish_sequence`, exactly as our in-process backends do;
- :class:`harness.retrieval.client.RetrievalClient`: ``harness serve-retriever`` (job.json's
  ``retriever_url``).

So dialect parsing, observation rendering and truncation, correction messages, turn budgets and
the loss mask (1 on generated tokens, 0 on observations and corrections) are the engine's own, not
a second implementation. The engine is synchronous; verl's loop is asyncio: the engine runs in a
worker thread and each generation is submitted to verl's event loop
(:func:`rollout_async`). Nothing here imports verl except :func:`agent_loop_class` (reached
through the module attribute ``HarnessTagAgentLoop``), so the module and its tests run without it.
"""

from __future__ import annotations

import asyncio
import functools
import json
import threading
from collections.abc import Awaitable, Callable, Sequence
from concurrent.futures import Executor, ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from harness.errors import ConfigError, ServerError
from harness.llm.base import GenerateArgs, TokenBackend, eos_ids, hf_encode
from harness.method import TrainableMethod
from harness.rollout.base import RunContext
from harness.types import Completion, QAExample, Trajectory
from harness.verl.contract import AGENT_NAME, rollout_of, trainable
from harness.verl.rows import row_example

if TYPE_CHECKING:
    from harness.protocol import Protocol
    from harness.rl.recipe import Recipe
    from harness.rollout.base import RolloutConfig

# (prompt ids, sampling params) -> the generated ids as the server returns them
Generate = Callable[[list[int], dict[str, Any]], list[int]]
AsyncGenerate = Callable[[list[int], dict[str, Any]], Awaitable[list[int]]]

_TOKENIZER_LOCK = threading.Lock()  # HF fast tokenizers are not safe to call from many threads at once


@dataclass(frozen=True)
class LoopJob:
    """What the loop needs from an exported ``job.json``: the method, its recipe (the rollout
    budgets) and the retrieval server."""

    method: str
    recipe: Recipe
    retriever_url: str

    @classmethod
    def from_file(cls, path: str | Path) -> LoopJob:
        from harness.rl.recipe import Recipe

        p = Path(path)
        try:
            raw = json.loads(p.read_text())
        except (OSError, ValueError) as e:
            raise ConfigError(
                f"{p}: cannot read the exported job ({e}); run `harness export-verl` again"
            ) from None
        if not raw.get("retriever_url"):
            raise ConfigError(
                f"{p}: method {raw.get('method')!r} has no retriever_url; the tag loop needs one"
            )
        return cls(
            method=raw["method"],
            recipe=Recipe.model_validate(raw["recipe"]),
            retriever_url=raw["retriever_url"],
        )


def job_path(job: str | Path, agent_loop_config_path: str | None) -> Path:
    """The exported ``job.json`` an agent-loop yaml entry names: relative to the yaml's folder (the
    export writes ``job: job.json``, so the folder can be moved), or absolute."""
    p = Path(job)
    if p.is_absolute() or not agent_loop_config_path:
        return p
    return Path(agent_loop_config_path).resolve().parent / p


@functools.cache
def load_job(path: str) -> LoopJob:
    """:meth:`LoopJob.from_file`, once per process (verl builds one loop object per sample)."""
    return LoopJob.from_file(path)


@dataclass(frozen=True)
class LoopPlan:
    """The method and its rollout config under the recipe's budgets (``config.run`` rolls out)."""

    method: TrainableMethod
    protocol: Protocol
    config: RolloutConfig


@functools.cache
def _plan(method_name: str, recipe_json: str) -> LoopPlan:
    from harness.eval.protocol import mini
    from harness.rl.recipe import Recipe
    from harness.rl.trainer import rollout_protocol

    method = trainable(method_name)
    protocol = rollout_protocol(mini(), Recipe.model_validate_json(recipe_json))
    config = rollout_of(method, protocol)
    if config is None:
        raise ConfigError(
            f"method {method_name!r} answers in one completion (rollout_config is None); export it with "
            "verl's single_turn_agent"
        )
    return LoopPlan(method, protocol, config)


def plan(job: LoopJob) -> LoopPlan:
    """The job's :class:`LoopPlan` (built once per process and job)."""
    return _plan(job.method, job.recipe.model_dump_json())


class ServerBackend(TokenBackend):
    """The token-space part of :class:`harness.llm.base.Backend` the engine calls in training
    mode, over a server that returns generated token ids (verl's server manager).

    The server is asked to stop at the turn's stop strings (vLLM and SGLang stop on the token that
    completes one and return the ids generated so far); :func:`finish_sequence` then cuts the text
    at the first stop string and re-aligns the ids, as our in-process backends do. ``prompt_ids``
    of the prompt text this backend was made for are the given ids (verl's chat template output),
    not a re-encoding."""

    name = "verl-server"

    def __init__(
        self,
        generate: Generate,
        tokenizer: Any,
        *,
        sampling_params: dict[str, Any] | None = None,
        eos: frozenset[int] | None = None,
    ):
        self._generate = generate
        self.tokenizer = tokenizer
        self.sampling_params = dict(sampling_params or {})
        self.eos_ids = eos if eos is not None else eos_ids(tokenizer)
        self._prompts: dict[str, list[int]] = {}
        self.unaligned = 0  # completions whose ids could not be made to decode to their text

    def prompt_text(self, ids: Sequence[int]) -> str:
        """The text of verl's prompt ids; ``prompt_ids`` of it returns these very ids."""
        text = self.detokenize(ids)
        self._prompts[text] = list(ids)
        return text

    def tokenize(self, text: str) -> list[int]:
        with _TOKENIZER_LOCK:
            return hf_encode(self.tokenizer, text)

    def detokenize(self, ids: Sequence[int]) -> str:
        with _TOKENIZER_LOCK:
            return self.tokenizer.decode(list(ids), skip_special_tokens=False)

    def count_tokens(self, text: str) -> int:
        return len(self.tokenize(text))

    def prompt_ids(self, text: str) -> list[int]:
        if text in self._prompts:
            return list(self._prompts[text])
        with _TOKENIZER_LOCK:
            return hf_encode(self.tokenizer, text, prompt=True)

    def _complete_ids(self, prompt_ids: Sequence[Sequence[int]], args: GenerateArgs) -> list[Completion]:
        """One completion per prompt; ``args.sampling`` is ignored (verl's sampling parameters apply)."""
        out = []
        stop = args.stop
        for ids in prompt_ids:
            params = {**self.sampling_params, "stop": list(stop), "max_new_tokens": args.max_new_tokens}
            raw = [int(x) for x in self._generate(list(ids), params)]
            out.append(
                self.completion_from_ids(
                    raw,
                    prompt_tokens=len(ids),
                    eos_hit=bool(raw) and raw[-1] in self.eos_ids,
                    stop=stop,
                    include_stop=args.include_stop,
                )
            )
        return out

    def _complete(self, prompts: Sequence[str], args: GenerateArgs) -> list[Completion]:
        raise ConfigError("the verl server backend generates from token ids only (training mode)")

    def chat_prompt(self, messages: list[dict[str, str]], add_generation_prompt: bool = True) -> str:
        raise ConfigError("the verl server backend takes verl's prompt ids; it applies no chat template")

    def describe(self) -> dict[str, Any]:
        return {"backend": "verl-server"}


@dataclass(frozen=True)
class SampleRollout:
    """One sample's rollout in verl's terms, with the trajectory our engine recorded."""

    prompt_ids: list[int]
    response_ids: list[int]
    response_mask: list[int]
    num_turns: int  # verl's count: the prompt, every generated segment and every observation
    trajectory: Trajectory
    unaligned: int = 0  # segments whose ids could not be made to decode to their text (engine: no ids kept)


def rollout_sample(
    job: LoopJob, example: QAExample, prompt_ids: Sequence[int], backend: ServerBackend, retriever: Any
) -> SampleRollout:
    """Roll out ``example`` from verl's ``prompt_ids`` with the method's own engine (synchronous)."""
    p = plan(job)
    ctx = RunContext(backend=backend, protocol=p.protocol, retriever=retriever, training=True)  # type: ignore[arg-type]
    prompt = backend.prompt_text(prompt_ids)
    (traj,) = p.config.run([prompt], [example], ctx)
    if traj.response_ids is None or traj.loss_mask is None or traj.prompt_ids is None:
        raise ServerError(f"{job.method}: the rollout returned no token ids (not run in training mode)")
    return SampleRollout(
        prompt_ids=list(traj.prompt_ids),
        response_ids=list(traj.response_ids),
        response_mask=list(traj.loss_mask),
        num_turns=1 + len(traj.turns),
        trajectory=traj,
        unaligned=backend.unaligned,
    )


_EXECUTOR: ThreadPoolExecutor | None = None
_EXECUTOR_LOCK = threading.Lock()


def executor(max_threads: int) -> Executor:
    """The process's rollout threads (one per sample in flight; they mostly wait on the server)."""
    global _EXECUTOR
    with _EXECUTOR_LOCK:
        if _EXECUTOR is None:
            _EXECUTOR = ThreadPoolExecutor(max_workers=max_threads, thread_name_prefix="harness-tag-agent")
        return _EXECUTOR


_CLIENTS: dict[str, Any] = {}


def retriever_for(url: str) -> Any:
    """One retrying :class:`RetrievalClient` per URL and process (its HTTP pool is thread-safe)."""
    from harness.retrieval.client import RetrievalClient

    with _EXECUTOR_LOCK:
        if url not in _CLIENTS:
            _CLIENTS[url] = RetrievalClient(url)
        return _CLIENTS[url]


async def rollout_async(
    job: LoopJob,
    example: QAExample,
    prompt_ids: Sequence[int],
    *,
    generate: AsyncGenerate,
    tokenizer: Any,
    sampling_params: dict[str, Any],
    retriever: Any,
    eos: frozenset[int] | None = None,
    pool: Executor | None = None,
) -> SampleRollout:
    """:func:`rollout_sample` from asyncio: the engine runs in ``pool`` and each generation is
    awaited on the running loop (verl's server manager is a coroutine)."""
    loop = asyncio.get_running_loop()

    def sync_generate(ids: list[int], params: dict[str, Any]) -> list[int]:
        return asyncio.run_coroutine_threadsafe(generate(ids, params), loop).result()

    backend = ServerBackend(sync_generate, tokenizer, sampling_params=sampling_params, eos=eos)
    return await loop.run_in_executor(
        pool, rollout_sample, job, example, list(prompt_ids), backend, retriever
    )


@functools.cache
def agent_loop_class() -> type:
    """The verl ``AgentLoopBase`` subclass (verl is imported here, and only here), for the
    installed verl, which must be a supported version (:mod:`harness.verl.versions`)."""
    from harness.verl.versions import require_verl

    require_verl(f"the {AGENT_NAME} agent loop")
    from verl.experimental.agent_loop.agent_loop import AgentLoopBase, AgentLoopOutput

    class HarnessTagAgentLoop(AgentLoopBase):
        def __init__(
            self, *args: Any, job: str, max_threads: int = 256, name: str = AGENT_NAME, **kwargs: Any
        ):
            super().__init__(*args, **kwargs)
            self.job = load_job(
                str(job_path(job, self.config.actor_rollout_ref.rollout.agent.agent_loop_config_path))
            )
            self.max_threads = int(max_threads)
            self.response_length = int(self.config.actor_rollout_ref.rollout.response_length)
            self.eos = _model_eos_ids(self.tokenizer, str(self.config.actor_rollout_ref.model.path))

        async def run(self, sampling_params: dict[str, Any], **kwargs: Any) -> AgentLoopOutput:
            from uuid import uuid4

            info = kwargs.get("extra_info") or {}
            if info.get("method", self.job.method) != self.job.method:
                raise ConfigError(
                    f"row method {info.get('method')!r} differs from the job's {self.job.method!r} "
                    f"({AGENT_NAME} runs one exported job)"
                )
            # verl 0.9's prompt tokens (its "continuous token" builder: the chat template with
            # data.apply_chat_template_kwargs, and the job's custom_chat_template if any)
            prompt_ids = await self.ct_build_initial_tokens(list(kwargs["raw_prompt"]))
            request_id = uuid4().hex  # one sticky server per trajectory (prefix cache)

            async def generate(ids: list[int], params: dict[str, Any]) -> list[int]:
                out = await self.server_manager.generate(request_id, prompt_ids=ids, sampling_params=params)
                return list(out.token_ids)

            params = {k: v for k, v in sampling_params.items() if k != "logprobs"}
            r = await rollout_async(
                self.job,
                row_example(kwargs),
                prompt_ids,
                generate=generate,
                tokenizer=self.tokenizer,
                sampling_params=params,
                retriever=retriever_for(self.job.retriever_url),
                eos=self.eos,
                pool=executor(self.max_threads),
            )
            turns = r.trajectory.turns
            metrics = {
                "generate_sequences": sum(t.latency_s or 0.0 for t in turns if t.kind == "generate"),
                "tool_calls": sum(t.latency_s or 0.0 for t in turns if t.kind == "retrieve"),
            }
            n = self.response_length
            return AgentLoopOutput(
                prompt_ids=r.prompt_ids,
                response_ids=r.response_ids[:n],
                response_mask=r.response_mask[:n],
                num_turns=r.num_turns,
                metrics=metrics,
                extra_fields={"harness_truncated": len(r.response_ids) > n, "harness_unaligned": r.unaligned},
            )

    # Hydra's `_target_` (AGENT_CLASS) must resolve to the module attribute. The loop is not put in
    # verl's registry with `register(AGENT_NAME)`: the exported agent_loop.yaml registers it with its
    # `job`, and verl's AgentLoopWorker resolves this class only after loading that yaml, so a
    # registration here would replace the yaml's entry by one without `job`
    HarnessTagAgentLoop.__module__ = __name__
    HarnessTagAgentLoop.__qualname__ = "HarnessTagAgentLoop"
    return HarnessTagAgentLoop


@functools.cache
def _model_eos_ids(tokenizer: Any, model_path: str) -> frozenset[int]:
    from transformers import GenerationConfig
    from verl.utils.fs import copy_to_local

    try:
        gc = GenerationConfig.from_pretrained(copy_to_local(model_path))
    except OSError:
        gc = None  # no generation_config.json: the tokenizer's end-of-sequence token
    return eos_ids(tokenizer, gc)


def __getattr__(name: str) -> Any:
    # Hydra resolves `_target_: harness.verl.agent_loop.HarnessTagAgentLoop` (AGENT_CLASS) with getattr.
    if name == "HarnessTagAgentLoop":
        return agent_loop_class()
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
