"""Eval-RAR's published EM numbers (Yu et al., Findings of ACL 2026, Tables 1-2), Qwen2.5-3B.

EM over the full test (else dev) sets, wiki-18 + E5 top-3; "avg" is the unweighted mean of the
seven sets as printed. Every baseline number is copied by the authors from the Search-R1 and
AutoRefine papers (the Search-R1 rows are Search-R1's GRPO numbers), not re-run (paper §5.1, Baselines).
"""

from __future__ import annotations

from harness.reported import EM_SEVEN_AVG, Row, Table

PAPER = "eval_rar"
SRC = "Eval-RAR (Yu et al., Findings of ACL 2026)"
_COPIED = "copied by the authors from Search-R1 / AutoRefine"
_UNSTATED = "backbone variant (base/instruct) not stated"

_BASE, _INSTRUCT = "Qwen2.5-3B", "Qwen2.5-3B-Instruct"

# (label, method, model, values NQ TriviaQA PopQA HotpotQA 2Wiki Musique Bamboogle Avg, note)
_T1 = [
    (
        "Direct Inference",
        "direct",
        _INSTRUCT,
        (0.106, 0.288, 0.108, 0.149, 0.244, 0.020, 0.024, 0.134),
        _COPIED,
    ),
    ("CoT", "cot", _INSTRUCT, (0.023, 0.032, 0.005, 0.021, 0.021, 0.002, 0.000, 0.015), _COPIED),
    (
        "SFT",
        "sft",
        _BASE,
        (0.249, 0.292, 0.104, 0.186, 0.248, 0.044, 0.112, 0.176),
        f"{_COPIED}; {_UNSTATED}",
    ),
    ("R1-Base", "r1", _BASE, (0.226, 0.455, 0.173, 0.201, 0.268, 0.055, 0.224, 0.229), _COPIED),
    ("R1-Instruct", "r1", _INSTRUCT, (0.210, 0.449, 0.171, 0.208, 0.275, 0.060, 0.192, 0.224), _COPIED),
    ("Naive RAG", "naive_rag", _INSTRUCT, (0.348, 0.544, 0.387, 0.255, 0.226, 0.047, 0.080, 0.270), _COPIED),
    ("IRCoT", "ircot", _INSTRUCT, (0.111, 0.312, 0.200, 0.164, 0.171, 0.067, 0.240, 0.181), _COPIED),
    ("Search-o1", "search_o1", _INSTRUCT, (0.238, 0.472, 0.262, 0.221, 0.218, 0.054, 0.320, 0.255), _COPIED),
    (
        "Search-R1-Base",
        "search_r1",
        _BASE,
        (0.421, 0.583, 0.413, 0.297, 0.274, 0.066, 0.128, 0.312),
        f"{_COPIED} (Search-R1's GRPO numbers)",
    ),
    (
        "Search-R1-Instruct",
        "search_r1",
        _INSTRUCT,
        (0.397, 0.565, 0.391, 0.331, 0.310, 0.124, 0.232, 0.336),
        f"{_COPIED} (Search-R1's GRPO numbers)",
    ),
    (
        "AutoRefine-Instruct",
        "autorefine",
        _INSTRUCT,
        (0.436, 0.597, 0.447, 0.404, 0.380, 0.169, 0.336, 0.396),
        _COPIED,
    ),
    (
        "AutoRefine-Base",
        "autorefine",
        _BASE,
        (0.467, 0.620, 0.450, 0.405, 0.393, 0.157, 0.344, 0.405),
        _COPIED,
    ),
    (
        "Eval-RAR-Instruct",
        "eval_rar",
        _INSTRUCT,
        (0.462, 0.611, 0.448, 0.403, 0.383, 0.171, 0.352, 0.404),
        "",
    ),
    ("Eval-RAR-Base", "eval_rar", _BASE, (0.471, 0.629, 0.453, 0.412, 0.394, 0.161, 0.368, 0.413), ""),
]

TABLE1 = Table(
    paper=PAPER,
    source=f"{SRC}, Table 1",
    table="Table 1",
    columns=EM_SEVEN_AVG,
    rows_=tuple(Row(method=m, model=mo, values=v, label=lab, note=n) for lab, m, mo, v, n in _T1),
)

TABLE2 = Table(
    paper=PAPER,
    source=f"{SRC}, Table 2 (ablation)",
    table="Table 2",
    columns=EM_SEVEN_AVG,
    rows_=(
        Row(
            "eval_rar",
            _INSTRUCT,
            (0.462, 0.611, 0.448, 0.403, 0.383, 0.171, 0.352, 0.404),
            "full",
            "Eval-RAR-Instruct",
        ),
        Row(
            "eval_rar",
            _INSTRUCT,
            (0.423, 0.583, 0.429, 0.341, 0.336, 0.111, 0.248, 0.353),
            "w/o evaluation reward",
            "w/o evaluation reward",
            note="same prompt and <evaluate> format, reward = outcome EM only",
        ),
        Row(
            "eval_rar",
            _BASE,
            (0.471, 0.629, 0.453, 0.412, 0.394, 0.161, 0.368, 0.413),
            "full",
            "Eval-RAR-Base",
        ),
        Row(
            "eval_rar",
            _BASE,
            (0.427, 0.591, 0.434, 0.331, 0.348, 0.123, 0.264, 0.360),
            "w/o evaluation reward",
            "w/o evaluation reward",
            note="same prompt and <evaluate> format, reward = outcome EM only",
        ),
    ),
)

TABLES = (TABLE1, TABLE2)
