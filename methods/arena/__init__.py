"""ARENA (Ren et al. 2025, arXiv 2505.13258): the method, its gold-context protocol, its training
bench and its judge (prompt and reply parser)."""

from harness.plugins import Plugin

PLUGIN = Plugin(
    methods={"arena": ".method:Arena"},
    protocols={"arena-gold-context": ".protocol:eval_protocol"},
    benches={"arena-train": ".benches:TRAIN"},
    judge_prompts={"arena": ".judge:ARENA"},
    aliases=("ARENA",),
)
