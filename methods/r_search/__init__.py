"""R-Search (Zhao et al. 2025): the method, its evaluation protocols (ours and the released one) and
its document renderer."""

from harness.plugins import Plugin

PLUGIN = Plugin(
    methods={"r_search": ".method:RSearch"},
    protocols={
        "r_search-eval": ".protocol:eval_protocol",
        "r_search-released": ".protocol:released_protocol",
    },
    renderers={"r_search": ".render:render_r_search"},
    aliases=("rsearch", "R-Search"),
)
