"""Fixtures for the prompt-baseline tests: the tiny random Llama of the backend tests."""

from __future__ import annotations

from tests.llm.conftest import smollm2_dir, tiny_dir  # noqa: F401
