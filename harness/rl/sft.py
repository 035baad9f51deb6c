"""Supervised warm-up (``harness sft``): demonstrations in the method's own tag dialect, rolled
out through the method's own rollout, trained with the RL trainer's token-space machinery.

Building a demonstration. For each training question the method's ``solve`` runs in training
mode (``ctx.training=True``) with a :class:`TeacherBackend` in place of the model: every time the
engine asks for a generation, the teacher returns the recipe's next turn template
(``SftConfig.turns``, over ``{question}``, ``{answer}``, ``{evidence}`` (the sentence of the
observations so far that holds the answer) and the method's own ``demonstration_fields``) instead of
sampling, as token ids of
the policy's tokenizer. Everything else is the real environment: the engine parses the turn's
action, the protocol's retriever answers the search, the method's renderer / observation function
formats the documents, the observation is truncated and wrapped exactly as in RL and evaluation.
The result is a :class:`~harness.types.Trajectory` with ``prompt_ids``, ``response_ids`` and a
``loss_mask`` that is 0 on every observation token: the same ids and mask an RL rollout of that
text would have, because they are made by the same code. ``{answer}`` is the first gold answer
found (normalised substring) in the trajectory's observations so far, else the first gold answer;
with ``answer_in_observation`` only demonstrations whose observations hold a gold answer are kept.

Training. The loss is the negative log-likelihood of the masked-in (model) tokens, token-mean over
each optimizer batch, computed with the trainer's :func:`~harness.rl.trainer.sequence_logprobs`
(the same left-padded prompt / right-padded response forward as the policy loss) and
:func:`~harness.rl.losses.agg_loss`. Why not TRL's ``SFTTrainer``: its completion-only masking
marks one contiguous completion per example (``completion_mask`` / assistant-only loss), while a
search trajectory interleaves model text and observations; we would have to rebuild the exact ids
and multi-span mask ourselves and hand them over, so the trainer's own forward and loss share more
code (one log-prob function, one mask, one checkpoint format) and TRL would add nothing but a loop.
"""

from __future__ import annotations

import random
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

import torch

from harness.errors import ConfigError
from harness.llm.base import Backend, GenerateArgs, TokenBackend
from harness.method import TrainableMethod
from harness.metrics.normalize import normalize_answer
from harness.protocol import Protocol
from harness.rl.losses import agg_loss, agg_units
from harness.rl.recipe import SftConfig
from harness.rollout.base import RunContext
from harness.types import Completion, QAExample, Trajectory

if TYPE_CHECKING:
    from harness.eval.setup import RunSetup


def observations(trajectory: Trajectory) -> list[str]:
    """The text of every retrieval observation of a trajectory, in order."""
    return [t.text for t in trajectory.turns if t.kind == "retrieve"]


def gold_in(text: str, answers: Sequence[str]) -> str | None:
    """The first gold answer whose normalised form occurs in normalised ``text``, or None."""
    norm = normalize_answer(text)
    for a in answers:
        n = normalize_answer(a)
        if n and n in norm:
            return a
    return None


def evidence_sentence(text: str, answer: str) -> str:
    """The first sentence (split at ``. ``, ``? ``, ``! `` and line ends) of ``text`` whose normalised form holds
    ``answer``'s, tags removed, stripped; the whole stripped ``text`` when none does. A demonstration's ``{evidence}``:
    the retrieved fact a method that quotes its evidence (e.g. an ``<original_evidence>`` box) copies."""
    import re

    norm = normalize_answer(answer)
    text = re.sub(r"<[^>]*>", " ", text)  # no tag of the dialect inside a quoted fact
    for sentence in re.split(r"(?<=[.?!])\s+|\n+", text):
        if norm and norm in normalize_answer(sentence):
            return sentence.strip()
    return text.strip()


class TeacherBackend(TokenBackend):
    """Plays the model in a demonstration rollout: the k-th generation asked for a prompt returns
    the k-th turn template, formatted for that prompt's example. Tokenizer, chat template and
    completion building are the wrapped backend's, so ids are exactly the policy's."""

    name = "teacher"

    def __init__(self, inner: Backend, turns: Sequence[str], fields: dict[str, dict[str, str]] | None = None):
        self.inner = inner
        self.turns = tuple(turns)
        self.fields = fields or {}  # example id -> the method's extra template fields (demonstration_fields)
        self._plans: dict[tuple[int, ...], tuple[QAExample, list[int]]] = {}  # prompt ids -> (example, calls)
        self._lengths: set[int] = set()
        self.answers: dict[str, str] = {}  # example id -> the answer its last turn gave

    def expect(self, prompt_ids: Sequence[int], example: QAExample) -> None:
        key = tuple(prompt_ids)
        if key in self._plans:
            raise ConfigError(f"two demonstrations share one prompt (question {example.question!r})")
        self._plans[key] = (example, [0])
        self._lengths.add(len(key))

    def _plan_of(self, ids: Sequence[int]) -> tuple[QAExample, list[int], int]:
        for n in sorted(self._lengths, reverse=True):
            hit = self._plans.get(tuple(ids[:n]))
            if hit is not None:
                return hit[0], hit[1], n
        raise ConfigError(
            "the rollout asked the teacher for a prompt it was not given (TeacherBackend.expect)"
        )

    def _complete_ids(self, prompt_ids: Sequence[Sequence[int]], args: GenerateArgs) -> list[Completion]:
        out = []
        for ids in prompt_ids:
            ex, calls, n_prompt = self._plan_of(ids)
            k = calls[0]
            calls[0] += 1
            if k >= len(self.turns):
                # the demonstration did not end where the turns do (e.g. its search was refused):
                # an empty generation, which the engine reads as an invalid action
                text = ""
            else:
                context = self.inner.detokenize(list(ids[n_prompt:]))
                answer = gold_in(context, ex.answers) or ex.answers[0]
                self.answers[ex.id] = answer
                extra = self.fields.get(ex.id, {})
                evidence = evidence_sentence(context, answer) if "{evidence}" in self.turns[k] else ""
                text = self.turns[k].format(**extra, question=ex.question, answer=answer, evidence=evidence)
            gen = self.inner.tokenize(text)
            out.append(
                self.completion_from_ids(
                    gen, prompt_tokens=len(ids), eos_hit=False, stop=args.stop, include_stop=args.include_stop
                )
            )
        return out

    def chat_prompt(self, messages: list[dict[str, str]], add_generation_prompt: bool = True) -> str:
        return self.inner.chat_prompt(messages, add_generation_prompt)

    def tokenize(self, text: str) -> list[int]:
        return self.inner.tokenize(text)

    def detokenize(self, ids: Sequence[int]) -> str:
        return self.inner.detokenize(ids)

    def prompt_ids(self, text: str) -> list[int]:
        return self.inner.prompt_ids(text)

    def describe(self) -> dict[str, Any]:
        return {"backend": self.name, "inner": self.inner.describe(), "turns": list(self.turns)}


@dataclass
class Demonstrations:
    trajectories: list[Trajectory]
    asked: int  # questions rolled out
    kept: int  # demonstrations kept (answer in the observations, when required)


def build_demonstrations(
    method: TrainableMethod,
    examples: Sequence[QAExample],
    *,
    backend: Backend,
    protocol: Protocol,
    retriever: Any,
    cfg: SftConfig,
    batch_size: int = 64,
) -> Demonstrations:
    """Roll out the teacher's turns for every example through ``method.solve`` in training mode;
    keep the complete ones (answered; with ``cfg.answer_in_observation``, gold in an observation)."""
    seen: set[str] = set()
    unique = []
    for e in examples:  # one demonstration per question text (the teacher keys on the prompt)
        if e.question not in seen:
            seen.add(e.question)
            unique.append(e)
    kept: list[Trajectory] = []
    for i in range(0, len(unique), batch_size):
        chunk = unique[i : i + batch_size]
        teacher = TeacherBackend(
            backend, cfg.turns, {e.id: method.demonstration_fields(e, protocol) for e in chunk}
        )
        for e in chunk:
            messages = method.prompt_messages(e, training=True)
            if messages and messages[-1]["role"] == "assistant":
                # a pre-filled assistant turn (e.g. "<think>"): the rollout's prompt is the chat prompt
                # of the messages before it, then the pre-fill, as the method's solve writes it
                prompt = teacher.chat_prompt(messages[:-1]) + messages[-1]["content"]
            else:
                prompt = teacher.chat_prompt(messages)
            teacher.expect(teacher.prompt_ids(prompt), e)
        ctx = RunContext(backend=teacher, protocol=protocol, retriever=retriever, training=True)
        for t, e in zip(method.solve(list(chunk), ctx), chunk, strict=True):
            if t.prompt_ids is None or t.loss_mask is None:
                raise ConfigError(
                    f"method {method.name!r} returned a trajectory without token ids in training mode"
                )
            if t.extraction_status not in ("ok", "multiple_answers"):
                continue
            if cfg.answer_in_observation and gold_in(" ".join(observations(t)), e.answers) is None:
                continue
            kept.append(t)
    return Demonstrations(trajectories=kept, asked=len(unique), kept=len(kept))


@dataclass
class SftResult:
    checkpoint: Path
    steps: list[dict[str, float]]
    demonstrations: int


@torch.no_grad()
def dev_metrics(
    policy: Any, trajectories: Sequence[Trajectory], *, pad_id: int, micro_batch_size: int
) -> dict[str, float]:
    """The token-mean NLL of the model tokens of ``trajectories`` under ``policy`` (``sft/dev_loss``)
    and the mean per-token entropy of its next-token distribution there (``sft/dev_entropy``,
    nats, temperature 1): teacher-forced, no gradient."""
    from harness.rl.sequences import sequence_logprobs
    from harness.rl.trainer import loss_masks

    was_training = policy.training
    policy.eval()
    nll = ent = tokens = 0.0
    for c0 in range(0, len(trajectories), micro_batch_size):
        c = list(trajectories[c0 : c0 + micro_batch_size])
        mask = loss_masks(c, device=next(policy.parameters()).device)
        logp, en = sequence_logprobs(
            policy,
            [list(t.prompt_ids or []) for t in c],
            [list(t.response_ids or []) for t in c],
            pad_id=pad_id,
            temperature=1.0,
            with_entropy=True,
            mask=mask,
            entropy_grad=False,
            keep=mask,
        )
        m = mask[:, : logp.shape[1]].to(logp.dtype)
        nll += float(-(logp * m).sum())
        ent += float((en[:, : m.shape[1]] * m).sum()) if en is not None else 0.0
        tokens += float(m.sum())
    policy.train(was_training)
    if not tokens:
        raise ConfigError("dev demonstrations have no model tokens to score")
    return {"sft/dev_loss": nll / tokens, "sft/dev_entropy": ent / tokens, "sft/dev_tokens": tokens}


# long: the SFT loop in order (shuffled epochs of micro-batches, the schedule, the dev-slice early
# stop that keeps the best weights, the per-step log); the early stop reads and restores the loop's state
def train_sft(
    policy: Any,
    trajectories: Sequence[Trajectory],
    cfg: SftConfig,
    *,
    pad_id: int,
    seed: int,
    log: Callable[[str], None] = print,
    on_step: Callable[[int, dict[str, float]], None] | None = None,
    dev: Sequence[Trajectory] = (),
) -> list[dict[str, float]]:
    """Minimise the token-mean NLL of the model tokens (loss mask 1) of ``trajectories``;
    returns the per-optimizer-step metrics (``sft/loss``, ``sft/tokens``, ``lr``, ``grad_norm``).
    With ``cfg.eval_every`` and ``dev`` demonstrations: :func:`dev_metrics` every ``eval_every``
    steps (logged with that step), early stop after ``cfg.patience`` measurements without a lower
    dev loss, and the trainable weights of the lowest one restored at the end (its step is logged as
    ``sft/best_step`` on the last step's metrics)."""
    if cfg.eval_every and not dev:
        raise ConfigError("sft early stopping (eval_every) needs dev demonstrations; none were kept")
    from harness.rl.sequences import sequence_logprobs
    from harness.rl.trainer import loss_masks, make_adamw

    if not trajectories:
        raise ConfigError("no demonstrations to train on")
    params = [p for p in policy.parameters() if p.requires_grad]
    opt = make_adamw(params, lr=cfg.lr, betas=cfg.adam_betas, weight_decay=cfg.weight_decay)
    warm = cfg.lr_warmup_steps
    sched = torch.optim.lr_scheduler.LambdaLR(opt, lambda n: (n + 1) / warm if n < warm else 1.0)
    rng = random.Random(seed)
    policy.train()
    history: list[dict[str, float]] = []
    step = 0
    n_steps = cfg.epochs * -(-len(trajectories) // cfg.batch_size)
    best: tuple[float, int, list[torch.Tensor]] | None = None  # (dev loss, step, trainable weights)
    since_best = 0
    if cfg.eval_every:
        m0 = dev_metrics(policy, dev, pad_id=pad_id, micro_batch_size=cfg.micro_batch_size)
        best = (m0["sft/dev_loss"], 0, [p.detach().clone() for p in params])
        log(f"sft dev before training: loss {m0['sft/dev_loss']:.4f}, entropy {m0['sft/dev_entropy']:.3f}")
    stop = False
    for _epoch in range(cfg.epochs):
        if stop:
            break
        order = list(range(len(trajectories)))
        rng.shuffle(order)
        for b0 in range(0, len(order), cfg.batch_size):
            t0 = time.perf_counter()
            batch = [trajectories[i] for i in order[b0 : b0 + cfg.batch_size]]
            mask = loss_masks(batch, device=next(policy.parameters()).device)
            units = agg_units(mask, "token-mean")
            opt.zero_grad(set_to_none=True)
            total = 0.0
            for c0 in range(0, len(batch), cfg.micro_batch_size):
                c = batch[c0 : c0 + cfg.micro_batch_size]
                logp, _ = sequence_logprobs(
                    policy,
                    [list(t.prompt_ids or []) for t in c],
                    [list(t.response_ids or []) for t in c],
                    pad_id=pad_id,
                    temperature=1.0,
                    with_entropy=False,
                    keep=mask[c0 : c0 + len(c)],
                )
                m = mask[c0 : c0 + len(c), : logp.shape[1]]
                loss = agg_loss(-logp, m, "token-mean", num_units=units)
                loss.backward()
                total += float(loss.detach())
            gn = torch.nn.utils.clip_grad_norm_(params, cfg.grad_clip) if cfg.grad_clip is not None else None
            opt.step()
            sched.step()
            step += 1
            metrics = {
                "sft/loss": total,
                "sft/tokens": units,
                "lr": sched.get_last_lr()[0],
                "seconds": time.perf_counter() - t0,
            }
            if gn is not None:
                metrics["grad_norm"] = float(gn)
            if cfg.eval_every and step % cfg.eval_every == 0:
                assert best is not None
                metrics |= dev_metrics(policy, dev, pad_id=pad_id, micro_batch_size=cfg.micro_batch_size)
                if metrics["sft/dev_loss"] < best[0]:
                    best, since_best = (
                        (metrics["sft/dev_loss"], step, [p.detach().clone() for p in params]),
                        0,
                    )
                else:
                    since_best += 1
                stop = since_best >= cfg.patience
                log(
                    f"sft dev at step {step}: loss {metrics['sft/dev_loss']:.4f}, entropy "
                    f"{metrics['sft/dev_entropy']:.3f} (best {best[0]:.4f} at step {best[1]})"
                )
            history.append(metrics)
            log(f"sft step {step}/{n_steps} loss {total:.4f} ({int(units)} tokens) {metrics['seconds']:.1f}s")
            if best is not None and (stop or step == n_steps):  # stop implies a best
                with torch.no_grad():
                    for p, w in zip(params, best[2], strict=True):
                        p.copy_(w)
                metrics["sft/best_step"] = float(best[1])
                log(
                    f"sft: {'early stop' if stop else 'end'} at step {step}; kept the weights of step {best[1]}"
                )
            if on_step is not None:
                on_step(step - 1, metrics)
            if stop:
                break
    return history


# long: `harness sft` end to end in order (demonstrations rolled out and written, the run row,
# training and checkpoint inside `lifecycle.running`, so a failure in training still ends the row)
def run_sft(
    method: TrainableMethod,
    recipe: Any,
    *,
    model: str,
    setup: RunSetup,
    out: Path,
    log: Callable[[str], None],
    device: str = "auto",
) -> tuple[Path, str]:
    """``harness sft`` end to end: roll out the recipe's demonstrations in the method's own
    dialect (with ``setup``'s protocol, retriever and training data, and the RL rollout budgets),
    write them to ``out/demonstrations.jsonl``, train, save the final checkpoint; the run row is
    ``setup``'s (:meth:`harness.eval.setup.RunSetup.train_run`). Returns (checkpoint dir, run id).
    ``device``: see :mod:`harness.device`."""
    import json

    from harness.device import describe_device, resolve_device
    from harness.llm.base import BackendSpec
    from harness.llm.transformers_backend import TransformersBackend
    from harness.results.lifecycle import running
    from harness.rl.split import stage_questions
    from harness.rl.trainer import load_policy, rollout_protocol, save_final, training_examples

    cfg = recipe.sft
    if cfg is None:
        raise ConfigError(
            f"recipe {recipe.name!r} of {method.name!r} has no sft block; pick a recipe with one"
        )
    rp = rollout_protocol(setup.protocol, recipe)  # the budgets RL rollouts use: same observations
    out.mkdir(parents=True, exist_ok=True)

    # the first sft.n_questions of the seeded shuffle; the RL stage of the recipe takes the rest
    examples = list(
        stage_questions(
            training_examples(recipe, setup.data_dir), seed=recipe.seed, sft_n=cfg.n_questions
        ).sft
    )
    # the dev slice (early stopping): the last dev_questions of the warm-up's own questions, never
    # trained on, never held out, and listed with the warm-up's questions so RL does not draw them
    dev_examples = examples[len(examples) - cfg.dev_questions :] if cfg.dev_questions else []
    train_examples = examples[: len(examples) - cfg.dev_questions]
    torch.manual_seed(recipe.seed)
    dev = resolve_device(device)
    policy, _, tok = load_policy(model, recipe, with_reference=False, device=dev)
    backend = TransformersBackend.from_model(policy, tok, BackendSpec(kind="transformers", model=model))
    retriever = setup.retriever(rp)
    t0 = time.perf_counter()
    demos = build_demonstrations(
        method, train_examples, backend=backend, protocol=rp, retriever=retriever, cfg=cfg
    )
    dev_demos = (
        build_demonstrations(method, dev_examples, backend=backend, protocol=rp, retriever=retriever, cfg=cfg)
        if dev_examples
        else None
    )
    if dev_demos is not None:
        log(
            f"dev demonstrations: {dev_demos.kept} of {dev_demos.asked} questions kept (early stopping, not trained on)"
        )
    log(
        f"demonstrations: {demos.kept} of {demos.asked} questions kept "
        f"({'gold answer in the observations' if cfg.answer_in_observation else 'answered'}); "
        f"{time.perf_counter() - t0:.1f}s"
    )
    (out / "demonstrations.jsonl").write_text(
        "".join(
            json.dumps({"id": t.example_id, "question": t.question, "response": t.response}) + "\n"
            for t in demos.trajectories
        )
    )

    store = setup.store
    run_id = setup.train_run(
        prefix="sft",
        method=method,
        recipe=recipe,
        protocol=rp,
        model=model,
        label=f"sft recipe {recipe.name}",
        runtime=describe_device(dev),
    )
    pad_id = backend.pad_id  # the tokenizer's pad id, else its eos (harness.llm.base.pad_token_id)
    with running(store, run_id):
        train_sft(
            policy,
            demos.trajectories,
            cfg,
            pad_id=pad_id,
            seed=recipe.seed,
            log=log,
            on_step=lambda step, m: store.add_train_steps(run_id, step, m),
            dev=dev_demos.trajectories if dev_demos is not None else (),
        )
        final = save_final(
            policy,
            tok,
            out,
            recipe,
            method.name,
            model,
            stage="sft",
            log=log,
            questions=[e.id for e in examples],
        )
    return final, run_id
