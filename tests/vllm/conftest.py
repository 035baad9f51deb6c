"""vLLM on CPU (vllm-cpu, docs/vllm-cpu.md): every test here carries the ``vllm`` marker and is
skipped, with the reason, where vLLM is not installed (the default venv). Run them with
``tox -e vllm`` or ``/work/venv-vllm/bin/pytest -m vllm tests/vllm -q -s``.

All tests use the Search-R1 setting: the Search-R1 prompt and tag dialect (stops ``</search>``,
``</answer>``), greedy decoding with the protocol's seed, float32 (the transformers backend's
dtype, so greedy tokens can be compared one by one)."""

from __future__ import annotations

import importlib.util
import os
from pathlib import Path

import pytest

HAS_VLLM = importlib.util.find_spec("vllm") is not None
# vLLM reads these when an engine starts; the backend sets the first two on a CPU as well.
os.environ.setdefault("VLLM_CPU_KVCACHE_SPACE", "1")  # GiB of KV cache
os.environ.setdefault("VLLM_ENABLE_V1_MULTIPROCESSING", "0")  # the in-process engine stays in-process
# no inductor compile (about 6 min on the first start; VLLM_CPU_CI_ENV=0 tests the compiled path)
os.environ.setdefault("VLLM_CPU_CI_ENV", "1")
os.environ.setdefault("VLLM_CPU_OMP_THREADS_BIND", "nobind")  # the server: OMP_NUM_THREADS, no pinning
os.environ.setdefault("VLLM_NO_USAGE_STATS", "1")
os.environ.setdefault("DO_NOT_TRACK", "1")

MAX_MODEL_LEN = 2048


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    here = Path(__file__).parent
    skip = pytest.mark.skip(
        reason="vLLM is not installed: these tests run in a vllm-cpu venv (tox -e vllm; docs/vllm-cpu.md)"
    )
    for item in items:
        if here in Path(str(item.fspath)).parents:
            item.add_marker(pytest.mark.vllm)
            if not HAS_VLLM:
                item.add_marker(skip)


@pytest.fixture(scope="session")
def vllm_backend(smollm2_dir: Path):
    """The in-process vLLM backend over the packaged SmolLM2 (float32), one engine per session."""
    from harness.llm import BackendSpec, make_backend

    b = make_backend(
        BackendSpec(
            kind="vllm", model="default", dtype="float32", max_model_len=MAX_MODEL_LEN, max_batch_size=8
        )
    )
    yield b
    b.close()
