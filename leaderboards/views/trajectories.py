"""The trajectory explorer: one sample's turns, searches, passages and prompts."""

from __future__ import annotations

import json
import math
import re
from dataclasses import dataclass, field

import pandas as pd

from harness.errors import ConfigError
from leaderboards import queries


# -- trajectories ----------------------------------------------------------------------------------
def question_table(
    questions: pd.DataFrame,
    values_a: pd.DataFrame,
    values_b: pd.DataFrame | None = None,
    questions_b: pd.DataFrame | None = None,
    *,
    only_disagreements: bool = False,
) -> pd.DataFrame:
    """The questions of run A on one dataset with A's metric value and, when given, B's.

    A disagreement is a question both runs answered whose metric values differ.
    """
    df = questions.merge(values_a.rename(columns={"value": "a"}), on="sample_id", how="left")
    if values_b is not None and questions_b is not None:
        b = questions_b[["sample_id", "prediction"]].rename(columns={"prediction": "prediction_b"})
        df = df.merge(b, on="sample_id", how="left")
        df = df.merge(values_b.rename(columns={"value": "b"}), on="sample_id", how="left")
        df["disagree"] = df["a"].notna() & df["b"].notna() & (df["a"] != df["b"])
        if only_disagreements:
            df = df[df["disagree"]]
    return df.reset_index(drop=True)


@dataclass(frozen=True)
class PassageView:
    doc_id: str
    score: float | None
    gold: bool
    title: str | None  # None when the passage text is not available
    text: str | None


INJECTED = "injected"
"""Kind of a reconstructed turn: environment text the engine appended after a generation without
an action (the dialect's correction message), recovered from the stored response (the engine
stores no turn for it; see :func:`injected_messages`)."""


@dataclass(frozen=True)
class TurnView:
    index: int
    kind: str  # generate | retrieve | message | llm_call | judge | injected
    text: str
    query: str | None
    passages: list[PassageView]
    prompt_tokens: int
    completion_tokens: int
    observation_tokens: int
    stop_reason: str | None
    status: str


@dataclass(frozen=True)
class SampleView:
    run_id: str
    dataset: str
    sample_id: str
    question: str
    answers: list[str]
    prediction: str
    extraction_status: str
    error: str | None
    gold_ids: list[str]
    metrics: dict[str, float]
    turns: list[TurnView]
    judgements: pd.DataFrame
    prompt: str | None = None  # the method's full prompt (meta "prompt"), when stored
    response: str = ""
    never_retrieved: list[PassageView] = field(default_factory=list)  # gold passages never retrieved


def injected_messages(response: str, turns: list[tuple[str, str]]) -> dict[int, str]:
    """Environment text between two consecutive generations, by the position of the later one
    (``len(turns)`` for text after the last turn).

    ``response`` is the stored full text (generations with every environment text interleaved);
    ``turns`` are the stored ``(kind, text)`` in order. A retrieval's observation and a ``message``
    turn are stored as turns; the correction message after a generation without an action is not
    (``harness.rollout.engine`` appends it with ``append_env`` and records no turn), so it is the
    text that sits between one generation and the next. Returns {} when the turns cannot be located
    in the response in order (then nothing is reconstructed rather than something wrong)."""
    out: dict[int, str] = {}
    pos, prev = 0, None
    for i, (kind, text) in enumerate(turns):
        if kind not in ("generate", "retrieve", "message"):
            continue
        if not text:
            prev = kind
            continue
        at = response.find(text, pos)
        if at < 0:
            return {}
        gap = response[pos:at]
        if kind == "generate" and prev == "generate" and gap.strip():
            out[i] = gap
        pos, prev = at + len(text), kind
    tail = response[pos:]
    if prev == "generate" and tail.strip():
        out[len(turns)] = tail
    return out


_REPEAT = re.compile(r"(.{8,300}?)\1{2,}", re.DOTALL)
MAX_COLLAPSE_CHARS = 50_000


def collapse_repeats(text: str) -> tuple[str, int]:
    """``text`` with every run of 3+ consecutive copies of a span (8-300 characters) shown once,
    followed by ``[... repeated N more times ...]``; and how many runs were collapsed. A 500-token
    loop becomes one line; texts over 50,000 characters are left as they are."""
    if len(text) > MAX_COLLAPSE_CHARS:
        return text, 0
    count = 0

    def sub(m: re.Match[str]) -> str:
        nonlocal count
        count += 1
        unit = m.group(1)
        more = len(m.group(0)) // len(unit) - 1
        return f"{unit} [... repeated {more} more times ...] "

    return _REPEAT.sub(sub, text), count


MODEL_CALLS = ("generate", "llm_call")
"""Turn kinds that are one model call each."""


@dataclass(frozen=True)
class CallPrompt:
    """The prompt of one model call, as far as the store holds it.

    ``source``: ``stored`` (the sample's stored prompt is this call's), ``continued`` (the stored
    first prompt plus the trajectory text before this call: the call continued one context, so
    this is its prompt character for character) or ``missing`` (not stored; ``text`` is None)."""

    turn: int  # position in SampleView.turns
    label: str
    source: str
    text: str | None
    note: str


def call_prompts(s: SampleView) -> list[CallPrompt]:
    """One :class:`CallPrompt` per model call of ``s`` (``generate`` and ``llm_call`` turns), by turn.

    The store keeps one prompt per question (``meta["prompt"]``), the turns' outputs and token
    counts, not each call's prompt. What can be said from that, without guessing:

    * one model call: the stored prompt is its prompt;
    * the stored prompt holds the earlier generations' text (IRCoT rebuilds its prompt each
      iteration and keeps the last one): it is the last generation's prompt; the others are missing;
    * else the stored prompt is the first generation's; a later generation whose text and everything
      before it are found in order in the stored response continued that context (the rollout
      engine's generations: context = prompt + response), so its prompt is the stored prompt plus
      the response before it;
    * an ``llm_call`` (a side call: Search-o1's Reason-in-Documents, SuRe's summaries) has its own
      prompt, which the store does not keep."""
    calls = [(i, t) for i, t in enumerate(s.turns) if t.kind in MODEL_CALLS]
    if not calls:
        return []
    gens = [(i, t) for i, t in calls if t.kind == "generate"]

    def label(i: int, t: TurnView) -> str:
        return f"turn {t.index} · {'generation' if t.kind == 'generate' else 'side call (llm_call)'}"

    missing_side = (
        "not stored: the store keeps this call's output and token counts "
        "({tokens} prompt tokens), not its prompt"
    )
    out: dict[int, CallPrompt] = {}
    prompt = s.prompt
    if prompt is None:
        return [CallPrompt(i, label(i, t), "missing", None, "this run stored no prompt") for i, t in calls]
    if len(calls) == 1:
        i, t = calls[0]
        return [CallPrompt(i, label(i, t), "stored", prompt, "the run's stored prompt (its only model call)")]
    earlier = [t.text.strip() for _, t in gens[:-1] if t.text.strip()]
    if len(gens) > 1 and earlier and all(e in prompt for e in earlier):
        last_i, last_t = gens[-1]
        out[last_i] = CallPrompt(
            last_i,
            label(last_i, last_t),
            "stored",
            prompt,
            "the run's stored prompt: it holds the earlier generations, so it is the last generation's "
            "(this method builds a new prompt per step and stores the last)",
        )
        for i, t in gens[:-1]:
            out[i] = CallPrompt(
                i,
                label(i, t),
                "missing",
                None,
                f"not stored: only the last generation's prompt is kept ({t.prompt_tokens} prompt tokens)",
            )
    elif gens:
        first_i, first_t = gens[0]
        out[first_i] = CallPrompt(
            first_i, label(first_i, first_t), "stored", prompt, "the run's stored prompt (the first call's)"
        )
        pos = 0
        starts: dict[int, int] = {}
        for i, t in gens:
            at = s.response.find(t.text, pos) if t.text else -1
            if at < 0:
                break
            starts[i], pos = at, at + len(t.text)
        for i, t in gens[1:]:
            if i in starts:
                out[i] = CallPrompt(
                    i,
                    label(i, t),
                    "continued",
                    prompt + s.response[: starts[i]],
                    "the stored first prompt + the trajectory before this call (one growing context)",
                )
            else:
                out[i] = CallPrompt(
                    i,
                    label(i, t),
                    "missing",
                    None,
                    f"not stored, and not a continuation of the stored context ({t.prompt_tokens} prompt tokens)",
                )
    for i, t in calls:
        if i not in out:
            out[i] = CallPrompt(i, label(i, t), "missing", None, missing_side.format(tokens=t.prompt_tokens))
    return [out[i] for i, _ in calls]


def sample_view(store, run_id: str, dataset: str, sample_id: str, passage_text=None) -> SampleView:
    """Everything stored about one question of one run; ``passage_text(doc_id) -> contents | None``
    fills passage titles and texts (e.g. from the packaged closed corpus). Correction messages the
    engine stored no turn for are reconstructed from the response as ``injected`` turns."""
    from harness.types import split_contents

    s = queries.sample_row(store, run_id, dataset, sample_id)
    if s.empty:
        raise ConfigError(f"run {run_id} has no sample {dataset}/{sample_id} in {store.path}")
    row = s.iloc[0]
    gold = [str(x) for x in _as_list(row["gold_ids"])]

    def passage(d: str, score: float | None) -> PassageView:
        contents = passage_text(d) if passage_text is not None else None
        title, text = split_contents(contents) if contents is not None else (None, None)
        return PassageView(d, score, d in gold, title, text)

    stored = list(queries.turn_rows(store, run_id, dataset, sample_id).itertuples(index=False))
    response = "" if row["response"] is None or pd.isna(row["response"]) else str(row["response"])
    injected = injected_messages(response, [(str(t.kind), str(t.text or "")) for t in stored])
    turns: list[TurnView] = []

    def add_injected(at: int) -> None:
        if at in injected:
            turns.append(TurnView(-1, INJECTED, injected[at], None, [], 0, 0, 0, None, "reconstructed"))

    for pos, t in enumerate(stored):
        add_injected(pos)
        ids = [str(x) for x in _as_list(t.doc_ids)]
        scores = [float(x) for x in _as_list(t.doc_scores)]
        turns.append(
            TurnView(
                index=int(t.turn_index),
                kind=str(t.kind),
                text=str(t.text or ""),
                query=None if t.query is None or pd.isna(t.query) else str(t.query),
                passages=[passage(d, scores[i] if i < len(scores) else None) for i, d in enumerate(ids)],
                prompt_tokens=int(t.prompt_tokens or 0),
                completion_tokens=int(t.completion_tokens or 0),
                observation_tokens=int(t.observation_tokens or 0),
                stop_reason=None if t.stop_reason is None or pd.isna(t.stop_reason) else str(t.stop_reason),
                status=str(t.status),
            )
        )
    add_injected(len(stored))
    retrieved = {str(x) for x in _as_list(row["retrieved_ids"])}
    meta = json.loads(row["meta_json"]) if row["meta_json"] and not pd.isna(row["meta_json"]) else {}
    prompt = meta.get("prompt")
    m = queries.sample_metric_rows(store, run_id, dataset, sample_id)
    prediction = str(row["prediction"] or "")
    return SampleView(
        run_id=run_id,
        dataset=dataset,
        sample_id=sample_id,
        question=str(row["question"]),
        answers=[str(x) for x in _as_list(row["answers"])],
        prediction=prediction,
        extraction_status=str(row["extraction_status"]),
        error=None if row["error"] is None or pd.isna(row["error"]) else str(row["error"]),
        gold_ids=gold,
        metrics=dict(zip(m["metric"], m["value"].astype(float), strict=True)),
        turns=turns,
        judgements=queries.judgement_rows(
            store, str(row["question"]), [t for t in (prediction, response) if t]
        ),
        prompt=str(prompt) if prompt else None,
        response=response,
        never_retrieved=[passage(g, None) for g in gold if g not in retrieved],
    )


def _as_list(x: object) -> list:
    if x is None:
        return []
    if isinstance(x, float) and math.isnan(x):
        return []
    return list(x)  # type: ignore[call-overload]


__all__ = [
    "INJECTED",
    "MODEL_CALLS",
    "CallPrompt",
    "call_prompts",
    "MAX_COLLAPSE_CHARS",
    "PassageView",
    "SampleView",
    "TurnView",
    "_REPEAT",
    "_as_list",
    "collapse_repeats",
    "injected_messages",
    "question_table",
    "sample_view",
]
