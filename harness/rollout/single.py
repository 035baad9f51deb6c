"""One-shot answering: one batched generation per example, answer extracted from the reply.

In training mode the generation runs from the prompts' exact token ids and each trajectory
carries its prompt/response token ids with a loss mask of 1 on every generated token."""

from __future__ import annotations

import time
from collections.abc import Callable, Sequence

from harness.rollout.base import RunContext
from harness.rollout.extract import Extraction
from harness.types import QAExample, Trajectory, Turn


def answer_once(
    prompts: Sequence[str],
    examples: Sequence[QAExample],
    ctx: RunContext,
    *,
    max_new_tokens: int,
    extractor: Callable[[str], Extraction],
    stop: list[str] | None = None,
) -> list[Trajectory]:
    kw = dict(stop=stop or [], max_new_tokens=max_new_tokens, sampling=ctx.sampling)
    t0 = time.perf_counter()
    prompt_ids = None
    if ctx.training:
        prompt_ids = [ctx.backend.prompt_ids(p) for p in prompts]
        comps = ctx.backend.generate_ids(prompt_ids, **kw)
    else:
        comps = ctx.backend.generate(list(prompts), **kw)
    latency = (time.perf_counter() - t0) / max(len(prompts), 1)
    out = []
    for i, (p, e, c) in enumerate(zip(prompts, examples, comps, strict=True)):
        ids = list(c.token_ids or []) if ctx.training else None
        ex = extractor(c.text)
        status = ex.status
        if status != "ok" and c.finish_reason == "length":
            status = "truncated"
        out.append(
            Trajectory(
                example_id=e.id,
                dataset=e.dataset,
                question=e.question,
                answers=list(e.answers),
                turns=[
                    Turn(
                        index=0,
                        kind="generate",
                        latency_s=latency,
                        **c.turn_fields(),
                    )
                ],
                prediction=ex.prediction,
                extraction_status=status,
                response=c.text,
                prompt_ids=prompt_ids[i] if prompt_ids is not None else None,
                response_ids=ids,
                loss_mask=[1] * len(ids) if ids is not None else None,
                meta={"prompt": p},
            )
        )
    return out
