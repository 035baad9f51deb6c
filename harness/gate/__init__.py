"""The regression gate's exact layers against a committed baseline (``harness regress``).

:mod:`harness.gate.layers` computes, with no model run, the items of four layers (specs,
retrieval, prompts, extraction); this module keeps them in a baseline file
(``results/regress/exact.json``, the prompt texts beside it in ``exact.prompts.json.gz`` for the
diff), compares a tree with it item by item, in layer order, and names the first layer and item
that moved, with a readable first difference. The items a plugin folder owns are pinned in that
folder (:mod:`harness.gate.pins`), so the baseline compared is every pin file read as one. The
model-score layer (paired bootstrap on the reader slice) is :mod:`harness.results.regress`, run
after these.

A baseline holds no machine paths and no timings: item keys are method, protocol, dataset and
question ids, values are hashes, ids, scores, predictions and metric values. ``reasons`` lists
every deliberate update's one-line reason (``harness regress --update --reason ...``).
"""

from __future__ import annotations

import gzip
import json
import math
import zlib
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Literal

from pydantic import BaseModel, ValidationError

from harness.errors import ConfigError
from harness.gate.layers import LAYERS, SCORE_TOLERANCE, Current

EXACT_FORMAT = 1
EXACT_BASELINE = Path("results/regress/exact.json")
VERSIONED = ("bm25s", "PyStemmer", "numpy")  # the retrieval layer's values depend on these


def library_versions() -> dict[str, str]:
    from harness.retrieval.index import library_versions as versions

    return versions(*VERSIONED)


class ExactBaseline(BaseModel):
    format: int = EXACT_FORMAT
    reasons: list[str] = []  # one line per deliberate update, oldest first
    versions: dict[str, str] = {}  # the libraries the retrieval layer was recorded with
    layers: dict[str, dict[str, Any]]

    @classmethod
    def load(cls, path: Path) -> ExactBaseline:
        if not path.is_file():
            raise ConfigError(
                f"{path}: no exact-layer baseline; create it with "
                f"`harness regress --layers exact --update --reason '...' --exact-against {path}`"
            )
        try:
            b = cls.model_validate_json(path.read_text())
        except (ValidationError, ValueError) as e:
            raise ConfigError(
                f"{path}: not a valid exact-layer baseline ({e}); recreate it with --update"
            ) from None
        if b.format != EXACT_FORMAT:
            raise ConfigError(
                f"{path}: exact-layer baseline format {b.format}, this harness reads {EXACT_FORMAT}"
            )
        for layer, items in b.layers.items():
            for key, item in items.items():
                damage = _item_damage(layer, item)
                if damage:
                    raise ConfigError(
                        f"{path}: {layer} item {key!r} is damaged ({damage}); restore the file "
                        "(git checkout) or recreate it with --update"
                    )
        return b

    def save(self, path: Path, prompt_texts: dict[str, str]) -> None:
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(json.dumps(self.model_dump(mode="json"), indent=1, ensure_ascii=False) + "\n")
        data = json.dumps(dict(sorted(prompt_texts.items())), ensure_ascii=False).encode()
        # mtime=0: the same texts give the same bytes (no timestamp in a committed file)
        texts_path(path).write_bytes(gzip.compress(data, mtime=0))


def _item_damage(layer: str, item: Any) -> str:
    """What is wrong with one pinned item of ``layer`` (the shape :func:`compare` reads), or ''."""
    if layer in ("specs", "prompts"):
        return "" if isinstance(item, str) else f"a hash string expected, got {type(item).__name__}"
    if layer == "extraction":
        if not isinstance(item, dict):
            return f"an object expected, got {type(item).__name__}"
        metrics = item.get("metrics", {})
        if not isinstance(metrics, dict) or not all(
            isinstance(v, int | float) and not isinstance(v, bool) for v in metrics.values()
        ):
            return "'metrics' must be an object of metric name -> number"
        return ""
    if layer == "retrieval":
        if not isinstance(item, dict):
            return f"an object with 'ids' and 'scores' expected, got {type(item).__name__}"
        ids, scores = item.get("ids"), item.get("scores")
        if not isinstance(ids, list) or not all(isinstance(x, str) for x in ids):
            return "'ids' must be a list of passage ids"
        if not isinstance(scores, list) or not all(
            isinstance(x, int | float) and not isinstance(x, bool) for x in scores
        ):
            return "'scores' must be a list of numbers"
        if len(ids) != len(scores):
            return f"{len(ids)} ids but {len(scores)} scores"
    return ""


def texts_path(path: Path) -> Path:
    return path.with_name(path.stem + ".prompts.json.gz")


def load_texts(path: Path) -> dict[str, str]:
    """The prompt texts pinned beside ``path`` ({} when there are none); a damaged file (not gzip,
    truncated, not a JSON object of strings) is one :class:`ConfigError` naming it."""
    p = texts_path(path)
    if not p.is_file():
        return {}
    try:
        texts = json.loads(gzip.decompress(p.read_bytes()))
    except (OSError, EOFError, zlib.error, UnicodeDecodeError, ValueError, RecursionError) as e:
        raise ConfigError(
            f"{p}: damaged prompt texts ({type(e).__name__}: {e}); restore the file (git checkout) or "
            "recreate it with --update"
        ) from None
    if not isinstance(texts, dict) or not all(isinstance(v, str) for v in texts.values()):
        raise ConfigError(
            f"{p}: damaged prompt texts (a JSON object of key -> text expected); restore the file or "
            "recreate it with --update"
        )
    return texts


@dataclass(frozen=True)
class Moved:
    key: str
    detail: str


@dataclass
class LayerVerdict:
    layer: str
    verdict: Literal["ok", "FAIL", "not run"]
    n: int = 0
    moved: list[Moved] = field(default_factory=list)
    note: str = ""

    @property
    def failed(self) -> bool:
        return self.verdict == "FAIL"


def compare(
    baseline: ExactBaseline, current: Current, *, baseline_texts: dict[str, str] | None = None
) -> list[LayerVerdict]:
    """One verdict per layer, in :data:`LAYERS` order; a layer fails when any item moved, is
    missing, or is new (a new method or protocol is pinned on purpose, with ``--update``)."""
    out = []
    for layer in LAYERS:
        if layer not in current.items:
            out.append(LayerVerdict(layer, "not run"))
            continue
        if layer not in baseline.layers:
            out.append(LayerVerdict(layer, "FAIL", note="the baseline has no such layer: --update it"))
            continue
        old, new = baseline.layers[layer], current.items[layer]
        moved = [
            Moved(k, _detail(layer, k, old[k], new[k], baseline_texts or {}, current.prompt_texts))
            for k in old
            if k in new and not _same(layer, old[k], new[k])
        ]
        moved += [Moved(k, "missing: in the baseline, not computed now") for k in old if k not in new]
        moved += [Moved(k, "new: not in the baseline") for k in new if k not in old]
        note = ""
        if layer == "retrieval" and moved and baseline.versions and baseline.versions != library_versions():
            note = f"recorded with {_fmt(baseline.versions)}, here {_fmt(library_versions())}"
        out.append(LayerVerdict(layer, "FAIL" if moved else "ok", n=len(new), moved=moved, note=note))
    return out


def first_moved(verdicts: list[LayerVerdict]) -> tuple[str, Moved | None] | None:
    """The first failing layer and its first moved item (None: every layer passed)."""
    for v in verdicts:
        if v.failed:
            return v.layer, (v.moved[0] if v.moved else None)
    return None


def report(verdicts: list[LayerVerdict], *, max_items: int = 5) -> str:
    """Plain text: one line per layer, then the moved items of each failing layer."""
    lines = []
    for v in verdicts:
        if v.verdict == "not run":
            lines.append(f"{v.layer:<11} not run")
            continue
        what = f"{len(v.moved)} of {v.n} items moved" if v.failed else f"{v.n} items identical"
        lines.append(f"{v.layer:<11} {v.verdict:<4} {what}" + (f" ({v.note})" if v.note else ""))
    first = first_moved(verdicts)
    if first is not None:
        layer, item = first
        lines.append(f"first moved: layer {layer}" + (f", item {item.key}" if item else ""))
        for v in verdicts:
            if not v.failed:
                continue
            for m in v.moved[:max_items]:
                lines.append(f"  [{v.layer}] {m.key}: {m.detail}")
            if len(v.moved) > max_items:
                lines.append(f"  [{v.layer}] ... and {len(v.moved) - max_items} more")
    return "\n".join(lines)


def _fmt(versions: dict[str, str]) -> str:
    return ", ".join(f"{k} {v}" for k, v in sorted(versions.items()))


def _same(layer: str, old: Any, new: Any) -> bool:
    if layer != "retrieval":
        return old == new
    return old["ids"] == new["ids"] and all(
        math.isclose(a, b, rel_tol=0.0, abs_tol=SCORE_TOLERANCE)
        for a, b in zip(old["scores"], new["scores"], strict=True)
    )


def _detail(layer: str, key: str, old: Any, new: Any, old_texts: dict, new_texts: dict) -> str:
    if layer == "retrieval":
        for r, (a, b) in enumerate(zip(old["ids"], new["ids"], strict=False), 1):
            i, j = old["ids"].index(a), new["ids"].index(b)
            if a != b or not math.isclose(old["scores"][i], new["scores"][j], abs_tol=SCORE_TOLERANCE):
                return f"rank {r}: {a} ({old['scores'][i]:.6f}) -> {b} ({new['scores'][j]:.6f})"
        return f"{len(old['ids'])} hits -> {len(new['ids'])} hits"
    if layer == "prompts":
        if key in old_texts and key in new_texts:
            return first_difference(old_texts[key], new_texts[key])
        return f"hash {old} -> {new} (no baseline text to diff)"
    if layer == "extraction" and isinstance(old, dict) and isinstance(new, dict):
        parts = []
        for f in ("prediction", "status", "error", "skipped"):
            if old.get(f) != new.get(f):
                parts.append(f"{f} {old.get(f)!r} -> {new.get(f)!r}")
        om, nm = old.get("metrics", {}), new.get("metrics", {})
        parts += [f"{m} {om.get(m)} -> {nm.get(m)}" for m in sorted({*om, *nm}) if om.get(m) != nm.get(m)]
        if "prediction" in old and old.get("prediction") == new.get("prediction") and parts:
            parts.append(f"(prediction {old['prediction']!r})")
        return "; ".join(parts)
    return f"{old} -> {new}"


def first_difference(old: str, new: str, context: int = 60) -> str:
    """Where two texts first differ: the line number and both lines around the first differing
    character (``-`` baseline, ``+`` now)."""
    a, b = old.split("\n"), new.split("\n")
    for n, (x, y) in enumerate(zip(a, b, strict=False), 1):
        if x != y:
            c = next((i for i, (p, q) in enumerate(zip(x, y, strict=False)) if p != q), min(len(x), len(y)))
            lo = max(0, c - context)
            return (
                f"first difference at line {n}, column {c + 1}:\n"
                f"      - {'…' if lo else ''}{x[lo : c + context]!r}\n"
                f"      + {'…' if lo else ''}{y[lo : c + context]!r}"
            )
    if len(a) != len(b):
        n = min(len(a), len(b)) + 1
        extra = (a if len(a) > len(b) else b)[n - 1]
        sign = "-" if len(a) > len(b) else "+"
        return f"first difference at line {n}: only one side has it:\n      {sign} {extra[: 2 * context]!r}"
    return "texts equal, hashes differ"
