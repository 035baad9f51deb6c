"""LLM-as-judge over predictions: named, versioned prompts; cached verdicts; agreement with EM.

    from harness.judge import JudgeSpec, make_judge, judge_runs
    judge = make_judge(JudgeSpec(url="http://127.0.0.1:8765/v1", model="smollm2"), store)
    report = judge_runs(store, run_ids, judge)      # writes judge@smollm2:<hash> into sample_metrics

Modules: :mod:`~harness.judge.prompts` (the default prompts; papers register their own), :mod:`~harness.judge.parsers`
(reply -> verdict, statuses, logit scores), :mod:`~harness.judge.transport` (OpenAI-compatible
servers and in-process backends), :mod:`~harness.judge.core` (the cached judge),
:mod:`~harness.judge.stored` (stored runs, agreement), :mod:`~harness.judge.factory` (settings).
"""

from __future__ import annotations

import importlib
from typing import Any

# exports resolve lazily, so `harness --help` (which imports harness.cli.judge_options) stays light
_EXPORTS = {
    "Judge": "core",
    "JudgeItem": "core",
    "JudgeOutcome": "core",
    "Judgement": "core",
    "judgement_key": "core",
    "JudgeSpec": "factory",
    "make_judge": "factory",
    "SCORED_STATUSES": "parsers",
    "JudgeStatus": "parsers",
    "ParsedReply": "parsers",
    "JUDGE_PROMPTS": "prompts",
    "JudgePrompt": "prompts",
    "describe_prompts": "prompts",
    "get_prompt": "prompts",
    "JudgeRunReport": "stored",
    "judge_runs": "stored",
    "resolve_runs": "stored",
    "BackendTransport": "transport",
    "JudgeReply": "transport",
    "OpenAITransport": "transport",
    "probe_server": "transport",
}
__all__ = sorted(_EXPORTS)


def __getattr__(name: str) -> Any:
    if name not in _EXPORTS:
        raise AttributeError(f"module 'harness.judge' has no attribute {name!r}")
    return getattr(importlib.import_module(f"harness.judge.{_EXPORTS[name]}"), name)
