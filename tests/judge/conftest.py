"""Judge tests: the real llama.cpp server fixture from the backend tests (module-scoped)."""

from tests.llm.conftest import llama_server  # noqa: F401  (a fixture, used by name)
