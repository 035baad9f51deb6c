"""Any OpenAI-compatible server through the ``openai`` client: vLLM, llama.cpp, hosted APIs.

* :meth:`OpenAIBackend.generate` sends raw prompts to ``/v1/completions`` with the stop strings,
  which is how multi-turn tag protocols continue a prompt after an observation.
  :meth:`OpenAIBackend.chat` / :meth:`chat_batch` use ``/v1/chat/completions`` (judges).
* Requests run on a thread pool of ``concurrency`` workers and are spread round-robin over
  ``base_urls``; each has a ``timeout`` and up to ``retries`` retries with exponential backoff
  (connection errors, timeouts, 429 and 5xx). A server that cannot be reached at all raises
  :class:`~harness.errors.ServerError` naming the URL; a request that still times out or fails
  with a 5xx / 400, or answers with a malformed body or a broken stream, after its retries becomes
  a completion with ``finish_reason="error"`` and the reason in ``Completion.error`` (counted in
  :attr:`OpenAIBackend.stats`), so one bad prompt does not end a run; the runner stores such a
  sample as an error, never as an answer. 401/403/404 raise. :func:`probe_urls` checks that every
  URL answers before a run starts.
* The API key is read from the environment variable ``spec.api_key_env`` (default
  ``OPENAI_API_KEY``); when unset, the placeholder ``"EMPTY"`` is sent (local servers ignore it).
* Token counts come from the response's ``usage``. When a server returns none, they are counted
  with the local tokenizer if one is configured (``spec.tokenizer``), otherwise recorded as -1;
  ``stats`` says which (``usage_server`` / ``usage_tokenizer`` / ``usage_missing``). Numbers are
  never invented.
* Which stop string ended a completion: OpenAI and llama.cpp's server only say
  ``finish_reason="stop"``, for a stop string and for the end of sequence alike, and cut the
  string off, so a tag protocol could not tell ``</search>`` from ``</answer>``. Two modes
  (``spec.stop_mode``):

  - ``"server"``: the stop strings go to the server; the matched one is exact when the server
    reports it (vLLM's ``stop_reason``, SGLang's ``matched_stop``; a token id there means the
    end-of-sequence token). Otherwise ``Completion.stop`` is None, ``include_stop`` cannot append
    it, and ``stats["stop_unknown"]`` counts it.
  - ``"client"``: the completion is streamed without stop strings and the stream is closed as soon
    as one appears in the text (the server stops generating when the client goes away); the stop
    string and EOS vs. stop are then exact on any server. Token counts come from the local
    tokenizer (the server sends no usage on a stream closed early).
  - ``"auto"`` (default): ``"client"`` for ``server="llamacpp"``, ``"server"`` otherwise.
* Chat templates for raw prompts: :meth:`chat_prompt` applies the template of the local tokenizer
  (``spec.tokenizer``: an HF directory or ``default``); without one it refuses, because the server's
  template is not exposed by the OpenAI API.
"""

from __future__ import annotations

import itertools
import json
import os
import random
import threading
import time
from collections import Counter
from collections.abc import Callable, Sequence
from concurrent.futures import ThreadPoolExecutor
from typing import Any, TypeVar

import httpx

from harness.errors import ConfigError, ServerError
from harness.llm.base import GREEDY, Backend, BackendSpec, GenerateArgs, hf_encode
from harness.llm.decoding import StopMatch, find_stop
from harness.llm.llamacpp_backend import llamacpp_penalty_window
from harness.secrets import join_url, redact, split_query
from harness.types import Completion, FinishReason, SamplingParams

T = TypeVar("T")


def _http_modules() -> list[Any]:
    """httpx, and httpx2 where the openai client runs on it (openai >= 3): their errors differ."""
    mods: list[Any] = [httpx]
    try:
        import httpx2  # type: ignore[import-not-found]

        mods.append(httpx2)
    except ImportError:
        pass
    return mods


_HTTP_ERRORS: tuple[type[Exception], ...] = tuple(m.HTTPError for m in _http_modules())
_CONNECT_ERRORS: tuple[type[Exception], ...] = tuple(m.ConnectError for m in _http_modules())


class OpenAIBackend(Backend):
    name = "openai"

    def __init__(self, spec: BackendSpec):
        import openai

        if spec.kind != "openai":
            raise ConfigError(f"OpenAIBackend got a {spec.kind!r} spec")
        self.spec = spec
        key = os.environ.get(spec.api_key_env) or "EMPTY"
        # the query of a base URL (``/v1?api_key=K``) goes as the client's default query: the
        # client appends request paths to its base URL as text, which would put them after it
        self.clients = [
            openai.OpenAI(
                base_url=b, default_query=q or None, api_key=key, timeout=spec.timeout, max_retries=0
            )
            for b, q in map(split_query, spec.base_urls)
        ]
        self._rr = itertools.count()
        self._lock = threading.Lock()
        self.stats: Counter[str] = Counter()
        self._tokenizer: Any = None
        self._model_name = spec.model if spec.model != "auto" else None
        self._llamacpp_n_ctx: int | None = None
        self.last_error: str | None = None
        mode = spec.stop_mode
        self.client_stops = mode == "client" or (mode == "auto" and spec.server == "llamacpp")

    # -- plumbing ------------------------------------------------------------------------
    @property
    def model_name(self) -> str:
        if self._model_name is None:
            self._model_name = self._discover_model()
        return self._model_name

    def _discover_model(self) -> str:
        url = self.spec.base_urls[0]
        ids = [m.id for m in self._call(lambda c: c.models.list(), fixed=0).data]
        if len(ids) != 1:
            raise ConfigError(
                f"{redact(join_url(url, 'models'))} lists {ids or 'no models'}; name the model to use (--model)"
            )
        return ids[0]

    def _llamacpp_context(self) -> int:
        """The largest context size of the llama.cpp servers (their ``/v1/models`` ``meta.n_ctx``):
        the ``repeat_last_n`` that makes a repetition penalty cover the whole context, since the
        xllamacpp server refuses llama.cpp's ``-1``."""
        if self._llamacpp_n_ctx is None:
            sizes = []
            for i, url in enumerate(self.spec.base_urls):
                for m in self._call(lambda c: c.models.list(), fixed=i).data:
                    n = ((m.model_extra or {}).get("meta") or {}).get("n_ctx")
                    if not isinstance(n, int) or n < 1:
                        raise ServerError(
                            f"{redact(join_url(url, 'models'))} gives no meta.n_ctx for {m.id!r}: is it llama.cpp's "
                            "server? A repetition penalty with server='llamacpp' needs it"
                        )
                    sizes.append(n)
            self._llamacpp_n_ctx = max(sizes)
        return self._llamacpp_n_ctx

    def _next_client(self) -> int:
        with self._lock:
            return next(self._rr) % len(self.clients)

    def _count(self, key: str, n: int = 1) -> None:
        with self._lock:
            self.stats[key] += n

    def _call(self, fn: Callable[[Any], T], fixed: int | None = None) -> T:
        """Run ``fn(client)`` with retries; the client is chosen round-robin (or ``fixed``)."""
        import openai

        attempt = 0
        i = self._next_client() if fixed is None else fixed
        while True:
            url = redact(self.spec.base_urls[i])  # it names the server in stats and messages
            try:
                result = fn(self.clients[i])
                self._count(f"requests:{url}")
                return result
            except (openai.AuthenticationError, openai.PermissionDeniedError) as e:
                raise ServerError(
                    f"{url} refused the API key ({e.status_code}): set ${self.spec.api_key_env}"
                ) from e
            except openai.NotFoundError as e:
                raise ServerError(
                    f"{url}: not found ({e.message}); check the base URL (it ends in /v1) "
                    f"and the model name {self.spec.model!r}"
                ) from e
            except (
                openai.APIConnectionError,
                openai.RateLimitError,
                openai.InternalServerError,
                openai.APIResponseValidationError,
                json.JSONDecodeError,  # a body that is not JSON
                NoGeneratedText,  # a 200 reply without text, where the caller checks it in ``fn``
                *_HTTP_ERRORS,  # a connection that broke while the body was read
            ) as e:
                if attempt >= self.spec.retries:
                    # only a refused connection means the server is gone (the run stops); a timeout,
                    # 429, 5xx, a malformed body or a connection dropped mid-reply fails this request
                    if isinstance(e, openai.APIConnectionError) and isinstance(e.__cause__, _CONNECT_ERRORS):
                        raise ServerError(
                            f"cannot reach the OpenAI-compatible server at {url} ({e}) after {attempt + 1} "
                            "attempt(s): start it (e.g. `harness serve-model`) or fix the base URL"
                        ) from e
                    raise RequestFailed(
                        f"{url}: {type(e).__name__}: {e} (after {attempt + 1} attempt(s))"
                    ) from e
                self._count("retries")
                attempt += 1
                time.sleep(self.spec.backoff * 2 ** (attempt - 1) * (1 + random.random()))  # noqa: S311
                if fixed is None and len(self.clients) > 1:
                    i = (i + 1) % len(self.clients)  # try another server
            except openai.BadRequestError as e:
                raise RequestFailed(f"{url}: rejected the request: {e.message}") from e

    def _map(self, fn: Callable[[T], Completion], items: Sequence[T]) -> list[Completion]:
        def one(item: T) -> Completion:
            t0 = time.perf_counter()
            try:
                c = fn(item)
            except RequestFailed as e:
                self._count("errors")
                self.last_error = str(e)
                return Completion(
                    text="",
                    prompt_tokens=-1,
                    completion_tokens=-1,
                    finish_reason="error",
                    latency_s=0.0,
                    error=str(e),
                )
            c.latency_s = time.perf_counter() - t0
            return c

        if len(items) <= 1 or self.spec.concurrency == 1:
            return [one(x) for x in items]
        with ThreadPoolExecutor(max_workers=min(self.spec.concurrency, len(items))) as pool:
            return list(pool.map(one, items))

    def _sampling_kwargs(self, sampling: SamplingParams) -> dict[str, Any]:
        kw: dict[str, Any] = {"temperature": sampling.temperature, "top_p": sampling.top_p}
        if sampling.seed is not None:
            kw["seed"] = sampling.seed
        extra: dict[str, Any] = {}
        penalty = sampling.repetition_penalty
        if self.spec.server == "llamacpp":
            # llama.cpp's own defaults (top_k 40, min_p 0.05, repeat_penalty 1.1) would change
            # even greedy decoding; send neutral values
            extra = {"top_k": sampling.top_k, "min_p": 0.0, "repeat_penalty": penalty}
            if penalty != 1.0:
                extra.update(llamacpp_penalty_window(self._llamacpp_context()))
        elif self.spec.server == "vllm":
            if sampling.top_k > 0:
                extra["top_k"] = sampling.top_k
            if penalty != 1.0:
                extra["repetition_penalty"] = penalty
            extra["skip_special_tokens"] = False
        elif sampling.top_k > 0:
            raise ConfigError(
                "top_k is not part of the OpenAI API; set server='vllm' or 'llamacpp' to send it"
            )
        elif penalty != 1.0:
            raise ConfigError(
                "repetition_penalty is not part of the OpenAI API (its frequency/presence penalties "
                "are other formulas); set server='vllm' or 'llamacpp' to send it"
            )
        if extra:
            kw["extra_body"] = extra
        return kw

    # -- tokenizer (optional, local) -------------------------------------------------------
    @property
    def tokenizer(self) -> Any:
        if self._tokenizer is None:
            if self.spec.tokenizer is None:
                raise ConfigError(
                    "the openai backend has no local tokenizer: set its tokenizer (an HF directory or "
                    "'default') to apply chat templates and count tokens"
                )
            from transformers import AutoTokenizer

            from harness.llm.model_files import resolve_model

            self._tokenizer = AutoTokenizer.from_pretrained(str(resolve_model(self.spec.tokenizer)))
        return self._tokenizer

    def tokenize(self, text: str) -> list[int]:
        return hf_encode(self.tokenizer, text)

    def detokenize(self, ids: Sequence[int]) -> str:
        return self.tokenizer.decode(list(ids), skip_special_tokens=False)

    def chat_prompt(self, messages: list[dict[str, str]], add_generation_prompt: bool = True) -> str:
        return self.tokenizer.apply_chat_template(
            messages, tokenize=False, add_generation_prompt=add_generation_prompt
        )

    def describe(self) -> dict[str, Any]:
        return {
            "backend": self.name,
            "model": self.spec.model if self._model_name is None else self._model_name,
            "base_urls": [redact(u) for u in self.spec.base_urls],
            "server": self.spec.server,
            "tokenizer": self.spec.tokenizer,
            "concurrency": self.spec.concurrency,
            "stop_mode": "client" if self.client_stops else "server",
            "stats": dict(self.stats),
        }

    # -- generation ------------------------------------------------------------------------
    def _complete(self, prompts: Sequence[str], args: GenerateArgs) -> list[Completion]:
        kw = self._sampling_kwargs(args.sampling)
        stops = [s for s in args.stop if s]
        max_new_tokens, include_stop = args.max_new_tokens, args.include_stop
        model = self.model_name

        def one(prompt: str) -> Completion:
            resp = self._call(
                lambda c: c.completions.create(
                    model=model, prompt=prompt, max_tokens=max_new_tokens, stop=stops or None, **kw
                )
            )
            ch = _first_choice(resp)
            text = _generated_text(ch, "text", resp)
            return self._completion(prompt, text, ch.finish_reason, ch, resp.usage, stops, include_stop)

        def streamed(prompt: str) -> Completion:
            def call(c: Any) -> tuple[str, str | None, StopMatch | None]:
                stream = c.completions.create(
                    model=model, prompt=prompt, max_tokens=max_new_tokens, stream=True, **kw
                )
                text, finish, m, said = "", None, None, False
                try:
                    for chunk in stream:
                        if not chunk.choices:
                            continue
                        ch = chunk.choices[0]
                        said = said or isinstance(ch.text, str)
                        text += ch.text or ""
                        m = find_stop(text, stops)
                        if m is not None:
                            break
                        finish = ch.finish_reason or finish
                except _HTTP_ERRORS as e:
                    raise RequestFailed(
                        f"{redact(str(c.base_url))}: the stream broke: {type(e).__name__}: {e}"
                    ) from e
                finally:
                    stream.close()
                if not said:  # every event's text was null (or absent): no generation, not an empty one
                    raise NoGeneratedText(
                        f"the server streamed no generated text (text=null in every event, finish={finish!r})"
                    )
                return text, finish, m

            text, finish, m = self._call(call)
            reason: FinishReason
            if m is not None:
                text, reason = text[: m.start] + m.stop, "stop"
            elif finish == "length":
                reason = "length"
            elif finish == "stop":  # no stop strings were sent: the end-of-sequence token
                reason = "eos"
            else:
                raise RequestFailed(
                    f"the stream for a completion ended without a finish reason (finish={finish!r}); "
                    "a llama.cpp server must run with --interrupt_requests False"
                )
            generated = text
            if m is not None and not include_stop:
                text = text[: m.start]
            prompt_tokens, completion_tokens = self._token_counts(None, generated, prompt=prompt)
            return Completion(
                text=text,
                prompt_tokens=prompt_tokens,
                completion_tokens=completion_tokens,
                finish_reason=reason,
                stop=m.stop if m is not None else None,
            )

        return self._map(streamed if (self.client_stops and stops) else one, list(prompts))

    def chat_completion(
        self,
        messages: list[dict[str, str]],
        *,
        max_tokens: int,
        sampling: SamplingParams = GREEDY,
        require_text: bool = False,
        **extra: Any,
    ) -> Any:
        """One raw chat completion (the server's response object), with this backend's retries,
        round-robin and sampling fields; ``extra`` passes OpenAI fields the batch API does not
        (``logprobs``, ``top_logprobs``, ``response_format``). ``require_text``: a reply whose
        first choice has no ``content`` (null or absent) is retried like a 500. A request that
        failed for good raises :class:`RequestFailed`; an unreachable server raises ``ServerError``."""
        kw = {**self._sampling_kwargs(sampling), **extra}

        def ask(c: Any) -> Any:
            resp = c.chat.completions.create(
                model=self.model_name,
                messages=messages,  # type: ignore[arg-type]
                max_tokens=max_tokens,
                **kw,
            )
            if require_text:
                _generated_text(getattr(_first_choice(resp), "message", None), "content", resp)
            return resp

        return self._call(ask)

    def _chat(self, conversations: Sequence[list[dict[str, str]]], args: GenerateArgs) -> list[Completion]:
        kw = self._sampling_kwargs(args.sampling)
        stops = [s for s in args.stop if s]
        model, max_new_tokens = self.model_name, args.max_new_tokens

        def one(messages: list[dict[str, str]]) -> Completion:
            resp = self._call(
                lambda c: c.chat.completions.create(
                    model=model,
                    messages=messages,  # type: ignore[arg-type]
                    max_tokens=max_new_tokens,
                    stop=stops or None,
                    **kw,
                )
            )
            ch = _first_choice(resp)
            text = _generated_text(getattr(ch, "message", None), "content", resp)
            return self._completion(None, text, ch.finish_reason, ch, resp.usage, stops, False, messages)

        return self._map(one, list(conversations))

    def _token_counts(
        self,
        usage: Any,
        text: str,
        *,
        prompt: str | None = None,
        messages: list[dict[str, str]] | None = None,
    ) -> tuple[int, int]:
        """(prompt, completion) tokens: the server's usage when it reports it, else counted with the
        configured tokenizer, else (-1, -1); which one is counted in ``stats``."""
        if usage is not None and usage.prompt_tokens is not None and usage.completion_tokens is not None:
            self._count("usage_server")
            return int(usage.prompt_tokens), int(usage.completion_tokens)
        if self.spec.tokenizer is not None:
            prompt_text = prompt if prompt is not None else self.chat_prompt(messages or [])
            self._count("usage_tokenizer")
            return len(hf_encode(self.tokenizer, prompt_text, prompt=True)), self.count_tokens(text)
        self._count("usage_missing")
        return -1, -1

    def _completion(
        self,
        prompt: str | None,
        text: str,
        server_finish: str | None,
        choice: Any,
        usage: Any,
        stops: list[str],
        include_stop: bool,
        messages: list[dict[str, str]] | None = None,
    ) -> Completion:
        finish: FinishReason
        matched: str | None = None
        if server_finish == "length":
            finish = "length"
        elif server_finish == "stop":
            extra = choice.model_extra or {}
            key = next((k for k in ("stop_reason", "matched_stop") if k in extra), None)
            reason = extra.get(key) if key else None
            if key is None and not stops:
                finish = "eos"  # nothing else can have stopped it
            elif key is None:
                finish = "stop"
                self._count("stop_unknown")
            elif isinstance(reason, str) and reason in stops:
                finish, matched = "stop", reason
            else:  # None or a token id: the end-of-sequence token
                finish = "eos"
        else:  # content_filter, abort, ...: not a normal end; counted, never passed off as one
            finish = "error"
            self._count(f"finish:{server_finish}")
            self._count("errors")
        if matched is not None and include_stop:
            text += matched

        prompt_tokens, completion_tokens = self._token_counts(usage, text, prompt=prompt, messages=messages)
        return Completion(
            text=text,
            prompt_tokens=prompt_tokens,
            completion_tokens=completion_tokens,
            finish_reason=finish,
            stop=matched,
            error=f"the server ended the completion with finish_reason={server_finish!r}"
            if finish == "error"
            else None,
        )


def _first_choice(resp: Any) -> Any:
    """The first choice of a completion response; a body without one (a malformed reply the
    client accepted) fails the request."""
    choices = getattr(resp, "choices", None)
    if not isinstance(choices, list) or not choices:
        raise RequestFailed(f"a malformed response without choices: {str(resp)[:200]!r}")
    return choices[0]


def _generated_text(holder: Any, field: str, resp: Any) -> str:
    """The generated text of a 200 reply (``choice.text``, ``message.content``). A reply without it
    (``null``, or no field at all) fails the request like a 500: it is never scored as an empty
    answer (an empty string is a real, if short, generation)."""
    text = getattr(holder, field, None)
    if not isinstance(text, str):
        raise NoGeneratedText(
            f"the server answered HTTP 200 with no generated text ({field}={text!r}): {str(resp)[:200]!r}"
        )
    return text


class RequestFailed(Exception):
    """One request failed for good (timeout, 5xx, rejected); recorded as finish_reason='error'."""


class NoGeneratedText(RequestFailed):
    """A 200 reply without generated text. Raised inside a request's ``_call`` it is retried like
    a 500 (then :class:`RequestFailed`); outside, it fails the request at once."""


def probe_urls(
    urls: Sequence[str],
    *,
    model: str | None = None,
    api_key_env: str = "OPENAI_API_KEY",
    timeout: float = 10.0,
) -> None:
    """GET ``<url>/models`` on every URL before a run starts: a dead or wrong endpoint (or one that
    does not serve ``model``) is one :class:`ServerError` line naming the URL, before any row is
    written. URLs are printed redacted."""
    key = os.environ.get(api_key_env)
    headers = {"Authorization": f"Bearer {key}"} if key else {}
    for url in urls:
        shown = redact(url.rstrip("/"))
        try:
            r = httpx.get(join_url(url, "models"), headers=headers, timeout=timeout)
        except httpx.HTTPError as e:
            raise ServerError(
                f"cannot reach the OpenAI-compatible server at {shown} ({type(e).__name__}); start it "
                "(e.g. `harness serve-model`) or fix --base-url. Nothing was run."
            ) from e
        if r.status_code in (401, 403):
            raise ServerError(f"{shown} refused the API key ({r.status_code}): set ${api_key_env}")
        if r.status_code != 200:
            raise ServerError(
                f"{shown} answered GET /models with HTTP {r.status_code}; is it an OpenAI-compatible "
                "base URL ending in /v1? Nothing was run."
            )
        try:
            ids = [str(m["id"]) for m in r.json()["data"]]
        except (ValueError, KeyError, TypeError) as e:
            raise ServerError(f"{shown}: GET /models returned no model list ({type(e).__name__})") from e
        if model not in (None, "auto") and ids and model not in ids:
            raise ServerError(
                f"{shown} does not serve model {model!r}; it serves {', '.join(ids)} (pass one as --model)"
            )
