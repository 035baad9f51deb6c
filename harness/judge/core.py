"""The judge: cached verdicts for (question, golds, text) items under one model and prompt.

A verdict is stored in the ``judgements`` table under
``sha256(judge model, prompt hash, question, sorted golds, text)`` and never asked again; the same
item twice in a batch is asked once. A verdict is stored as soon as its reply arrives (from a
transport with ``ask_each``; an in-process backend answers a chunk at once), so an interrupted run
asks again only what was not answered. Failed requests (``timeout`` / ``error``) are stored and
counted, and asked again on the next pass; every other status is final (temperature 0). An empty
text is not asked: it is ``no_prediction``, scored 0 (as EM scores it), and not stored.

The metric name is ``judge@<model>:<prompt hash>``; only scored statuses (``ok``,
``fallback_parse``, ``no_prediction``) yield a metric value, the rest are counted.
"""

from __future__ import annotations

import hashlib
import json
import time
from collections import Counter
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime

from harness.judge.parsers import (
    RETRY_STATUSES,
    SCORED_STATUSES,
    JudgeStatus,
    ParsedReply,
    logit_score,
)
from harness.judge.prompts import JudgePrompt
from harness.judge.transport import JudgeReply, JudgeTransport


@dataclass(frozen=True)
class JudgeItem:
    """What the judge sees: the question, every gold answer, and the judged text (the extracted
    prediction, or the whole response for ``target="response"`` prompts)."""

    question: str
    golds: tuple[str, ...]
    text: str


@dataclass
class Judgement:
    """One verdict, as stored in ``judgements``. ``score`` is None unless the status is scored."""

    key: str
    judge_model: str
    prompt_id: str
    prompt_hash: str
    question: str
    golds: list[str]
    prediction: str
    status: JudgeStatus
    verdict: str | None
    score: float | None
    rationale: str | None
    raw: str | None
    prompt_tokens: int
    completion_tokens: int
    latency_s: float
    created_at: datetime | None = None

    @property
    def scored(self) -> bool:
        return self.status in SCORED_STATUSES and self.score is not None


@dataclass
class JudgeOutcome:
    """Verdicts aligned with the items, and where they came from."""

    judgements: list[Judgement]
    asked: int = 0  # distinct items sent to the model in this call
    cached: int = 0  # items answered from the store
    duplicates: int = 0  # items equal to an earlier item of the same call
    seconds: float = 0.0
    prompt_tokens: int = 0
    completion_tokens: int = 0
    status_counts: Counter[str] = field(default_factory=Counter)

    @property
    def n_scored(self) -> int:
        return sum(1 for j in self.judgements if j.scored)


def judgement_key(judge_model: str, prompt_hash: str, question: str, golds: Sequence[str], text: str) -> str:
    blob = json.dumps([judge_model, prompt_hash, question, sorted(golds), text], ensure_ascii=False)
    return hashlib.sha256(blob.encode()).hexdigest()


def _now() -> datetime:
    return datetime.now(UTC).replace(tzinfo=None)


class Judge:
    """``Judge(transport, prompt, store).judge(items)``; ``store=None`` keeps nothing (no cache)."""

    def __init__(
        self,
        transport: JudgeTransport,
        prompt: JudgePrompt,
        store=None,
        *,
        chunk_size: int = 32,
        progress: bool = False,
    ):
        self.transport = transport
        self.prompt = prompt
        self.store = store
        self.chunk_size = chunk_size
        self.progress = progress

    @property
    def model(self) -> str:
        return self.transport.model

    @property
    def metric_name(self) -> str:
        return f"judge@{self.model}:{self.prompt.prompt_hash}"

    def key(self, item: JudgeItem) -> str:
        return judgement_key(self.model, self.prompt.prompt_hash, item.question, item.golds, item.text)

    def judge(self, items: Sequence[JudgeItem]) -> JudgeOutcome:
        t_start = time.perf_counter()
        keys = [self.key(it) for it in items]
        out = JudgeOutcome(judgements=[])
        found: dict[str, Judgement] = {}
        if self.store is not None:
            for row in self.store.get_judgements(sorted(set(keys))):
                j = Judgement(**row)
                if j.status not in RETRY_STATUSES:
                    found[j.key] = j
        todo: dict[str, JudgeItem] = {}
        seen: set[str] = set()
        for k, it in zip(keys, items, strict=True):
            if k in seen:
                out.duplicates += 1
                continue
            seen.add(k)
            if k in found:
                out.cached += 1
            elif not it.text.strip():
                found[k] = self._no_prediction(k, it)
            else:
                todo[k] = it
        bar = _progress(len(todo), f"judge {self.model}", self.progress)
        pending = list(todo.items())
        try:

            def keep(made: list[Judgement]) -> None:
                if self.store is not None:
                    self.store.add_judgements(made)  # insert or replace: keeping one twice is harmless
                for j in made:
                    found[j.key] = j
                    out.prompt_tokens += max(0, j.prompt_tokens)
                    out.completion_tokens += max(0, j.completion_tokens)
                out.asked += len(made)
                bar.update(len(made))

            for i in range(0, len(pending), self.chunk_size):
                self._ask(pending[i : i + self.chunk_size], keep)
        finally:
            bar.close()
        out.judgements = [found[k] for k in keys]
        out.status_counts = Counter(j.status for j in out.judgements)
        out.seconds = time.perf_counter() - t_start
        return out

    def _ask(self, chunk: list[tuple[str, JudgeItem]], keep: Callable[[list[Judgement]], None]) -> None:
        """Ask ``chunk`` and ``keep`` its verdicts: each as it arrives from a transport with
        ``ask_each`` (on an interrupt, those that arrived but were not kept yet are kept first,
        then the interrupt goes on); the whole chunk at once from one that answers a batch (an
        in-process backend's ``chat_batch``)."""
        conversations = [self.prompt.messages(it.question, it.golds, it.text) for _, it in chunk]
        max_tokens, json_mode = self.prompt.max_tokens, self.prompt.json_mode
        logprobs = self.prompt.scoring == "logit"
        ask_each = getattr(self.transport, "ask_each", None)
        if ask_each is None:
            replies = self.transport.ask(
                conversations, max_tokens=max_tokens, logprobs=logprobs, json_mode=json_mode
            )
            keep([self._judgement(k, it, r) for (k, it), r in zip(chunk, replies, strict=True)])
            return
        each = ask_each(conversations, max_tokens=max_tokens, logprobs=logprobs, json_mode=json_mode)
        unkept: list[Judgement] = []
        try:
            for i, reply in each:
                key, item = chunk[i]
                unkept.append(self._judgement(key, item, reply))
                keep(unkept)
                unkept = []
        except KeyboardInterrupt:  # Ctrl-C, or SIGTERM in the CLI
            for i, reply in each.drain():
                key, item = chunk[i]
                unkept.append(self._judgement(key, item, reply))
            keep(unkept)
            raise
        finally:
            each.close()

    def _base(self, key: str, it: JudgeItem) -> dict:
        return {
            "key": key,
            "judge_model": self.model,
            "prompt_id": self.prompt.name,
            "prompt_hash": self.prompt.prompt_hash,
            "question": it.question,
            "golds": list(it.golds),
            "prediction": it.text,
        }

    def _no_prediction(self, key: str, it: JudgeItem) -> Judgement:
        return Judgement(
            **self._base(key, it),
            status="no_prediction",
            verdict="incorrect",
            score=0.0,
            rationale=None,
            raw=None,
            prompt_tokens=0,
            completion_tokens=0,
            latency_s=0.0,
        )

    def _judgement(self, key: str, it: JudgeItem, reply: JudgeReply) -> Judgement:
        parsed = self._parse(reply)
        return Judgement(
            **self._base(key, it),
            status=parsed.status,
            verdict=parsed.verdict,
            score=parsed.score if parsed.status in SCORED_STATUSES else None,
            rationale=parsed.rationale,
            raw=reply.text if reply.status in ("ok", "length") else reply.error,
            prompt_tokens=reply.prompt_tokens,
            completion_tokens=reply.completion_tokens,
            latency_s=reply.latency_s,
            created_at=_now(),
        )

    def _parse(self, reply: JudgeReply) -> ParsedReply:
        if reply.status in ("timeout", "error"):
            return ParsedReply(reply.status)
        parsed = self.prompt.parser(reply.text)
        if parsed.status == "unparseable" and reply.status == "length":
            return ParsedReply("truncated", rationale=parsed.rationale)
        if self.prompt.scoring != "logit" or parsed.status not in SCORED_STATUSES:
            return parsed
        labels = self.prompt.labels
        p = logit_score(reply.logprobs or (), labels) if labels is not None else None
        if p is None:
            return ParsedReply("no_logprobs", parsed.verdict, None, parsed.rationale)
        return ParsedReply(parsed.status, parsed.verdict, p, parsed.rationale)


def _progress(total: int, desc: str, enabled: bool):
    import sys

    from tqdm import tqdm

    return tqdm(total=total, desc=desc, unit="q", disable=not enabled or total == 0, file=sys.stderr)
