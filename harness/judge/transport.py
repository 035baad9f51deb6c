"""How judge requests reach a model: an OpenAI-compatible server, or any in-process backend.

* :class:`OpenAITransport` sends chat requests through the openai backend's client, retry and
  back-off machinery (:class:`~harness.llm.openai_backend.OpenAIBackend`), on its own pool of
  ``concurrency`` threads, optionally paced to ``requests_per_minute``. It asks for the first
  tokens' log-probabilities when logit scoring is on, and tells a timeout from other failures.
  Its ``ask_each`` hands over each reply as it arrives, so the judge stores every verdict at once
  and an interrupted run pays again for none it was answered (issue 61: verdicts were stored 32
  at a time, so up to 31 answered requests were lost).
* :class:`BackendTransport` wraps any :class:`~harness.llm.base.Backend` (``chat_batch``), e.g.
  llama.cpp or transformers in-process; it has no log-probabilities.
* :func:`probe_server` checks ``<url>/models`` before anything is judged, so a dead or wrong URL
  fails with one message naming it, and tells llama.cpp and vLLM servers apart (their sampling
  defaults differ; see :class:`~harness.llm.base.BackendSpec`).
"""

from __future__ import annotations

import contextlib
import os
import threading
import time
from collections.abc import Callable, Iterator, Sequence
from concurrent.futures import Future, ThreadPoolExecutor, as_completed
from dataclasses import dataclass
from typing import Any, Literal, Protocol

from harness.errors import ConfigError, ServerError
from harness.judge.parsers import TokenLogprobs
from harness.types import SamplingParams

TOP_LOGPROBS = 10
ReplyStatus = Literal["ok", "length", "timeout", "error"]


@dataclass(frozen=True)
class JudgeReply:
    """One reply. ``status``: ``ok`` (the model finished), ``length`` (it hit the token limit),
    ``timeout`` / ``error`` (no usable reply after the retries; ``error`` says why)."""

    text: str
    status: ReplyStatus
    prompt_tokens: int = -1
    completion_tokens: int = -1
    latency_s: float = 0.0
    logprobs: tuple[TokenLogprobs, ...] | None = None
    error: str | None = None


class JudgeTransport(Protocol):
    model: str

    def ask(
        self,
        conversations: Sequence[list[dict[str, str]]],
        *,
        max_tokens: int,
        logprobs: bool = False,
        json_mode: bool = False,
    ) -> list[JudgeReply]:
        """One reply per conversation, in order, at temperature 0. A transport whose replies
        arrive one by one may also have ``ask_each`` (same arguments; the replies as they arrive,
        :class:`Replies`); the judge then stores each verdict as it comes."""
        ...


class RateLimiter:
    """At most ``per_minute`` request starts per minute, evenly spaced (thread-safe)."""

    def __init__(self, per_minute: float | None):
        self.interval = 60.0 / per_minute if per_minute else 0.0
        self._next = 0.0
        self._lock = threading.Lock()

    def wait(self) -> None:
        if not self.interval:
            return
        with self._lock:
            now = time.monotonic()
            start = max(now, self._next)
            self._next = start + self.interval
        time.sleep(max(0.0, start - now))


@dataclass(frozen=True)
class ServerInfo:
    url: str
    models: tuple[str, ...]
    kind: Literal["generic", "vllm", "llamacpp"]


def probe_server(url: str, *, api_key_env: str = "OPENAI_API_KEY", timeout: float = 10.0) -> ServerInfo:
    """GET ``<url>/models``: the served model ids and the server kind. Raises :class:`ServerError`
    naming ``url`` when it cannot be reached or does not answer like an OpenAI-compatible API."""
    import httpx

    from harness.secrets import join_url, redact

    shown = redact(url.rstrip("/"))  # the URL as messages show it
    key = os.environ.get(api_key_env)
    headers = {"Authorization": f"Bearer {key}"} if key else {}
    try:
        r = httpx.get(join_url(url, "models"), headers=headers, timeout=timeout)
    except httpx.HTTPError as e:
        raise ServerError(
            f"the judge server at {shown} cannot be reached ({type(e).__name__}: {e}); start it "
            f"(e.g. `harness serve-model`) or fix --judge-url. Nothing was judged."
        ) from e
    if r.status_code in (401, 403):
        raise ServerError(
            f"the judge server at {shown} refused the API key ({r.status_code}): set ${api_key_env}"
        )
    if r.status_code != 200:
        raise ServerError(
            f"the judge server at {shown} answered GET /models with HTTP {r.status_code}; "
            "is this an OpenAI-compatible base URL ending in /v1? Nothing was judged."
        )
    try:
        data = r.json()["data"]
        ids = tuple(str(m["id"]) for m in data)
        owners = {str(m.get("owned_by", "")) for m in data}
    except (ValueError, KeyError, TypeError) as e:
        raise ServerError(f"the judge server at {shown}: GET /models returned no model list ({e})") from e
    kind: Literal["generic", "vllm", "llamacpp"] = "generic"
    if "vllm" in owners:
        kind = "vllm"
    elif owners & {"me", "llamacpp"}:  # llama-cpp-python / llama.cpp's server
        kind = "llamacpp"
    return ServerInfo(url=url.rstrip("/"), models=ids, kind=kind)


class Replies:
    """``(index, reply)`` pairs of requests running on ``pool``, in the order the replies arrive.
    :meth:`drain` returns those that arrived but were not taken yet (the caller was interrupted
    while it stored the previous one: it keeps them before it stops); :meth:`close` cancels the
    requests not started."""

    def __init__(self, pool: ThreadPoolExecutor, futures: dict[Future[JudgeReply], int]):
        self.pool = pool
        self.futures = futures
        self.taken: set[Future[JudgeReply]] = set()

    def __iter__(self) -> Iterator[tuple[int, JudgeReply]]:
        for f in as_completed(self.futures):
            self.taken.add(f)
            yield self.futures[f], f.result()

    def drain(self) -> list[tuple[int, JudgeReply]]:
        done = [f for f in self.futures if f.done() and f not in self.taken and not f.cancelled()]
        self.taken.update(done)
        return [(self.futures[f], f.result()) for f in done if f.exception() is None]

    def close(self) -> None:
        self.pool.shutdown(wait=False, cancel_futures=True)


class OpenAITransport:
    """Judge requests to an OpenAI-compatible server (see the module docstring)."""

    def __init__(
        self,
        url: str,
        model: str,
        *,
        server: Literal["auto", "generic", "vllm", "llamacpp"] = "auto",
        concurrency: int = 4,
        timeout: float = 60.0,
        retries: int = 5,
        backoff: float = 1.0,
        requests_per_minute: float | None = None,
        api_key_env: str = "OPENAI_API_KEY",
    ):
        from harness.llm.base import BackendSpec, make_backend

        info = probe_server(url, api_key_env=api_key_env)
        if model not in info.models:
            raise ConfigError(
                f"the judge server at {info.url} does not serve {model!r}; it serves: "
                f"{', '.join(info.models) or '(nothing)'} (pass one of them as --judge-model)"
            )
        kind = info.kind if server == "auto" else server
        spec = BackendSpec(
            kind="openai",
            model=model,
            base_urls=(info.url,),
            server=kind,
            api_key_env=api_key_env,
            concurrency=concurrency,
            timeout=timeout,
            retries=retries,
            backoff=backoff,
        )
        self.backend: Any = make_backend(spec)
        self.model = model
        self.url = info.url
        self.concurrency = concurrency
        self.limiter = RateLimiter(requests_per_minute)

    def ask(
        self,
        conversations: Sequence[list[dict[str, str]]],
        *,
        max_tokens: int,
        logprobs: bool = False,
        json_mode: bool = False,
    ) -> list[JudgeReply]:
        items = list(conversations)
        with contextlib.closing(
            self.ask_each(items, max_tokens=max_tokens, logprobs=logprobs, json_mode=json_mode)
        ) as replies:
            got = dict(replies)
        return [got[i] for i in range(len(items))]

    def ask_each(
        self,
        conversations: Sequence[list[dict[str, str]]],
        *,
        max_tokens: int,
        logprobs: bool = False,
        json_mode: bool = False,
    ) -> Replies:
        """The replies as they arrive (:class:`Replies`), asked on ``concurrency`` threads."""
        one = self._asker(max_tokens=max_tokens, logprobs=logprobs, json_mode=json_mode)
        items = list(conversations)
        pool = ThreadPoolExecutor(max_workers=max(1, min(self.concurrency, len(items))))
        return Replies(pool, {pool.submit(one, m): i for i, m in enumerate(items)})

    def _asker(
        self, *, max_tokens: int, logprobs: bool, json_mode: bool
    ) -> Callable[[list[dict[str, str]]], JudgeReply]:
        """The function that asks one conversation (paced, timed, its failure a reply)."""
        import openai

        from harness.llm.openai_backend import RequestFailed

        extra: dict[str, Any] = {}
        if logprobs:
            extra.update(logprobs=True, top_logprobs=TOP_LOGPROBS)
        if json_mode:
            extra["response_format"] = {"type": "json_object"}

        def one(messages: list[dict[str, str]]) -> JudgeReply:
            self.limiter.wait()
            t0 = time.perf_counter()
            try:
                resp = self.backend.chat_completion(  # null content: retried, then an error (no verdict)
                    messages,
                    max_tokens=max_tokens,
                    sampling=SamplingParams(temperature=0.0),
                    require_text=True,
                    **extra,
                )
            except RequestFailed as e:
                timed_out = isinstance(e.__cause__, openai.APITimeoutError)
                return JudgeReply(
                    "", "timeout" if timed_out else "error", latency_s=time.perf_counter() - t0, error=str(e)
                )
            ch = resp.choices[0]
            usage = resp.usage
            status: ReplyStatus = "length" if ch.finish_reason == "length" else "ok"
            if ch.finish_reason not in ("stop", "length", None):
                status = "error"
            return JudgeReply(
                text=ch.message.content,
                status=status,
                prompt_tokens=usage.prompt_tokens if usage is not None else -1,
                completion_tokens=usage.completion_tokens if usage is not None else -1,
                latency_s=time.perf_counter() - t0,
                logprobs=_token_logprobs(ch) if logprobs else None,
                error=None if status != "error" else f"finish_reason={ch.finish_reason}",
            )

        return one

    def requests_made(self) -> int:
        """Requests the server answered so far (the backend's own counter)."""
        return int(sum(v for k, v in self.backend.stats.items() if k.startswith("requests:")))


def _token_logprobs(choice: Any) -> tuple[TokenLogprobs, ...] | None:
    lp = getattr(choice, "logprobs", None)
    content = getattr(lp, "content", None) if lp is not None else None
    if not content:
        return None
    return tuple(
        TokenLogprobs(
            token=t.token,
            top=tuple((a.token, float(a.logprob)) for a in (t.top_logprobs or [])),
        )
        for t in content
    )


class BackendTransport:
    """Judge requests through any backend's ``chat_batch`` (in-process or not); no log-probabilities."""

    def __init__(self, backend: Any, model: str | None = None):
        self.backend = backend
        self.model = model or str(backend.describe().get("model", backend.name))

    def ask(
        self,
        conversations: Sequence[list[dict[str, str]]],
        *,
        max_tokens: int,
        logprobs: bool = False,
        json_mode: bool = False,
    ) -> list[JudgeReply]:
        if logprobs:
            raise ConfigError(
                f"logit scoring needs log-probabilities from an OpenAI-compatible server; the "
                f"{self.backend.name} backend has none (use a prompt without '+logit', or --judge-url)"
            )
        if json_mode:
            raise ConfigError(
                f"JSON mode needs an OpenAI-compatible server, not the {self.backend.name} backend"
            )
        t0 = time.perf_counter()
        outs = self.backend.chat_batch(
            list(conversations), max_new_tokens=max_tokens, sampling=SamplingParams(temperature=0.0)
        )
        per = (time.perf_counter() - t0) / max(1, len(outs))
        replies = []
        for c in outs:
            if c.finish_reason == "error":
                why = getattr(self.backend, "last_error", None) or "the backend recorded an error"
                status: ReplyStatus = "timeout" if "Timeout" in why else "error"
                replies.append(JudgeReply("", status, latency_s=per, error=why))
                continue
            replies.append(
                JudgeReply(
                    text=c.text,
                    status="length" if c.finish_reason == "length" else "ok",
                    prompt_tokens=c.prompt_tokens,
                    completion_tokens=c.completion_tokens,
                    latency_s=c.latency_s or per,
                )
            )
        return replies
