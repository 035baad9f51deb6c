"""Fault-injection set-up: a tokenizer-only model directory (so ``--backend openai`` needs no
weights) and a fake OpenAI-compatible server on 127.0.0.1 per test."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest

from tests.reliability.fake_openai import FakeOpenAI
from tests.rl.test_trainer import toy_model_dir  # noqa: F401  (a tiny random Llama: test_train_resume.py)


@pytest.fixture(scope="session")
def tok_dir(smollm2_dir: Path, tmp_path_factory: pytest.TempPathFactory) -> Path:
    """SmolLM2's tokenizer, chat template and config without the weights: what the openai
    backend reads to apply the chat template and count tokens."""
    out = tmp_path_factory.mktemp("tokenizer-only")
    for name in ("tokenizer.json", "tokenizer_config.json", "chat_template.jinja", "config.json"):
        shutil.copy(smollm2_dir / name, out / name)
    return out


@pytest.fixture
def fake():
    with FakeOpenAI() as srv:
        yield srv
