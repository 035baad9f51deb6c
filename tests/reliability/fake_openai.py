"""A fake OpenAI-compatible server on 127.0.0.1 for fault injection (stdlib ``http.server`` in a
thread, started and stopped by the test).

Replies are deterministic functions of the prompt, so two runs against it are comparable exactly.
``fault`` makes matching requests fail the way real servers do:

- ``"500"``: HTTP 500 with an error body; ``"500_echo"``: the same, its message quoting the request
  target (path and query, e.g. ``?api_key=K``), as some servers do;
- ``"hang"``: accept the request and never answer (until the server stops; the client's timeout fires);
- ``"malformed"``: HTTP 200 with a body that is not JSON;
- ``"drop"``: close the connection after the status line and part of the body (mid-stream);
- ``"null_text"`` / ``"no_text"``: HTTP 200 with a well-formed completion whose choice has
  ``text: null`` (chat: ``content: null``) / no ``text`` (chat: no ``content``) at all; a streamed
  reply with ``"null_text"`` has null text in every event.

``fault_when`` (a substring) limits the fault to prompts containing it; ``faults`` maps prompt
substrings to faults (one server failing each question its own way); ``delay`` slows every
answer (so a kill lands mid-run); ``on_request(n)`` is called with the running count of completion
requests before each is answered (a test kills its client from there). ``GET /v1/models`` always
answers.
"""

from __future__ import annotations

import hashlib
import json
import threading
import time
from collections.abc import Callable
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any
from urllib.parse import urlsplit

MODEL = "fake-model"
WORDS = ("Paris", "London", "1999", "yes", "no", "Einstein", "blue", "Nile")


def reply_for(prompt: str) -> str:
    """The fake model's answer to ``prompt``: a word chosen by the prompt's hash."""
    h = int(hashlib.sha256(prompt.encode()).hexdigest(), 16)
    return WORDS[h % len(WORDS)]


class _Server(ThreadingHTTPServer):
    daemon_threads = True

    def handle_error(self, request: Any, client_address: Any) -> None:
        """A client that went away (killed, timed out) is part of the test, not a server error."""
        import sys

        if not isinstance(sys.exc_info()[1], ConnectionError):
            super().handle_error(request, client_address)


class FakeOpenAI:
    def __init__(
        self,
        *,
        fault: str | None = None,
        fault_when: str | None = None,
        faults: dict[str, str] | None = None,
        delay: float = 0.0,
    ):
        self.fault = fault
        self.fault_when = fault_when
        self.faults_by_text = dict(faults or {})
        self.delay = delay
        self.on_request: Callable[[int], None] | None = None
        self.requests = 0
        self.faults = 0
        self.paths: list[str] = []  # every request's target (path and query), in order
        self._stop = threading.Event()
        self._lock = threading.Lock()
        self.server = _Server(("127.0.0.1", 0), self._handler())
        self.thread = threading.Thread(target=self.server.serve_forever, daemon=True)

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.server.server_address[1]}/v1"

    def __enter__(self) -> FakeOpenAI:
        self.thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._stop.set()  # releases hanging handlers
        self.server.shutdown()
        self.server.server_close()
        self.thread.join(timeout=5)

    def _faulty(self, prompt: str) -> str | None:
        fault = next((f for text, f in self.faults_by_text.items() if text in prompt), None)
        if fault is not None:
            with self._lock:
                self.faults += 1
            return fault
        if self.fault is None or (self.fault_when is not None and self.fault_when not in prompt):
            return None
        with self._lock:
            self.faults += 1
        return self.fault

    def _handler(self) -> type[BaseHTTPRequestHandler]:
        fake = self

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def log_message(self, *args: Any) -> None:  # quiet
                pass

            def _send(self, code: int, body: bytes, ctype: str = "application/json") -> None:
                self.send_response(code)
                self.send_header("Content-Type", ctype)
                self.send_header("Content-Length", str(len(body)))
                self.end_headers()
                self.wfile.write(body)

            def do_GET(self) -> None:
                fake.paths.append(self.path)
                if urlsplit(self.path).path.rstrip("/").endswith("/models"):
                    data = {"object": "list", "data": [{"id": MODEL, "object": "model", "owned_by": "fake"}]}
                    self._send(200, json.dumps(data).encode())
                else:
                    self._send(404, b'{"error": {"message": "not found"}}')

            def do_POST(self) -> None:
                fake.paths.append(self.path)
                n = int(self.headers.get("Content-Length") or 0)
                body = json.loads(self.rfile.read(n) or b"{}")
                with fake._lock:
                    fake.requests += 1
                    n_request = fake.requests
                if fake.on_request is not None:
                    fake.on_request(n_request)
                chat = urlsplit(self.path).path.rstrip("/").endswith("/chat/completions")
                prompt = (
                    "\n".join(str(m.get("content", "")) for m in body.get("messages", []))
                    if chat
                    else str(body.get("prompt", ""))
                )
                fault = fake._faulty(prompt)
                if fault == "500":
                    return self._send(500, b'{"error": {"message": "internal error (injected)"}}')
                if fault == "500_echo":  # a server that repeats the request target in its error
                    message = f"internal error (injected) serving {self.path}"
                    return self._send(500, json.dumps({"error": {"message": message}}).encode())
                if fault == "hang":
                    fake._stop.wait(30)  # bounded: the test's client times out long before
                    self.close_connection = True
                    return None
                if fault == "malformed":
                    return self._send(200, b'{"id": "x", "choices": [ this is not json')
                if fault == "drop":
                    self.send_response(200)
                    self.send_header("Content-Type", "application/json")
                    self.send_header("Content-Length", "4096")
                    self.end_headers()
                    self.wfile.write(b'{"id": "cmpl-1", "choices": [{"text": "Par')
                    self.wfile.flush()
                    self.close_connection = True
                    return None
                if fake.delay:
                    time.sleep(fake.delay)
                text = reply_for(prompt)
                usage = {
                    "prompt_tokens": len(prompt.split()),
                    "completion_tokens": 1,
                    "total_tokens": len(prompt.split()) + 1,
                }
                if body.get("stream"):
                    return self._stream(None if fault == "null_text" else text, chat)
                if chat:
                    choice = {
                        "index": 0,
                        "message": {"role": "assistant", "content": text},
                        "finish_reason": "stop",
                    }
                    obj = "chat.completion"
                else:
                    choice = {"index": 0, "text": text, "finish_reason": "stop", "logprobs": None}
                    obj = "text_completion"
                if fault in ("null_text", "no_text"):
                    holder = choice["message"] if chat else choice
                    field = "content" if chat else "text"
                    if fault == "null_text":
                        holder[field] = None
                    else:
                        del holder[field]
                out = {"id": "cmpl-1", "object": obj, "created": 0, "model": MODEL, "choices": [choice]}
                out["usage"] = usage
                return self._send(200, json.dumps(out).encode())

            def _stream(self, text: str | None, chat: bool) -> None:
                """Two events and ``[DONE]``; ``text`` None: null text in every event."""
                self.send_response(200)
                self.send_header("Content-Type", "text/event-stream")
                self.send_header("Connection", "close")
                self.end_headers()
                delta = {"content": text} if chat else None
                first = (
                    {"index": 0, "delta": delta, "finish_reason": None}
                    if chat
                    else {"index": 0, "text": text, "finish_reason": None}
                )
                last = {**first, "finish_reason": "stop"}
                last["delta" if chat else "text"] = {} if chat else ("" if text is not None else None)
                for ch in (first, last):
                    chunk = {"id": "cmpl-1", "object": "x", "created": 0, "model": MODEL, "choices": [ch]}
                    self.wfile.write(f"data: {json.dumps(chunk)}\n\n".encode())
                self.wfile.write(b"data: [DONE]\n\n")
                self.close_connection = True

        return Handler
