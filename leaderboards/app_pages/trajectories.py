"""Trajectory explorer: every turn of one question as the model saw it — the prompt, each
generation, each observation, every message the environment injected — with gold passages
highlighted, repetition loops collapsed, and a side-by-side comparison with a second method.

Method, dataset, comparison, metric and question live in the URL (a permalink opens the question).
"""

from __future__ import annotations

import pandas as pd
import streamlit as st

from leaderboards import ui, views
from leaderboards.schema import metric_label

NONE = "(none)"
code = views.inline_code  # model text, queries and ids render as text, whatever they contain

st.title("Trajectory explorer")
db = ui.db_path()
protocol = ui.current_protocol()
if protocol is None:
    st.info("No scored evaluation runs yet.")
    st.stop()

runs = ui.load_latest_runs(db, ui.stamp(db), protocol)
systems = sorted({f"{r.method} · {r.model}" for r in runs.itertuples()})
by_system = {s: runs[(runs["method"] + " · " + runs["model"]) == s] for s in systems}

c1, c2, c3 = st.columns(3)
ui.from_link("traj_a", systems)
a = c1.selectbox("Method", systems, key="traj_a")
ui.to_link("traj_a", a, systems[0])
datasets = sorted(set(by_system[a]["dataset"]))
ui.from_link("traj_dataset", datasets)
dataset = c2.selectbox("Dataset", datasets, key="traj_dataset")
ui.to_link("traj_dataset", dataset, datasets[0])
others = [NONE, *(s for s in systems if s != a)]
ui.from_link("traj_b", others)
b = c3.selectbox("Compare with", others, key="traj_b")
ui.to_link("traj_b", b, NONE)


def run_of(system: str) -> str | None:
    r = by_system[system]
    r = r[r["dataset"] == dataset]
    return None if r.empty else str(r.iloc[0]["run_id"])


run_a = run_of(a)
run_b = run_of(b) if b != NONE else None
metrics = ui.load_metrics(db, ui.stamp(db), protocol)
c4, c5 = st.columns([2, 1])
ui.from_link("traj_metric", metrics)
metric = c4.selectbox("Metric", metrics, format_func=metric_label, key="traj_metric")
ui.to_link("traj_metric", metric, metrics[0] if metrics else None)
only_dis = c5.toggle(
    "Only disagreements",
    value=False,
    key="traj_disagree",
    disabled=run_b is None,
    help="questions where the two methods score differently on this metric",
)
if b != NONE and run_b is None:
    st.warning(f"{b} has no run on {dataset} under this protocol.")

qs = views.question_table(
    ui.load_questions(db, ui.stamp(db), run_a, dataset),
    ui.load_run_metric(db, ui.stamp(db), run_a, dataset, metric),
    ui.load_run_metric(db, ui.stamp(db), run_b, dataset, metric) if run_b else None,
    ui.load_questions(db, ui.stamp(db), run_b, dataset) if run_b else None,
    only_disagreements=only_dis and run_b is not None,
)
if run_b is not None:
    n_dis = int(qs["disagree"].sum()) if "disagree" in qs else 0
    st.caption(
        f"{len(qs)} questions shown; {n_dis} where {metric_label(metric)} differs between the two methods."
    )
if qs.empty:
    st.info("No questions match.")
    st.stop()


def badge(value: float | None) -> str:
    if value is None or pd.isna(value):
        return "·"
    return "✓" if value >= 1 else ("✗" if value <= 0 else "◐")


labels = {
    r.sample_id: f"{badge(r.a)} {r.position}. {r.question[:110]}"
    + (f"  [{r.a:.2f} vs {r.b:.2f}]" if run_b and pd.notna(r.b) else "")
    for r in qs.itertuples()
}
ui.from_link("q", list(labels))
sample_id = st.selectbox("Question", list(labels), format_func=labels.__getitem__, key="q")
ui.to_link("q", sample_id)
pjson = ui.load_protocol_json(db, ui.stamp(db), protocol)


def show_passage(p: views.PassageView) -> None:
    score = "" if p.score is None else f" · score {p.score:.2f}"
    head = f"**{'GOLD · ' if p.gold else ''}{code(p.doc_id)}**{score}"
    body = (
        f"{head}  \n**{p.title}** — {p.text}"
        if p.title is not None
        else f"{head}  \n_(passage text not available for this corpus)_"
    )
    if p.gold:
        st.success(body, icon=":material/star:")
    else:
        st.markdown(body)


def show_text(text: str) -> None:
    collapsed, n = views.collapse_repeats(text)
    st.code(collapsed or "∅", language=None, wrap_lines=True)
    if n:
        st.caption(f"{n} repetition loop(s) collapsed")


SOURCE_WORDS = {"stored": "stored", "continued": "continued context", "missing": "not stored"}


def show_prompt(c: views.CallPrompt) -> None:
    """The call's prompt in a collapsed expander labelled by turn, or why it is not there."""
    with st.expander(f"prompt of {c.label} · {SOURCE_WORDS[c.source]}", expanded=False):
        st.caption(c.note)
        if c.text is not None:
            st.code(c.text, language=None, wrap_lines=True)


def show_sample(s: views.SampleView, system: str) -> None:
    value = s.metrics.get(metric)
    mark = badge(value)
    verdict = {"✓": "correct", "✗": "wrong", "◐": "partly right", "·": "not scored"}[mark]
    st.subheader(system)
    st.markdown(
        f"**{mark} {verdict}** ({metric_label(metric)} {'' if value is None else f'{value:.2f}'}) · "
        f"**answer:** {code(s.prediction or '∅')} · extraction: {code(s.extraction_status)}"
    )
    if s.error:
        st.error(s.error)
    prompts = {c.turn: c for c in views.call_prompts(s)}
    kept = {c.source for c in prompts.values()}
    st.caption(
        "Each model call shows its prompt under its turn: "
        + "; ".join(
            text
            for source, text in (
                ("stored", "**stored** is the prompt the run kept"),
                (
                    "continued",
                    "**continued** is the stored prompt plus the trajectory before the call "
                    "(the call continued one context)",
                ),
                (
                    "missing",
                    "**not stored**: the store keeps one prompt per question, so the other calls "
                    "show only their output and token counts",
                ),
            )
            if source in kept
        )
    )
    if s.metrics:
        st.caption(" · ".join(f"{metric_label(k)} {v:.2f}" for k, v in sorted(s.metrics.items())))
    for pos, t in enumerate(s.turns):
        tokens = f"{t.prompt_tokens} prompt / {t.completion_tokens} completion tokens"
        with st.container(border=True):
            if t.kind == "retrieve":
                found = f"{len(t.passages)} passages" if t.passages else "**0 passages**"
                st.markdown(
                    f"**turn {t.index} · search** {code(t.query)} · {found} · {t.observation_tokens} observation tokens"
                )
                for p in t.passages:
                    show_passage(p)
                st.markdown("observation text (as inserted into the context):")
                show_text(t.text)
            elif t.kind == views.INJECTED:
                st.markdown("**injected message** · after a generation without a search or an answer")
                st.warning(t.text.strip(), icon=":material/reply:")
            elif t.kind == "message":
                st.markdown(
                    f"**turn {t.index} · injected message** ({t.status}) · refused query {code(t.query)}"
                )
                st.warning(t.text.strip(), icon=":material/reply:")
            else:
                st.markdown(
                    f"**turn {t.index} · {t.kind}** · {tokens} · stop: {code(t.stop_reason)} · {t.status}"
                )
                if pos in prompts:
                    show_prompt(prompts[pos])
                show_text(t.text)
    if s.never_retrieved:
        st.markdown(f"**gold passages never retrieved** ({len(s.never_retrieved)})")
        for p in s.never_retrieved:
            show_passage(p)
    if not s.judgements.empty:
        st.markdown("**judge verdicts**")
        st.dataframe(s.judgements, hide_index=True, key=f"judge_{s.run_id}")


first = ui.load_sample(db, ui.stamp(db), run_a, dataset, sample_id, pjson)
st.markdown(f"### {first.question}")
st.markdown(
    f"**gold answers:** {', '.join(code(x) for x in first.answers)} · **gold passages:** "
    + (", ".join(code(g) for g in first.gold_ids) or "unknown")
)
if run_b is not None and sample_id in set(ui.load_questions(db, ui.stamp(db), run_b, dataset)["sample_id"]):
    left, right = st.columns(2)
    with left:
        show_sample(first, a)
    with right:
        show_sample(ui.load_sample(db, ui.stamp(db), run_b, dataset, sample_id, pjson), b)
else:
    show_sample(first, a)
