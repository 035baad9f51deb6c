"""A crowd of slow HTTP clients for the load tests: each connects, sends one byte of a request
header every ``every`` seconds (never finishing it), and reconnects as soon as the server answers
or closes, as issue 45's probe did. One thread drives them all (``selectors``), on 127.0.0.1."""

from __future__ import annotations

import selectors
import socket
import threading
import time
from collections import Counter

HEAD = b"GET /health HTTP/1.1\r\nHost: x\r\nX-Slow: " + b"y" * 4096


class SlowClients:
    """``n`` slow clients of ``host:port`` while in the ``with`` block (bounded: ``n`` sockets at
    a time, one thread). ``answers`` counts the status codes the server sent them; ``opened`` the
    connections made."""

    def __init__(self, host: str, port: int, n: int = 300, every: float = 2.0):
        self.host, self.port, self.n, self.every = host, port, n, every
        self.answers: Counter[str] = Counter()
        self.opened = 0
        self._stop = threading.Event()
        self._sel = selectors.DefaultSelector()
        self._thread = threading.Thread(target=self._run, daemon=True)

    def __enter__(self) -> SlowClients:
        for _ in range(self.n):
            self._connect()
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._stop.set()
        self._thread.join(timeout=10)
        for key in list(self._sel.get_map().values()):
            key.fileobj.close()
        self._sel.close()

    def _connect(self) -> None:
        s = socket.create_connection((self.host, self.port), timeout=5)
        s.setblocking(False)
        self.opened += 1
        self._sel.register(s, selectors.EVENT_READ, data=[0])  # data: bytes of HEAD sent

    def _drop(self, s: socket.socket, reply: bytes) -> None:
        self._sel.unregister(s)
        s.close()
        status = reply.split(b" ", 2)[1].decode() if reply.startswith(b"HTTP/1.1 ") else "closed"
        self.answers[status] += 1
        if not self._stop.is_set():
            self._connect()

    def _run(self) -> None:
        next_byte = time.monotonic()
        while not self._stop.is_set():
            for key, _ in self._sel.select(timeout=0.05):
                s = key.fileobj
                try:
                    reply = s.recv(4096)
                except (BlockingIOError, InterruptedError):
                    continue
                except OSError:
                    reply = b""
                self._drop(s, reply)
            if time.monotonic() >= next_byte:
                next_byte += self.every
                for key in list(self._sel.get_map().values()):
                    sent = key.data
                    try:
                        key.fileobj.send(HEAD[sent[0] : sent[0] + 1])
                        sent[0] += 1
                    except OSError:
                        self._drop(key.fileobj, b"")
