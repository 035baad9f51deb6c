"""Generation backends behind one interface (:class:`~harness.llm.base.Backend`).

``transformers`` (in-process, CPU default, used by training), ``llamacpp`` (llama.cpp in-process
over a GGUF, the xllamacpp wheel), ``openai`` (any OpenAI-compatible server: vLLM, llama.cpp,
hosted APIs) and ``vllm`` (in-process, GPU). Build one with :func:`make_backend`; heavy libraries are imported
only by the backend that needs them.
"""

from harness.llm.base import BACKENDS, Backend, BackendSpec, make_backend

__all__ = ["BACKENDS", "Backend", "BackendSpec", "make_backend"]
