"""Per-run files for the field's tools: a results JSON per run and a samples JSON Lines file per run
and dataset, laid out as lm-evaluation-harness lays out ``--output_path`` with ``--log_samples``
(``<dir>/<model>/results_<stamp>.json`` and ``<dir>/<model>/samples_<task>_<stamp>.jsonl``; here
the stamp is the run id, the task the dataset). ``harness run --output-path DIR`` writes them for
the runs it just finished, ``harness export --run ID --samples --out DIR`` for any stored run.
Written by hand because lm-evaluation-harness writes them from its own task objects, which these
runs are not; the schema (docs/results-files.md) follows its keys where they mean the same.

``results_<run>.json``::

    {"schema": 1, "run_id", "method", "model", "backend", "bench", "label", "status",
     "started_at", "ended_at", "seconds", "n_expected",
     "protocol": {"id", "name", "config": <the protocol as stored>},
     "method_spec_hash", "git_commit", "versions": {...}, "command",
     "training": "none" | "untrained" | "trained (<algorithm>)",
     "results": {<dataset>: {<metric>: {"mean", "lo", "hi", "n", "interval"}}},
     "n_samples": {<dataset>: {"scored", "errors"}},
     "samples_files": {<dataset>: "samples_<dataset>_<run>.jsonl"}}

``results`` are the leaderboard's per-dataset cells (:func:`harness.metrics.bootstrap.
dataset_aggregate`: the Wilson interval for a 0/1 metric, the seeded percentile bootstrap
otherwise; a metric is 0/1 when every value of the run is), so ``harness export`` of the run's row
gives the same means (and the same intervals where the board's interval method is the same: the
board calls a metric 0/1 only when every row's values are).

``samples_<dataset>_<run>.jsonl``: one line per stored question, in bench order::

    {"doc_id": <position>, "sample_id", "question", "golds": [...], "prediction",
     "extraction_status", "error", "metrics": {<metric>: value}, "response",
     "retrieved_ids": [...], "gold_ids": [...], "n_retrievals", "n_llm_calls",
     "prompt_tokens", "completion_tokens", "latency_s",
     "turns": [{"index", "kind", "text", "query", "doc_ids", "prompt_tokens",
                "completion_tokens", "status"}]}

A failed question (extraction status ``error``) is written with its error and no metrics: it is
in no mean (as in the store).
"""

from __future__ import annotations

import json
import re
from pathlib import Path

import numpy as np

from harness.errors import ConfigError
from harness.metrics.bootstrap import dataset_aggregate, is_binary
from harness.results.store import ERROR_STATUS, Store
from harness.results.training_state import training_of

SCHEMA = 1


def model_dir_name(model: str) -> str:
    """A model name as a folder name, as lm-evaluation-harness sanitises it (``/`` -> ``__``)."""
    return re.sub(r"[^\w.\-]+", "_", model.replace("/", "__")).strip("_") or "model"


def _json_value(v: object) -> object:
    if isinstance(v, np.ndarray):
        return [_json_value(x) for x in v.tolist()]
    if isinstance(v, (list, tuple)):
        return [_json_value(x) for x in v]
    if isinstance(v, np.generic):
        return v.item()
    if isinstance(v, float) and np.isnan(v):
        return None
    if hasattr(v, "isoformat"):
        return v.isoformat()  # type: ignore[union-attr]
    return v


def _run_row(store: Store, run_id: str) -> dict:
    df = store.query("SELECT * FROM runs WHERE run_id = $run_id AND kind = 'eval'", {"run_id": run_id})
    if df.empty:
        raise ConfigError(f"{store.path}: no evaluation run {run_id!r} (harness export --run takes a run id)")
    return {k: _json_value(v) for k, v in df.iloc[0].to_dict().items()}


def run_results(store: Store, run_id: str) -> tuple[dict, dict[str, list[dict]]]:
    """The results document of one run and its samples per dataset (module docstring)."""
    run = _run_row(store, run_id)
    samples = store.query(
        "SELECT * FROM samples WHERE run_id = $run_id ORDER BY dataset, position, sample_id",
        {"run_id": run_id},
    )
    metrics = store.query(
        "SELECT dataset, sample_id, metric, value FROM sample_metrics WHERE run_id = $run_id",
        {"run_id": run_id},
    )
    turns = store.query(
        """SELECT dataset, sample_id, turn_index, kind, text, query, doc_ids, prompt_tokens,
                  completion_tokens, status FROM turns WHERE run_id = $run_id
           ORDER BY dataset, sample_id, turn_index""",
        {"run_id": run_id},
    )
    per_q: dict[tuple[str, str], dict[str, float]] = {}
    for r in metrics.itertuples(index=False):
        per_q.setdefault((str(r.dataset), str(r.sample_id)), {})[str(r.metric)] = float(r.value)
    per_t: dict[tuple[str, str], list[dict]] = {}
    for t in turns.itertuples(index=False):
        per_t.setdefault((str(t.dataset), str(t.sample_id)), []).append(
            {
                "index": int(t.turn_index),
                "kind": t.kind,
                "text": t.text,
                "query": t.query,
                "doc_ids": _json_value(t.doc_ids) if t.doc_ids is not None else None,
                "prompt_tokens": _json_value(t.prompt_tokens),
                "completion_tokens": _json_value(t.completion_tokens),
                "status": t.status,
            }
        )
    lines: dict[str, list[dict]] = {}
    for s in samples.to_dict("records"):
        key = (str(s["dataset"]), str(s["sample_id"]))
        lines.setdefault(key[0], []).append(
            {
                "doc_id": int(s["position"]),
                "sample_id": key[1],
                "question": s["question"],
                "golds": _json_value(s["answers"]) if s["answers"] is not None else [],
                "prediction": s["prediction"],
                "extraction_status": s["extraction_status"],
                "error": s["error"],
                "metrics": dict(sorted(per_q.get(key, {}).items())),
                "response": s["response"],
                "retrieved_ids": _json_value(s["retrieved_ids"]) if s["retrieved_ids"] is not None else [],
                "gold_ids": _json_value(s["gold_ids"]) if s["gold_ids"] is not None else [],
                "n_retrievals": _json_value(s["n_retrievals"]),
                "n_llm_calls": _json_value(s["n_llm_calls"]),
                "prompt_tokens": _json_value(s["prompt_tokens"]),
                "completion_tokens": _json_value(s["completion_tokens"]),
                "latency_s": _json_value(s["latency_s"]),
                "turns": per_t.get(key, []),
            }
        )
    results: dict[str, dict[str, dict]] = {}
    counts: dict[str, dict[str, int]] = {}
    # a metric is 0/1 (Wilson) when every value of the run is, as harness run's summary decides
    binary = {str(m): is_binary(g["value"].to_numpy(dtype=np.float64)) for m, g in metrics.groupby("metric")}
    for dataset, rows in lines.items():
        scored = [r for r in rows if r["extraction_status"] != ERROR_STATUS]
        counts[dataset] = {"scored": len(scored), "errors": len(rows) - len(scored)}
        names = sorted({m for r in scored for m in r["metrics"]})
        for m in names:
            v = np.array([r["metrics"][m] for r in scored if m in r["metrics"]], dtype=np.float64)
            agg = dataset_aggregate(v, binary=binary[m])
            results.setdefault(dataset, {})[m] = {
                **agg.to_dict(),
                "interval": "wilson 95%"
                if binary[m]
                else "percentile bootstrap 95% (1000 resamples, seed 0)",
            }
    versions = json.loads(run.get("versions_json") or "{}")
    doc = {
        "schema": SCHEMA,
        **{k: run.get(k) for k in ("run_id", "method", "model", "backend", "bench", "label", "status")},
        **{k: run.get(k) for k in ("started_at", "ended_at", "seconds", "n_expected")},
        "protocol": {
            "id": run.get("protocol_id"),
            "name": run.get("protocol_name"),
            "config": json.loads(run.get("protocol_json") or "null"),
        },
        "method_spec_hash": run.get("method_spec_hash"),
        "git_commit": run.get("git_commit"),
        "versions": versions,
        "command": run.get("command"),
        "training": training_of(str(run.get("method")), versions),
        "results": results,
        "n_samples": counts,
        "samples_files": {d: f"samples_{d}_{run_id}.jsonl" for d in lines},
    }
    return doc, lines


def write_run_outputs(store: Store, run_id: str, out_dir: Path) -> list[Path]:
    """Write one run's results JSON and samples JSONL files under ``out_dir/<model>/``; their paths."""
    doc, lines = run_results(store, run_id)
    folder = Path(out_dir) / model_dir_name(str(doc["model"]))
    folder.mkdir(parents=True, exist_ok=True)
    written = []
    for dataset, rows in lines.items():
        path = folder / doc["samples_files"][dataset]
        with path.open("w", encoding="utf-8") as f:
            for r in rows:
                f.write(json.dumps(r, ensure_ascii=False) + "\n")
        written.append(path)
    path = folder / f"results_{run_id}.json"
    path.write_text(json.dumps(doc, indent=1, ensure_ascii=False) + "\n", encoding="utf-8")
    return [path, *written]


__all__ = ["SCHEMA", "model_dir_name", "run_results", "write_run_outputs"]
