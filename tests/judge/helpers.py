"""Hand-made stored runs and a scripted judge transport (control-flow tests only)."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path

from harness.eval.protocol import preset
from harness.eval.runner import score_trajectory
from harness.judge.transport import JudgeReply
from harness.results.store import RunRecord, ScoredSample, Store
from harness.types import Trajectory, Turn

# (question, golds, prediction): exact, alias-only, wrong, hedged, empty ...
QA: list[tuple[str, list[str], str]] = [
    ("What is the capital of France?", ["Paris"], "Paris"),
    ("Who wrote Hamlet?", ["William Shakespeare", "Shakespeare"], "Shakespeare"),
    ("Which planet is known as the Red Planet?", ["Mars"], "Jupiter"),
    ("Who was the 35th president of the United States?", ["John F. Kennedy"], "JFK"),
    ("What is the largest ocean on Earth?", ["Pacific Ocean"], "the Pacific"),
    ("In which year did World War II end?", ["1945"], "1945"),
    ("What is the chemical symbol for gold?", ["Au"], "Ag"),
    ("Who painted the Mona Lisa?", ["Leonardo da Vinci"], "Leonardo da Vinci"),
    ("What is the tallest mountain in the world?", ["Mount Everest"], "K2"),
    ("Which country hosted the 2016 Summer Olympics?", ["Brazil"], "Brazil"),
    ("What is the square root of 81?", ["9", "nine"], "nine"),
    ("Who discovered penicillin?", ["Alexander Fleming"], "Fleming"),
    ("What is the longest river in Africa?", ["Nile", "Nile River"], "the Nile River"),
    ("Which element has atomic number 1?", ["Hydrogen"], "Helium"),
    ("What language is spoken in Brazil?", ["Portuguese"], "Spanish"),
    ("Who developed the theory of relativity?", ["Albert Einstein"], "Einstein"),
    ("What is the capital of Japan?", ["Tokyo"], "Tokyo"),
    ("How many continents are there?", ["7", "seven"], "seven continents"),
    ("Which animal is the largest mammal?", ["Blue whale"], "the blue whale"),
    ("What is the boiling point of water in Celsius?", ["100", "100 °C"], ""),
]


def make_run(
    store: Store,
    qa: Sequence[tuple[str, list[str], str]] = QA,
    *,
    run_id: str = "run-a",
    method: str = "direct",
    bench: str = "toy",
    dataset: str = "toyqa",
    model: str = "smollm2-135m-instruct",
    backend: str = "transformers",
    tokens: Sequence[tuple[int, int]] | None = None,
    retrievals: Sequence[int] | None = None,
    latency: float = 0.0,
) -> str:
    """A finished eval run whose samples carry the given predictions, scored with em/f1/cover_em."""
    store.create_run(
        RunRecord(
            run_id=run_id,
            kind="eval",
            method=method,
            model=model,
            backend=backend,
            protocol_id="p",
            protocol_name="mini",
            protocol_json="{}",
            method_spec_hash="h",
            method_spec_json="{}",
            bench=bench,
            status="complete",
        )
    )
    scored = []
    for i, (q, golds, pred) in enumerate(qa):
        pt, ct = tokens[i] if tokens is not None else (10, 2)
        turns = [Turn(index=0, kind="generate", text=pred, prompt_tokens=pt, completion_tokens=ct)]
        for r in range(retrievals[i] if retrievals is not None else 0):
            turns.append(Turn(index=r + 1, kind="retrieve", query=q, doc_ids=[f"d{r}"]))
        t = Trajectory(
            example_id=f"q{i}",
            dataset=dataset,
            question=q,
            answers=list(golds),
            turns=turns,
            prediction=pred,
            extraction_status="ok" if pred else "no_answer",
            response=f"<answer>{pred}</answer>",
        )
        scored.append(
            ScoredSample(
                trajectory=t, metrics=score_trajectory(t, [], preset("mini")), position=i, latency_s=latency
            )
        )
    store.add_samples(run_id, scored)
    return run_id


def new_store(tmp_path: Path, name: str = "h.duckdb") -> Store:
    return Store(tmp_path / name)


@dataclass
class ScriptedTransport:
    """Replies chosen by the first key found in the user message; records every conversation asked."""

    replies: dict[str, JudgeReply]
    default: JudgeReply | None = None
    model: str = "scripted-judge"
    asked: list[str] = field(default_factory=list)

    def ask(self, conversations, *, max_tokens, logprobs=False, json_mode=False):
        out = []
        for conv in conversations:
            user = conv[-1]["content"]
            self.asked.append(user)
            reply = next((r for k, r in self.replies.items() if k in user), self.default)
            if reply is None:
                raise AssertionError(f"no scripted reply for {user[-120:]!r}")
            out.append(reply)
        return out
