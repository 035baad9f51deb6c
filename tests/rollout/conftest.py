from tests.llm.conftest import smollm2_dir, tiny_dir  # noqa: F401  (shared model fixtures)
