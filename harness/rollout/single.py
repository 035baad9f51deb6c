"""One-shot answering: one batched generation per example, answer extracted from the reply."""

from __future__ import annotations

import time
from collections.abc import Callable, Sequence

from harness.method import RunContext
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
    t0 = time.perf_counter()
    comps = ctx.backend.generate(
        list(prompts), stop=stop or [], max_new_tokens=max_new_tokens, sampling=ctx.sampling
    )
    latency = (time.perf_counter() - t0) / max(len(prompts), 1)
    out = []
    for p, e, c in zip(prompts, examples, comps, strict=True):
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
                        text=c.text,
                        prompt_tokens=c.prompt_tokens,
                        completion_tokens=c.completion_tokens,
                        latency_s=latency,
                        stop_reason=c.stop or c.finish_reason,
                    )
                ],
                prediction=ex.prediction,
                extraction_status=status,
                response=c.text,
                meta={"prompt": p},
            )
        )
    return out
