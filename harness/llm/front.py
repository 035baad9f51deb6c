"""The Python front of ``harness serve-model``: every request passes here before llama.cpp.

``harness serve-model`` listens on ``--host:--port`` with this front; llama.cpp's own HTTP server
(the ``xllamacpp`` wheel) binds a private port on 127.0.0.1 behind it and requires a random key
that only the front knows, so a local user cannot reach it around the front either.

Why a front: llama.cpp's server (cpp-httplib) gives each connection one of a fixed pool of
threads, reads a body of any size into memory before looking at it, accepts any model name and
any bearer token, serves ``/slots``, ``/props`` and ``/metrics`` to everyone, wraps ``max_tokens``
into an int32 and answers completions logprobs in the chat shape. What the front does:

* **Connections** (:class:`FrontLimits`): uvicorn (asyncio, httptools) holds a connection as a few
  KB of state, not a thread, so 64 clients trickling bytes cost nothing and ``/health`` is answered at
  once. A client must send its whole request within ``read_timeout_s`` of connecting or of its
  previous response, else 408 and the connection is closed; beyond ``max_connections`` open
  connections the one that has waited longest for its request is closed (408), and only when
  every open connection is being answered is a new one refused (503). This is the uvicorn protocol
  both servers share (:func:`harness.serving.read_timeout_protocol`): with
  uvicorn's ``limit_concurrency`` instead, 300 slow clients reconnecting after their 408 held every
  connection and ``/health`` and chat were 503 for as long as they kept coming (issue 45).
* **Body limit** (:class:`harness.serving.BodyLimit`, shared with the retrieval server, by hand: Starlette reads a body without a bound and answers
  nothing before it has it all): a declared ``Content-Length`` over ``max_body_bytes`` is
  answered 413 at once, before a byte of the body is read; a body without one (chunked) is counted
  as it arrives and answered 413 as soon as it passes the limit. Either way the rest of the body
  is then read and dropped (constant memory, bounded by the read timeout) so the client, which
  sends its whole body before reading, gets the 413 rather than a reset connection. A client that
  sent ``Expect: 100-continue`` is told 413 without being asked for the body.
* **API key** (``--api-key`` / ``HARNESS_API_KEY``): when set, every route, ``/health``
  included, needs ``Authorization: Bearer KEY`` (or ``X-Api-Key: KEY``), else 401. Compared in
  constant time.
* **Routes**: the OpenAI ones (``/v1/chat/completions``, ``/v1/completions``, ``/v1/models``,
  also without ``/v1``) and ``/health``; llama.cpp's admin routes (``/slots``, ``/props``,
  ``/metrics``) only with ``--admin-routes``; any other path is 404.
* **Request checks** (:func:`check_request`, before llama.cpp sees the request): a ``model``
  other than the served alias is 404 naming the served model; ``messages`` must be a non-empty
  list (400); ``max_tokens`` (also ``max_completion_tokens``, llama.cpp's ``n_predict``) must be
  a whole number from 1 to the context per slot (400 naming the limit); a prompt (or the text of
  the messages) of more than ``n_ctx x MAX_TOKEN_BYTES`` bytes cannot fit a slot and is 400 before
  llama.cpp tokenizes it; ``logprobs`` (a bool, or a whole number on ``/v1/completions``),
  ``top_logprobs`` and llama.cpp's ``n_probs`` are at most :data:`MAX_LOGPROBS`, OpenAI's cap (400):
  llama.cpp clamps them to the vocabulary, so ``"logprobs": 1000000`` asked for all 49,152
  SmolLM2 tokens at every step, a 135 MB reply after 193 s, and three such requests took the
  server from 608 MB to 2.8 GB (issue 61).
* **Prompt length in tokens** (:meth:`_Routes.too_long`): a prompt of more bytes than ``n_ctx``
  may hold more tokens than a slot; its first ``n_ctx x PREFIX_BYTES_PER_TOKEN`` bytes are
  tokenized (llama.cpp's ``/tokenize``) and a prompt of more tokens than ``n_ctx`` is 400 before
  generation. llama.cpp refuses it too, but only after tokenizing all of it: a 1.04 MB prompt (just
  under the byte bound) is 549,736 tokens, and eight at once took 8-15 s each and kept +348 MB.
* **Body JSON**: a body that is not JSON, or nested too deep for Python's parser (100,000 ``[``),
  is a 400 in OpenAI's shape, not a plain-text 500.
* **Memory**: after a reply of more than :data:`TRIM_AFTER_BYTES`, the process (the front and
  llama.cpp share it) hands freed heap back to the system (glibc's ``malloc_trim``); glibc keeps
  it otherwise, and the server's RSS only grew.
* **Completions logprobs** (:func:`completion_logprobs`): llama.cpp answers ``/v1/completions``
  logprobs as chat's ``{"content": [{"token", "logprob", "top_logprobs"}]}``; the front rewrites
  them to the completions shape the OpenAI SDK parses (``openai/types/completion_choice.py``,
  ``Logprobs``: ``tokens``, ``token_logprobs``, ``top_logprobs``, ``text_offset``), in replies
  and in each streamed event. ``text_offset`` counts characters of the generated text from 0 (and
  on across the events of a stream), as vLLM's ``serving_completion.py`` does.

Forwarding uses ``httpx.AsyncClient`` with at most ``parallel + 2`` connections to llama.cpp (the
rest wait in the front), and llama.cpp gets two HTTP threads more than that, one of them for the
front's own ``/health`` client, so a busy server still answers ``/health``. A streamed reply (SSE)
is passed through as it arrives; a client that goes away cancels its request in llama.cpp.
Errors are one line in OpenAI's shape: ``{"error": {"message", "type", "code"}}``.
"""

from __future__ import annotations

import asyncio
import contextlib
import hmac
import json
from collections.abc import AsyncIterator
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from pydantic import Field

from harness.serving import BodyLimit, HttpLimits, header, refuse, uvicorn_config

if TYPE_CHECKING:
    import httpx
    from starlette.requests import Request
    from starlette.responses import Response

__all__ = ["FrontConfig", "FrontLimits", "check_request", "completion_logprobs", "create_app", "serve"]

API_KEY_ENV = "HARNESS_API_KEY"
ADMIN_ROUTES = ("/slots", "/props", "/metrics")
CHAT_PATHS = ("/v1/chat/completions", "/chat/completions")
COMPLETION_PATHS = ("/v1/completions", "/completions")
MODEL_PATHS = ("/v1/models", "/models")
TOKEN_FIELDS = ("max_tokens", "max_completion_tokens", "n_predict")
# No token of a usual vocabulary is longer than this (SmolLM2's longest: 162 bytes), so a prompt of
# more than n_ctx x this many bytes cannot fit a slot: refused before llama.cpp reads it (issue 45:
# eight 4.19 MB prompts under the body limit took 27-34 s each and +700 MB in llama.cpp)
MAX_TOKEN_BYTES = 256
# OpenAI's cap on top_logprobs (its API reference, "top_logprobs: integer between 0 and 20")
MAX_LOGPROBS = 20
LOGPROB_FIELDS = ("logprobs", "top_logprobs", "n_probs")
# usual text is 3-5 bytes a token: a prefix of n_ctx x this many bytes holds more than n_ctx tokens
PREFIX_BYTES_PER_TOKEN = 16
TRIM_AFTER_BYTES = 1 << 20


class FrontLimits(HttpLimits):
    """What a client may cost the front (``harness serve-model --help``); the fields are
    :class:`harness.serving.HttpLimits`' (a 4,096-token prompt is ~16 KB of body)."""

    read_timeout_s: float = Field(10.0, gt=0)  # 408 and close when a request takes longer to arrive


@dataclass(frozen=True)
class FrontConfig:
    """The front of one llama.cpp server: what it serves and how it is reached."""

    upstream: str  # llama.cpp's private base URL, e.g. http://127.0.0.1:41234
    alias: str  # the one model name clients may send
    n_ctx: int  # tokens per slot: the largest max_tokens
    parallel: int  # llama.cpp slots
    upstream_key: str | None = None  # llama.cpp's own API key (only the front knows it)
    api_key: str | None = field(default=None, repr=False)  # clients' key; None: no key asked
    admin_routes: bool = False
    limits: FrontLimits = field(default_factory=FrontLimits)

    @property
    def upstream_connections(self) -> int:
        return self.parallel + 2

    @property
    def llama_http_threads(self) -> int:
        """llama.cpp's HTTP threads: the forwarding pool, one for ``/health``, one spare."""
        return self.upstream_connections + 2


class RequestError(Exception):
    def __init__(self, status: int, message: str, param: str | None = None, code: str | None = None):
        super().__init__(message)
        self.status, self.message, self.param, self.code = status, message, param, code


_TYPES = {400: "invalid_request_error", 401: "authentication_error", 404: "not_found_error"}


def error_body(status: int, message: str, param: str | None = None, code: str | None = None) -> bytes:
    """OpenAI's error shape, which the OpenAI SDK reads its message from."""
    err: dict[str, Any] = {"message": message, "type": _TYPES.get(status, "server_error"), "code": code}
    if param is not None:
        err["param"] = param
    return json.dumps({"error": err}).encode()


def check_request(path: str, body: Any, *, alias: str, n_ctx: int) -> None:
    """Raise :class:`RequestError` for a request llama.cpp would answer wrongly (see the module
    docstring); return None for one it may see."""
    if not isinstance(body, dict):
        raise RequestError(400, "the request body must be a JSON object")
    model = body.get("model")
    if model is not None and model != alias:
        raise RequestError(
            404,
            f"model {model!r} is not served here; this server serves {alias!r} (GET /v1/models)",
            "model",
            "model_not_found",
        )
    if path in CHAT_PATHS:
        messages = body.get("messages")
        if not isinstance(messages, list) or not messages:
            raise RequestError(400, "'messages' must be a non-empty list of messages", "messages")
    size = _prompt_bytes(body)
    if size > n_ctx * MAX_TOKEN_BYTES:
        raise RequestError(
            400,
            f"the prompt is {size} bytes: more than {n_ctx} tokens (the context per slot) of at most "
            f"{MAX_TOKEN_BYTES} bytes each, so it cannot fit; shorten it",
            "messages" if path in CHAT_PATHS else "prompt",
        )
    for name in LOGPROB_FIELDS:
        value = body.get(name)
        if value is None or (name == "logprobs" and isinstance(value, bool)):
            continue
        if isinstance(value, bool) or not isinstance(value, int) or not 0 <= value <= MAX_LOGPROBS:
            kind = "true, false or a whole number" if name == "logprobs" else "a whole number"
            raise RequestError(
                400, f"'{name}' must be {kind} from 0 to {MAX_LOGPROBS} (OpenAI's cap), got {value!r}", name
            )
    for name in TOKEN_FIELDS:
        value = body.get(name)
        if value is None:
            continue
        if isinstance(value, bool) or not isinstance(value, int) or not 1 <= value <= n_ctx:
            raise RequestError(
                400,
                f"'{name}' must be a whole number from 1 to {n_ctx} (the context per slot), got {value!r}",
                name,
            )


def prompt_texts(body: dict[str, Any]) -> list[str]:
    """The texts a request asks llama.cpp to read, one per prompt: each string of ``prompt`` (a
    string or a list of them), and the text of the chat ``messages`` (string contents or text
    parts) joined by newlines."""
    prompt = body.get("prompt")
    texts = [t for t in (prompt if isinstance(prompt, list) else [prompt]) if isinstance(t, str)]
    chat: list[Any] = []
    for m in body.get("messages") or []:
        content = m.get("content") if isinstance(m, dict) else None
        if isinstance(content, list):
            chat += [part.get("text") for part in content if isinstance(part, dict)]
        else:
            chat.append(content)
    if chat:
        texts.append("\n".join(t for t in chat if isinstance(t, str)))
    return texts


def _utf8(text: str) -> bytes:
    return text.encode("utf-8", "surrogatepass")


def _prompt_bytes(body: dict[str, Any]) -> int:
    """UTF-8 bytes of the texts a request asks llama.cpp to read (:func:`prompt_texts`)."""
    return sum(len(_utf8(t)) for t in prompt_texts(body))


def _trim_heap() -> None:
    """Hand freed heap back to the system (glibc ``malloc_trim``; nothing elsewhere)."""
    import ctypes
    import ctypes.util

    name = ctypes.util.find_library("c")
    if name and "libc.so" in name:
        with contextlib.suppress(OSError, AttributeError):
            ctypes.CDLL(name).malloc_trim(0)


def completion_logprobs(lp: Any, start: int = 0) -> tuple[Any, int]:
    """llama.cpp's chat-shaped logprobs of a completion -> the completions shape, with text offsets
    from ``start``; returns it and the offset after its last token. Anything else is returned as is."""
    if not isinstance(lp, dict) or not isinstance(lp.get("content"), list):
        return lp, start
    tokens: list[str] = []
    token_logprobs: list[float | None] = []
    top: list[dict[str, float]] = []
    offsets: list[int] = []
    pos = start
    for t in lp["content"]:
        token = str(t.get("token", ""))
        tokens.append(token)
        token_logprobs.append(t.get("logprob"))
        alternatives: dict[str, float] = {}
        for alt in t.get("top_logprobs") or []:
            alternatives.setdefault(str(alt.get("token", "")), alt.get("logprob"))  # first (likeliest) wins
        top.append(alternatives)
        offsets.append(pos)
        pos += len(token)
    shaped = {"tokens": tokens, "token_logprobs": token_logprobs, "top_logprobs": top, "text_offset": offsets}
    return shaped, pos


class Guard:
    """ASGI middleware: the API key, decided before the body is read (see the module docstring);
    the body limit is the shared :class:`harness.serving.BodyLimit`, inside it."""

    def __init__(self, app: Any, *, api_key: str | None):
        self.app = app
        self.api_key = api_key.encode() if api_key else None

    def _key_ok(self, scope: dict[str, Any]) -> bool:
        assert self.api_key is not None
        given = header(scope, b"x-api-key")
        auth = header(scope, b"authorization")
        if auth is not None and auth[:7].lower() == b"bearer ":
            given = auth[7:].strip()
        return given is not None and hmac.compare_digest(given, self.api_key)

    async def __call__(self, scope, receive, send) -> None:
        if scope["type"] == "http" and self.api_key is not None and not self._key_ok(scope):
            message = "missing or wrong API key: send 'Authorization: Bearer <key>' (the server's --api-key)"
            await refuse(
                scope, receive, send, 401, error_body(401, message), ((b"www-authenticate", b"Bearer"),)
            )
            return
        await self.app(scope, receive, send)


def _error(status: int, message: str, param: str | None = None, code: str | None = None) -> Response:
    """A reply in OpenAI's error shape (:func:`error_body`)."""
    from starlette.responses import Response

    return Response(error_body(status, message, param, code), status, media_type="application/json")


def _passed(r: httpx.Response, content: bytes) -> Response:
    """llama.cpp's reply ``r`` passed on, with ``content`` as its body."""
    from starlette.responses import Response

    return Response(content, r.status_code, media_type=r.headers.get("content-type", "application/json"))


def _upstream_failed(e: Exception) -> Response:
    return _error(502, f"the llama.cpp server behind this front failed: {type(e).__name__}: {e}")


async def _until_disconnect(request: Request) -> None:
    while (await request.receive())["type"] != "http.disconnect":
        pass


async def _race(coro: Any, request: Request) -> Any:
    """``await coro`` unless the client goes away first (then None: the upstream request is
    cancelled, its connection closed, and llama.cpp stops the generation)."""
    work = asyncio.ensure_future(coro)
    gone = asyncio.ensure_future(_until_disconnect(request))
    done, _ = await asyncio.wait({work, gone}, return_when=asyncio.FIRST_COMPLETED)
    gone.cancel()
    if work in done:
        return work.result()
    work.cancel()
    return None


def _completion_reply(content: bytes) -> bytes:
    """A whole ``/v1/completions`` reply with its choices' logprobs in the completions shape."""
    reply = json.loads(content)
    for choice in reply.get("choices") or []:
        choice["logprobs"], _ = completion_logprobs(choice.get("logprobs"))
    return json.dumps(reply, separators=(",", ":"), ensure_ascii=False).encode()


async def _events(r: httpx.Response, convert: bool) -> AsyncIterator[bytes]:
    """A streamed reply (SSE) as it arrives; with ``convert``, each event's completions logprobs in
    the completions shape, text offsets running on across the events of each choice."""
    offsets: dict[int, int] = {}
    try:
        if not convert:
            async for chunk in r.aiter_raw():
                yield chunk
            return
        async for line in r.aiter_lines():
            if line.startswith("data: {"):
                event = json.loads(line[6:])
                for choice in event.get("choices") or []:
                    i = choice.get("index", 0)
                    choice["logprobs"], offsets[i] = completion_logprobs(
                        choice.get("logprobs"), offsets.get(i, 0)
                    )
                line = "data: " + json.dumps(event, separators=(",", ":"), ensure_ascii=False)
            yield (line + "\n").encode()
    finally:
        await r.aclose()


class _Routes:
    """The front's route handlers over llama.cpp (see the module docstring), and its HTTP clients
    to llama.cpp: ``work`` (``parallel + 2`` connections) and ``health`` (one), made on first use
    inside the server's event loop and closed when the app shuts down (:meth:`lifespan`)."""

    def __init__(self, cfg: FrontConfig):
        self.cfg = cfg
        self.headers = {"authorization": f"Bearer {cfg.upstream_key}"} if cfg.upstream_key else {}
        self.clients: dict[str, httpx.AsyncClient] = {}

    def client(self, name: str) -> httpx.AsyncClient:
        import httpx

        if name not in self.clients:
            n = self.cfg.upstream_connections if name == "work" else 1
            self.clients[name] = httpx.AsyncClient(
                base_url=self.cfg.upstream,
                headers=self.headers,
                limits=httpx.Limits(max_connections=n, max_keepalive_connections=n),
                # a generation may take minutes: the client's own timeout bounds it
                timeout=httpx.Timeout(connect=10.0, read=None, write=60.0, pool=None)
                if name == "work"
                else httpx.Timeout(5.0),
            )
        return self.clients[name]

    @contextlib.asynccontextmanager
    async def lifespan(self, _app: Any) -> AsyncIterator[None]:
        yield
        for c in self.clients.values():
            await c.aclose()

    async def health(self, request: Request) -> Response:
        import httpx

        try:
            r = await self.client("health").get("/health")
        except httpx.HTTPError as e:
            return _error(503, f"llama.cpp did not answer /health: {type(e).__name__}: {e}")
        return _passed(r, r.content)

    async def models(self, request: Request) -> Response:
        import httpx

        try:
            r = await self.client("work").get("/v1/models")
        except httpx.HTTPError as e:
            return _upstream_failed(e)
        return _passed(r, r.content)

    async def admin(self, request: Request) -> Response:
        import httpx

        if not self.cfg.admin_routes:
            return _error(
                404, f"{request.url.path} is off; start serve-model with --admin-routes to serve it"
            )
        try:
            r = await self.client("work").request(
                request.method,
                request.url.path,
                params=request.query_params,
                content=await request.body(),
                headers={"content-type": request.headers.get("content-type", "application/json")},
            )
        except httpx.HTTPError as e:
            return _upstream_failed(e)
        return _passed(r, r.content)

    async def generate(self, request: Request) -> Response:
        import httpx
        from starlette.responses import Response, StreamingResponse

        path = request.url.path
        raw = await request.body()
        try:
            body = json.loads(raw)
        except ValueError as e:
            return _error(400, f"the request body is not JSON: {e}")
        except RecursionError:
            return _error(400, "the request body is JSON nested too deep to read; send a flat request")
        try:
            check_request(path, body, alias=self.cfg.alias, n_ctx=self.cfg.n_ctx)
            await self.too_long(path, body)
        except RequestError as e:
            return _error(e.status, e.message, e.param, e.code)
        except httpx.HTTPError as e:
            return _upstream_failed(e)
        target = "/v1/chat/completions" if path in CHAT_PATHS else "/v1/completions"
        convert = path in COMPLETION_PATHS and body.get("logprobs") not in (None, False)
        req = self.client("work").build_request(
            "POST", target, content=raw, headers={"content-type": "application/json"}
        )
        try:
            r = await _race(self.client("work").send(req, stream=True), request)
        except httpx.HTTPError as e:
            return _upstream_failed(e)
        if r is None:
            return Response(status_code=499)  # the client is gone; nobody reads this
        if r.headers.get("content-type", "").startswith("text/event-stream"):
            return StreamingResponse(
                _events(r, convert),
                r.status_code,
                media_type="text/event-stream",
                headers={"x-accel-buffering": "no"},
            )
        return await self._whole(r, request, convert)

    async def too_long(self, path: str, body: dict[str, Any]) -> None:
        """Raise :class:`RequestError` (400) for a prompt of more tokens than a slot holds, counted
        by llama.cpp's tokenizer over at most its first ``n_ctx x PREFIX_BYTES_PER_TOKEN`` bytes
        (see the module docstring). Texts of at most ``n_ctx`` bytes are not counted: a token is at
        least a byte."""
        n_ctx = self.cfg.n_ctx
        for text in prompt_texts(body):
            data = _utf8(text)
            if len(data) <= n_ctx:
                continue
            head = data[: n_ctx * PREFIX_BYTES_PER_TOKEN].decode("utf-8", "ignore")
            r = await self.client("work").post("/tokenize", json={"content": head, "add_special": False})
            r.raise_for_status()
            n = len(r.json().get("tokens") or [])
            if n > n_ctx:
                whole = "its first " if len(head) < len(text) else ""
                raise RequestError(
                    400,
                    f"the prompt is longer than the context: {whole}{len(_utf8(head))} bytes are {n} tokens, "
                    f"more than the {n_ctx} tokens a slot holds; shorten it",
                    "messages" if path in CHAT_PATHS else "prompt",
                    "context_length_exceeded",
                )

    async def _whole(self, r: httpx.Response, request: Request, convert: bool) -> Response:
        """A reply that is not streamed, read whole (unless the client goes away first: 499)."""
        import httpx
        from starlette.responses import Response

        try:
            content = await _race(r.aread(), request)
        except httpx.HTTPError as e:
            return _upstream_failed(e)
        finally:
            await r.aclose()
        if content is None:
            return Response(status_code=499)
        if convert and r.status_code == 200:
            content = _completion_reply(content)
        reply = _passed(r, content)
        if len(content) > TRIM_AFTER_BYTES:  # once the reply is sent
            from starlette.background import BackgroundTask

            reply.background = BackgroundTask(_trim_heap)
        return reply

    async def not_found(self, request: Request) -> Response:
        return _error(
            404,
            f"{request.method} {request.url.path} is not served here; the routes are "
            "/v1/chat/completions, /v1/completions, /v1/models and /health",
        )


def create_app(cfg: FrontConfig) -> Any:
    """The front as an ASGI app (Starlette routes inside :class:`Guard`)."""
    from starlette.applications import Starlette
    from starlette.routing import Route

    handlers = _Routes(cfg)
    routes = [Route("/health", handlers.health, methods=["GET"])]
    routes += [Route(p, handlers.models, methods=["GET"]) for p in MODEL_PATHS]
    routes += [Route(p, handlers.generate, methods=["POST"]) for p in CHAT_PATHS + COMPLETION_PATHS]
    for p in ADMIN_ROUTES:
        routes += [
            Route(p, handlers.admin, methods=["GET", "POST"]),
            Route(p + "/{rest:path}", handlers.admin, methods=["GET", "POST"]),
        ]
    routes.append(
        Route("/{rest:path}", handlers.not_found, methods=["GET", "POST", "PUT", "DELETE", "PATCH", "HEAD"])
    )
    app = Starlette(routes=routes, lifespan=handlers.lifespan)
    limited = BodyLimit(
        app, cfg.limits.max_body_bytes, flag="serve-model --max-body-bytes", error_body=error_body
    )
    return Guard(limited, api_key=cfg.api_key)


def serve(cfg: FrontConfig, *, host: str, port: int, ready: Any = None) -> None:
    """Serve the front on ``host:port`` until the process ends. uvicorn installs no signal handlers:
    the process keeps its own (``serve-model``'s child ignores SIGINT and dies on SIGTERM)."""
    import contextlib

    import uvicorn

    class _Server(uvicorn.Server):
        def capture_signals(self):  # type: ignore[override]
            return contextlib.nullcontext()

        async def startup(self, sockets=None) -> None:  # type: ignore[override]
            await super().startup(sockets)
            if ready is not None and self.started:
                ready()

    _Server(
        uvicorn_config(create_app(cfg), cfg.limits, host=host, port=port, loop="asyncio", lifespan="on")
    ).run()
