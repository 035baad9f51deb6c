"""Search-R1 (Jin et al. 2025, arXiv 2503.09516): the method, its evaluation protocol and training
bench, and its document renderer (which Eval-RAR reuses by name)."""

from harness.plugins import Plugin

PLUGIN = Plugin(
    methods={"search_r1": ".method:SearchR1"},
    protocols={"searchr1": ".protocol:searchr1"},
    benches={"searchr1-train": ".benches:TRAIN"},
    renderers={"search_r1": ".render:render_search_r1"},
    aliases=("searchr1", "Search-R1"),
)
