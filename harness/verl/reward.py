"""verl's reward signature over **our** reward code: the exported ``reward.py`` calls
:func:`verl_compute_score`, so the reward optimised at scale is the one optimised in-harness
(tests check the values agree for every reward of every trainable method).

The reward reconstructs the trajectory our engine would have recorded from the decoded response
(:func:`trajectory_from_text`). A method without a multi-turn rollout (``rollout_config`` is None)
answers in one completion: its own ``solve`` is replayed on the response (same extraction, same
trajectory meta, e.g. gold reference numbers its rollout records). A multi-turn response is split
into the model's segments and the environment's text: the method's own observation blocks
(``dialect.obs_prefix`` … ``obs_suffix``), the dialect's correction message, and (in a response
of verl's own ``tool_agent``) verl's tool turns (``<tool_response>`` blocks, with the ChatML role
lines that survive decoding without special tokens), which become observations in the **method's
own wrapper** with the tool's text. So a reward that reads the structure of the response (a format
grammar, a check of the observation tags, a judge's view of the context) sees what it sees
in-harness; the answer is read from the model's own text only.
"""

from __future__ import annotations

import functools
import json
import re
import threading
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from harness.method import RewardContext, TrainableMethod
from harness.rollout.base import RunContext
from harness.types import Completion, QAExample, SamplingParams, Trajectory, Turn
from harness.verl.contract import rollout_of, trainable
from harness.verl.rows import example_from_verl

if TYPE_CHECKING:
    from harness.protocol import Protocol
    from harness.rollout.base import RolloutConfig
    from harness.rollout.dialect import TagDialect

# verl's tool turn as decoded for the reward (``skip_special_tokens=True``) under a ChatML template
# (Qwen2.5): "<|im_start|>user\n<tool_response>\n{text}\n</tool_response><|im_end|>\n<|im_start|>assistant\n"
VERL_TOOL_TURN = r"(?:user\n)?<tool_response>\n?(?P<tool>.*?)\n?</tool_response>(?:\nassistant\n)?"


@dataclass(frozen=True)
class Exported:
    """How a method's verl job is built: its rollout config (None for a method that does not
    retrieve and answers in one completion) and the protocol its rollouts use."""

    method: TrainableMethod
    rollout: RolloutConfig | None
    protocol: Protocol


@functools.cache
def exported(method_name: str) -> Exported:
    """The method and its rollout config, built once per process: verl calls the reward once per
    trajectory, and building a method costs milliseconds."""
    from harness.eval.protocol import mini

    method = trainable(method_name)
    protocol = mini()
    return Exported(method, rollout_of(method, protocol), protocol)


def tool_text(content: str) -> str:
    """The text of a verl tool response: verl's ``SearchTool`` returns ``{"result": text}`` JSON."""
    try:
        data = json.loads(content)
    except ValueError:
        return content
    if isinstance(data, dict) and isinstance(data.get("result"), str):
        return data["result"]
    return content


def response_parts(solution_str: str, dialect: TagDialect) -> list[tuple[str, bool, str | None]]:
    """``(text, written by the model, observation body or None)`` parts of a decoded multi-turn
    response: the method's observation blocks and verl's tool turns (rewritten into the method's
    wrapper) are observations, the dialect's correction message is environment text, the rest is
    the model's."""
    alts = [
        re.escape(dialect.obs_prefix) + r"(?P<obs>.*?)" + re.escape(dialect.obs_suffix),
        VERL_TOOL_TURN,
    ]
    if dialect.invalid_message.strip():
        alts.append(r"(?P<invalid>" + re.escape(dialect.invalid_message) + ")")
    pattern = re.compile("|".join(f"(?:{a})" for a in alts), re.DOTALL)
    parts: list[tuple[str, bool, str | None]] = []
    pos = 0
    for m in pattern.finditer(solution_str):
        if m.start() > pos:
            parts.append((solution_str[pos : m.start()], True, None))
        if m.group("obs") is not None:
            parts.append((m.group(0), False, m.group("obs")))
        elif m.group("tool") is not None:
            body = tool_text(m.group("tool"))
            parts.append((dialect.obs_prefix + body + dialect.obs_suffix, False, body))
        else:
            parts.append((m.group(0), False, None))
        pos = m.end()
    if pos < len(solution_str):
        parts.append((solution_str[pos:], True, None))
    return parts


class _ReplayBackend:
    """A backend whose one completion is a given response (a one-completion method's ``solve`` is
    replayed on a verl response); training-mode calls return no token ids."""

    name = "verl-replay"

    def __init__(self, text: str):
        self.text = text

    def chat_prompt(self, messages: list[dict[str, str]], add_generation_prompt: bool = True) -> str:
        return "".join(m["content"] for m in messages)

    def prompt_ids(self, text: str) -> list[int]:
        return []

    def _completions(self, n: int) -> list[Completion]:
        return [Completion(text=self.text, prompt_tokens=0, completion_tokens=0, finish_reason="stop")] * n

    def generate(self, prompts: list[str], **_kw: Any) -> list[Completion]:
        return self._completions(len(prompts))

    def generate_ids(self, prompt_ids: list[list[int]], **_kw: Any) -> list[Completion]:
        return self._completions(len(prompt_ids))


def trajectory_from_text(method_name: str, solution_str: str, example: QAExample) -> Trajectory:
    """The trajectory a decoded verl response stands for, as our engine would have recorded it
    (see the module docstring)."""
    ex = exported(method_name)
    if ex.rollout is None:
        ctx = RunContext(
            backend=_ReplayBackend(solution_str),  # type: ignore[arg-type]
            protocol=ex.protocol,
            sampling=SamplingParams(),
            training=True,
        )
        (traj,) = ex.method.solve([example], ctx)
        return traj
    d = ex.rollout.dialect
    parts = response_parts(solution_str, d)
    turns: list[Turn] = []
    for text, own, body in parts:
        if own:
            turns.append(Turn(index=len(turns), kind="generate", text=text))
        elif body is not None:
            prev = turns[-1].text if turns and turns[-1].kind == "generate" else ""
            action, query = d.parse_action(prev)
            turns.append(
                Turn(
                    index=len(turns), kind="retrieve", text=body, query=query if action == "search" else None
                )
            )
    model_text = "".join(text for text, own, _ in parts if own)
    extraction = ex.rollout.extract(model_text)
    return Trajectory(
        example_id=example.id,
        dataset=example.dataset,
        question=example.question,
        answers=list(example.answers),
        turns=turns,
        prediction=extraction.prediction,
        extraction_status=extraction.status,
        response="".join(text for text, _, _ in parts),
    )


def verl_compute_score(
    method_name: str,
    reward_name: str,
    data_source: str,
    solution_str: str,
    ground_truth: Any,
    extra_info: dict[str, Any] | None = None,
    models: dict[str, Any] | None = None,
    *,
    step: int = 0,
    total_steps: int | None = None,
) -> dict[str, float]:
    """verl's reward signature -> our reward. Returns ``{"score": total, **components}`` (verl
    logs the extra keys). ``total_steps``: the run's length, for rewards that anneal with t/T."""
    ex = exported(method_name)
    example = example_from_verl(data_source, ground_truth, extra_info)
    traj = trajectory_from_text(method_name, solution_str, example)
    ctx = RewardContext(step=step, models=models or {}, total_steps=total_steps)
    r = ex.method.reward(traj, name=reward_name, ctx=ctx)
    return {"score": float(r.total), **{k: float(v) for k, v in r.components.items()}}


def aux_models_from_job(job_json: Path) -> dict[str, Any]:
    """Build the recipe's auxiliary models (role -> backend) recorded in an exported ``job.json``.
    At scale these are OpenAI-compatible servers (``vllm serve``); edit job.json to point at yours.
    An in-process backend (``transformers``, ``vllm``, ``llamacpp``) generates one call at a time
    (its prefix cache is not shared safely), so it is wrapped in :class:`OneCallAtATime`; verl
    calls the reward from many threads at once. (A reward that embeds with a packaged encoder loads
    it itself: :meth:`TrainableMethod.load_reward_models`.)"""
    from harness.llm.base import BackendSpec, make_backend

    job = json.loads(Path(job_json).read_text())
    specs = job["recipe"].get("aux_models", {})
    out: dict[str, Any] = {}
    for role, raw in specs.items():
        spec = BackendSpec.model_validate(raw)
        backend = make_backend(spec)
        out[role] = backend if spec.kind == "openai" else OneCallAtATime(backend)
    return out


class OneCallAtATime:
    """A backend whose calls (``chat_batch``, ``generate``, ...) take one lock: an in-process model
    generates one call at a time (harness/llm/transformers_backend.py's prefix cache is not
    thread-safe), while verl's reward manager scores a batch from many threads. Attributes that
    are not methods are the backend's own. (By hand: a lock around another object's every method
    is a few lines, no library does it.)"""

    def __init__(self, backend: Any):
        self._backend = backend
        self._lock = threading.Lock()

    def __getattr__(self, name: str) -> Any:
        attr = getattr(self._backend, name)
        if not callable(attr):
            return attr

        @functools.wraps(attr)
        def locked(*args: Any, **kwargs: Any) -> Any:
            with self._lock:
                return attr(*args, **kwargs)

        return locked


_REWARD_MODELS: dict[tuple[str, str], dict[str, Any]] = {}  # (method, job.json) -> role -> model
_REWARD_MODELS_LOCK = threading.Lock()


def reward_models(method_name: str, job_json: Path) -> dict[str, Any]:
    """The reward's helper models for an exported job, loaded once per process, under a lock,
    before the first trajectory is scored: the recipe's auxiliary models (:func:`aux_models_from_job`)
    and the models the method's rewards load themselves (:meth:`TrainableMethod.load_reward_models`,
    e.g. a packaged sentence encoder). verl scores a batch from many threads at once, and
    transformers' ``from_pretrained`` called from several threads at once fails ("Cannot copy out of
    meta tensor"); so the first call loads while the others wait, and every later call returns the
    same models."""
    key = (method_name, str(Path(job_json).resolve()))
    with _REWARD_MODELS_LOCK:
        if key not in _REWARD_MODELS:
            models = aux_models_from_job(Path(job_json))
            exported(method_name).method.load_reward_models()
            _REWARD_MODELS[key] = models
        return _REWARD_MODELS[key]
