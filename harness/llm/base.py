"""The generation interface every backend implements, and the spec that builds one.

A :class:`Backend` turns raw prompt strings into :class:`~harness.types.Completion` objects with
exact token counts from the model's own tokenizer. Multi-turn tag protocols keep a raw prompt
string (built once with :meth:`Backend.chat_prompt`) and continue it turn after turn.

Stop strings, for every backend:

* generation stops as soon as any stop string appears in the decoded continuation; the text is
  cut at the earliest occurrence (ties: the shorter string); ``Completion.stop`` names it;
* ``include_stop=False`` returns the text before the stop string, ``include_stop=True`` the text
  up to and including it;
* ``finish_reason`` is ``"stop"`` (a stop string), ``"eos"`` (the model's end-of-sequence token),
  ``"length"`` (``max_new_tokens`` reached) or ``"error"`` (a request that failed and was recorded
  instead of raised; see the backend).

``Completion.completion_tokens`` counts every token the model generated (the tokens of the stop
string and the end-of-sequence token included), as OpenAI-compatible servers report it.
``Completion.token_ids`` (in-process backends) decode exactly to ``Completion.text``, followed by
the end-of-sequence id when ``finish_reason == "eos"``; see :mod:`harness.llm.decoding`.
``Completion.logprobs`` is not filled: trainers recompute log-probabilities under the policy.
"""

from __future__ import annotations

import random
from abc import ABC, abstractmethod
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any, Literal, Required, TypedDict, Unpack

from pydantic import BaseModel, ConfigDict, Field, field_validator, model_validator

from harness.errors import ConfigError
from harness.registry import Registry
from harness.types import Completion, SamplingParams

BackendKind = Literal["transformers", "llamacpp", "openai", "vllm"]
Dtype = Literal["auto", "float32", "bfloat16", "float16"]
ServerKind = Literal["generic", "vllm", "llamacpp"]

GREEDY = SamplingParams()


class BackendSpec(BaseModel):
    """How to build a backend. Only the fields of the chosen ``kind`` are used.

    * ``model``: for in-process backends a model name (``"default"`` = the packaged
      SmolLM2-135M-Instruct) or a local directory / GGUF file; for ``openai`` the model name the
      server serves (``"auto"``: ask the server's ``/v1/models`` and take its only model).
    * ``base_urls``: ``openai`` only; one or several ``http://host:port/v1`` URLs, requests are
      spread round-robin (a comma-separated string is accepted).
    * ``server``: ``openai`` only; which non-standard sampling fields the server accepts. llama.cpp's
      server applies ``repeat_penalty=1.1``, ``top_k=40`` and ``min_p=0.05`` unless told otherwise,
      so ``"llamacpp"`` sends neutral values; ``"vllm"`` sends ``top_k`` and
      ``repetition_penalty`` when set; ``"generic"`` sends only OpenAI fields (``top_k > 0`` or
      ``repetition_penalty != 1`` is then refused). docs/decoding.md has the mapping.
    * ``tokenizer``: ``openai`` only; a local HF directory (or ``"default"``) used to apply the chat
      template to raw prompts and to count tokens when the server returns no usage.
    * ``stop_mode``: ``openai`` only; how the matched stop string is found (see
      :mod:`harness.llm.openai_backend`).
    * ``api_key_env``: the environment variable holding the API key (never the key itself);
      when it is unset the placeholder ``"EMPTY"`` is sent, which local servers accept.
    * ``max_batch_size``: sequences decoded together (transformers micro-batch, vLLM
      ``max_num_seqs``, llama.cpp parallel slots). ``None`` is the backend's default,
      :attr:`batch_limit`: 1 for ``llamacpp`` (one slot, so a greedy rerun repeats exactly; see
      :mod:`harness.llm.llamacpp_backend`), 8 for the others.
    * ``draft``: ``llamacpp`` only; ``"ngram"`` lets llama.cpp draft the next tokens from an earlier
      occurrence of the last 4 tokens in the context and check them in one decode call
      (speculative decoding without a draft model: faster on repetitive text, but greedy output
      then depends on the thread count; see :mod:`harness.llm.llamacpp_backend`). ``"none"``
      (default) decodes one token per call.
    """

    model_config = ConfigDict(frozen=True, extra="forbid")

    kind: BackendKind = "transformers"
    model: str = "default"
    base_urls: tuple[str, ...] = ()
    server: ServerKind = "generic"
    tokenizer: str | None = None
    api_key_env: str = "OPENAI_API_KEY"
    stop_mode: Literal["auto", "server", "client"] = "auto"
    dtype: Dtype = "float32"
    # transformers only: auto / cpu / cuda / cuda:N (harness.device); "auto" is the first GPU
    # torch sees, else the CPU
    device: str = "auto"
    threads: int | None = Field(default=None, ge=1)
    max_batch_size: int | None = Field(default=None, ge=1)
    draft: Literal["none", "ngram"] = "none"
    # transformers only: tokens of KV the cross-call prefix cache may hold (0 = off); see
    # harness.llm.transformers_backend (SmolLM2-135M fp32: 45 KB per token, 32768 tokens = 1.5 GB)
    prefix_cache_tokens: int = Field(default=32768, ge=0)
    # transformers only: how the decode loop keeps its KV (harness.llm.transformers_backend):
    # "dynamic" grows it and drops finished rows; "static" preallocates it so that one decode step
    # has fixed shapes and addresses; "graph" is static with the step replayed as a CUDA graph
    # (CUDA only); "auto" is "graph" on a CUDA device and "dynamic" elsewhere
    decode: Literal["auto", "dynamic", "static", "graph"] = "auto"
    concurrency: int = Field(default=4, ge=1)
    timeout: float = Field(default=120.0, gt=0)
    retries: int = Field(default=2, ge=0)
    backoff: float = Field(default=0.5, ge=0)
    n_ctx: int = Field(default=4096, ge=16)
    tensor_parallel_size: int = Field(default=1, ge=1)
    gpu_memory_utilization: float = Field(default=0.9, gt=0, le=1)
    max_model_len: int | None = None

    @field_validator("base_urls", mode="before")
    @classmethod
    def _split_urls(cls, v: Any) -> Any:
        if isinstance(v, str):
            return tuple(u.strip() for u in v.split(",") if u.strip())
        return v

    @field_validator("base_urls")
    @classmethod
    def _check_urls(cls, v: tuple[str, ...]) -> tuple[str, ...]:
        for u in v:
            if not u.startswith(("http://", "https://")):
                raise ValueError(f"base URL {u!r} must start with http:// or https://")
        return tuple(u.rstrip("/") for u in v)

    @property
    def context_limit(self) -> int | None:
        """Prompt plus completion tokens a call may take, where the spec alone says (llama.cpp's
        ``n_ctx``, vLLM's ``max_model_len``); None where the model or the server decides."""
        if self.kind == "llamacpp":
            return self.n_ctx
        if self.kind == "vllm":
            return self.max_model_len
        return None

    @property
    def batch_limit(self) -> int:
        """``max_batch_size``, or the backend's default when it is None (see the class docstring)."""
        if self.max_batch_size is not None:
            return self.max_batch_size
        return 1 if self.kind == "llamacpp" else 8

    @model_validator(mode="after")
    def _check_kind(self) -> BackendSpec:
        if self.kind == "openai" and not self.base_urls:
            raise ValueError("the openai backend needs base_urls (e.g. http://127.0.0.1:8765/v1)")
        if self.kind != "openai" and self.base_urls:
            raise ValueError(f"base_urls are only used by the openai backend, not {self.kind!r}")
        if self.draft == "ngram" and self.kind != "llamacpp":
            raise ValueError(
                f"draft={self.draft!r} is the llamacpp backend's; the {self.kind} backend does not draft"
            )
        return self


@dataclass(frozen=True)
class GenerateArgs:
    """The keyword arguments of one :meth:`Backend.generate` / :meth:`Backend.generate_ids` call,
    with their defaults, as a backend's implementation receives them (see the module docstring)."""

    max_new_tokens: int
    stop: Sequence[str] = ()
    sampling: SamplingParams = GREEDY
    include_stop: bool = False

    def check_prompt_ids(
        self,
        prompt_ids: Sequence[Sequence[int]],
        *,
        limit: int | None,
        room: str,
        fix: str = "shorten the prompt (e.g. max_obs_tokens)",
    ) -> None:
        """Refuse ``max_new_tokens < 1``, an empty prompt, and a prompt that leaves fewer than
        ``max_new_tokens`` of the ``limit`` positions (``room`` names them, ``fix`` says what to do)."""
        if self.max_new_tokens < 1:
            raise ConfigError(f"max_new_tokens must be at least 1, got {self.max_new_tokens}")
        for i, ids in enumerate(prompt_ids):
            if not ids:
                raise ConfigError(f"prompt {i} is empty")
            if limit is not None and len(ids) + self.max_new_tokens > limit:
                raise ConfigError(
                    f"prompt {i} has {len(ids)} tokens; with max_new_tokens={self.max_new_tokens} it "
                    f"exceeds {room}: {fix}"
                )


class GenerateKwargs(TypedDict, total=False):
    """The keyword arguments of :meth:`Backend.generate` (typed; defaults in :class:`GenerateArgs`)."""

    max_new_tokens: Required[int]
    stop: Sequence[str]
    sampling: SamplingParams
    include_stop: bool


class Backend(ABC):
    """A text generator with its tokenizer. Subclasses set ``name`` (the backend kind) and implement
    :meth:`_complete` (text prompts); :class:`TokenBackend` is the base of those that generate
    from token ids."""

    name: str = ""

    def generate(self, prompts: Sequence[str], **kw: Unpack[GenerateKwargs]) -> list[Completion]:
        """One completion per prompt, in order. Keywords: ``max_new_tokens`` (required), ``stop``
        (strings), ``sampling`` (default greedy), ``include_stop`` (default False)."""
        return self._complete(prompts, GenerateArgs(**kw))

    def generate_ids(
        self, prompt_ids: Sequence[Sequence[int]], **kw: Unpack[GenerateKwargs]
    ) -> list[Completion]:
        """Like :meth:`generate`, from exact prompt token ids (training works in token space).
        Only :class:`TokenBackend` backends implement it."""
        return self._complete_ids(prompt_ids, GenerateArgs(**kw))

    @abstractmethod
    def _complete(self, prompts: Sequence[str], args: GenerateArgs) -> list[Completion]:
        """:meth:`generate`'s work: one completion per prompt, in order."""

    def _complete_ids(self, prompt_ids: Sequence[Sequence[int]], args: GenerateArgs) -> list[Completion]:
        raise ConfigError(f"the {self.name} backend cannot generate from token ids; use transformers")

    def chat(
        self,
        messages: list[dict[str, str]],
        *,
        max_new_tokens: int = 256,
        sampling: SamplingParams = GREEDY,
        stop: Sequence[str] = (),
    ) -> Completion:
        """One chat turn (judges). In-process: the chat template, then :meth:`generate`."""
        return self.chat_batch([messages], max_new_tokens=max_new_tokens, sampling=sampling, stop=stop)[0]

    def chat_batch(
        self,
        conversations: Sequence[list[dict[str, str]]],
        *,
        max_new_tokens: int = 256,
        sampling: SamplingParams = GREEDY,
        stop: Sequence[str] = (),
    ) -> list[Completion]:
        """One chat turn per conversation, in order."""
        return self._chat(conversations, GenerateArgs(max_new_tokens, stop, sampling))

    def _chat(self, conversations: Sequence[list[dict[str, str]]], args: GenerateArgs) -> list[Completion]:
        """:meth:`chat_batch`'s work; by default the chat template, then :meth:`generate`."""
        prompts = [self.chat_prompt(m) for m in conversations]
        return self.generate(
            prompts, stop=args.stop, max_new_tokens=args.max_new_tokens, sampling=args.sampling
        )

    @abstractmethod
    def chat_prompt(self, messages: list[dict[str, str]], add_generation_prompt: bool = True) -> str:
        """The model's chat template applied to ``messages``, as a raw prompt string."""

    @abstractmethod
    def tokenize(self, text: str) -> list[int]:
        """Plain token ids of ``text``: no special tokens are added (special-token strings in the
        text, like ``<|im_start|>``, become their ids). Observations appended to a context are
        tokenized with it. A prompt passed to :meth:`generate` additionally gets the tokenizer's
        BOS token when the tokenizer adds one and the prompt does not already start with it."""

    @abstractmethod
    def detokenize(self, ids: Sequence[int]) -> str:
        """Text of ``ids``; special tokens are kept, so ``detokenize`` inverts generated ids."""

    unaligned: int = 0  # completions whose token ids could not be made to match their text

    def completion_from_ids(
        self,
        generated: Sequence[int],
        *,
        prompt_tokens: int,
        eos_hit: bool,
        stop: Sequence[str],
        include_stop: bool,
        latency_s: float = 0.0,
    ) -> Completion:
        """The completion of one generated id sequence (text cut at the stop string, token ids that
        decode to the text, finish reason); counts a sequence whose ids cannot be re-aligned."""
        from harness.llm.decoding import finish_sequence

        f = finish_sequence(
            generated,
            eos_hit=eos_hit,
            stops=stop,
            include_stop=include_stop,
            decode=self.detokenize,
            encode=self.tokenize,
        )
        if f.token_ids is None:
            self.unaligned += 1
        return Completion(
            text=f.text,
            prompt_tokens=prompt_tokens,
            completion_tokens=len(generated),
            finish_reason=f.finish_reason,
            stop=f.stop,
            token_ids=f.token_ids,
            latency_s=latency_s,
        )

    def prompt_ids(self, text: str) -> list[int]:
        """The ids :meth:`generate` feeds for prompt ``text`` (``tokenize`` plus the BOS rule);
        :meth:`generate_ids` with them equals :meth:`generate` with ``text``."""
        return self.tokenize(text)

    def count_tokens(self, text: str) -> int:
        """``len(tokenize(text))``."""
        return len(self.tokenize(text))

    @abstractmethod
    def describe(self) -> dict[str, Any]:
        """What identifies the generator in a run record: backend, model, dtype, revision/hash..."""

    def drop_prefix_cache(self) -> None:  # noqa: B027 - optional hook
        """Free whatever the backend keeps of earlier calls to reuse their prefixes (the trainer
        calls it once a step's rollouts are done, so cached KV does not sit through the update)."""

    def close(self) -> None:  # noqa: B027 - optional hook
        """Release threads, processes or memory held by the backend."""

    def __enter__(self) -> Backend:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


class TokenBackend(Backend):
    """A backend that generates from token ids (the in-process models, the SFT teacher, verl's
    server): a text prompt is turned into ids with :meth:`prompt_ids`, so :meth:`generate` with a
    text equals :meth:`generate_ids` with its ids. Subclasses implement :meth:`_complete_ids`."""

    def _complete(self, prompts: Sequence[str], args: GenerateArgs) -> list[Completion]:
        return self._complete_ids([self.prompt_ids(p) for p in prompts], args)

    @abstractmethod
    def _complete_ids(self, prompt_ids: Sequence[Sequence[int]], args: GenerateArgs) -> list[Completion]:
        """:meth:`generate_ids`'s work: one completion per prompt, in order."""


def base_seed(sampling: SamplingParams, bound: int = 2**31) -> int:
    """The seed of a call's first prompt (prompt ``i`` is sampled with ``base + i``): the
    sampling's seed, else a fresh draw below ``bound`` from the OS (an unseeded call)."""
    return sampling.seed if sampling.seed is not None else random.SystemRandom().randrange(bound)


def hf_encode(tokenizer: Any, text: str, *, prompt: bool = False) -> list[int]:
    """Token ids from a Hugging Face tokenizer; see :meth:`Backend.tokenize` for ``prompt``."""
    add = prompt and not (tokenizer.bos_token and text.startswith(tokenizer.bos_token))
    return list(tokenizer.encode(text, add_special_tokens=add))


class HFTokenizerMixin:
    """The tokenizer methods of an in-process backend whose ``tokenizer`` is a Hugging Face
    tokenizer (transformers, vLLM); ``path`` or ``spec.model`` names it in errors."""

    tokenizer: Any
    path: Any
    spec: BackendSpec

    def tokenize(self, text: str) -> list[int]:
        return hf_encode(self.tokenizer, text)

    def detokenize(self, ids: Sequence[int]) -> str:
        return self.tokenizer.decode(list(ids), skip_special_tokens=False)

    def prompt_ids(self, text: str) -> list[int]:
        return hf_encode(self.tokenizer, text, prompt=True)

    def chat_prompt(self, messages: list[dict[str, str]], add_generation_prompt: bool = True) -> str:
        if not getattr(self.tokenizer, "chat_template", None):
            raise ConfigError(f"{self.path or self.spec.model}: the tokenizer has no chat template")
        return self.tokenizer.apply_chat_template(
            messages, tokenize=False, add_generation_prompt=add_generation_prompt
        )


def eos_ids(tokenizer: Any, generation_config: Any = None) -> frozenset[int]:
    """The end-of-sequence ids generation stops at: the tokenizer's and the model's generation
    config's (Hugging Face; ``eos_token_id`` may be one id or a list)."""
    ids: set[int] = set()
    cand = getattr(generation_config, "eos_token_id", None)
    if isinstance(cand, int):
        ids.add(cand)
    elif isinstance(cand, list | tuple):
        ids.update(int(x) for x in cand)
    if tokenizer.eos_token_id is not None:
        ids.add(int(tokenizer.eos_token_id))
    return frozenset(ids)


def pad_token_id(tokenizer: Any, what: str) -> int:
    """The id sequences are padded with: the tokenizer's pad token, else its eos token (padded
    positions are masked, so any id the model knows serves). ``what`` names the model in the error."""
    pid = tokenizer.pad_token_id if tokenizer.pad_token_id is not None else tokenizer.eos_token_id
    if pid is None:
        raise ConfigError(f"{what}: the tokenizer has neither a pad nor an eos token")
    return int(pid)


BACKENDS: Registry[type[Backend]] = Registry("backend")
BACKENDS.register_lazy("transformers", "harness.llm.transformers_backend:TransformersBackend")
BACKENDS.register_lazy("llamacpp", "harness.llm.llamacpp_backend:LlamaCppBackend")
BACKENDS.register_lazy("openai", "harness.llm.openai_backend:OpenAIBackend")
BACKENDS.register_lazy("vllm", "harness.llm.vllm_backend:VLLMBackend")


def make_backend(spec: BackendSpec) -> Backend:
    """Build the backend ``spec`` describes; the backend's libraries are imported only now."""
    cls = BACKENDS.get(spec.kind)
    return cls(spec)  # type: ignore[call-arg]
