"""TIRESRAG-R1 (He, Gutiérrez-Basulto, Pan 2025): the method, its evaluation protocol, its training
bench (R1-Searcher's training questions) and its three judge prompts (evaluation, sufficiency and
thinking rewards)."""

from harness.plugins import Plugin

PLUGIN = Plugin(
    methods={"tiresrag_r1": ".method:TiresRAG"},
    protocols={
        "tiresrag_r1-eval": ".protocol:eval_protocol",
        "tiresrag_r1-released": ".protocol:released_protocol",
    },
    benches={"r1searcher-train": ".benches:TRAIN"},
    judge_prompts={
        "tiresrag_r1": ".judge:TIRESRAG_R1",
        "tiresrag_r1_sufficiency": ".judge:TIRESRAG_R1_SUFFICIENCY",
        "tiresrag_r1_thinking": ".judge:TIRESRAG_R1_THINKING",
    },
    aliases=("tiresrag", "TIRESRAG-R1", "TiresRAG"),
)
