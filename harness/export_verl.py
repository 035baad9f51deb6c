"""Export a method's training job to verl (Ray, multi-GPU, multi-node): the way to train at scale.

``harness export-verl --method M --out DIR`` writes:

- ``data/train.parquet`` and ``data/test.parquet`` in verl's RL dataset format (``data_source``,
  ``prompt`` chat messages, ``ability``, ``reward_model.ground_truth.target``, ``extra_info``,
  ``agent_name``), built with the method's own ``prompt_messages``; ``extra_info.example`` holds
  the whole question (JSON) so the reward sees what the in-harness reward sees;
- ``reward.py``: a verl custom reward function with verl's ``compute_score(data_source,
  solution_str, ground_truth, extra_info)`` signature that calls **our** reward code, so the same
  reward is optimised at scale as here (tests check the values agree for every trainable method);
- for methods that retrieve, ``agent_loop.yaml``: verl's ``agent_loop_config_path`` file that
  registers :mod:`harness.verl_agent_loop` (``harness_tag_agent``, the rows' ``agent_name``): the
  method's own tag dialect rolled out by our engine against verl's inference servers and
  ``harness serve-retriever`` (job.json's ``retriever_url``), so verl trains on the rollouts the
  harness trainer makes; a method that does not retrieve (ARENA) runs verl's ``single_turn_agent``;
- for a method whose prompt pre-fills the assistant turn (TIRESRAG-R1's ``<think>``: a final
  ``assistant`` message of ``prompt_messages``), ``verl_job.yaml``, a verl config whose
  ``actor_rollout_ref.model.custom_chat_template`` is the model's own chat template followed by the
  pre-fill after the generation prompt (not after a tool turn), the way verl's examples set a
  custom template; the parquet prompt keeps the other messages;
- ``run.sh``: the launch command with the recipe's hyperparameters as verl overrides; a recipe
  with reward stages (When-to-Search) runs one verl invocation per stage, resuming the checkpoint,
  each with its reward (``custom_reward_function.reward_kwargs.reward``);
- ``job.json``: the recipe and protocol exported, for the record, with ``limitations``: what of
  the recipe verl's ``main_ppo`` does not run (dynamic sampling, advantage hooks, ...).

The reward reconstructs the trajectory our engine would have recorded from the decoded response
(:func:`trajectory_from_text`). A method that does not retrieve answers in one completion: its own
``solve`` is replayed on the response (same extraction, same trajectory meta, e.g. ARENA's gold
reference numbers). A multi-turn response is split into the model's segments and observations:
the method's own observation blocks (``dialect.obs_prefix`` … ``obs_suffix``), the method's
correction message, and (in a response of verl's own ``tool_agent``) verl's tool turns
(``<tool_response>`` blocks, with the ChatML role lines that survive decoding without special
tokens) which become observations in the **method's own wrapper** with the tool's text, so a reward that reads the structure of the response (When-to-Search's
format grammar, R-Search's ``<observation>`` check, TIRESRAG-R1's judge context) sees what it sees
in-harness; the answer is read from the model's own text only.
"""

from __future__ import annotations

import functools
import json
import math
import re
import shlex
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

from harness.errors import ConfigError
from harness.method import RewardContext, RunContext, TrainableMethod
from harness.rollout.engine import TagRolloutConfig
from harness.types import Completion, QAExample, SamplingParams, Trajectory, Turn
from harness.verl_agent_loop import AGENT_NAME, agent_loop_yaml

# verl's tool turn as decoded for the reward (``skip_special_tokens=True``) under a ChatML template
# (Qwen2.5): "<|im_start|>user\n<tool_response>\n{text}\n</tool_response><|im_end|>\n<|im_start|>assistant\n"
VERL_TOOL_TURN = r"(?:user\n)?<tool_response>\n?(?P<tool>.*?)\n?</tool_response>(?:\nassistant\n)?"


@dataclass(frozen=True)
class Exported:
    """How a method's verl job is built: its rollout config (None for a method that does not
    retrieve and answers in one completion) and the protocol its rollouts use."""

    method: TrainableMethod
    rollout: Any
    protocol: Any


@functools.cache
def _trainable(method_name: str) -> Exported:
    """The method and its rollout config, built once per process: verl calls the reward once per
    trajectory, and building a method costs milliseconds."""
    from harness.methods_registry import get_method
    from harness.protocol import mini

    method = get_method(method_name)
    if not isinstance(method, TrainableMethod):
        raise ConfigError(f"{method_name!r} is not a trainable method")
    protocol = mini()
    if not method.uses_retrieval:
        return Exported(method, None, protocol)
    if not hasattr(method, "rollout_config"):
        raise ConfigError(
            f"method {method_name!r} retrieves but has no rollout_config(protocol) with a tag dialect: "
            "its verl responses cannot be split into model text and observations"
        )
    return Exported(method, method.rollout_config(protocol), protocol)  # type: ignore[attr-defined]


def tool_text(content: str) -> str:
    """The text of a verl tool response: verl's ``SearchTool`` returns ``{"result": text}`` JSON."""
    try:
        data = json.loads(content)
    except ValueError:
        return content
    if isinstance(data, dict) and isinstance(data.get("result"), str):
        return data["result"]
    return content


def response_parts(solution_str: str, dialect: Any) -> list[tuple[str, bool, str | None]]:
    """``(text, written by the model, observation body or None)`` parts of a decoded multi-turn
    response: the method's observation blocks and verl's tool turns (rewritten into the method's
    wrapper) are observations, the method's correction message is environment text, the rest is
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
    ex = _trainable(method_name)
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


def example_from_verl(data_source: str, ground_truth: Any, extra_info: dict[str, Any] | None) -> QAExample:
    """The question a verl row stands for: ``extra_info.example`` (JSON, written by the export),
    else the row's id / question and the ground truth."""
    info = extra_info or {}
    if info.get("example"):
        return QAExample.from_dict(json.loads(info["example"]))
    target = ground_truth["target"] if isinstance(ground_truth, dict) else ground_truth
    answers = tuple(str(a) for a in (target if isinstance(target, list | tuple) else list(target)))
    return QAExample(
        id=str(info.get("id", "")),
        dataset=data_source,
        split=str(info.get("split", "")),
        question=str(info.get("question", "")),
        answers=answers,
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
    logs the extra keys). ``total_steps``: the run's length, for rewards that anneal (TIRESRAG-R1)."""
    ex = _trainable(method_name)
    example = example_from_verl(data_source, ground_truth, extra_info)
    traj = trajectory_from_text(method_name, solution_str, example)
    ctx = RewardContext(step=step, models=models or {}, total_steps=total_steps)
    r = ex.method.reward(traj, name=reward_name, ctx=ctx)
    return {"score": float(r.total), **{k: float(v) for k, v in r.components.items()}}


def aux_models_from_job(job_json: Path) -> dict[str, Any]:
    """Build the recipe's auxiliary models (role -> backend) recorded in an exported ``job.json``.
    At scale these are OpenAI-compatible servers (``vllm serve``); edit job.json to point at yours.
    (When-to-Search's embedder is not a backend: its reward loads the packaged MiniLM itself.)"""
    from harness.llm.base import BackendSpec, make_backend

    job = json.loads(Path(job_json).read_text())
    specs = job["recipe"].get("aux_models", {})
    return {role: make_backend(BackendSpec.model_validate(spec)) for role, spec in specs.items()}


REWARD_PY = '''"""verl custom reward for {method} (generated by `harness export-verl`).

verl config: custom_reward_function.path=<this file> custom_reward_function.name=compute_score
Needs the harness installed in verl's environment (pip install rar-harness).
run.sh passes the reward of each stage as custom_reward_function.reward_kwargs.reward.
"""

from pathlib import Path

from harness.export_verl import aux_models_from_job, verl_compute_score

METHOD = {method!r}
REWARD = {reward!r}
TOTAL_STEPS = {total_steps!r}  # the recipe's steps (rewards that anneal with t/T read it)
_MODELS = None  # auxiliary models of the reward (e.g. R-Search's reader), from job.json's recipe


def compute_score(data_source, solution_str, ground_truth, extra_info=None, reward=REWARD, **kwargs):
    global _MODELS
    if _MODELS is None:
        _MODELS = aux_models_from_job(Path(__file__).with_name("job.json"))
    return verl_compute_score(
        METHOD, reward, data_source, solution_str, ground_truth, extra_info, models=_MODELS, total_steps=TOTAL_STEPS
    )
'''


def split_prefill(messages: list[dict[str, str]]) -> tuple[list[dict[str, str]], str]:
    """``prompt_messages`` -> (the chat messages, the assistant pre-fill or "")."""
    if messages and messages[-1]["role"] == "assistant":
        return messages[:-1], messages[-1]["content"]
    return messages, ""


def model_chat_template(model_path: str, chat_template: Path | None) -> str:
    """The chat template verl will apply: ``chat_template`` (a Jinja file), else the template of
    the model directory ``model_path`` (``chat_template.jinja`` or ``tokenizer_config.json``)."""
    if chat_template is not None:
        return Path(chat_template).read_text()
    d = Path(model_path)
    if (d / "chat_template.jinja").is_file():
        return (d / "chat_template.jinja").read_text()
    cfg = d / "tokenizer_config.json"
    if cfg.is_file():
        tpl = json.loads(cfg.read_text()).get("chat_template")
        if isinstance(tpl, str):
            return tpl
    raise ConfigError(
        f"the method pre-fills the assistant turn, so the export writes the model's chat template with the "
        f"pre-fill appended; {model_path!r} is not a local model directory with a chat template "
        "(chat_template.jinja or tokenizer_config.json 'chat_template'): pass --model DIR or --chat-template FILE"
    )


PROMPT_MARGIN = 1.25  # head-room when prompt lengths are measured with another model's tokenizer


@dataclass(frozen=True)
class PromptBudget:
    """``data.max_prompt_length`` for verl: the longest exported prompt in tokens, measured with
    the model's own tokenizer when ``--model`` is a local directory (``exact``), else with the
    packaged SmolLM2 tokenizer plus a 25% margin, rounded up to a multiple of 64. verl refuses a
    longer prompt (``data.truncation=error``) instead of cutting it, so a short budget fails loudly."""

    max_prompt_length: int
    longest_measured: int
    tokenizer: str
    exact: bool


def prompt_budget(prompts: list[list[dict[str, str]]], model_path: str, prefill: str = "") -> PromptBudget:
    from transformers import AutoTokenizer

    local = Path(model_path)
    exact = (local / "tokenizer_config.json").is_file() or (local / "tokenizer.json").is_file()
    if exact:
        tok_dir = str(local)
    else:
        from harness.llm.model_files import ensure_hf_model

        tok_dir = str(ensure_hf_model())
    tok = AutoTokenizer.from_pretrained(tok_dir)
    longest = 0
    for messages in prompts:
        text = tok.apply_chat_template(messages, tokenize=False, add_generation_prompt=True) + prefill
        longest = max(longest, len(tok(text, add_special_tokens=False)["input_ids"]))
    budget = longest if exact else math.ceil(longest * PROMPT_MARGIN)
    budget = max(64, math.ceil(budget / 64) * 64)
    return PromptBudget(budget, longest, model_path if exact else f"{tok_dir} (estimate)", exact)


def prefill_template(base: str, prefill: str) -> str:
    """``base`` followed by ``prefill`` after the generation prompt; not after a tool turn (verl
    renders tool responses with ``add_generation_prompt=True`` too, and the model continues its own
    turn there)."""
    return (
        base
        + "{%- if add_generation_prompt and messages[-1]['role'] != 'tool' %}{{ "
        + json.dumps(prefill)
        + " }}{%- endif %}"
    )


def job_config_yaml(custom_chat_template: str) -> str:
    """A verl config (verl's examples' layout: ``ppo_trainer`` defaults + our settings)."""
    return (
        "# verl config written by `harness export-verl` (run.sh: --config-path <dir> --config-name verl_job)\n"
        "hydra:\n  searchpath:\n    - pkg://verl.trainer.config\n\n"
        "defaults:\n  - ppo_trainer\n  - _self_\n\n"
        "actor_rollout_ref:\n  model:\n"
        f"    custom_chat_template: {json.dumps(custom_chat_template)}\n"
    )


def env_tokens(method_name: str, max_obs_tokens: int) -> int:
    """An upper bound on the tokens a turn's environment text adds beyond ``max_obs_tokens``: the
    observation's wrapper tags, or a correction message (characters bound tokens), for the
    response budget."""
    ex = _trainable(method_name)
    if ex.rollout is None:
        return 0
    d = ex.rollout.dialect
    wrap = len(d.obs_prefix) + len(d.obs_suffix)
    if isinstance(ex.rollout, TagRolloutConfig):
        return max(wrap, len(d.invalid_message) - max_obs_tokens)
    return wrap


def limitations(method: TrainableMethod, recipe: Any) -> list[str]:
    """What of the recipe verl's ``main_ppo`` does not run as the harness trainer does."""
    a = recipe.algo
    out = []
    if a.dynamic_sampling.enabled:
        out.append(
            "algo.dynamic_sampling (group filters) is not exported: verl's main_ppo has none (recipe/dapo does)"
        )
    if a.overlong is not None and (a.overlong.soft_penalty or a.overlong.filter_truncated):
        out.append("algo.overlong is not exported: verl's main_ppo has no overlong shaping or filter")
    if type(method).advantage_adjust is not TrainableMethod.advantage_adjust:
        out.append(
            f"{method.name}'s advantage hook (advantage_adjust) is not applied: verl computes plain advantages"
        )
    out.append(
        "verl does not pass the training step to compute_score: the reward sees step 0 within each reward "
        "stage (a reward that anneals with t/T, TIRESRAG-R1's a_t, keeps its step-0 value)"
    )
    if method.uses_retrieval:
        out.append(
            "the harness_tag_agent loop returns no rollout log-probs: keep "
            "actor_rollout_ref.rollout.calculate_log_probs=false (no rollout importance-sampling correction)"
        )
    return out


def verl_overrides(
    recipe: Any,
    out: Path,
    *,
    n_gpus: int,
    model_path: str,
    uses_retrieval: bool = True,
    env_tokens: int = 0,
    max_prompt_length: int | None = None,
) -> list[str]:
    """The recipe's hyperparameters as verl Hydra overrides (``verl.trainer.main_ppo``).
    ``env_tokens``: the most tokens an observation or correction adds on top of ``max_obs_tokens``
    (its wrapper tags; the budget of the response holds every turn's)."""
    a = recipe.algo
    adv = {
        "grpo": "grpo",
        "dr_grpo": "grpo",
        "reinforce_pp": "reinforce_plus_plus",
        "reinforce_pp_baseline": "reinforce_plus_plus_baseline",
        "rloo": "rloo",
        "gae": "gae",
    }[a.adv_estimator]
    turns = recipe.max_turns if uses_retrieval else 0
    max_response = recipe.max_new_tokens * (turns + 1) + (recipe.max_obs_tokens + env_tokens) * turns
    ov = [
        f"algorithm.adv_estimator={adv}",
        f"algorithm.norm_adv_by_std_in_grpo={str(a.norm_adv_by_std).lower()}",
        f"data.train_files={out / 'data' / 'train.parquet'}",
        f"data.val_files={out / 'data' / 'test.parquet'}",
        f"data.train_batch_size={a.train_batch_size}",
        f"data.max_response_length={max_response}",
        *(
            [f"data.max_prompt_length={max_prompt_length}", "data.truncation=error"]
            if max_prompt_length is not None
            else []
        ),
        "data.return_raw_chat=true",
        f"actor_rollout_ref.model.path={model_path}",
        f"actor_rollout_ref.actor.optim.lr={a.lr}",
        f"actor_rollout_ref.actor.optim.weight_decay={a.weight_decay}",
        f"actor_rollout_ref.actor.ppo_mini_batch_size={a.mini_batch_size}",
        f"actor_rollout_ref.actor.ppo_epochs={a.ppo_epochs}",
        f"actor_rollout_ref.actor.clip_ratio_low={a.clip_low}",
        f"actor_rollout_ref.actor.clip_ratio_high={a.clip_high}",
        f"actor_rollout_ref.actor.loss_agg_mode={a.loss_agg_mode}",
        f"actor_rollout_ref.actor.entropy_coeff={a.entropy_coef}",
        f"actor_rollout_ref.actor.use_kl_loss={str(a.kl_placement == 'loss').lower()}",
        f"actor_rollout_ref.actor.kl_loss_coef={a.kl_coef if a.kl_placement == 'loss' else 0.0}",
        f"actor_rollout_ref.actor.kl_loss_type={a.kl_estimator}",
        f"algorithm.use_kl_in_reward={str(a.kl_placement == 'reward').lower()}",
        f"algorithm.kl_ctrl.kl_coef={a.kl_coef if a.kl_placement == 'reward' else 0.0}",
        f"actor_rollout_ref.rollout.n={a.group_size}",
        f"actor_rollout_ref.rollout.temperature={a.temperature}",
        f"actor_rollout_ref.rollout.top_p={a.top_p}",
        "actor_rollout_ref.rollout.name=sglang",
    ]
    if uses_retrieval:
        ov += [
            "actor_rollout_ref.rollout.multi_turn.enable=true",
            f"actor_rollout_ref.rollout.agent.agent_loop_config_path={out / 'agent_loop.yaml'}",
        ]
    ov += [
        f"custom_reward_function.path={out / 'reward.py'}",
        "custom_reward_function.name=compute_score",
        f"trainer.total_training_steps={recipe.steps}",
        f"trainer.n_gpus_per_node={n_gpus}",
    ]
    if a.grad_clip is not None:
        ov.append(f"actor_rollout_ref.actor.grad_clip={a.grad_clip}")
    if a.critic is not None:  # PPO: verl's critic worker (a value model from the same base model)
        c = a.critic
        warm = (
            [f"critic.optim.lr_warmup_steps={c.lr_warmup_steps}"]
            if c.lr_warmup_steps is not None
            else [f"critic.optim.lr_warmup_steps_ratio={c.lr_warmup_ratio}"]
        )
        ov += [
            f"algorithm.gamma={a.gamma}",
            f"algorithm.lam={c.lam}",
            f"critic.model.path={model_path}",
            f"critic.optim.lr={c.lr}",
            *warm,
            f"critic.optim.weight_decay={c.weight_decay}",
            f"critic.cliprange_value={c.cliprange_value}",
            f"critic.ppo_mini_batch_size={a.mini_batch_size}",
            f"critic.ppo_epochs={a.ppo_epochs}",
            f"trainer.critic_warmup={c.warmup_steps}",
        ]
        if c.grad_clip is not None:
            ov.append(f"critic.grad_clip={c.grad_clip}")
    if a.loss_norm_length is not None:
        ov.append(f"actor_rollout_ref.actor.loss_scale_factor={a.loss_norm_length}")
    return ov


def _rows(
    method: TrainableMethod, examples: list[QAExample], split: str, reward: str
) -> tuple[list[dict[str, Any]], set[str]]:
    """The parquet rows and the assistant pre-fills of the method's prompts ("" = none)."""
    rows = []
    prefills: set[str] = set()
    agent = AGENT_NAME if method.uses_retrieval else "single_turn_agent"
    for i, e in enumerate(examples):
        messages, prefill = split_prefill(method.prompt_messages(e, training=True))
        prefills.add(prefill)
        rows.append(
            {
                "data_source": e.dataset,
                "prompt": messages,
                "ability": "fact-reasoning",
                "reward_model": {"style": "rule", "ground_truth": {"target": list(e.answers)}},
                "extra_info": {
                    "split": split,
                    "index": i,
                    "id": e.id,
                    "question": e.question,
                    "method": method.name,
                    "reward": reward,
                    "example": json.dumps(e.to_dict(), ensure_ascii=False),
                },
                "agent_name": agent,
            }
        )
    return rows, prefills


def stage_runs(recipe: Any) -> list[tuple[str, int]]:
    """``(reward, last step + 1)`` of each reward stage that starts before the end of the run."""
    stages = [s for s in recipe.reward_stages if s.start_step < recipe.steps]
    return [
        (s.reward, stages[i + 1].start_step if i + 1 < len(stages) else recipe.steps)
        for i, s in enumerate(stages)
    ]


def export_verl(
    method: TrainableMethod,
    recipe: Any,
    out: Path,
    *,
    retriever_url: str,
    test_bench: str,
    test_limit: int | None,
    n_gpus: int,
    model_path: str,
    data_dir: Path | None = None,
    chat_template: Path | None = None,
) -> list[Path]:
    """Load the recipe's training questions and the validation bench, then :func:`write_verl_job`."""
    from harness.data.benches import Selection, get_bench, load_bench

    train = [
        e for _, exs in load_bench(get_bench(recipe.bench), recipe.selection, data_dir=data_dir) for e in exs
    ]
    sel = Selection(mode="first", n=test_limit) if test_limit else Selection()
    test = [e for _, exs in load_bench(get_bench(test_bench), sel) for e in exs]
    return write_verl_job(
        method,
        recipe,
        out,
        train,
        test,
        retriever_url=retriever_url,
        n_gpus=n_gpus,
        model_path=model_path,
        chat_template=chat_template,
    )


def write_verl_job(
    method: TrainableMethod,
    recipe: Any,
    out: Path,
    train: list[QAExample],
    test: list[QAExample],
    *,
    retriever_url: str,
    n_gpus: int,
    model_path: str,
    chat_template: Path | None = None,
) -> list[Path]:
    """Write the job's files (module docstring) for these training and validation questions."""
    import pyarrow as pa
    import pyarrow.parquet as pq

    out = Path(out).resolve()
    (out / "data").mkdir(parents=True, exist_ok=True)
    reward = recipe.reward_at(0)
    prefills: set[str] = set()
    prompts: list[list[dict[str, str]]] = []
    for name, examples, split in (("train", train, "train"), ("test", test, "test")):
        rows, seen = _rows(method, examples, split, reward)
        prefills |= seen
        prompts += [r["prompt"] for r in rows]
        pq.write_table(pa.Table.from_pylist(rows), out / "data" / f"{name}.parquet")
    if len(prefills) > 1:
        raise ConfigError(
            f"method {method.name!r} pre-fills the assistant turn differently per question "
            f"({sorted(prefills)!r}); a verl chat template holds one pre-fill"
        )
    prefill = next(iter(prefills), "")
    budget = prompt_budget(prompts, model_path, prefill)
    files = [out / "data" / "train.parquet", out / "data" / "test.parquet"]
    (out / "reward.py").write_text(
        REWARD_PY.format(method=method.name, reward=reward, total_steps=recipe.steps)
    )
    files.append(out / "reward.py")
    if method.uses_retrieval:
        (out / "agent_loop.yaml").write_text(agent_loop_yaml(out / "job.json"))
        files.append(out / "agent_loop.yaml")
    launch = ["python3 -m verl.trainer.main_ppo \\"]
    if prefill:
        template = prefill_template(model_chat_template(model_path, chat_template), prefill)
        (out / "verl_job.yaml").write_text(job_config_yaml(template))
        files.append(out / "verl_job.yaml")
        launch.append(f"    --config-path={shlex.quote(str(out))} --config-name=verl_job \\")
    overrides = verl_overrides(
        recipe,
        out,
        n_gpus=n_gpus,
        model_path=model_path,
        uses_retrieval=method.uses_retrieval,
        env_tokens=env_tokens(method.name, recipe.max_obs_tokens),
        max_prompt_length=budget.max_prompt_length,
    )
    stages = stage_runs(recipe)
    lims = limitations(method, recipe)
    script = [
        "#!/usr/bin/env bash",
        f"# verl job for {method.name} (recipe {recipe.name}); generated by `harness export-verl`.",
    ]
    if method.uses_retrieval:
        script += [
            "# 1) start the retriever on the node(s) that run rollouts:",
            "#      harness serve-retriever --host 127.0.0.1 --port 8000 --protocol searchr1 --corpus wiki-18.jsonl &",
            "#    (job.json 'retriever_url' is where the harness_tag_agent loop sends the method's queries;",
            "#     the harness must be installed where verl's agent loop workers run)",
            "# 2) then:",
        ]
    script += [f"# not exported (job.json 'limitations'): {x}" for x in lims]
    script.append("set -euo pipefail")
    for i, (stage_reward, end) in enumerate(stages):
        stage_ov = [o for o in overrides if not o.startswith("trainer.total_training_steps=")]
        stage_ov += [
            f"trainer.total_training_steps={end}",
            f"+custom_reward_function.reward_kwargs.reward={stage_reward}",
        ]
        if len(stages) > 1:
            script.append(f"# stage {i + 1}/{len(stages)}: reward {stage_reward!r} until step {end}")
            stage_ov.append("trainer.resume_mode=auto")
        script += [*launch, *[f"    {shlex.quote(o)} \\" for o in stage_ov], '    "$@"']
    (out / "run.sh").write_text("\n".join(script) + "\n")
    (out / "run.sh").chmod(0o755)
    files.append(out / "run.sh")
    (out / "job.json").write_text(
        json.dumps(
            {
                "method": method.name,
                "recipe": recipe.model_dump(mode="json"),
                "retriever_url": retriever_url if method.uses_retrieval else None,
                "assistant_prefill": prefill or None,
                "prompt_budget": asdict(budget),
                "reward_stages": [{"reward": r, "until_step": end} for r, end in stages],
                "limitations": lims,
                "n_train": len(train),
                "n_test": len(test),
            },
            indent=2,
        )
    )
    files.append(out / "job.json")
    return files
