"""Building a judge from settings (CLI flags, configs): :class:`JudgeSpec` -> :func:`make_judge`.

With ``url`` the judge is an OpenAI-compatible server (probed first: a dead URL fails before
anything is judged); without it, ``backend`` names an in-process backend (``llamacpp`` or
``transformers``) over ``model`` (``default`` = the packaged model).
"""

from __future__ import annotations

from typing import Literal

from pydantic import BaseModel, ConfigDict, Field, model_validator

from harness.errors import ConfigError
from harness.judge.core import Judge
from harness.judge.prompts import get_prompt
from harness.judge.transport import BackendTransport, JudgeTransport, OpenAITransport


class JudgeSpec(BaseModel):
    model_config = ConfigDict(frozen=True, extra="forbid")

    model: str
    url: str | None = None
    backend: Literal["openai", "llamacpp", "transformers"] = "openai"
    prompt: str = "default"
    server: Literal["auto", "generic", "vllm", "llamacpp"] = "auto"
    concurrency: int = Field(default=4, ge=1)
    timeout: float = Field(default=60.0, gt=0)
    retries: int = Field(default=5, ge=0)
    backoff: float = Field(default=1.0, ge=0)
    requests_per_minute: float | None = Field(default=None, gt=0)
    api_key_env: str = "OPENAI_API_KEY"
    chunk_size: int = Field(default=32, ge=1)

    @model_validator(mode="after")
    def _check(self) -> JudgeSpec:
        if self.backend == "openai" and not self.url:
            raise ValueError("an OpenAI-compatible judge needs its URL (--judge-url http://host:port/v1)")
        if self.backend != "openai" and self.url:
            raise ValueError(f"--judge-url is for OpenAI-compatible servers, not the {self.backend} backend")
        return self


def make_transport(spec: JudgeSpec) -> JudgeTransport:
    if spec.backend == "openai":
        assert spec.url is not None
        return OpenAITransport(
            spec.url,
            spec.model,
            server=spec.server,
            concurrency=spec.concurrency,
            timeout=spec.timeout,
            retries=spec.retries,
            backoff=spec.backoff,
            requests_per_minute=spec.requests_per_minute,
            api_key_env=spec.api_key_env,
        )
    from harness.llm.base import BackendSpec, make_backend
    from harness.llm.model_files import PACKAGED, canonical_name

    backend = make_backend(BackendSpec(kind=spec.backend, model=spec.model))
    name = canonical_name(spec.model) if canonical_name(spec.model) in PACKAGED else spec.model
    return BackendTransport(backend, model=name)


def make_judge(spec: JudgeSpec, store=None, *, progress: bool = False) -> Judge:
    """The judge ``spec`` describes; the prompt is resolved and the server probed first."""
    prompt = get_prompt(spec.prompt)
    if prompt.scoring == "logit" and spec.backend != "openai":
        raise ConfigError(
            f"prompt {spec.prompt!r} needs log-probabilities: use an OpenAI-compatible --judge-url"
        )
    return Judge(make_transport(spec), prompt, store, chunk_size=spec.chunk_size, progress=progress)
