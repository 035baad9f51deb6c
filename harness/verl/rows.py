"""verl's RL dataset rows for a method's questions, and the question a row stands for.

A row (``data/{train,test}.parquet``) holds ``data_source``, the ``prompt`` chat messages (the
method's own ``prompt_messages``, without a final assistant pre-fill: that goes into the chat
template, see :mod:`harness.verl.job`), ``ability``, ``reward_model.ground_truth.target``,
``extra_info`` (``example``: the whole question as JSON, so the reward sees what the in-harness
reward sees) and ``agent_name`` (the harness agent loop for a method that retrieves, verl's
single-turn loop otherwise).
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from harness.method import TrainableMethod, split_prefill
from harness.types import QAExample
from harness.verl.contract import AGENT_NAME, SINGLE_TURN_AGENT


def dataset_rows(
    method: TrainableMethod, examples: list[QAExample], split: str, reward: str
) -> tuple[list[dict[str, Any]], set[str]]:
    """The parquet rows and the assistant pre-fills of the method's prompts ("" = none)."""
    rows = []
    prefills: set[str] = set()
    agent = AGENT_NAME if method.uses_retrieval else SINGLE_TURN_AGENT
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


def write_parquet(rows: list[dict[str, Any]], path: Path) -> None:
    import pyarrow as pa
    import pyarrow.parquet as pq

    pq.write_table(pa.Table.from_pylist(rows), path)


def example_from_verl(data_source: str, ground_truth: Any, extra_info: dict[str, Any] | None) -> QAExample:
    """The question a verl row stands for: ``extra_info.example`` (JSON, written by the export),
    else the row's id / question and the ground truth."""
    info = extra_info or {}
    if info.get("example"):
        return QAExample.from_dict(json.loads(info["example"]))
    return QAExample(
        id=str(info.get("id", "")),
        dataset=data_source,
        split=str(info.get("split", "")),
        question=str(info.get("question", "")),
        answers=gold_answers(ground_truth),
    )


def gold_answers(ground_truth: Any) -> tuple[str, ...]:
    """The gold answers of a verl row's ``reward_model.ground_truth`` in any of the forms in use:
    a string (one answer, never split into characters), a list / tuple / array of answers, or
    verl's Search-R1 form ``{"target": [...]}`` (``verl/utils/reward_score/search_r1_like_qa_em.py``
    reads ``ground_truth["target"]``; read from parquet the list is a numpy array)."""
    target = ground_truth
    if isinstance(ground_truth, dict):
        if "target" not in ground_truth:
            raise ValueError(
                f"reward_model.ground_truth {str(ground_truth)[:200]} is a dict without 'target'; "
                "give the answers as a string, a list, or {'target': [...]}"
            )
        target = ground_truth["target"]
    if isinstance(target, str):
        return (target,)
    if isinstance(target, bytes | dict) or not hasattr(target, "__iter__"):
        raise ValueError(
            f"reward_model.ground_truth {str(ground_truth)[:200]} is not a string, a list of answers "
            "or {'target': [...]}"
        )
    answers = tuple(str(a) for a in target)
    if not answers:
        raise ValueError("reward_model.ground_truth has no answer; give at least one")
    return answers


def row_example(row: dict[str, Any]) -> QAExample:
    """The question of a verl dataset row as the agent loop receives it (the row's fields as
    keyword arguments)."""
    reward_model = row.get("reward_model") or {}
    return example_from_verl(
        str(row.get("data_source", "")), reward_model.get("ground_truth", []), row.get("extra_info")
    )
