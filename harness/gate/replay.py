"""A backend that replays recorded model outputs: the regression gate's stand-in for a model.

:class:`ReplayBackend` answers each prompt with the next recorded output of the question the
prompt carries (the longest question text found in it), cut at the first stop string as a real
backend cuts it, and records every prompt it is given: the fully rendered prompt of each turn
(chat messages, rendered documents, observations, correction and injected messages). A method's
own ``solve`` runs unchanged over it, so what the gate hashes is exactly what a model would read.

It is model-free and the same on every machine, by construction:

- **tokens** are the matches of ``TOKEN_RE`` (a word or a punctuation character with the
  whitespace before it, or trailing whitespace), a rough stand-in for a BPE vocabulary written by
  hand because the gate must not depend on a model's tokenizer files or on the ``tokenizers``
  library version; ``detokenize(tokenize(s)) == s`` exactly, so observation truncation
  (``max_obs_tokens``) and token budgets act as they do with a model, on other cut points;
- **the chat template** is plain ChatML (``<|im_start|>role\\ncontent<|im_end|>\\n``, then
  ``<|im_start|>assistant\\n``), Qwen2.5's form without its default system message: a model's
  template belongs to the model, which this gate does not run;
- **a prompt without the question** (Search-o1's Reason-in-Documents reads the search query and
  the reasoning so far, not the question) goes to the question whose earlier replies share the
  longest line with it (a reply's lines, split also at tags, of at least ``MIN_SHARED`` characters);
- **after the recorded outputs run out** (a change of control flow asks for more turns than were
  recorded) the reply is the empty string with finish reason ``eos``; the prompts that follow
  still differ from the baseline's, so such a change is seen.
"""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence

from harness.errors import ConfigError
from harness.types import Completion, SamplingParams

TOKEN_RE = re.compile(r"\s*\w+|\s*[^\w\s]|\s+")
MIN_SHARED = 12
_PIECES = re.compile(r"<[^<>\n]*>|\n")


class ReplayBackend:
    """Replays ``scripts`` (question text -> outputs in call order); ``calls`` records
    (question text, prompt) for every generation, in call order."""

    name = "replay"

    def __init__(self, scripts: Mapping[str, Sequence[str]]):
        if not scripts:
            raise ConfigError("ReplayBackend needs at least one scripted question")
        self._scripts = {k: list(v) for k, v in scripts.items()}
        self._keys = sorted(self._scripts, key=len, reverse=True)  # a question inside another: longest wins
        self._vocab: dict[str, int] = {}
        self._words: list[str] = []
        self.calls: list[tuple[str, str]] = []
        self._replied: dict[str, list[str]] = {k: [] for k in self._scripts}  # lines of earlier replies

    # -- generation ------------------------------------------------------------------------------
    def _question_of(self, prompt: str) -> str:
        for key in self._keys:
            if key in prompt:
                return key
        best = max(
            ((len(line), key) for key, lines in self._replied.items() for line in lines if line in prompt),
            default=None,
        )
        if best is not None:
            return best[1]
        raise ConfigError(
            f"replay: a prompt carries none of the {len(self._keys)} scripted questions "
            f"(its end: {prompt[-120:]!r}); the method no longer puts the question in its prompt"
        )

    def generate(
        self,
        prompts: Sequence[str],
        *,
        stop: Sequence[str] = (),
        max_new_tokens: int,
        sampling: SamplingParams | None = None,
        include_stop: bool = False,
    ) -> list[Completion]:
        out = []
        for p in prompts:
            key = self._question_of(p)
            self.calls.append((key, p))
            queue = self._scripts[key]
            text = queue.pop(0) if queue else ""
            self._replied[key].extend(x.strip() for x in _PIECES.split(text) if len(x.strip()) >= MIN_SHARED)
            finish, hit = "eos", None
            cut = min(((text.find(s), len(s), s) for s in stop if s and s in text), default=None)
            if cut is not None:
                idx, _, hit = cut
                text = text[: idx + (len(hit) if include_stop else 0)]
                finish = "stop"
            ids = self.tokenize(text)
            if len(ids) > max_new_tokens:
                ids = ids[:max_new_tokens]
                text, finish, hit = self.detokenize(ids), "length", None
            out.append(
                Completion(
                    text=text,
                    prompt_tokens=self.count_tokens(p),
                    completion_tokens=len(ids),
                    finish_reason=finish,
                    stop=hit,
                    token_ids=ids,
                )
            )
        return out

    def generate_ids(self, prompt_ids: Sequence[Sequence[int]], **kw) -> list[Completion]:
        return self.generate([self.detokenize(p) for p in prompt_ids], **kw)

    def chat_prompt(self, messages: list[dict[str, str]], add_generation_prompt: bool = True) -> str:
        text = "".join(f"<|im_start|>{m['role']}\n{m['content']}<|im_end|>\n" for m in messages)
        return text + ("<|im_start|>assistant\n" if add_generation_prompt else "")

    def chat_batch(self, conversations, *, max_new_tokens=256, sampling=None, stop=()):
        return self.generate(
            [self.chat_prompt(m) for m in conversations], stop=list(stop), max_new_tokens=max_new_tokens
        )

    # -- tokens ------------------------------------------------------------------------------------
    def tokenize(self, text: str) -> list[int]:
        ids = []
        for w in TOKEN_RE.findall(text):
            i = self._vocab.get(w)
            if i is None:
                i = self._vocab[w] = len(self._words)
                self._words.append(w)
            ids.append(i)
        return ids

    def prompt_ids(self, text: str) -> list[int]:
        return self.tokenize(text)

    def detokenize(self, ids: Sequence[int]) -> str:
        return "".join(self._words[i] for i in ids)

    def count_tokens(self, text: str) -> int:
        return len(TOKEN_RE.findall(text))

    @property
    def eos_ids(self) -> set[int]:
        return set()
