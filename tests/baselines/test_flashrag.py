"""FlashRAG's benchmark setting (RUC-NLPIR/FlashRAG@1ee5249): the protocol ``flashrag`` pinned
against the released config, the middle truncation of every prompt to 2048 tokens, the raw reply
as the prediction of direct / naive RAG, and IRCoT's ``ircot_pred_parse`` (the whole chain when it
has no "So the answer is:") — each against the ``ircot`` / ``naive_rag`` / ``direct`` defaults."""

from __future__ import annotations

import re

import pytest

from baselines.direct import Direct
from baselines.flashrag import (
    GENERATOR_MAX_INPUT_LEN,
    DirectFlashRAG,
    IRCoTFlashRAG,
    NaiveRAGFlashRAG,
    extract_raw,
    middle_truncate,
)
from baselines.ircot import EXAMPLE, INSTRUCTION, IRCoT
from baselines.naive_rag import NaiveRAG
from harness.errors import ConfigError
from harness.eval.protocol import preset
from harness.eval.runner import check_protocol
from harness.methods_registry import get_method
from tests.baselines.helpers import context, example, protocol
from tests.support.scripted import ScriptedBackend

# FlashRAG@1ee5249 examples/methods/my_config.yaml, lines 55, 76 and 78-80, verbatim (the benchmark config)
MY_CONFIG = """\
retrieval_topk: 5 # number of retrieved documents
generator_max_input_len: 2048  # max length of the input
generation_params:
  do_sample: False
  max_tokens: 32
"""
# FlashRAG@1ee5249 flashrag/prompt/base_prompt.py:101-103, verbatim
TRUNCATE = """\
            if len(tokenized_prompt) >= self.max_input_len:
                half = int(self.max_input_len / 2) - 20
"""


class WordBackend(ScriptedBackend):
    """A scripted backend whose tokens are words and runs of whitespace, so FlashRAG's one-shot
    IRCoT prompt (about 900 such tokens) fits in 2048 and is sent whole."""

    def __init__(self, script: dict[str, list[str]]):
        super().__init__(script)
        self.vocab: dict[str, int] = {}
        self.words: list[str] = []

    def prompt_ids(self, text: str) -> list[int]:
        ids = []
        for w in re.findall(r"\s+|\S+", text):
            if w not in self.vocab:
                self.vocab[w] = len(self.words)
                self.words.append(w)
            ids.append(self.vocab[w])
        return ids

    def detokenize(self, ids) -> str:
        return "".join(self.words[i] for i in ids)


def config_value(key: str) -> str:
    return re.search(rf"^\s*{key}: (\S+)", MY_CONFIG, re.M).group(1)


def test_flashrag_protocol_pins_the_released_config():
    p = preset("flashrag")
    assert p.top_k == int(config_value("retrieval_topk")) == 5
    assert p.decoding.max_new_tokens == int(config_value("max_tokens")) == 32
    assert config_value("do_sample") == "False" and p.decoding.temperature == 0.0
    assert GENERATOR_MAX_INPUT_LEN == int(config_value("generator_max_input_len")) == 2048
    # docs/original_docs/baseline_details.md: e5-base-v2, wiki-dpr Dec 2018, Flat, first 1000 samples
    assert p.retriever.kind == "dense" and p.retriever.index_type == "Flat"
    assert "e5-base-v2" in p.retriever.encoder.model and p.corpus.id == "wiki18"
    assert (p.selection.mode, p.selection.n) == ("first", 1000)


def test_variants_are_scored_only_under_flashrag_and_the_defaults_never_there():
    proto = preset("flashrag")
    for name in ("direct_flashrag", "naive_rag_flashrag", "ircot_flashrag"):
        check_protocol(get_method(name), proto)
        with pytest.raises(ConfigError, match="scored only under its own protocol flashrag"):
            check_protocol(get_method(name), preset("mini"))
    for name in ("direct", "naive_rag", "ircot"):
        with pytest.raises(ConfigError, match="own setting of method"):
            check_protocol(get_method(name), proto)


@pytest.mark.parametrize(
    ("n", "kept"),
    [(2047, 2047), (2048, 2 * (2048 // 2 - 20)), (5000, 2008)],
)
def test_middle_truncation_keeps_the_first_and_last_1004_tokens(n, kept):
    half = int(re.search(r"- (\d+)", TRUNCATE).group(1))
    assert half == 20 and "len(tokenized_prompt) >= self.max_input_len" in TRUNCATE
    be = ScriptedBackend({})  # one character per token
    text = "".join(chr(0x4E00 + i % 500) for i in range(n))
    out, cut = middle_truncate(be, text)
    assert len(out) == kept and cut is (n >= 2048)
    if cut:
        assert out == text[:1004] + text[-1004:]


def test_direct_and_naive_rag_score_the_raw_reply_not_the_first_line():
    reply = "Paris\nThe capital."  # <= 32 tokens (characters here)
    be = ScriptedBackend({}, default=reply)
    ctx, _ = context(be, protocol(top_k=5))
    ex = [example(1, "What is the capital of France?")]
    assert Direct().solve(ex, ctx)[0].prediction == "Paris"
    assert NaiveRAG().solve(ex, ctx)[0].prediction == "Paris"
    for method in (DirectFlashRAG(), NaiveRAGFlashRAG()):
        (t,) = method.solve(ex, ctx)
        assert t.prediction == reply and t.extraction_status == "ok" and t.meta["prompt_truncated"] == 0
    assert extract_raw("  \n").status == "no_answer"


def test_a_long_rag_prompt_is_cut_in_the_middle():
    be = ScriptedBackend({}, default="Paris")
    ctx, _ = context(be, protocol(top_k=5))
    question = "What is the capital of France? " + "x" * 3000
    (t,) = NaiveRAGFlashRAG().solve([example(1, question)], ctx)
    sent = be.calls[0][0]
    assert len(sent) == 2008 and t.meta["prompt_truncated"] == 1
    assert sent.startswith("<system>Answer the question based on") and sent.endswith("x</user><assistant>")
    assert t.turns[0].kind == "retrieve" and len(t.turns[0].doc_ids) == 5


Q = "Which country is Zorbia in?"


def test_ircot_whole_chain_is_the_prediction_without_the_marker():
    thoughts = [f" Step {i} of thinking." for i in range(5)]
    be = ScriptedBackend({Q: list(thoughts)})
    ctx, _ = context(be)
    (ours,) = IRCoT().solve([example(1, Q)], ctx)
    assert ours.prediction == "" and ours.extraction_status == "max_turns"
    be = WordBackend({Q: list(thoughts)})
    ctx, ret = context(be)
    (t,) = IRCoTFlashRAG().solve([example(1, Q)], ctx)
    # active_pipeline.py:1036 joins the thoughts with a space; pred_parse.py:27-28 keeps it whole
    assert t.prediction == " ".join(thoughts) and t.extraction_status == "final_turn_fallback"
    # the thoughts are searched as generated (stop string and leading space kept)
    assert ret.calls[1] == ([" Step 0 of thinking."], 3)


def test_ircot_answer_is_after_the_first_marker_and_the_prompt_is_flashrags_string():
    be = WordBackend({Q: [" Zorbia is in Freedonia.", " So the answer is: Freedonia."]})
    ctx, _ = context(be)
    (t,) = IRCoTFlashRAG().solve([example(1, Q)], ctx)
    assert t.prediction == "Freedonia." and t.extraction_status == "ok" and t.meta["prompt_truncated"] == 0
    first, second = be.calls[0][0], be.calls[1][0]
    assert first.startswith(INSTRUCTION + "\n\n" + EXAMPLE + "\n\n" + "Wikipedia Title: ")
    # base_prompt.py:155-163: the chain is appended as generated, with no space added
    assert first.endswith(f"Question: {Q}\nThought:")
    assert second.endswith(f"Question: {Q}\nThought: Zorbia is in Freedonia.")


def test_ircot_prompt_over_2048_tokens_is_cut_in_the_middle():
    long_q = Q + " " + "y" * 2500
    be = ScriptedBackend({"yyyy": [" So the answer is: x"]})
    ctx, _ = context(be)
    (t,) = IRCoTFlashRAG().solve([example(1, long_q)], ctx)
    sent = be.calls[0][0]
    assert len(sent) == 2008 and sent.startswith(INSTRUCTION[:100]) and sent.endswith("y\nThought:")
    assert t.meta["prompt_truncated"] == 1 and t.prediction == "x"


def test_variant_specs_differ_from_the_defaults_only_where_flashrag_does():
    proto = preset("flashrag")
    for variant, base in ((DirectFlashRAG, Direct), (NaiveRAGFlashRAG, NaiveRAG), (IRCoTFlashRAG, IRCoT)):
        v, b = variant().spec(proto), base().spec(proto)
        assert v.prompts == b.prompts and v.spec_hash != b.spec_hash
        assert v.params["max_input_len"] == 2048 and v.params["input_truncation"] == "middle"
