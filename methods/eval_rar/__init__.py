"""Eval-RAR (Yu et al., Findings of ACL 2026): the method, its mode-B variant and its evaluation
protocol. It trains on Search-R1's bench and renders documents with Search-R1's renderer, both
looked up by name."""

from harness.plugins import Plugin

PLUGIN = Plugin(
    methods={"eval_rar": ".method:EvalRAR", "eval_rar_b": ".method:EvalRARModeB"},
    variants={"eval_rar_b": "eval_rar"},
    protocols={"eval_rar-eval": ".protocol:eval_protocol"},
    aliases=("evalrar", "Eval-RAR"),
)
