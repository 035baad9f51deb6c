"""The HTTP kit both servers share (``harness serve-retriever``, :mod:`harness.retrieval.server`, and
``harness serve-model``'s front, :mod:`harness.llm.front`): the connection limits every client
is held to (:class:`HttpLimits`), the request body limit (:class:`BodyLimit`), the slow-client
guard (:func:`read_timeout_protocol`) and the uvicorn config that puts them together
(:func:`uvicorn_config`). A server adds its own limits (``ServerLimits``, ``FrontLimits``) and
the shape of its error replies; what a client may cost it is decided here, once.
"""

from __future__ import annotations

import json
import time
from collections.abc import Callable
from typing import Any

from pydantic import BaseModel, ConfigDict, Field


class HttpLimits(BaseModel):
    """What one client may cost a server, whatever it serves; each server states its defaults."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    max_body_bytes: int = Field(4 * 2**20, ge=1)  # 413 above
    read_timeout_s: float = Field(30.0, gt=0)  # 408 and close when a request takes longer to arrive
    keep_alive_s: int = Field(5, ge=1)  # an idle keep-alive connection is closed after this
    max_connections: int = Field(256, ge=1)  # beyond: the longest-waiting connection is closed (408)


def detail_body(status: int, message: str) -> bytes:
    """The one-line JSON reason ``{"detail": message}`` (FastAPI's shape)."""
    return json.dumps({"detail": message}).encode()


def detail_reply(status: int, message: str) -> tuple[int, list[tuple[bytes, bytes]], bytes]:
    """Status, headers and body of a :func:`detail_body` reply."""
    body = detail_body(status, message)
    headers = [(b"content-type", b"application/json"), (b"content-length", str(len(body)).encode())]
    return status, headers, body


def header(scope: dict[str, Any], name: bytes) -> bytes | None:
    """The first value of request header ``name`` (lower case), or None."""
    for k, v in scope.get("headers") or []:
        if k == name:
            return v
    return None


async def refuse(
    scope: Any, receive: Any, send: Any, status: int, body: bytes, extra: tuple[tuple[bytes, bytes], ...] = ()
) -> None:
    """Answer ``status`` with ``body`` at once, then read and drop what is left of the request body
    (constant memory, bounded by the read timeout; not when the client waits for ``100 Continue``,
    which it is then never sent), then close: the client, which sends its whole body before it
    reads the answer, gets the reply rather than a reset connection."""
    headers = [
        (b"content-type", b"application/json"),
        (b"content-length", str(len(body)).encode()),
        (b"connection", b"close"),
        *extra,
    ]
    await send({"type": "http.response.start", "status": status, "headers": headers})
    await send({"type": "http.response.body", "body": body, "more_body": True})
    if (header(scope, b"expect") or b"").lower() != b"100-continue":
        while True:
            message_in = await receive()
            if message_in["type"] == "http.disconnect" or not message_in.get("more_body", False):
                break
    await send({"type": "http.response.body", "body": b"", "more_body": False})


class BodyLimit:
    """ASGI middleware: the request body is read whole before the app sees it, and refused with 413
    over ``max_bytes`` (Starlette and FastAPI read a body without a bound and answer nothing before
    they have it all). A declared ``Content-Length`` over the limit is answered at once, before a
    byte of the body is read; a body without one (chunked) is counted as it arrives and answered as
    soon as it passes the limit; either way through :func:`refuse`. ``flag`` names the setting in
    the reason (``max_body_bytes``, ``serve-model --max-body-bytes``), ``advice`` may follow it,
    and ``error_body`` shapes it (default :func:`detail_body`)."""

    def __init__(
        self,
        app: Any,
        max_bytes: int,
        *,
        flag: str,
        advice: str = "",
        error_body: Callable[[int, str], bytes] = detail_body,
    ):
        self.app = app
        self.max_bytes = max_bytes
        self.flag = flag
        self.advice = advice
        self.error_body = error_body

    def _reason(self, size: int | None) -> str:
        got = f"request body of {size} bytes is" if size is not None else "request body"
        tail = f"; {self.advice}" if self.advice else ""
        return f"{got} over the server's limit of {self.max_bytes} bytes ({self.flag}){tail}"

    async def __call__(self, scope: Any, receive: Any, send: Any) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        declared = header(scope, b"content-length")
        if declared is not None and declared.isdigit() and int(declared) > self.max_bytes:
            await refuse(scope, receive, send, 413, self.error_body(413, self._reason(int(declared))))
            return
        chunks: list[bytes] = []
        size = 0
        while True:
            message = await receive()
            if message["type"] == "http.disconnect":
                return
            chunk = message.get("body", b"")
            size += len(chunk)
            if size > self.max_bytes:
                chunks.clear()
                await refuse(scope, receive, send, 413, self.error_body(413, self._reason(None)))
                return
            chunks.append(chunk)
            if not message.get("more_body", False):
                break
        await self.app(scope, replay_body(b"".join(chunks), receive), send)


def replay_body(data: bytes, receive: Any) -> Any:
    """An ASGI ``receive`` that hands the app ``data``, a body already read whole by a middleware,
    as one message, then passes on to the connection's own ``receive`` (disconnects)."""
    replayed = False

    async def replay():
        nonlocal replayed
        if not replayed:
            replayed = True
            return {"type": "http.request", "body": data, "more_body": False}
        return await receive()

    return replay


MAX_HEAD_BYTES = 16 * 2**10  # request line and headers; the bound h11 (uvicorn's default) sets


class _ReadTimeout:
    """The read timeout, connection bound and head limit of :func:`read_timeout_protocol`, as a
    mixin over uvicorn's ``HttpToolsProtocol`` (which this module does not import until a server is
    configured): the subclass made there sets the class attributes below."""

    read_timeout_s: float
    max_connections: int | None = None
    max_head_bytes: int = MAX_HEAD_BYTES
    _read_timer = None
    _waiting_since: float | None = None  # when the timer was armed: waiting for a request
    _requests_in = 0  # requests wholly received and not yet answered (pipelined ones included)
    _head_bytes = 0  # of the request being parsed: its URL and headers so far

    # the attributes of uvicorn's HttpToolsProtocol this mixin reads
    connections: set[Any]
    transport: Any
    loop: Any
    cycle: Any

    def connection_made(self, transport) -> None:
        super().connection_made(transport)  # type: ignore[misc]
        self._arm_read_timer()
        if self.max_connections is not None and len(self.connections) > self.max_connections:
            self._make_room()

    def _make_room(self) -> None:
        waiting = [
            c
            for c in self.connections
            if c is not self
            and getattr(c, "_waiting_since", None) is not None
            and not c.transport.is_closing()
        ]
        if waiting:
            oldest = min(waiting, key=lambda c: c._waiting_since)
            oldest._close_with(
                408,
                "Request Timeout",
                f"connection closed: the server is at its limit of {self.max_connections} open connections "
                "(max_connections) and this one had waited longest for a request",
            )
        else:
            self._close_with(
                503,
                "Service Unavailable",
                f"every one of the server's {self.max_connections} connections (max_connections) is being "
                "answered; retry shortly",
            )

    def connection_lost(self, exc: Exception | None) -> None:
        self._cancel_read_timer()
        super().connection_lost(exc)  # type: ignore[misc]

    # httptools' parser callbacks: the head is counted as it is parsed (llhttp has no bound of its
    # own); an exception here makes uvicorn answer through send_400_response, below
    def on_message_begin(self) -> None:
        self._head_bytes = 0
        super().on_message_begin()  # type: ignore[misc]

    def on_url(self, url: bytes) -> None:
        self._count_head(len(url))
        super().on_url(url)  # type: ignore[misc]

    def on_header(self, name: bytes, value: bytes) -> None:
        self._count_head(len(name) + len(value) + 4)  # ": " and CRLF
        super().on_header(name, value)  # type: ignore[misc]

    def _count_head(self, n: int) -> None:
        self._head_bytes += n
        if self._head_bytes > self.max_head_bytes:
            raise _HeadTooLarge

    def send_400_response(self, msg: str) -> None:
        if self._head_bytes > self.max_head_bytes:
            self._close_with(
                431,
                "Request Header Fields Too Large",
                f"request line and headers over the server's limit of {self.max_head_bytes} bytes",
            )
        else:
            super().send_400_response(msg)  # type: ignore[misc]

    def on_message_complete(self) -> None:
        self._requests_in += 1  # the request is wholly in: no deadline while it is answered
        self._cancel_read_timer()
        super().on_message_complete()  # type: ignore[misc]

    def on_response_complete(self) -> None:
        self._requests_in = max(0, self._requests_in - 1)
        if not self.transport.is_closing() and self._requests_in == 0:
            self._arm_read_timer()  # the next request's deadline (a pipelined one already in has none)
        super().on_response_complete()  # type: ignore[misc]

    def _arm_read_timer(self) -> None:
        self._cancel_read_timer()
        self._read_timer = self.loop.call_later(self.read_timeout_s, self._read_timed_out)
        self._waiting_since = time.monotonic()

    def _cancel_read_timer(self) -> None:
        self._waiting_since = None
        if self._read_timer is not None:
            self._read_timer.cancel()
            self._read_timer = None

    def _read_timed_out(self) -> None:
        self._read_timer = None
        self._close_with(
            408, "Request Timeout", f"request not received within {self.read_timeout_s:g} s (read_timeout_s)"
        )

    def _close_with(self, status: int, phrase: str, message: str) -> None:
        """Answer ``status`` with a one-line JSON reason (unless a response is under way) and close."""
        self._cancel_read_timer()
        if self.transport.is_closing():
            return
        cycle = self.cycle
        if cycle is None or cycle.response_complete or not cycle.response_started:
            _, headers, body = detail_reply(status, message)
            head = b"".join(k + b": " + v + b"\r\n" for k, v in headers)
            self.transport.write(
                f"HTTP/1.1 {status} {phrase}\r\n".encode() + head + b"connection: close\r\n\r\n" + body
            )
        self.transport.close()


class _HeadTooLarge(Exception):
    """Raised in a parser callback when the request head passes ``max_head_bytes``."""


def read_timeout_protocol(read_timeout_s: float, max_connections: int | None = None):
    """uvicorn's httptools protocol with a request read timeout, a bound on open connections and a
    bound on the request head.

    A timer starts when a connection opens and again after every response; it stops when a whole
    request (headers and body) has arrived. When it fires the client gets a 408 with a JSON reason
    and the connection is closed. uvicorn's own ``timeout_keep_alive`` does not cover this: it
    only runs between requests and is cancelled by the first byte received.

    With ``max_connections``, a connection opened beyond it makes room by closing (408) the open
    connection that has waited longest for its request (a slow client, or an idle keep-alive one);
    only when every open connection is being answered is the new one refused with 503. uvicorn's
    ``limit_concurrency`` refuses every new request instead, so slow clients holding the cap
    starved everyone else until the read timeout.

    A request line and headers over :data:`MAX_HEAD_BYTES` get 431 with a JSON reason, and the
    connection is closed. (h11, uvicorn's pure-Python parser, bounds them at the same size; httptools, its C
    parser over llhttp, does not, so the bound is counted here.)

    Why httptools, not h11: the same Lucene server on httptools answered 1.15x the requests a second
    it answered on h11 under 16 clients (docs/performance.md). The protocol is :class:`_ReadTimeout` over
    ``HttpToolsProtocol``.
    """
    from uvicorn.protocols.http.httptools_impl import HttpToolsProtocol

    settings = {"read_timeout_s": read_timeout_s, "max_connections": max_connections}
    return type("ReadTimeoutHttpToolsProtocol", (_ReadTimeout, HttpToolsProtocol), settings)


def uvicorn_config(
    app: Any,
    limits: HttpLimits,
    *,
    host: str = "127.0.0.1",
    port: int = 0,
    log_level: str = "warning",
    **options: Any,
) -> Any:
    """The uvicorn config a server runs with: httptools with the read timeout, keep-alive and connection
    limits from ``limits`` (:func:`read_timeout_protocol`), no access log; ``options`` are further
    ``uvicorn.Config`` arguments (the model front's ``loop`` and ``lifespan``)."""
    import uvicorn

    return uvicorn.Config(
        app,
        host=host,
        port=port,
        http=read_timeout_protocol(limits.read_timeout_s, limits.max_connections),
        timeout_keep_alive=limits.keep_alive_s,
        log_level=log_level,
        access_log=False,
        **options,
    )
