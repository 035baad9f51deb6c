"""A :class:`Retriever` backed by a retrieval server speaking Search-R1's ``POST /retrieve``.

Works against ``harness serve-retriever`` and any Search-R1-compatible server. Connection errors,
timeouts and 5xx answers are retried with exponential backoff; 4xx answers are not (the request
is wrong). Every error is a :class:`ServerError` naming the URL. The spec and index id come from
``GET /health`` (a ``harness serve-retriever`` extension), so results can be cached and stored
with the protocol; for a server without ``/health`` (404) the spec is ``RemoteSpec(url)`` and the
index id is ``remote-<url>``.
"""

from __future__ import annotations

import time
from typing import Any
from urllib.parse import urlsplit, urlunsplit

from pydantic import BaseModel, ConfigDict, TypeAdapter, ValidationError

from harness.errors import ServerError
from harness.retrieval.base import Retriever
from harness.retrieval.spec import CorpusSpec, RetrieverSpec
from harness.secrets import join_url, redact
from harness.types import Hit, join_contents


class RemoteSpec(BaseModel):
    """The spec of a server that does not describe itself."""

    model_config = ConfigDict(frozen=True, extra="forbid")
    kind: str = "remote"
    url: str


class HTTPStatusError(ServerError):
    """The server answered with a 4xx status."""

    def __init__(self, message: str, status: int):
        super().__init__(message)
        self.status = status


class RetrievalClient(Retriever):
    def __init__(
        self,
        url: str,
        *,
        timeout: float = 60.0,
        connect_timeout: float = 5.0,
        retries: int = 3,
        backoff: float = 0.5,
    ):
        import httpx

        parts = urlsplit(url)  # the path ends in /retrieve or not; a query (?token=) is kept
        self.base_url = urlunsplit(parts._replace(path=parts.path.rstrip("/").removesuffix("/retrieve")))
        self.shown_url = redact(self.base_url)  # the URL as messages show it
        self.retries = retries
        self.backoff = backoff
        self._http = httpx.Client(timeout=httpx.Timeout(timeout, connect=connect_timeout))
        self._info: dict[str, Any] | None = None

    def __repr__(self) -> str:
        return f"RetrievalClient({self.shown_url!r})"

    def _request(self, method: str, path: str, payload: Any = None) -> Any:
        import httpx

        url, shown = join_url(self.base_url, path), redact(join_url(self.base_url, path))
        last = ""
        for attempt in range(self.retries + 1):
            if attempt:
                time.sleep(self.backoff * 2 ** (attempt - 1))
            try:
                resp = self._http.request(method, url, json=payload)
            except httpx.TimeoutException as e:
                last = f"timed out ({type(e).__name__})"
                continue
            except httpx.TransportError as e:
                last = f"{type(e).__name__}: {e}"
                continue
            if resp.status_code >= 500:
                last = f"HTTP {resp.status_code}: {_detail(resp)}"
                continue
            if resp.status_code >= 400:
                raise HTTPStatusError(
                    f"{shown} rejected the request: HTTP {resp.status_code}: {_detail(resp)}",
                    resp.status_code,
                )
            try:
                return resp.json()
            except ValueError:
                raise ServerError(f"{shown} answered with invalid JSON: {resp.text[:200]!r}") from None
        raise ServerError(f"retrieval server {shown} failed after {self.retries + 1} attempt(s): {last}")

    def info(self) -> dict[str, Any]:
        """The server's ``/health`` answer (fetched once); ``{}`` if the server has no ``/health``.

        An unreachable server raises :class:`ServerError` (never a made-up identity)."""
        if self._info is None:
            try:
                info = self._request("GET", "/health")
            except HTTPStatusError as e:
                if e.status != 404:
                    raise
                info = {}
            self._info = info if isinstance(info, dict) else {}
        return self._info

    @property
    def spec(self) -> BaseModel:
        raw = self.info().get("spec")
        if raw is None:
            return RemoteSpec(url=self.base_url)
        try:
            return TypeAdapter(RetrieverSpec).validate_python(raw)
        except ValidationError as e:
            raise ServerError(
                f"{redact(join_url(self.base_url, 'health'))}: unknown retriever spec {raw!r} ({e.errors()[0]['msg']})"
            ) from None

    @property
    def index_id(self) -> str:
        return str(self.info().get("index_id") or f"remote-{self.base_url}")

    @property
    def corpus_spec(self) -> CorpusSpec | None:
        raw = self.info().get("corpus")
        if raw is None:
            return None
        try:
            return CorpusSpec.model_validate(raw)
        except ValidationError:
            raise ServerError(
                f"{redact(join_url(self.base_url, 'health'))}: malformed corpus description {raw!r}"
            ) from None

    def _search(self, queries: list[str], k: int) -> list[list[Hit]]:
        url = redact(join_url(self.base_url, "retrieve"))  # as messages show it
        body = self._request("POST", "/retrieve", {"queries": queries, "topk": k, "return_scores": True})
        result = body.get("result") if isinstance(body, dict) else None
        if not isinstance(result, list) or len(result) != len(queries):
            raise ServerError(f"{url} answered without a 'result' list of {len(queries)} entries")
        out = []
        for per_query in result:
            hits = []
            for item in per_query:
                try:
                    doc, score = item["document"], float(item["score"])
                    contents = doc.get("contents")
                    if contents is None:
                        contents = join_contents(doc["title"], doc["text"])
                    hits.append(Hit(doc_id=str(doc["id"]), contents=contents, score=score))
                except (KeyError, TypeError, ValueError) as e:
                    raise ServerError(
                        f"{url} answered with a malformed hit {str(item)[:200]} ({e})"
                    ) from None
            out.append(hits)
        return out

    def close(self) -> None:
        self._http.close()


def _detail(resp) -> str:
    try:
        body = resp.json()
    except ValueError:
        return resp.text[:300]
    if isinstance(body, dict) and "detail" in body:
        return str(body["detail"])
    return str(body)[:300]
