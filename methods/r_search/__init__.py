"""R-Search (Zhao et al. 2025): the method, its evaluation protocol and its document renderer."""

from harness.plugins import Plugin

PLUGIN = Plugin(
    methods={"r_search": ".method:RSearch"},
    protocols={"r_search-eval": ".protocol:eval_protocol"},
    renderers={"r_search": ".render:render_r_search"},
    aliases=("rsearch", "R-Search"),
)
