"""Cost accounting: what a run, a question, a correct answer and a judge cost, in USD.

Every generation and retrieval is already recorded (``samples``: prompt / completion tokens,
retrieval and LLM calls, seconds). This module adds the prices and asks DuckDB:

* **Prices** (:class:`PriceTable`): USD per 1M input and output tokens per model name (as the run
  or judge names it), and per backend whether its tokens are billed (``token_priced``; in-process
  backends run a local model: $0 per token) and what one hour of its GPU costs
  (``gpu_hourly_usd``; unset = unknown, not billed). Presets cover common hosted APIs (each with a
  dated source) and the packaged local model; ``results/prices.json`` next to the results database
  overrides or extends them::

      {"models":   {"gpt-4o-mini": {"input_usd_per_1m": 0.15, "output_usd_per_1m": 0.60,
                                    "source": "openai.com/api/pricing, 2025-06-01"},
                    "Qwen/Qwen2.5-7B-Instruct": {"input_usd_per_1m": 0, "output_usd_per_1m": 0,
                                                  "source": "self-hosted vLLM"}},
       "backends": {"vllm":   {"gpu_hourly_usd": 2.10, "source": "our A100 rate"},
                    "openai": {"gpu_hourly_usd": 2.10, "source": "the vLLM server we point at"}}}

* **Views** (created with the store): ``sample_costs`` (per question: token_usd, gpu_seconds,
  gpu_usd, cost_usd, em), ``run_costs`` (per run: cost_usd, cost_usd_per_q, usd_per_correct by EM,
  retrievals_per_q, gpu_seconds, n_unpriced) and ``judge_costs`` (per judge model and prompt).
  GPU time is the per-question share of the batch wall time (``samples.latency_s``), counted
  where the backend has a ``gpu_hourly_usd``. A cost is NULL, never 0, when it is unknown (a model
  without a price, token counts the server did not report); so is a total over any such question.

Prices change: the presets are a convenience, check them before publishing a cost.
"""

from __future__ import annotations

import json
import math
from collections.abc import Sequence
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import TYPE_CHECKING

from pydantic import BaseModel, ConfigDict, Field, ValidationError

from harness.errors import DataError

if TYPE_CHECKING:
    import pandas as pd

    from harness.results.store import Store

PRICES_FILE = "prices.json"


@dataclass(frozen=True)
class ModelPrice:
    input_usd_per_1m: float
    output_usd_per_1m: float
    source: str


@dataclass(frozen=True)
class BackendCost:
    token_priced: bool
    gpu_hourly_usd: float | None
    source: str


_OPENAI = "openai.com/api/pricing (standard tier), as listed 2025-06"
_ANTHROPIC = "anthropic.com/pricing, as listed 2025-06"
_GOOGLE = "ai.google.dev/pricing (paid tier, prompts <=128k), as listed 2025-06"
_DEEPSEEK = "api-docs.deepseek.com/quick_start/pricing (cache miss, standard hours), as listed 2025-06"
_LOCAL = "local model (harness serve-model / packaged): no per-token bill"

PRESET_MODELS: dict[str, ModelPrice] = {
    # OpenAI
    "gpt-4o": ModelPrice(2.50, 10.00, _OPENAI),
    "gpt-4o-2024-11-20": ModelPrice(2.50, 10.00, _OPENAI),
    "gpt-4o-2024-08-06": ModelPrice(2.50, 10.00, _OPENAI),
    "gpt-4o-mini": ModelPrice(0.15, 0.60, _OPENAI),
    "gpt-4o-mini-2024-07-18": ModelPrice(0.15, 0.60, _OPENAI),
    "gpt-4.1": ModelPrice(2.00, 8.00, _OPENAI),
    "gpt-4.1-mini": ModelPrice(0.40, 1.60, _OPENAI),
    "gpt-4.1-nano": ModelPrice(0.10, 0.40, _OPENAI),
    "o3-mini": ModelPrice(1.10, 4.40, _OPENAI),
    "o4-mini": ModelPrice(1.10, 4.40, _OPENAI),
    "gpt-3.5-turbo": ModelPrice(0.50, 1.50, _OPENAI),
    # Anthropic (through an OpenAI-compatible gateway)
    "claude-3-5-haiku-20241022": ModelPrice(0.80, 4.00, _ANTHROPIC),
    "claude-3-5-sonnet-20241022": ModelPrice(3.00, 15.00, _ANTHROPIC),
    "claude-3-7-sonnet-20250219": ModelPrice(3.00, 15.00, _ANTHROPIC),
    # Google
    "gemini-2.0-flash": ModelPrice(0.10, 0.40, _GOOGLE),
    "gemini-1.5-flash": ModelPrice(0.075, 0.30, _GOOGLE),
    # DeepSeek
    "deepseek-chat": ModelPrice(0.27, 1.10, _DEEPSEEK),
    "deepseek-reasoner": ModelPrice(0.55, 2.19, _DEEPSEEK),
    # the packaged model, in-process or served by `harness serve-model` (alias smollm2)
    "smollm2-135m-instruct": ModelPrice(0.0, 0.0, _LOCAL),
    "smollm2": ModelPrice(0.0, 0.0, _LOCAL),
    "default": ModelPrice(0.0, 0.0, _LOCAL),
}

PRESET_BACKENDS: dict[str, BackendCost] = {
    "transformers": BackendCost(False, None, "in-process model: no per-token bill"),
    "llamacpp": BackendCost(False, None, "in-process model: no per-token bill"),
    "vllm": BackendCost(False, None, "in-process model: no per-token bill; set gpu_hourly_usd"),
    "openai": BackendCost(True, None, "a server billed per token (set the model's price)"),
}


@dataclass(frozen=True)
class PriceRow:
    """One row of the ``prices`` table."""

    kind: str
    name: str
    input_usd_per_1m: float | None
    output_usd_per_1m: float | None
    token_priced: bool | None
    gpu_hourly_usd: float | None
    source: str
    updated_at: datetime


@dataclass
class PriceTable:
    models: dict[str, ModelPrice]
    backends: dict[str, BackendCost]

    def token_cost(self, model: str, prompt_tokens: int, completion_tokens: int) -> float | None:
        """USD for these tokens of ``model``; None when unpriced or a count is unknown (< 0)."""
        p = self.models.get(model)
        if p is None or prompt_tokens < 0 or completion_tokens < 0:
            return None
        return (prompt_tokens * p.input_usd_per_1m + completion_tokens * p.output_usd_per_1m) / 1e6

    def rows(self) -> list[PriceRow]:
        now = datetime.now(UTC).replace(tzinfo=None)
        out = [
            PriceRow("model", n, p.input_usd_per_1m, p.output_usd_per_1m, None, None, p.source, now)
            for n, p in sorted(self.models.items())
        ]
        out += [
            PriceRow("backend", n, None, None, b.token_priced, b.gpu_hourly_usd, b.source, now)
            for n, b in sorted(self.backends.items())
        ]
        return out


class _ModelEntry(BaseModel):
    model_config = ConfigDict(extra="forbid")
    input_usd_per_1m: float = Field(ge=0)
    output_usd_per_1m: float = Field(ge=0)
    source: str = "results/prices.json"


class _BackendEntry(BaseModel):
    model_config = ConfigDict(extra="forbid")
    token_priced: bool | None = None
    gpu_hourly_usd: float | None = Field(default=None, ge=0)
    source: str = "results/prices.json"


class _PriceFile(BaseModel):
    model_config = ConfigDict(extra="forbid")
    models: dict[str, _ModelEntry] = {}
    backends: dict[str, _BackendEntry] = {}


def load_prices(path: str | Path | None = None) -> PriceTable:
    """The presets, overridden and extended by the JSON file at ``path`` when it exists."""
    models = dict(PRESET_MODELS)
    backends = dict(PRESET_BACKENDS)
    if path is None or not Path(path).exists():
        return PriceTable(models, backends)
    p = Path(path)
    try:
        data = _PriceFile.model_validate(json.loads(p.read_text()))
    except json.JSONDecodeError as e:
        raise DataError(str(p), f"not valid JSON: {e.msg}", e.lineno) from e
    except ValidationError as e:
        first = e.errors()[0]
        where = ".".join(str(x) for x in first["loc"])
        raise DataError(
            str(p), f"{where}: {first['msg']} (see harness/results/cost.py for the format)"
        ) from e
    for name, m in data.models.items():
        models[name] = ModelPrice(m.input_usd_per_1m, m.output_usd_per_1m, m.source)
    for name, b in data.backends.items():
        base = backends.get(name, BackendCost(True, None, ""))
        backends[name] = BackendCost(
            base.token_priced if b.token_priced is None else b.token_priced, b.gpu_hourly_usd, b.source
        )
    return PriceTable(models, backends)


def prices_path(store: Store) -> Path:
    """``prices.json`` next to the results database (``results/prices.json`` by default)."""
    return store.path.parent / PRICES_FILE


def sync_prices(store: Store, table: PriceTable | None = None) -> PriceTable:
    """Write the price table (default: presets + the store's prices.json) into ``prices``."""
    table = table if table is not None else load_prices(prices_path(store))
    store.replace_prices(table.rows())
    return table


def cost_summary(store: Store, run_ids: Sequence[str], *, sync: bool = True) -> pd.DataFrame:
    """Per (method, dataset) over ``run_ids``: n, cost_usd, cost_usd_per_q, n_correct_em,
    usd_per_correct, retrievals_per_q, tokens, gpu_seconds, n_unpriced, unpriced_models.
    ``sync``: refresh the ``prices`` table first (skipped on a read-only store)."""
    if sync and not store.read_only:
        sync_prices(store)
    from harness.results import queries

    return queries.cost_rows(store, run_ids)


def run_costs(store: Store, run_ids: Sequence[str]) -> pd.DataFrame:
    """Rows of the ``run_costs`` view for ``run_ids``."""
    from harness.results import queries

    return queries.run_costs(store, run_ids)


def format_usd(x: float | None) -> str:
    """``$0``, ``$0.0123``, ``$1.2e-05``; ``-`` when unknown (None/NaN)."""
    if x is None or (isinstance(x, float) and math.isnan(x)):
        return "-"
    if x == 0:
        return "$0"
    return f"${x:.4f}" if abs(x) >= 0.01 else f"${x:.2g}"
