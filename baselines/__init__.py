"""The prompt baselines, one module each; registered from the manifest below (``harness.plugins``).

The variants reproduce a released evaluation (``docs/baselines.md``) and are scored under their own
protocols (``baselines/protocol.py``); they are listed and runnable by name, not in ``--method all``.
"""

from harness.plugins import Plugin

PLUGIN = Plugin(
    methods={
        "direct": ".direct:Direct",
        "naive_rag": ".naive_rag:NaiveRAG",
        "cot": ".cot:CoT",
        "ircot": ".ircot:IRCoT",
        "search_o1": ".search_o1:SearchO1",
        "sure": ".sure:SuRe",
        "search_o1_released": ".search_o1:SearchO1Released",
        "direct_flashrag": ".flashrag:DirectFlashRAG",
        "naive_rag_flashrag": ".flashrag:NaiveRAGFlashRAG",
        "ircot_flashrag": ".flashrag:IRCoTFlashRAG",
        "search_r1_rag": ".search_r1_rag:SearchR1RAG",
        "naive_rag_arena": ".naive_rag_arena:NaiveRAGArena",
    },
    variants={
        "search_o1_released": "search_o1",
        "direct_flashrag": "direct",
        "naive_rag_flashrag": "naive_rag",
        "ircot_flashrag": "ircot",
        "search_r1_rag": "naive_rag",
        "naive_rag_arena": "naive_rag",
    },
    protocols={
        "search_o1-released-singlehop": ".protocol:search_o1_released_singlehop",
        "search_o1-released-multihop": ".protocol:search_o1_released_multihop",
        "flashrag": ".protocol:flashrag",
    },
)
