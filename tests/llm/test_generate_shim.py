"""The generate shim of harness/llm/base.py: the public keywords are read once (GenerateArgs), a
TokenBackend's text prompts become prompt_ids, chat_batch applies the chat template, and a backend
without a token path refuses generate_ids."""

from __future__ import annotations

from collections.abc import Sequence

import pytest

from harness.errors import ConfigError
from harness.llm.base import GREEDY, Backend, GenerateArgs, TokenBackend
from harness.types import Completion, SamplingParams


class Recording(TokenBackend):
    """Characters are tokens; BOS is id 1; every call's ids and args are recorded."""

    name = "recording"

    def __init__(self) -> None:
        self.calls: list[tuple[list[list[int]], GenerateArgs]] = []

    def _complete_ids(self, prompt_ids: Sequence[Sequence[int]], args: GenerateArgs) -> list[Completion]:
        self.calls.append(([list(p) for p in prompt_ids], args))
        return [
            Completion(text="x", prompt_tokens=len(p), completion_tokens=1, finish_reason="eos")
            for p in prompt_ids
        ]

    def prompt_ids(self, text: str) -> list[int]:
        return [1, *self.tokenize(text)]

    def tokenize(self, text: str) -> list[int]:
        return [ord(c) for c in text]

    def detokenize(self, ids: Sequence[int]) -> str:
        return "".join(chr(i) for i in ids)

    def chat_prompt(self, messages: list[dict[str, str]], add_generation_prompt: bool = True) -> str:
        return "|".join(m["content"] for m in messages)

    def describe(self) -> dict[str, str]:
        return {"backend": self.name}


class TextOnly(Backend):
    name = "text-only"

    def _complete(self, prompts: Sequence[str], args: GenerateArgs) -> list[Completion]:
        return []

    chat_prompt = tokenize = detokenize = describe = None  # type: ignore[assignment]


def test_text_prompts_go_through_prompt_ids_with_the_same_args():
    b = Recording()
    s = SamplingParams(temperature=0.7, seed=3)
    b.generate(["ab", "c"], stop=["</s>"], max_new_tokens=5, sampling=s, include_stop=True)
    b.generate_ids([[1, 97, 98], [1, 99]], stop=["</s>"], max_new_tokens=5, sampling=s, include_stop=True)
    assert b.calls[0] == b.calls[1] == ([[1, 97, 98], [1, 99]], GenerateArgs(5, ["</s>"], s, True))


def test_defaults_and_chat_batch():
    b = Recording()
    b.generate(["a"], max_new_tokens=2)
    assert b.calls[-1][1] == GenerateArgs(max_new_tokens=2, stop=(), sampling=GREEDY, include_stop=False)
    b.chat_batch([[{"role": "user", "content": "hi"}, {"role": "user", "content": "yo"}]], stop=["z"])
    assert b.calls[-1] == ([[1, *map(ord, "hi|yo")]], GenerateArgs(256, ["z"], GREEDY, False))


def test_a_text_only_backend_refuses_token_ids():
    with pytest.raises(ConfigError, match="the text-only backend cannot generate from token ids"):
        TextOnly().generate_ids([[1]], max_new_tokens=1)


@pytest.mark.parametrize(
    ("prompts", "max_new_tokens", "message"),
    [
        ([[1, 2]], 0, "max_new_tokens must be at least 1, got 0"),
        ([[1], []], 1, "prompt 1 is empty"),
        (
            [[1, 2, 3]],
            8,
            "prompt 0 has 3 tokens; with max_new_tokens=8 it exceeds n_ctx=10: raise n_ctx or shorten",
        ),
    ],
)
def test_prompt_checks(prompts, max_new_tokens, message):
    with pytest.raises(ConfigError) as e:
        GenerateArgs(max_new_tokens).check_prompt_ids(
            prompts, limit=10, room="n_ctx=10", fix="raise n_ctx or shorten"
        )
    assert str(e.value) == message
    GenerateArgs(7).check_prompt_ids([[1, 2, 3]], limit=10, room="n_ctx=10")  # 3 + 7 fits exactly
