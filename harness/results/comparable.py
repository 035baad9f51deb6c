"""When two numbers may be compared: the one definition every view, export and command uses.

- Two of our scores compare only under the same protocol id (which pins corpus, retriever, top-k,
  prompt, decoding, sample and metric versions) and the same metric (:func:`ours_differs`).
- Ours against a paper's row compares only when the row's recorded setting matches the run on
  every field that moves a score (:data:`FIELDS`): corpus, retriever, top-k, prompt variant, model,
  metric variant and training state (:func:`setting_differs`). A field the paper row does not
  record cannot be shown to match, so it is a difference too ("prompt not recorded"); where the
  row says what its paper states about the prompt (``prompt_note``), the reason is that statement
  ("prompt not given (ARENA §4.3)"), and a recorded prompt that differs from ours carries it too
  ("prompt naive_rag_flashrag vs naive_rag: FlashRAG's pipeline scores the whole reply, ...").

Anything else gets no difference: both numbers, and "not comparable: <fields>".

A paper row's setting (:func:`paper_setting`): what its ``reported.yaml`` file, table or row
records (``setting:``, with its source; never the harness protocol registered for the paper, which
may run on a substitute corpus); its prompt is our implementation of the paper's own method for the paper's
own rows (``methods/<paper>/`` holds the paper's templates) and unrecorded for any other row unless
the file says which; its training state is ``none`` (inference only) for a registered prompt
baseline and ``trained`` for any other row unless the file says otherwise, a trained row with the
algorithm and variant its setting records (``algorithm``, ``variant``): ``trained (grpo)``. Ours
(:func:`run_setting`): the run's protocol, model, metric, method (its prompt variant) and training
state from the run's record (:mod:`harness.results.training_state`: ``none``, ``untrained``,
``trained (<algorithm>)``), never from its label: a trained run compares only with paper rows of
the same algorithm and variant.
"""

from __future__ import annotations

from dataclasses import dataclass, fields

from harness.results.training_state import training_text

FIELDS = ("corpus", "retriever", "top_k", "prompt", "model", "metric", "training")
"""The setting fields that move a score, in the order reasons are given."""

_LABEL = {"top_k": "top-k"}


@dataclass(frozen=True)
class Setting:
    """What a number was produced under; None: not recorded."""

    corpus: str | None = None
    retriever: str | None = None
    top_k: int | None = None
    prompt: str | None = None
    model: str | None = None
    metric: str | None = None
    training: str | None = None
    prompt_note: str | None = None  # what the paper states about its prompt, with the source (not a field)

    def replace(self, **changes: object) -> Setting:
        return Setting(**{**{f.name: getattr(self, f.name) for f in fields(self)}, **changes})  # type: ignore[arg-type]


def ours_differs(protocol_a: str, protocol_b: str, metric_a: str = "", metric_b: str = "") -> list[str]:
    """Why two of our scores do not compare (empty: they do): ``protocol X vs Y``, ``metric X vs Y``."""
    out = []
    if protocol_a != protocol_b:
        out.append(f"protocol {protocol_a} vs {protocol_b}")
    if metric_a != metric_b:
        out.append(f"metric {metric_a} vs {metric_b}")
    return out


def retriever_text(protocol: dict) -> str:
    """The protocol's retriever in a few words (``bm25s``, ``dense e5-base-v2 Flat``)."""
    r = protocol.get("retriever") or {}
    kind = str(r.get("kind", "?"))
    enc = r.get("encoder")
    if isinstance(enc, dict):
        name = str(enc.get("name") or enc.get("model") or "").split("/")[-1]
        return f"{kind} {name} {r.get('index_type', '')}".strip()
    return kind


def corpus_text(protocol: dict) -> str:
    return str((protocol.get("corpus") or {}).get("id", "?"))


def model_key(model: str) -> str:
    """A model name as compared: the last path part, lower case (``Qwen/Qwen2.5-3B`` = ``qwen2.5-3b``)."""
    return model.split("/")[-1].lower()


def protocol_setting(protocol: dict | None) -> Setting:
    """Corpus, retriever and top-k of a protocol (as its JSON dict); nothing when None."""
    if protocol is None:
        return Setting()
    top_k = protocol.get("top_k")
    return Setting(
        corpus=corpus_text(protocol),
        retriever=retriever_text(protocol),
        top_k=int(top_k) if top_k is not None else None,
    )


def run_setting(
    protocol: dict | None,
    *,
    method: str,
    model: str,
    metric: str,
    training: str | None,
) -> Setting:
    """Our run's setting: its protocol's corpus, retriever and top-k, its method as the prompt
    variant, its model and metric, and its ``training`` state as
    :func:`harness.results.training_state.training_of` reads it from the run's record."""
    return protocol_setting(protocol).replace(prompt=method, model=model, metric=metric, training=training)


def paper_setting(
    *,
    paper: str,
    method: str,
    model: str,
    metric: str,
    recorded: dict[str, object] | None = None,
) -> Setting:
    """A paper row's setting: ``recorded`` (its ``reported.yaml`` ``setting``), else the defaults of
    the module docstring; a field neither gives is None (not recorded)."""
    from harness.methods_registry import METHODS, get_method

    rec = dict(recorded or {})
    registered = method in METHODS.names()
    if "training" in rec:
        training = str(rec["training"])
    elif registered and not get_method(method).trained:
        training = "none"
    else:
        training = "trained"
    algorithm, variant = rec.get("algorithm"), rec.get("variant")
    training = str(
        training_text(training, str(algorithm) if algorithm else None, str(variant) if variant else None)
    )
    prompt = rec.get("prompt", method if method == paper else None)
    return Setting(
        corpus=str(rec["corpus"]) if "corpus" in rec else None,
        retriever=str(rec["retriever"]) if "retriever" in rec else None,
        top_k=int(rec["top_k"]) if "top_k" in rec else None,  # type: ignore[call-overload]
        prompt=str(prompt) if prompt is not None else None,
        model=model,
        metric=metric,
        training=training,
        prompt_note=str(rec["prompt_note"]) if rec.get("prompt_note") else None,
    )


def setting_differs(paper: Setting, ours: Setting, only: tuple[str, ...] = FIELDS) -> list[str]:
    """Why a paper row and our run do not compare, field by field (``corpus wiki18 vs closed``,
    ``training trained vs untrained``, ``prompt not recorded``); empty: they compare. The paper's
    ``prompt_note`` stands for ``not recorded`` (``prompt not given (ARENA §4.3)``) and follows a
    prompt that differs (``prompt naive_rag_flashrag vs naive_rag: <note>``)."""
    out = []
    for name in only:
        theirs, mine = getattr(paper, name), getattr(ours, name)
        label = _LABEL.get(name, name)
        note = paper.prompt_note if name == "prompt" else None
        if theirs is None:
            out.append(f"{label} {note}" if note else f"{label} not recorded")
        elif mine is None:
            out.append(f"{label} {theirs} vs unknown")
        elif (model_key(str(theirs)) != model_key(str(mine))) if name == "model" else (theirs != mine):
            out.append(f"{label} {theirs} vs {mine}" + (f": {note}" if note else ""))
    return out


def field_of(reason: str) -> str:
    """The field a reason of :func:`setting_differs` names (``top-k 7 vs 3`` -> ``top-k``)."""
    return reason.split(" ", 1)[0]


def not_comparable(reasons: list[str]) -> str:
    """``not comparable: corpus, retriever, training`` ('' when there is no reason)."""
    names = list(dict.fromkeys(field_of(r) for r in reasons))
    return f"not comparable: {', '.join(names)}" if names else ""


__all__ = [
    "FIELDS",
    "Setting",
    "corpus_text",
    "field_of",
    "model_key",
    "not_comparable",
    "ours_differs",
    "paper_setting",
    "protocol_setting",
    "retriever_text",
    "run_setting",
    "setting_differs",
]
