"""Issue 45, failure 7 (serve-model greedy answers): with 4 slots, greedy answers to the same
prompts differed in 1 of 16 between concurrent and one-at-a-time requests, and
docs/model-server.md did not say so. Now it does (section "Greedy answers and concurrency"), with
what does repeat exactly: requests sent one at a time with ``"cache_prompt": false``. The test
checks that (two passes over the same prompts give the same answers) and that the documentation
says it. 16 prompts of 24 tokens, on 127.0.0.1."""

from __future__ import annotations

from pathlib import Path

import httpx
import pytest

from harness.llm.server import ModelServer
from tests.reliability.helpers import questions

pytestmark = [pytest.mark.llamacpp, pytest.mark.integration]
DOC = Path(__file__).resolve().parents[2] / "docs" / "model-server.md"


def test_greedy_one_at_a_time_without_the_prompt_cache_repeats_and_the_doc_says_so():
    text = " ".join(DOC.read_text().split())
    assert "Greedy answers and concurrency" in text and '"cache_prompt": false' in text
    # issue 61's measured rates, not "1 in 16": concurrent vs sequential, two sequential passes
    # with the cache on, and the cache off
    assert all(f"**{rate} of 16**" in text for rate in (2, 5, 16))
    prompts = [f"Question: {q}\nAnswer:" for _, _, q in questions(limit=6)][:16]
    with ModelServer(threads=1, n_ctx=512, parallel=4) as srv:

        def ask(prompt: str) -> str:
            body = {"prompt": prompt, "max_tokens": 24, "temperature": 0.0, "cache_prompt": False}
            r = httpx.post(f"{srv.base_url}/completions", json=body, timeout=120)
            r.raise_for_status()
            return r.json()["choices"][0]["text"]

        one = [ask(p) for p in prompts]
        again = [ask(p) for p in prompts]
    assert one == again
