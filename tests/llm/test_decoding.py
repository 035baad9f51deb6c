"""Stop strings and token alignment on a hand-made vocabulary, so every boundary case is explicit."""

from __future__ import annotations

from harness.llm.base import hf_encode
from harness.llm.decoding import StopScanner, align_ids, find_stop, finish_sequence

VOCAB = [
    "<eos>",
    "</",
    "search",
    ">",
    ">\n\n",
    "hello",
    " world",
    "<search>",
    " q",
    "ans",
    "a",
    "b",
    "\n",
    "</search>",
]
ID = {t: i for i, t in enumerate(VOCAB)}
EOS = ID["<eos>"]


def decode(ids):
    return "".join(VOCAB[i] for i in ids)


def encode(text: str) -> list[int]:
    """Greedy longest match (never produces <eos>)."""
    out, i = [], 0
    while i < len(text):
        best = max((t for t in VOCAB[1:] if text.startswith(t, i)), key=len)
        out.append(ID[best])
        i += len(best)
    return out


def ids(*toks: str) -> list[int]:
    return [ID[t] for t in toks]


def test_find_stop_earliest_then_shortest():
    assert find_stop("a</b>c</a>", ["</a>", "</b>"]).stop == "</b>"
    m = find_stop("x</search>", ["</search>", "</s"])
    assert (m.start, m.stop) == (1, "</s")
    assert find_stop("abc", ["d", ""]) is None


def test_scanner_detects_stop_spanning_tokens_only_when_complete():
    sc = StopScanner(["</search>"], decode)
    gen = ids("<search>", " q", "</", "search")
    assert [sc.update(gen[: i + 1]) for i in range(len(gen))] == [False] * 4
    assert sc.update([*gen, ID[">\n\n"]]) is True


def test_stop_with_overhang_is_cut_and_ids_realigned():
    gen = ids("<search>", " q", "</", "search", ">\n\n")  # the last token runs past the stop string
    f = finish_sequence(
        gen, eos_hit=False, stops=["</search>"], include_stop=True, decode=decode, encode=encode
    )
    assert (f.text, f.finish_reason, f.stop) == ("<search> q</search>", "stop", "</search>")
    assert decode(f.token_ids) == f.text
    assert f.token_ids == ids("<search>", " q", "</", "search", ">")  # generated ids kept, tail re-encoded

    f2 = finish_sequence(
        gen, eos_hit=False, stops=["</search>"], include_stop=False, decode=decode, encode=encode
    )
    assert (f2.text, f2.token_ids) == ("<search> q", ids("<search>", " q"))


def test_stop_inside_one_token_keeps_the_text_before_it():
    gen = ids("hello", "</search>")
    f = finish_sequence(gen, eos_hit=False, stops=["arch"], include_stop=True, decode=decode, encode=encode)
    assert (f.text, f.stop) == ("hello</search", "arch")
    assert f.token_ids == ids("hello", "</", "search")


def test_eos_and_length():
    f = finish_sequence(
        ids("hello", "<eos>"), eos_hit=True, stops=["x"], include_stop=True, decode=decode, encode=encode
    )
    assert (f.text, f.finish_reason, f.stop, f.token_ids) == ("hello", "eos", None, ids("hello", "<eos>"))
    f = finish_sequence(
        ids("hello", " world"), eos_hit=False, stops=[], include_stop=False, decode=decode, encode=encode
    )
    assert (f.text, f.finish_reason, f.token_ids) == ("hello world", "length", ids("hello", " world"))


def test_align_refuses_when_the_tokenizer_cannot_reproduce_the_text():
    assert align_ids(ids("hello"), "hel!", decode, lambda s: []) is None


class _BosTokenizer:
    """A tokenizer whose post-processor prepends BOS (id 0), like Llama 3's."""

    bos_token = "<s>"

    def encode(self, text, add_special_tokens=True):
        body = [ord(c) for c in text.replace("<s>", "\0")]
        return ([0] if add_special_tokens else []) + body


def test_hf_encode_adds_bos_only_to_prompts_without_it():
    t = _BosTokenizer()
    assert hf_encode(t, "ab") == [97, 98]  # plain: observations never get a BOS
    assert hf_encode(t, "ab", prompt=True) == [0, 97, 98]
    assert hf_encode(t, "<s>ab", prompt=True) == [0, 97, 98]  # the template already has it


def test_scanner_skips_tokens_that_cannot_end_a_stop_and_agrees_with_a_full_scan():
    """Only a token holding a stop's last (ASCII, visible) character can complete it: the scan
    decodes nothing for the others, and says the same as decoding the whole continuation every
    step, on every prefix of the packaged tokenizer's encoding of texts with stops."""
    from transformers import AutoTokenizer

    from harness.llm.model_files import ensure_hf_model

    tok = AutoTokenizer.from_pretrained(str(ensure_hf_model()))
    calls: list[int] = []

    def dec(ids):
        calls.append(len(ids))
        return tok.decode(list(ids))

    stops = ["</search>", "</answer>"]
    texts = [
        "<think>x</think><search>capital of France</search>\n\n",
        "<answer> Paris</answer>",
        "a>b</searc h></search>",
        "héllo wörld </answer",  # no stop
        ">>>></search>",
    ]
    for text in texts:
        gen = tok.encode(text, add_special_tokens=False)
        memo: dict[int, bool] = {}
        sc = StopScanner(stops, dec, memo)
        assert sc.last_chars == ">"
        got = [sc.update(gen[: i + 1]) for i in range(len(gen))]
        want = [find_stop(tok.decode(gen[: i + 1]), stops) is not None for i in range(len(gen))]
        first = want.index(True) if True in want else len(want)
        assert got[: first + 1] == want[: first + 1], text  # a loop stops at the first True
        assert all(memo[t] == (">" in tok.decode([t])) for t in memo)
    calls.clear()
    sc = StopScanner(stops, dec, {})
    plain = tok.encode("hello world and more words", add_special_tokens=False)
    assert not any(sc.update(plain[: i + 1]) for i in range(len(plain)))
    assert max(calls) == 1  # single-token decodes only: no window was decoded
    # a stop ending in whitespace or a non-ASCII character: every token is scanned
    assert StopScanner(["\n\n"], dec).last_chars is None
    assert StopScanner(["。"], dec).last_chars is None
