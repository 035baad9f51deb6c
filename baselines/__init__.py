"""The prompt baselines, one module each; registered from the manifest below (``harness.plugins``)."""

from harness.plugins import Plugin

PLUGIN = Plugin(
    methods={
        "direct": ".direct:Direct",
        "naive_rag": ".naive_rag:NaiveRAG",
        "cot": ".cot:CoT",
        "ircot": ".ircot:IRCoT",
        "search_o1": ".search_o1:SearchO1",
        "sure": ".sure:SuRe",
    },
)
